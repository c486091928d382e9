//! sluice-testkit (work in progress).
