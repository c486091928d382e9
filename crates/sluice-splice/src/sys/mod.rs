//! The operating-system layer: every system call the engines make goes through here, one file
//! per mechanism, each a thin wrapper taking `BorrowedFd`s and returning `io::Result`.
//!
//! - [`splice`]: pipes, splice(2), tee(2) and the MSG_MORE send that lets a prefix leave in the
//!   same segment as the first spliced bytes. Safe code over `rustix`.
//! - [`sockmap`]: the eBPF program, its maps and the socket ioctls it needs; the only file with
//!   `unsafe`, each block with its `// SAFETY:` line.

pub(crate) mod sockmap;
pub(crate) mod splice;
