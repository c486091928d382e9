//! sluice-config (work in progress).
