//! Any bytes: parsing never panics, and an accepted head written back out parses to the same
//! head, so what we forward is what we understood. Responses get the same check.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_http::{parse_request, parse_response, Limits, Parsed};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    if let Ok(Parsed::Complete { head, len }) = parse_request(data, &limits) {
        assert!(len <= data.len());
        let _ = head.body_framing();
        let mut out = Vec::new();
        head.write_to(&mut out);
        match parse_request(&out, &limits) {
            Ok(Parsed::Complete { head: again, len }) => {
                assert_eq!(again, head);
                assert_eq!(len, out.len());
            }
            other => panic!("serialized head re-parsed as {other:?}"),
        }
    }
    if let Ok(Parsed::Complete { head, .. }) = parse_response(data, &limits) {
        let mut out = Vec::new();
        head.write_to(&mut out);
        assert!(matches!(parse_response(&out, &limits), Ok(Parsed::Complete { .. })));
    }
});
