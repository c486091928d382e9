//! Serializing heads back to bytes, for forwarding.

use crate::{Headers, RequestHead, ResponseHead};

impl RequestHead {
    /// Appends the request line, the fields (`name: value`, in order) and the final CRLF to
    /// `out`. The target is written in the form it holds, so a proxy switching from
    /// absolute-form to origin-form replaces [`target`](Self::target) first.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let line = format!("{} {} {}\r\n", self.method, self.target, self.version);
        out.extend_from_slice(line.as_bytes());
        write_fields(&self.headers, out);
    }
}

impl ResponseHead {
    /// Appends the status line, the fields and the final CRLF to `out`. An empty reason is
    /// written as `HTTP/1.1 204 ` (with the SP, as RFC 9112 §4 requires).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let line = format!("{} {} {}\r\n", self.version, self.status, self.reason);
        out.extend_from_slice(line.as_bytes());
        write_fields(&self.headers, out);
    }
}

fn write_fields(headers: &Headers, out: &mut Vec<u8>) {
    for field in headers {
        out.extend_from_slice(field.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(&field.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}
