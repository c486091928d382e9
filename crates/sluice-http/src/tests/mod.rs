//! Table tests across modules: literal bytes in, outcome out, one case per rule.

mod chunked;
mod noise;
mod request;
mod response;

use crate::{parse_request, parse_response, Limits, ParseError, Parsed, RequestHead, ResponseHead};

fn request(raw: &[u8]) -> Result<Parsed<RequestHead>, ParseError> {
    parse_request(raw, &Limits::default())
}

fn complete_request(raw: &[u8]) -> (RequestHead, usize) {
    match request(raw) {
        Ok(Parsed::Complete { head, len }) => (head, len),
        other => panic!(
            "expected a complete request from {:?}, got {other:?}",
            show(raw)
        ),
    }
}

fn response(raw: &[u8]) -> Result<Parsed<ResponseHead>, ParseError> {
    parse_response(raw, &Limits::default())
}

fn complete_response(raw: &[u8]) -> (ResponseHead, usize) {
    match response(raw) {
        Ok(Parsed::Complete { head, len }) => (head, len),
        other => panic!(
            "expected a complete response from {:?}, got {other:?}",
            show(raw)
        ),
    }
}

fn show(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

/// One `#[test]` per rejection rule: `name: parser, bytes => error`.
macro_rules! rejects {
    ($($name:ident: $parse:ident, $raw:expr => $error:expr;)*) => {$(
        #[test]
        fn $name() {
            let raw: &[u8] = $raw;
            assert_eq!(super::$parse(raw).map(|_| ()), Err($error), "{:?}", super::show(raw));
        }
    )*};
}
pub(crate) use rejects;

#[test]
fn error_statuses() {
    let cases = [
        (ParseError::RequestLineTooLong { limit: 1 }, 414),
        (ParseError::HeadersTooLarge { limit: 1 }, 431),
        (ParseError::TooManyHeaders { limit: 1 }, 431),
        (ParseError::UnsupportedTransferEncoding, 501),
        (ParseError::UnsupportedVersion, 505),
        (ParseError::ContentLengthWithTransferEncoding, 400),
        (ParseError::MissingHost, 400),
    ];
    for (error, status) in cases {
        assert_eq!(error.status(), status, "{error}");
    }
}
