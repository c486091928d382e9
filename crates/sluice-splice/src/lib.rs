//! sluice-splice (work in progress).
