//! The load client against every framing the origin offers, checked byte by byte.

use sluice_lab::load::client::{Conn, Endpoint, Failure};
use sluice_lab::load::Via;
use sluice_lab::origin::{Origin, OriginConfig};

async fn fetch(endpoint: &Endpoint, target: &str, size: u64) -> Result<bool, Failure> {
    let mut conn = Conn::connect(endpoint.connect_addr()).await?;
    let response = conn.get(endpoint, target, size, true, true, false).await?;
    Ok(response.reusable)
}

#[test]
fn every_framing_verifies() {
    let origin = Origin::start(OriginConfig::default()).unwrap();
    let endpoint = Endpoint {
        origin: origin.local_addr(),
        via: Via::Direct,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for size in [0u64, 1, 16 * 1024, 100_000, 3 << 20] {
            let length = format!("/size/{size}?frame=length");
            assert!(fetch(&endpoint, &length, size).await.unwrap(), "{length}");
            let chunked = format!("/size/{size}?frame=chunked&cache=60");
            assert!(fetch(&endpoint, &chunked, size).await.unwrap(), "{chunked}");
            let close = format!("/size/{size}?frame=close");
            assert!(!fetch(&endpoint, &close, size).await.unwrap(), "{close}");
        }
        // The size the client expects is checked, not only the bytes.
        assert_eq!(fetch(&endpoint, "/size/10", 11).await, Err(Failure::Length));
    });
    let totals = origin.stop();
    assert_eq!(totals.rejected, 0);
}

#[test]
fn a_flipped_byte_from_the_network_is_a_body_mismatch() {
    use std::io::{Read, Write};
    // A fake origin that serves the right body for /size/1000 with one bit flipped.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = [0u8; 1024];
        let _ = stream.read(&mut request).unwrap();
        let pattern = sluice_lab::body::BodyPattern::shared();
        let start = sluice_lab::body::BodyPattern::start_offset("/size/1000");
        let mut body: Vec<u8> = pattern
            .slices(start, 1000, 1000)
            .flatten()
            .copied()
            .collect();
        body[777] ^= 0x10;
        let mut response = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n".to_vec();
        response.extend_from_slice(&body);
        stream.write_all(&response).unwrap();
    });
    let endpoint = Endpoint {
        origin: addr,
        via: Via::Direct,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = runtime.block_on(fetch(&endpoint, "/size/1000", 1000));
    assert_eq!(result, Err(Failure::BodyMismatch));
    server.join().unwrap();
}
