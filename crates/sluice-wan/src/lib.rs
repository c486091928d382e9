//! Emulated wide-area networks for Sluice's test bed: client, proxy and server hosts in network
//! namespaces, joined by a user-space "wire" that delays, rate-limits and drops frames.
//!
//! `sluice-lab net` and `sluice-lab wire` call into this crate ([`run_net`], [`run_wire`]);
//! it calls `ip` (iproute2) to build namespaces and `/dev/net/tun` for TAP devices. Nothing in
//! Sluice's proxy depends on it.
//!
//! Start with:
//! - [`topology::TestBed`]: the hosts, wires and state file of one test bed (`net up|down`).
//! - [`wire::Wire`]: the process that owns both TAP devices of every link and applies, per
//!   direction, [`loss`] then [`shaper`] (rate with a bounded tail-drop queue, optionally per
//!   TCP flow) then [`delay`].
//! - [`profile::Profile`]: the impairments as a TOML file; built-ins match the papers.
//!
//! It does not use the kernel's qdiscs for delay: this machine has no `sch_netem`. Emulating
//! delay in user space costs a context switch per frame, which the measurements in
//! docs/TESTBED.md ("WAN emulation") show stays far below the delays emulated.
//!
//! Invariants: a wire frame is one packet (offloads off, TAPs without vnet headers), so a loss
//! decision drops one packet; packets of one direction (or one flow, with `per_flow`) are never
//! reordered; a seed fixes every random draw, and each direction draws from its own generators,
//! so its loss decisions depend only on its own frames.
//!
//! ```no_run
//! use sluice_wan::profile::Profile;
//! use sluice_wan::topology::{self, Layout, TestBed};
//!
//! let profile = Profile::load("www2002-modem-1")?;
//! let mut bed = TestBed::plan("slw", Layout::Proxy, "www2002-modem-1", profile, 1)?;
//! topology::up(&mut bed, &std::env::current_exe().unwrap())?;
//! // ... run load in bed.netns_of("client")? ...
//! topology::down("slw")?;
//! # Ok::<(), sluice_wan::WanError>(())
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod cli;
pub mod counters;
pub mod delay;
mod error;
pub mod frame;
pub mod loss;
pub mod netns;
pub mod probe;
pub mod profile;
pub mod shaper;
// The one place with `unsafe`: TUNSETIFF, signalfd and sched_setscheduler, which neither std
// nor rustix wrap.
#[allow(unsafe_code)]
mod sys;
pub mod tcpstats;
pub mod topology;
pub mod units;
pub mod wire;

pub use cli::{run_net, run_wire, NetArgs, WireArgs};
pub use error::WanError;
pub use topology::is_test_bed_address;
