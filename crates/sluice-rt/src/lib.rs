//! sluice-rt (work in progress).
