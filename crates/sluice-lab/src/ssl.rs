//! SSL handshake emulation (WWW 2002 paper, section 3.1 and Table 3).
//!
//! Neither side runs TLS: after a CONNECT tunnel opens, client and origin exchange messages of
//! exactly the sizes and order of a real handshake, so the proxy carries a realistic SSL
//! workload, then a plain GET runs in the same tunnel.
//!
//! | handshake   | sequence (source and bytes)                                  |
//! |-------------|--------------------------------------------------------------|
//! | full        | client 98, server 2239, client 73, server 6, client 67, server 61 |
//! | abbreviated | client 98, server 79, server 6, server 61, client 6, client 61    |
//!
//! The first message starts with `0x16` (a TLS handshake record, never the first byte of an
//! HTTP method), so the origin tells an emulated handshake from a request by one byte; its second
//! byte says which handshake the client chose. Every other byte of message `i` is `0xA0 + i`,
//! and each side checks what it reads.

use std::io;

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// First byte of the emulated client hello: a TLS handshake record type.
pub const HELLO_FIRST_BYTE: u8 = 0x16;

/// Which side of the connection sends a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The load generator.
    Client,
    /// The origin emulator.
    Server,
}

/// One handshake message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// Who sends it.
    pub from: Side,
    /// Its exact length in bytes.
    pub len: usize,
}

const fn msg(from: Side, len: usize) -> Message {
    Message { from, len }
}

const FULL: [Message; 6] = [
    msg(Side::Client, 98),
    msg(Side::Server, 2239),
    msg(Side::Client, 73),
    msg(Side::Server, 6),
    msg(Side::Client, 67),
    msg(Side::Server, 61),
];

const ABBREVIATED: [Message; 6] = [
    msg(Side::Client, 98),
    msg(Side::Server, 79),
    msg(Side::Server, 6),
    msg(Side::Server, 61),
    msg(Side::Client, 6),
    msg(Side::Client, 61),
];

/// The two handshakes of Table 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Handshake {
    /// A new session: certificate and key exchange.
    Full,
    /// A resumed session (60% of handshakes in the paper's workload).
    Abbreviated,
}

impl Handshake {
    /// The messages in order.
    pub fn messages(self) -> &'static [Message] {
        match self {
            Handshake::Full => &FULL,
            Handshake::Abbreviated => &ABBREVIATED,
        }
    }

    fn tag(self) -> u8 {
        match self {
            Handshake::Full => 1,
            Handshake::Abbreviated => 2,
        }
    }

    /// Which handshake a client hello asks for, from its second byte.
    pub fn from_hello(hello: &[u8]) -> Option<Handshake> {
        match hello {
            [HELLO_FIRST_BYTE, 1, ..] => Some(Handshake::Full),
            [HELLO_FIRST_BYTE, 2, ..] => Some(Handshake::Abbreviated),
            _ => None,
        }
    }

    /// The exact bytes of message `index`.
    pub fn message_bytes(self, index: usize) -> Vec<u8> {
        let len = self.messages()[index].len;
        let mut bytes = vec![0xA0u8.wrapping_add(index as u8); len];
        if index == 0 {
            bytes[0] = HELLO_FIRST_BYTE;
            bytes[1] = self.tag();
        }
        bytes
    }

    /// Bytes `side` sends in the whole handshake.
    pub fn bytes_from(self, side: Side) -> usize {
        self.messages()
            .iter()
            .filter(|m| m.from == side)
            .map(|m| m.len)
            .sum()
    }
}

/// Runs the handshake on `stream` as `me`, from message `start` on (the origin starts at 1,
/// having read the hello to recognise it). `buf` holds bytes already read from the stream and
/// keeps any read past the handshake (the GET that follows).
pub async fn exchange<S>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    handshake: Handshake,
    me: Side,
    start: usize,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    for (index, message) in handshake.messages().iter().enumerate().skip(start) {
        let expected = handshake.message_bytes(index);
        if message.from == me {
            stream.write_all(&expected).await?;
        } else {
            read_to(stream, buf, message.len).await?;
            let received: Vec<u8> = buf.drain(..message.len).collect();
            if received != expected {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("ssl emulation: message {index} has the wrong bytes"),
                ));
            }
        }
    }
    Ok(())
}

/// Reads from `stream` until `buf` holds at least `len` bytes.
pub async fn read_to<S>(stream: &mut S, buf: &mut Vec<u8>, len: usize) -> io::Result<()>
where
    S: AsyncRead + Unpin,
{
    let mut chunk = [0u8; 4096];
    while buf.len() < len {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequence(handshake: Handshake) -> Vec<(Side, usize)> {
        handshake
            .messages()
            .iter()
            .map(|m| (m.from, m.len))
            .collect()
    }

    #[test]
    fn full_sequence_is_table_3() {
        use Side::*;
        assert_eq!(
            sequence(Handshake::Full),
            [
                (Client, 98),
                (Server, 2239),
                (Client, 73),
                (Server, 6),
                (Client, 67),
                (Server, 61)
            ]
        );
        assert_eq!(Handshake::Full.bytes_from(Client), 238);
        assert_eq!(Handshake::Full.bytes_from(Server), 2306);
    }

    #[test]
    fn abbreviated_sequence_is_table_3() {
        use Side::*;
        assert_eq!(
            sequence(Handshake::Abbreviated),
            [
                (Client, 98),
                (Server, 79),
                (Server, 6),
                (Server, 61),
                (Client, 6),
                (Client, 61)
            ]
        );
        assert_eq!(Handshake::Abbreviated.bytes_from(Client), 165);
        assert_eq!(Handshake::Abbreviated.bytes_from(Server), 146);
    }

    #[test]
    fn hello_names_its_handshake_and_is_not_http() {
        for handshake in [Handshake::Full, Handshake::Abbreviated] {
            let hello = handshake.message_bytes(0);
            assert_eq!(hello.len(), 98);
            assert_eq!(Handshake::from_hello(&hello), Some(handshake));
            assert!(!hello[0].is_ascii_alphabetic());
        }
        assert_eq!(Handshake::from_hello(b"GET / HTTP/1.1"), None);
    }

    async fn run_both(handshake: Handshake) -> (Vec<u8>, usize) {
        let (mut client, mut server) = tokio::io::duplex(64);
        let client_task = tokio::spawn(async move {
            let mut buf = Vec::new();
            exchange(&mut client, &mut buf, handshake, Side::Client, 0)
                .await
                .unwrap();
            client
                .write_all(b"GET /after HTTP/1.1\r\n\r\n")
                .await
                .unwrap();
            client
        });
        // The origin's way in: read the hello, recognise it, go on from message 1.
        let mut buf = Vec::new();
        read_to(&mut server, &mut buf, 98).await.unwrap();
        let seen = Handshake::from_hello(&buf).unwrap();
        assert_eq!(seen, handshake);
        buf.drain(..98);
        exchange(&mut server, &mut buf, seen, Side::Server, 1)
            .await
            .unwrap();
        let _client = client_task.await.unwrap();
        read_to(&mut server, &mut buf, 23).await.unwrap();
        (buf, handshake.bytes_from(Side::Server))
    }

    #[tokio::test]
    async fn both_sides_complete_and_the_request_follows() {
        for handshake in [Handshake::Full, Handshake::Abbreviated] {
            let (rest, _) = run_both(handshake).await;
            assert_eq!(rest, b"GET /after HTTP/1.1\r\n\r\n");
        }
    }

    #[tokio::test]
    async fn a_wrong_byte_fails_the_handshake() {
        let (mut client, mut server) = tokio::io::duplex(4096);
        let mut hello = Handshake::Full.message_bytes(0);
        hello[50] ^= 1;
        client.write_all(&hello).await.unwrap();
        let mut buf = Vec::new();
        let result = exchange(&mut server, &mut buf, Handshake::Full, Side::Server, 0).await;
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::InvalidData);
    }
}
