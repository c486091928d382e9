//! Signals as a file: `sigprocmask(2)` blocks them, `signalfd(2)` reads them (signalfd(2):
//! "the signals must be blocked ... to prevent them being handled according to their default
//! dispositions").

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A non-blocking signalfd for a fixed set of signals, which stay blocked for the process.
#[derive(Debug)]
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    /// Blocks `signals` in the calling thread (call it before starting any other thread, so
    /// they inherit the mask) and returns a file that becomes readable when one is pending.
    ///
    /// Children inherit a blocked mask across exec, so spawn helper processes before this.
    pub fn new(signals: &[libc::c_int]) -> io::Result<SignalFd> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initialises the whole set it is given; `set` is a valid pointer.
        if unsafe { libc::sigemptyset(set.as_mut_ptr()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: initialised by sigemptyset just above.
        let mut set = unsafe { set.assume_init() };
        for &signal in signals {
            // SAFETY: `set` is an initialised sigset_t, borrowed mutably for the call.
            if unsafe { libc::sigaddset(&mut set, signal) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: `set` is initialised; a null old-set pointer is allowed (sigprocmask(2)).
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        // SAFETY: -1 asks for a new fd; `set` is initialised and only read.
        let raw = unsafe { libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: signalfd returned a new fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(SignalFd { fd })
    }

    /// The next pending signal number, or `None` when none is pending.
    pub fn read(&self) -> io::Result<Option<u32>> {
        let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
        match rustix::io::read(&self.fd, &mut info) {
            Ok(n) if n == info.len() => {
                // ssi_signo is the first field, a u32 in native byte order.
                let signo = u32::from_ne_bytes([info[0], info[1], info[2], info[3]]);
                Ok(Some(signo))
            }
            Ok(_) => Ok(None),
            Err(rustix::io::Errno::AGAIN) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

impl AsFd for SignalFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for SignalFd {
    fn as_raw_fd(&self) -> libc::c_int {
        self.fd.as_raw_fd()
    }
}
