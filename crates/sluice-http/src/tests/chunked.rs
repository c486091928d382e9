//! Chunked bodies: payload and length, every split of the stream, and each framing rule.

use crate::{decode_chunked, ChunkStep, ChunkedDecoder, Limits, ParseError};

const BODY: &[u8] = b"5;name=value\r\nhello\r\n1A ; a=\"q s\"\r\nabcdefghijklmnopqrstuvwxyz\r\n\
                      0000000000000001\r\n!\r\n0\r\nX-Trailer: t\r\nY: \r\n\r\nNEXT";
const PAYLOAD: &[u8] = b"helloabcdefghijklmnopqrstuvwxyz!";

#[test]
fn decodes_body_with_extensions_and_trailers() {
    let (payload, len) = decode_chunked(BODY).unwrap();
    assert_eq!(payload, PAYLOAD);
    assert_eq!(&BODY[len..], b"NEXT");
}

/// Feeds `stream` to a decoder as `feeds` dictates, the way the proxy does: framing through
/// `advance`, keeping unconsumed bytes; data moved and reported with `consume_data`.
fn decode_in_pieces(stream: &[u8], feeds: impl IntoIterator<Item = usize>) -> (Vec<u8>, usize) {
    let mut decoder = ChunkedDecoder::new();
    let mut payload = Vec::new();
    let (mut pos, mut received) = (0, 0);
    for feed in feeds {
        received = (received + feed).min(stream.len());
        loop {
            let (consumed, step) = decoder.advance(&stream[pos..received]).unwrap();
            pos += consumed;
            match step {
                ChunkStep::NeedMore => break,
                ChunkStep::Done => return (payload, pos),
                ChunkStep::Data { remaining } => {
                    let take = (received - pos).min(usize::try_from(remaining).unwrap());
                    if take == 0 {
                        break;
                    }
                    payload.extend_from_slice(&stream[pos..pos + take]);
                    pos += take;
                    decoder.consume_data(take as u64);
                }
            }
        }
    }
    panic!("body not done after {received} bytes");
}

#[test]
fn one_byte_feeds_give_the_same_payload() {
    let (payload, len) = decode_in_pieces(BODY, std::iter::repeat_n(1, BODY.len()));
    assert_eq!(payload, PAYLOAD);
    assert_eq!(&BODY[len..], b"NEXT");
}

#[test]
fn every_two_piece_split_gives_the_same_payload() {
    for cut in 0..BODY.len() {
        let (payload, len) = decode_in_pieces(BODY, [cut, BODY.len()]);
        assert_eq!(payload, PAYLOAD, "cut at {cut}");
        assert_eq!(&BODY[len..], b"NEXT", "cut at {cut}");
    }
}

#[test]
fn reports_data_and_needs_more() {
    let mut decoder = ChunkedDecoder::new();
    assert_eq!(decoder.advance(b"1"), Ok((1, ChunkStep::NeedMore)));
    assert_eq!(
        decoder.advance(b"0\r\nab"),
        Ok((3, ChunkStep::Data { remaining: 16 }))
    );
    // In the data state nothing is consumed until the caller reports data moved.
    assert_eq!(
        decoder.advance(b"ab"),
        Ok((0, ChunkStep::Data { remaining: 16 }))
    );
    decoder.consume_data(10);
    assert_eq!(
        decoder.advance(b"abcdef"),
        Ok((0, ChunkStep::Data { remaining: 6 }))
    );
    decoder.consume_data(6);
    assert_eq!(
        decoder.advance(b"\r\n0\r\n\r\nrest"),
        Ok((7, ChunkStep::Done))
    );
    assert!(decoder.is_done());
    assert_eq!(decoder.advance(b"rest"), Ok((0, ChunkStep::Done)));
}

#[test]
fn accepts_largest_chunk_size() {
    let mut decoder = ChunkedDecoder::new();
    let step = decoder.advance(b"ffffffffffffffff\r\n");
    assert_eq!(
        step,
        Ok((
            18,
            ChunkStep::Data {
                remaining: u64::MAX
            }
        ))
    );
}

#[test]
fn rejects_incomplete_body() {
    assert_eq!(
        decode_chunked(b"5\r\nhel"),
        Err(ParseError::IncompleteChunkedBody)
    );
    assert_eq!(
        decode_chunked(b"5\r\nhello\r\n0\r\n"),
        Err(ParseError::IncompleteChunkedBody)
    );
}

#[test]
fn rejects_large_trailer_section() {
    // The trailer section here is `X: 0123456789\r\n` (15 bytes) and then the final CRLF.
    let limits = Limits {
        max_header_bytes: 15,
        ..Limits::default()
    };
    let mut decoder = ChunkedDecoder::with_limits(&limits);
    assert_eq!(
        decoder.advance(b"0\r\nX: 0123456789\r\n"),
        Ok((18, ChunkStep::NeedMore))
    );
    assert_eq!(
        decoder.advance(b"\r"),
        Err(ParseError::TrailerTooLarge { limit: 15 })
    );
}

#[test]
fn rejects_long_chunk_size_line() {
    let mut line = b"1;".to_vec();
    line.resize(crate::MAX_CHUNK_SIZE_LINE - 1, b'x');
    line.push(b'\r');
    assert_eq!(
        ChunkedDecoder::new().advance(&line),
        Ok((line.len(), ChunkStep::NeedMore))
    );
    line.insert(2, b'x');
    let limit = crate::MAX_CHUNK_SIZE_LINE;
    assert_eq!(
        ChunkedDecoder::new().advance(&line),
        Err(ParseError::ChunkSizeLineTooLong { limit })
    );
}

/// One `#[test]` per chunked framing rule: `name: body => error`.
macro_rules! rejects_chunked {
    ($($name:ident: $raw:expr => $error:expr;)*) => {$(
        #[test]
        fn $name() {
            let raw: &[u8] = $raw;
            assert_eq!(decode_chunked(raw), Err($error), "{:?}", super::show(raw));
            // The same verdict however the body is split.
            let mut decoder = ChunkedDecoder::new();
            let mut result = Ok(());
            let mut pending = Vec::new();
            for &byte in raw {
                pending.push(byte);
                match decoder.advance(&pending) {
                    Err(error) => { result = Err(error); break; }
                    Ok((consumed, ChunkStep::Data { .. })) => {
                        pending.drain(..consumed);
                        if let Some(_) = pending.first() {
                            pending.remove(0);
                            decoder.consume_data(1);
                        }
                    }
                    Ok((consumed, _)) => { pending.drain(..consumed); }
                }
            }
            assert_eq!(result, Err($error), "byte by byte");
        }
    )*};
}

rejects_chunked! {
    rejects_non_hex_chunk_size: b"zz\r\n" => ParseError::InvalidChunkSize;
    rejects_hex_prefix_chunk_size: b"0x5\r\nhello\r\n0\r\n\r\n" => ParseError::InvalidChunkSize;
    rejects_empty_chunk_size: b"\r\nhello\r\n0\r\n\r\n" => ParseError::InvalidChunkSize;
    rejects_extension_without_size: b";a=b\r\n" => ParseError::InvalidChunkSize;
    rejects_negative_chunk_size: b"-5\r\nhello\r\n0\r\n\r\n" => ParseError::InvalidChunkSize;
    rejects_space_inside_chunk_size: b"1 2\r\n" => ParseError::InvalidChunkSize;
    rejects_space_before_chunk_size: b" 5\r\nhello\r\n0\r\n\r\n" => ParseError::InvalidChunkSize;
    rejects_trailing_space_after_chunk_size: b"5 \r\nhello\r\n0\r\n\r\n" => ParseError::InvalidChunkSize;
    rejects_chunk_size_over_16_digits: b"10000000000000000\r\n" => ParseError::ChunkSizeOverflow;
    rejects_leading_zeros_over_16_digits: b"00000000000000005\r\n" => ParseError::ChunkSizeOverflow;
    rejects_bare_lf_after_chunk_size: b"5\nhello\r\n0\r\n\r\n" => ParseError::BareLineFeed;
    rejects_bare_cr_after_chunk_size: b"5\rhello\r\n0\r\n\r\n" => ParseError::BareCarriageReturn;
    rejects_bare_lf_after_extension: b"5;a\nhello\r\n0\r\n\r\n" => ParseError::BareLineFeed;
    rejects_control_char_in_extension: b"5;a\x01\r\nhello\r\n0\r\n\r\n" => ParseError::InvalidChunkExtension;
    rejects_nul_in_extension: b"5;a\0\r\nhello\r\n0\r\n\r\n" => ParseError::InvalidChunkExtension;
    rejects_missing_crlf_after_data: b"5\r\nhelloX\r\n0\r\n\r\n" => ParseError::MissingChunkDataCrlf;
    rejects_lf_only_after_data: b"5\r\nhello\n0\r\n\r\n" => ParseError::MissingChunkDataCrlf;
    rejects_cr_only_after_data: b"5\r\nhello\r0\r\n\r\n" => ParseError::MissingChunkDataCrlf;
    rejects_obs_fold_in_trailer: b"0\r\nX: a\r\n b\r\n\r\n" => ParseError::ObsoleteLineFolding;
    rejects_whitespace_before_colon_in_trailer: b"0\r\nX : a\r\n\r\n" => ParseError::WhitespaceBeforeColon;
    rejects_trailer_without_colon: b"0\r\nXa\r\n\r\n" => ParseError::InvalidTrailer;
    rejects_nul_in_trailer: b"0\r\nX: a\0\r\n\r\n" => ParseError::NulByte;
    rejects_bare_lf_in_trailer: b"0\r\nX: a\n\r\n" => ParseError::BareLineFeed;
    rejects_bare_cr_in_trailer: b"0\r\nX: a\rb\r\n\r\n" => ParseError::BareCarriageReturn;
    rejects_bare_lf_ending_body: b"0\r\n\n" => ParseError::BareLineFeed;
    rejects_junk_after_last_chunk: b"0\r\n\rX" => ParseError::BareCarriageReturn;
}
