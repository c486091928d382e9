//! sluice-http (work in progress).
