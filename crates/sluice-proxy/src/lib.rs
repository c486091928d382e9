//! sluice-proxy (work in progress).
