//! Response heads: leniencies that real servers need, and the framing rules that stay strict.

use super::{complete_response, rejects, response};
use crate::{BodyFraming, Method, ParseError, Parsed, Version};

#[test]
fn parses_simple_response() {
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
    let (head, len) = complete_response(raw);
    assert_eq!(
        (head.version, head.status, head.reason.as_str()),
        (Version::Http11, 200, "OK")
    );
    assert_eq!(len, raw.len() - 2);
    assert_eq!(head.body_framing(&Method::Get), Ok(BodyFraming::Length(2)));
    for cut in 0..len {
        assert_eq!(response(&raw[..cut]), Ok(Parsed::Partial), "cut at {cut}");
    }
}

#[test]
fn accepts_empty_reason() {
    for raw in [&b"HTTP/1.1 204\r\n\r\n"[..], b"HTTP/1.1 204 \r\n\r\n"] {
        assert_eq!(complete_response(raw).0.reason, "");
    }
}

#[test]
fn accepts_obs_text_and_spaces_in_reason() {
    let (head, _) = complete_response(b"HTTP/1.0 404 Pas trouv\xe9 ici\r\n\r\n");
    assert_eq!(head.reason, "Pas trouv\u{fffd} ici");
    assert_eq!(head.version, Version::Http10);
}

#[test]
fn accepts_bare_lf_line_ends() {
    let (head, len) = complete_response(b"HTTP/1.1 200 OK\nContent-Length: 0\n\nX");
    assert_eq!(head.headers.get("content-length"), Some(&b"0"[..]));
    assert_eq!(len, 35);
}

#[test]
fn body_framing_of_responses() {
    let cases: [(Method, &[u8], BodyFraming); 12] = [
        (
            Method::Get,
            b"HTTP/1.1 200 OK\r\n\r\n",
            BodyFraming::UntilClose,
        ),
        (
            Method::Get,
            b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n",
            BodyFraming::Length(7),
        ),
        (
            Method::Get,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            BodyFraming::Chunked,
        ),
        (
            Method::Get,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            BodyFraming::Chunked,
        ),
        (
            Method::Get,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            BodyFraming::UntilClose,
        ),
        (
            Method::Head,
            b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n",
            BodyFraming::Empty,
        ),
        (
            Method::Head,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            BodyFraming::Empty,
        ),
        (
            Method::Get,
            b"HTTP/1.1 100 Continue\r\n\r\n",
            BodyFraming::Empty,
        ),
        (
            Method::Get,
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
            BodyFraming::Empty,
        ),
        (
            Method::Get,
            b"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n",
            BodyFraming::Empty,
        ),
        (
            Method::Get,
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n",
            BodyFraming::Empty,
        ),
        (
            Method::Connect,
            b"HTTP/1.1 200 Connection established\r\n\r\n",
            BodyFraming::Empty,
        ),
    ];
    for (method, raw, framing) in cases {
        let (head, _) = complete_response(raw);
        assert_eq!(
            head.body_framing(&method),
            Ok(framing),
            "{method} {:?}",
            super::show(raw)
        );
    }
    let (head, _) = complete_response(b"HTTP/1.1 407 Auth\r\nContent-Length: 3\r\n\r\n");
    assert_eq!(
        head.body_framing(&Method::Connect),
        Ok(BodyFraming::Length(3))
    );
}

#[test]
fn keep_alive_of_responses() {
    let cases: [(&[u8], bool); 4] = [
        (b"HTTP/1.1 200 OK\r\n\r\n", true),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", false),
        (b"HTTP/1.0 200 OK\r\n\r\n", false),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", true),
    ];
    for (raw, keep_alive) in cases {
        assert_eq!(complete_response(raw).0.keep_alive(), keep_alive, "{raw:?}");
    }
}

#[test]
fn write_to_round_trips() {
    let inputs: [&[u8]; 3] = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX: a\r\n\r\n",
        b"HTTP/1.0 204 \r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    ];
    for raw in inputs {
        let (head, len) = complete_response(raw);
        let mut out = Vec::new();
        head.write_to(&mut out);
        assert_eq!(out, &raw[..len], "{:?}", super::show(raw));
        assert_eq!(complete_response(&out).0, head);
    }
}

rejects! {
    rejects_cl_with_te_in_response: response,
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
        => ParseError::ContentLengthWithTransferEncoding;
    rejects_differing_content_lengths_in_response: response,
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"
        => ParseError::DuplicateContentLength { first: 5, second: 6 };
    rejects_bad_content_length_in_response: response,
        b"HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\n" => ParseError::InvalidContentLength;
    rejects_te_in_http10_response: response,
        b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" => ParseError::TransferEncodingInHttp10;
    rejects_chunked_twice_in_response: response,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"
        => ParseError::InvalidTransferEncoding;
    rejects_obs_fold_in_response: response,
        b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n" => ParseError::ObsoleteLineFolding;
    rejects_space_before_colon_in_response: response,
        b"HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n" => ParseError::WhitespaceBeforeColon;
    rejects_bare_cr_in_response: response,
        b"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n" => ParseError::BareCarriageReturn;
    rejects_nul_in_response: response,
        b"HTTP/1.1 200 OK\r\nX: a\0\r\n\r\n" => ParseError::NulByte;
    rejects_two_digit_status: response,
        b"HTTP/1.1 20 OK\r\n\r\n" => ParseError::MalformedStatusLine;
    rejects_status_below_100: response,
        b"HTTP/1.1 099 OK\r\n\r\n" => ParseError::MalformedStatusLine;
    rejects_non_numeric_status: response,
        b"HTTP/1.1 2x0 OK\r\n\r\n" => ParseError::MalformedStatusLine;
    rejects_control_char_in_reason: response,
        b"HTTP/1.1 200 O\x01K\r\n\r\n" => ParseError::MalformedStatusLine;
    rejects_http2_response: response,
        b"HTTP/2.0 200 OK\r\n\r\n" => ParseError::UnsupportedVersion;
    rejects_garbage_status_line: response,
        b"ICY 200 OK\r\n\r\n" => ParseError::MalformedStatusLine;
}
