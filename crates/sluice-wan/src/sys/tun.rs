//! TAP devices: `open("/dev/net/tun")` plus `ioctl(TUNSETIFF)` (kernel
//! `Documentation/networking/tuntap.rst`).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use rustix::fs::{Mode, OFlags};

/// `_IOW('T', 202, int)` from `<linux/if_tun.h>`; `libc` does not export it.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// `struct ifreq` with the one union member TUNSETIFF reads (`ifr_flags`), padded to the
/// kernel's 40 bytes so the kernel's `copy_from_user` of the whole struct stays in bounds.
#[repr(C)]
struct IfReqFlags {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Creates (or attaches to) the TAP device `name` in the caller's network namespace and returns
/// its non-blocking, close-on-exec file. Frames are plain Ethernet, without the 4-byte packet
/// information header (`IFF_NO_PI`) and without a virtio-net header, so the kernel segments
/// any GSO packet before it reaches us: one read is one wire frame.
///
/// The device is not persistent: it disappears when the last file open on it closes, which is
/// what makes `kill -9` of the wire leave no device behind.
pub fn open_tap(name: &str) -> io::Result<OwnedFd> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name {name:?} must have 1 to 15 bytes and no NUL"),
        ));
    }
    let fd = rustix::fs::open(
        "/dev/net/tun",
        OFlags::RDWR | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut req = IfReqFlags {
        name: [0; libc::IFNAMSIZ],
        flags: (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short,
        _pad: [0; 22],
    };
    req.name[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: `fd` is open for the whole call; TUNSETIFF reads and writes one `struct ifreq`
    // (40 bytes on Linux), and `req` is a live, exclusively borrowed, 40-byte repr(C) value
    // whose name is NUL-terminated (checked above: at most 15 bytes, the rest zero).
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req as *mut IfReqFlags) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifreq_has_the_kernel_size() {
        assert_eq!(std::mem::size_of::<IfReqFlags>(), 40);
    }

    #[test]
    fn refuses_long_names() {
        let err = open_tap("a-name-that-is-too-long").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
