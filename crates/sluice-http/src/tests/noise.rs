//! Seeded random inputs: mutated heads and bodies never panic, an accepted head survives
//! write_to and a re-parse unchanged, and any split of a chunked body decodes the same.
//! The fuzz targets in `fuzz/` search the same properties without a seed or a bound.

use crate::{
    decode_chunked, parse_request, parse_response, ChunkStep, ChunkedDecoder, Limits, Parsed,
};

/// xorshift64*: enough randomness for mutation, and reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap()
    }
}

const SEEDS: [&[u8]; 4] = [
    b"GET http://h:8080/a?b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nX: y\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    b"CONNECT [::1]:443 HTTP/1.0\r\nProxy-Authorization: Basic eA==\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
];

/// Bytes that matter to the grammar, so mutations hit the interesting cases often.
const SPICE: &[u8] = b"\r\n\0 \t:;,/?*[]@#\xff0aF-";

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(bytes.len() + 1);
        let byte = if rng.below(2) == 0 {
            SPICE[rng.below(SPICE.len())]
        } else {
            rng.next() as u8
        };
        match rng.below(3) {
            0 => bytes.insert(at, byte),
            1 if at < bytes.len() => bytes[at] = byte,
            _ if at < bytes.len() => {
                bytes.remove(at);
            }
            _ => {}
        }
    }
    bytes
}

#[test]
fn mutated_heads_never_panic_and_accepted_ones_round_trip() {
    let mut rng = Rng(0x0005_eed0_f510_01ce);
    let limits = Limits::default();
    let mut accepted = 0;
    for round in 0..20_000 {
        let input = mutate(&mut rng, SEEDS[round % SEEDS.len()]);
        if let Ok(Parsed::Complete { head, len }) = parse_request(&input, &limits) {
            accepted += 1;
            let mut out = Vec::new();
            head.write_to(&mut out);
            match parse_request(&out, &limits) {
                Ok(Parsed::Complete { head: again, len }) => {
                    assert_eq!(again, head, "{:?}", super::show(&input));
                    assert_eq!(len, out.len());
                }
                other => panic!("{:?} re-parsed as {other:?}", super::show(&out)),
            }
            assert!(len <= input.len());
            let _ = head.body_framing();
        }
        if let Ok(Parsed::Complete { head, .. }) = parse_response(&input, &limits) {
            let mut out = Vec::new();
            head.write_to(&mut out);
            assert!(matches!(
                parse_response(&out, &limits),
                Ok(Parsed::Complete { .. })
            ));
        }
        let _ = decode_chunked(&input);
    }
    // Not vacuous: a fair share of mutants must be accepted for the round trip to be tested.
    assert!(accepted > 1_000, "only {accepted} mutants accepted");
}

/// A random valid chunked body: payload, and the encoding with extensions and trailers.
fn chunked_body(rng: &mut Rng) -> (Vec<u8>, Vec<u8>) {
    let (mut payload, mut body) = (Vec::new(), Vec::new());
    for _ in 0..rng.below(5) {
        let data: Vec<u8> = (0..1 + rng.below(40)).map(|_| rng.next() as u8).collect();
        let extension = if rng.below(2) == 0 {
            ""
        } else {
            " ;a=\"b c\";d"
        };
        body.extend_from_slice(format!("{:x}{extension}\r\n", data.len()).as_bytes());
        body.extend_from_slice(&data);
        body.extend_from_slice(b"\r\n");
        payload.extend_from_slice(&data);
    }
    body.extend_from_slice(b"000;last\r\n");
    for i in 0..rng.below(3) {
        body.extend_from_slice(format!("X-T{i}: v").as_bytes());
        body.extend_from_slice(b"\xe9\r\n");
    }
    body.extend_from_slice(b"\r\n");
    (payload, body)
}

#[test]
fn random_splits_of_chunked_bodies_decode_the_same() {
    let mut rng = Rng(0x00c4_0bed);
    for _ in 0..500 {
        let (payload, body) = chunked_body(&mut rng);
        assert_eq!(decode_chunked(&body), Ok((payload.clone(), body.len())));
        let mut decoder = ChunkedDecoder::new();
        let (mut decoded, mut pos, mut received) = (Vec::new(), 0, 0);
        while !decoder.is_done() {
            assert!(received < body.len() || pos < received, "stuck at {pos}");
            received = (received + 1 + rng.below(8)).min(body.len());
            loop {
                let (consumed, step) = decoder.advance(&body[pos..received]).unwrap();
                pos += consumed;
                let ChunkStep::Data { remaining } = step else {
                    break;
                };
                let take = (received - pos).min(usize::try_from(remaining).unwrap());
                if take == 0 {
                    break;
                }
                decoded.extend_from_slice(&body[pos..pos + take]);
                pos += take;
                decoder.consume_data(take as u64);
            }
        }
        assert_eq!((decoded, pos), (payload, body.len()));
    }
}
