//! Request heads: what is accepted, and each rule that refuses one.

use super::{complete_request, rejects, request};
use crate::{
    parse_request, Authority, BodyFraming, Limits, Method, ParseError, Parsed, RequestTarget,
    Version,
};

const SIMPLE: &[u8] = b"GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\nBODY";

#[test]
fn parses_simple_get() {
    let (head, len) = complete_request(SIMPLE);
    assert_eq!(len, SIMPLE.len() - 4);
    assert_eq!(head.method, Method::Get);
    assert_eq!(head.target, RequestTarget::Origin("/a?b=1".into()));
    assert_eq!(head.version, Version::Http11);
    assert_eq!(head.host(), Some(&b"example.com"[..]));
    assert_eq!(head.headers.len(), 2);
    assert_eq!(head.body_framing(), Ok(BodyFraming::Empty));
    assert!(head.keep_alive());
}

#[test]
fn every_prefix_is_partial() {
    let end = SIMPLE.len() - 4;
    for cut in 0..end {
        assert_eq!(request(&SIMPLE[..cut]), Ok(Parsed::Partial), "cut at {cut}");
    }
}

#[test]
fn skips_empty_lines_before_request_line() {
    let (head, len) = complete_request(b"\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(head.method, Method::Get);
    assert_eq!(len, 31);
}

#[test]
fn keeps_field_order_and_case_and_trims_ows() {
    let (head, _) = complete_request(b"GET / HTTP/1.1\r\nhOsT: h\r\nX-A:   a b \t\r\nX-B:\r\n\r\n");
    let fields: Vec<(&str, &[u8])> = head
        .headers
        .iter()
        .map(|f| (f.name.as_str(), f.value.as_slice()))
        .collect();
    assert_eq!(fields, [("hOsT", &b"h"[..]), ("X-A", b"a b"), ("X-B", b"")]);
}

#[test]
fn accepts_obs_text_in_field_values() {
    let (head, _) = complete_request(b"GET / HTTP/1.1\r\nHost: h\r\nX: caf\xe9\r\n\r\n");
    assert_eq!(head.headers.get("x"), Some(&b"caf\xe9"[..]));
}

#[test]
fn parses_target_forms() {
    let (head, _) = complete_request(b"GET http://example.com:8080 HTTP/1.1\r\nHost: x\r\n\r\n");
    let authority = Authority {
        host: "example.com".into(),
        port: 8080,
    };
    let expected = RequestTarget::Absolute {
        scheme: "http".into(),
        authority: authority.clone(),
        path_and_query: "/".into(),
    };
    assert_eq!(head.target, expected);
    let (head, _) =
        complete_request(b"CONNECT example.com:8080 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n");
    assert_eq!(head.target, RequestTarget::Authority(authority));
    let (head, _) = complete_request(b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(head.target, RequestTarget::Asterisk);
}

#[test]
fn accepts_http10_without_host() {
    let (head, _) = complete_request(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(head.version, Version::Http10);
    assert!(!head.keep_alive());
}

#[test]
fn accepts_equal_content_lengths() {
    for raw in [
        &b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 005\r\n\r\n",
    ] {
        let (head, _) = complete_request(raw);
        assert_eq!(head.body_framing(), Ok(BodyFraming::Length(5)), "{raw:?}");
    }
}

#[test]
fn body_framing_of_requests() {
    let cases: [(&[u8], BodyFraming); 4] = [
        (b"POST / HTTP/1.1\r\nHost: h\r\n\r\n", BodyFraming::Empty),
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
            BodyFraming::Length(0),
        ),
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
            BodyFraming::Chunked,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: ChunKed\r\n\r\n",
            BodyFraming::Chunked,
        ),
    ];
    for (raw, framing) in cases {
        let (head, _) = complete_request(raw);
        assert_eq!(head.body_framing(), Ok(framing), "{raw:?}");
    }
}

#[test]
fn body_framing_rechecks_headers_changed_after_parsing() {
    let (mut head, _) =
        complete_request(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n");
    head.headers.append("Transfer-Encoding", "chunked");
    assert_eq!(
        head.body_framing(),
        Err(ParseError::ContentLengthWithTransferEncoding)
    );
}

#[test]
fn keep_alive_by_version_and_connection() {
    let cases: [(&[u8], bool); 6] = [
        (b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", true),
        (
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
            false,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, CLOSE\r\n\r\n",
            false,
        ),
        (b"GET / HTTP/1.0\r\n\r\n", false),
        (b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true),
        (
            b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
            false,
        ),
    ];
    for (raw, keep_alive) in cases {
        assert_eq!(complete_request(raw).0.keep_alive(), keep_alive, "{raw:?}");
    }
}

#[test]
fn expects_continue_only_in_http11() {
    let cases: [(&[u8], bool); 4] = [
        (
            b"PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\n\r\n",
            true,
        ),
        (b"PUT / HTTP/1.1\r\nHost: h\r\n\r\n", false),
        (
            b"PUT / HTTP/1.1\r\nHost: h\r\nExpect: something\r\n\r\n",
            false,
        ),
        (b"PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", false),
    ];
    for (raw, expects) in cases {
        assert_eq!(
            complete_request(raw).0.expects_continue(),
            expects,
            "{raw:?}"
        );
    }
}

#[test]
fn write_to_round_trips() {
    let inputs: [&[u8]; 5] = [
        b"GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n",
        b"POST http://h:8080/x HTTP/1.1\r\nHost: h:8080\r\nContent-Length: 3\r\n\r\n",
        b"CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n",
        b"OPTIONS * HTTP/1.0\r\nX-Obs: caf\xe9\r\n\r\n",
        b"PROPFIND /d HTTP/1.1\r\nHost: h\r\nX: a\r\nx: b\r\n\r\n",
    ];
    for raw in inputs {
        let (head, len) = complete_request(raw);
        let mut out = Vec::new();
        head.write_to(&mut out);
        assert_eq!(out, &raw[..len], "{:?}", super::show(raw));
        assert_eq!(complete_request(&out).0, head);
    }
}

#[test]
fn write_to_normalizes_absolute_form() {
    let (head, _) = complete_request(b"GET HTTP://h:80 HTTP/1.1\r\nHost:h\r\n\r\n");
    let mut out = Vec::new();
    head.write_to(&mut out);
    assert_eq!(out, b"GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n");
}

fn small_limits() -> Limits {
    Limits {
        max_request_line: 16,
        max_header_bytes: 64,
        max_headers: 2,
    }
}

#[test]
fn rejects_long_request_line_while_partial() {
    let limits = small_limits();
    // 16 bytes and a pending CR are still fine; the 17th byte of the line is not.
    assert_eq!(
        parse_request(b"GET /aaaaaaaaaaa\r", &limits),
        Ok(Parsed::Partial)
    );
    let error = parse_request(b"GET /aaaaaaaaaaaa", &limits).unwrap_err();
    assert_eq!(error, ParseError::RequestLineTooLong { limit: 16 });
    assert_eq!(error.status(), 414);
}

#[test]
fn rejects_long_request_line_when_complete() {
    let limits = small_limits();
    let ok = parse_request(b"GET /aa HTTP/1.0\r\n\r\n", &limits);
    assert!(matches!(ok, Ok(Parsed::Complete { .. })), "{ok:?}");
    let error = parse_request(b"GET /aaa HTTP/1.0\r\n\r\n", &limits).unwrap_err();
    assert_eq!(error, ParseError::RequestLineTooLong { limit: 16 });
}

#[test]
fn rejects_large_head_while_partial() {
    let limits = small_limits();
    let mut raw = b"GET / HTTP/1.1\r\nHost: h\r\nX: ".to_vec();
    raw.resize(64, b'a');
    assert_eq!(parse_request(&raw, &limits), Ok(Parsed::Partial));
    raw.push(b'a');
    let error = parse_request(&raw, &limits).unwrap_err();
    assert_eq!(error, ParseError::HeadersTooLarge { limit: 64 });
    assert_eq!(error.status(), 431);
}

#[test]
fn rejects_large_head_when_complete() {
    let limits = small_limits();
    let mut raw = b"GET / HTTP/1.1\r\nHost: h\r\nX: ".to_vec();
    raw.resize(61, b'a');
    raw.extend_from_slice(b"\r\n\r\n");
    assert_eq!(
        parse_request(&raw, &limits).unwrap_err(),
        ParseError::HeadersTooLarge { limit: 64 }
    );
    raw.remove(30);
    assert!(matches!(
        parse_request(&raw, &limits),
        Ok(Parsed::Complete { len: 64, .. })
    ));
}

#[test]
fn rejects_too_many_headers() {
    let limits = small_limits();
    let raw = b"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n";
    let error = parse_request(raw, &limits).unwrap_err();
    assert_eq!(error, ParseError::TooManyHeaders { limit: 2 });
    assert_eq!(error.status(), 431);
}

#[test]
fn rejects_nul_while_partial() {
    assert_eq!(request(b"GET /\0"), Err(ParseError::NulByte));
}

#[test]
fn rejects_bare_cr_while_partial() {
    assert_eq!(
        request(b"GET / HTTP/1.1\r\nHost: h\rX"),
        Err(ParseError::BareCarriageReturn)
    );
}

fn invalid_target(reason: &'static str) -> ParseError {
    ParseError::InvalidTarget { reason }
}

rejects! {
    rejects_cl_with_te: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
        => ParseError::ContentLengthWithTransferEncoding;
    rejects_te_with_cl: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
        => ParseError::ContentLengthWithTransferEncoding;
    rejects_differing_content_lengths: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"
        => ParseError::DuplicateContentLength { first: 5, second: 6 };
    rejects_differing_content_length_list: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 50\r\n\r\n"
        => ParseError::DuplicateContentLength { first: 5, second: 50 };
    rejects_non_digit_content_length: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5a\r\n\r\n" => ParseError::InvalidContentLength;
    rejects_signed_content_length: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n" => ParseError::InvalidContentLength;
    rejects_negative_content_length: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n" => ParseError::InvalidContentLength;
    rejects_hex_content_length: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x5\r\n\r\n" => ParseError::InvalidContentLength;
    rejects_space_inside_content_length: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1 2\r\n\r\n" => ParseError::InvalidContentLength;
    rejects_empty_content_length: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \r\n\r\n" => ParseError::InvalidContentLength;
    rejects_empty_content_length_element: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5,\r\n\r\n" => ParseError::InvalidContentLength;
    rejects_overflowing_content_length: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551616\r\n\r\n"
        => ParseError::InvalidContentLength;
    rejects_gzip_then_chunked_in_request: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
        => ParseError::UnsupportedTransferEncoding;
    rejects_codings_split_across_lines: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
        => ParseError::UnsupportedTransferEncoding;
    rejects_chunked_not_final: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"
        => ParseError::InvalidTransferEncoding;
    rejects_unknown_transfer_coding: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: xchunked\r\n\r\n"
        => ParseError::InvalidTransferEncoding;
    rejects_chunked_twice: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
        => ParseError::InvalidTransferEncoding;
    rejects_empty_transfer_encoding: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \r\n\r\n" => ParseError::InvalidTransferEncoding;
    rejects_empty_transfer_coding_element: request,
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked,\r\n\r\n"
        => ParseError::InvalidTransferEncoding;
    rejects_te_in_http10: request,
        b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n" => ParseError::TransferEncodingInHttp10;
    rejects_te_with_cl_in_http10: request,
        b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
        => ParseError::TransferEncodingInHttp10;
    rejects_obs_fold: request,
        b"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n" => ParseError::ObsoleteLineFolding;
    rejects_obs_fold_with_tab: request,
        b"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n" => ParseError::ObsoleteLineFolding;
    rejects_whitespace_before_first_field: request,
        b"GET / HTTP/1.1\r\n Host: h\r\n\r\n" => ParseError::ObsoleteLineFolding;
    rejects_space_before_colon: request,
        b"GET / HTTP/1.1\r\nHost : h\r\n\r\n" => ParseError::WhitespaceBeforeColon;
    rejects_tab_before_colon: request,
        b"GET / HTTP/1.1\r\nHost\t: h\r\n\r\n" => ParseError::WhitespaceBeforeColon;
    rejects_bare_cr_in_field_value: request,
        b"GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n" => ParseError::BareCarriageReturn;
    rejects_bare_cr_in_request_line: request,
        b"GET /\r HTTP/1.1\r\nHost: h\r\n\r\n" => ParseError::BareCarriageReturn;
    rejects_bare_cr_as_line_end: request,
        b"GET / HTTP/1.1\rHost: h\r\n\r\n" => ParseError::BareCarriageReturn;
    rejects_bare_lf_line_ends: request,
        b"GET / HTTP/1.1\nHost: h\n\n" => ParseError::BareLineFeed;
    rejects_bare_lf_ending_head: request,
        b"GET / HTTP/1.1\r\nHost: h\r\n\n" => ParseError::BareLineFeed;
    rejects_nul_in_field_value: request,
        b"GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n" => ParseError::NulByte;
    rejects_nul_in_field_name: request,
        b"GET / HTTP/1.1\r\nHost: h\r\nX\0: ab\r\n\r\n" => ParseError::NulByte;
    rejects_nul_in_request_line: request,
        b"GET /\0 HTTP/1.1\r\nHost: h\r\n\r\n" => ParseError::NulByte;
    rejects_control_char_in_field_value: request,
        b"GET / HTTP/1.1\r\nHost: h\r\nX: a\x01b\r\n\r\n" => ParseError::InvalidHeaderValue { name: "X".into() };
    rejects_invalid_field_name: request,
        b"GET / HTTP/1.1\r\nHost: h\r\nX(y): 1\r\n\r\n" => ParseError::InvalidHeaderName;
    rejects_empty_field_name: request,
        b"GET / HTTP/1.1\r\nHost: h\r\n: 1\r\n\r\n" => ParseError::InvalidHeaderName;
    rejects_field_line_without_colon: request,
        b"GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n" => ParseError::InvalidHeaderName;
    rejects_invalid_method_token: request,
        b"GE(T / HTTP/1.1\r\nHost: h\r\n\r\n" => ParseError::InvalidMethod;
    rejects_non_ascii_method: request,
        b"G\xc9T / HTTP/1.1\r\nHost: h\r\n\r\n" => ParseError::InvalidMethod;
    rejects_space_in_target: request,
        b"GET /a b HTTP/1.1\r\nHost: h\r\n\r\n" => invalid_target("control character, space or non-ASCII byte");
    rejects_double_space_in_request_line: request,
        b"GET  / HTTP/1.1\r\nHost: h\r\n\r\n" => invalid_target("control character, space or non-ASCII byte");
    rejects_tab_in_target: request,
        b"GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n" => invalid_target("control character, space or non-ASCII byte");
    rejects_non_ascii_target: request,
        b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n" => invalid_target("control character, space or non-ASCII byte");
    rejects_fragment_in_target: request,
        b"GET /a#b HTTP/1.1\r\nHost: h\r\n\r\n" => invalid_target("fragment");
    rejects_relative_target: request,
        b"GET a/b HTTP/1.1\r\nHost: h\r\n\r\n" => invalid_target("not in origin, absolute, authority or asterisk form");
    rejects_authority_form_for_get: request,
        b"GET example.com:80 HTTP/1.1\r\nHost: h\r\n\r\n" => invalid_target("authority-form is for CONNECT only");
    rejects_connect_with_origin_form: request,
        b"CONNECT / HTTP/1.1\r\nHost: h\r\n\r\n" => invalid_target("CONNECT needs authority-form host:port");
    rejects_connect_without_port: request,
        b"CONNECT example.com HTTP/1.1\r\nHost: h\r\n\r\n" => invalid_target("CONNECT needs authority-form host:port");
    rejects_asterisk_form_for_get: request,
        b"GET * HTTP/1.1\r\nHost: h\r\n\r\n" => invalid_target("asterisk-form is for OPTIONS only");
    rejects_https_absolute_form: request,
        b"GET https://h/ HTTP/1.1\r\nHost: h\r\n\r\n" => ParseError::UnsupportedScheme { scheme: "https".into() };
    rejects_missing_host_in_http11: request,
        b"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n" => ParseError::MissingHost;
    rejects_duplicate_host: request,
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n" => ParseError::DuplicateHost;
    rejects_invalid_host: request,
        b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n" => ParseError::InvalidHost;
    rejects_host_with_userinfo: request,
        b"GET / HTTP/1.1\r\nHost: u@a\r\n\r\n" => ParseError::InvalidHost;
    rejects_http2_version: request,
        b"GET / HTTP/2.0\r\nHost: h\r\n\r\n" => ParseError::UnsupportedVersion;
    rejects_http12_version: request,
        b"GET / HTTP/1.2\r\nHost: h\r\n\r\n" => ParseError::UnsupportedVersion;
    rejects_http09_version: request,
        b"GET / HTTP/0.9\r\n\r\n" => ParseError::UnsupportedVersion;
    rejects_lowercase_version: request,
        b"GET / http/1.1\r\nHost: h\r\n\r\n" => ParseError::MalformedRequestLine;
    rejects_missing_version: request,
        b"GET /\r\nHost: h\r\n\r\n" => ParseError::MalformedRequestLine;
    rejects_trailing_space_in_request_line: request,
        b"GET / HTTP/1.1 \r\nHost: h\r\n\r\n" => ParseError::MalformedRequestLine;
}
