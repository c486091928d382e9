//! Any bytes as a chunked body: decoding never panics, and feeding the stream in pieces (sizes
//! taken from the first byte) gives the same verdict, payload and length as one buffer.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_http::{decode_chunked, ChunkStep, ChunkedDecoder, ParseError};

fuzz_target!(|data: &[u8]| {
    let Some((&piece, body)) = data.split_first() else { return };
    let piece = usize::from(piece % 16) + 1;
    let whole = decode_chunked(body);
    assert_eq!(in_pieces(body, piece), whole);
});

fn in_pieces(body: &[u8], piece: usize) -> Result<(Vec<u8>, usize), ParseError> {
    let mut decoder = ChunkedDecoder::new();
    let (mut payload, mut pos, mut received) = (Vec::new(), 0, 0);
    loop {
        if received == body.len() && !decoder.is_done() {
            // Everything was fed; one last call tells NeedMore from an error or the end.
            let (consumed, step) = decoder.advance(&body[pos..])?;
            pos += consumed;
            match step {
                ChunkStep::Done => return Ok((payload, pos)),
                _ => return Err(ParseError::IncompleteChunkedBody),
            }
        }
        received = (received + piece).min(body.len());
        loop {
            let (consumed, step) = decoder.advance(&body[pos..received])?;
            pos += consumed;
            match step {
                ChunkStep::Done => return Ok((payload, pos)),
                ChunkStep::NeedMore => break,
                ChunkStep::Data { remaining } => {
                    let take = (received - pos).min(usize::try_from(remaining).unwrap_or(usize::MAX));
                    if take == 0 {
                        break;
                    }
                    payload.extend_from_slice(&body[pos..pos + take]);
                    pos += take;
                    decoder.consume_data(take as u64);
                }
            }
        }
    }
}
