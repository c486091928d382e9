//! Readiness backends, one file per mechanism.

pub mod epoll;
