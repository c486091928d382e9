//! CPU accounting from `/proc`: the whole machine (`/proc/stat`) and named processes
//! (`/proc/PID/stat`), sampled at the start and end of a measurement window.
//!
//! On one machine the kernel's work for a socket (softirq, TCP) is often charged to whichever
//! process happens to run, so a proxy's own `utime + stime` misses part of its cost and the load
//! generator's includes some of it. The honest figure is therefore the machine's busy time per
//! request with the proxy minus the same without it (a direct run of the same load); the
//! per-process figures are reported beside it as a breakdown, not as the headline.

use std::fs;
use std::process::Command;

use serde::Serialize;

/// Which processes count as the proxy.
#[derive(Debug, Clone, Default)]
pub struct ProxyProcesses {
    /// Explicit pids (`--proxy-pid`), each with its descendants (an nginx master and its
    /// workers), looked up at each sample.
    pub pids: Vec<u32>,
    /// Every process whose `comm` is this name (`--proxy-process haproxy`), looked up at each
    /// sample so worker processes started later are found.
    pub name: Option<String>,
}

impl ProxyProcesses {
    /// Whether any process is named.
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty() && self.name.is_none()
    }

    fn resolve(&self) -> Vec<u32> {
        let mut pids = with_descendants(&self.pids);
        if let Some(name) = &self.name {
            pids.extend(pids_named(name));
        }
        pids.sort_unstable();
        pids.dedup();
        pids
    }
}

/// Pids of every process whose `comm` (the first 15 bytes of its name) equals `name`'s.
pub fn pids_named(name: &str) -> Vec<u32> {
    let comm: String = name.chars().take(15).collect();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == comm)
        })
        .collect()
}

/// `roots` and every process descended from one of them.
pub fn with_descendants(roots: &[u32]) -> Vec<u32> {
    if roots.is_empty() {
        return Vec::new();
    }
    let Ok(entries) = fs::read_dir("/proc") else {
        return roots.to_vec();
    };
    let parents: Vec<(u32, u32)> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // Field 4, the parent pid, counted from the last ')' as in parse_pid_stat.
            let ppid = stat[stat.rfind(')')? + 1..]
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found = roots.to_vec();
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(parents.iter().filter(|p| p.1 == parent).map(|p| p.0));
        next += 1;
    }
    found
}

/// One reading of the counters, in clock ticks.
#[derive(Debug, Clone, Default)]
pub struct CpuSample {
    machine_busy: u64,
    machine_total: u64,
    /// (pid, utime + stime) of each proxy process alive at the sample.
    proxy: Vec<(u32, u64)>,
    lab: u64,
}

/// CPU time used between two samples, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CpuUsage {
    /// Busy time summed over all CPUs: user, nice, system, irq, softirq, steal.
    pub machine_busy_s: f64,
    /// Wall time times the number of CPUs, as /proc/stat counts it (busy plus idle).
    pub machine_total_s: f64,
    /// User plus system time of the proxy's processes; `None` when none were named.
    pub proxy_s: Option<f64>,
    /// Pids counted as the proxy at the end of the window.
    pub proxy_pids: Vec<u32>,
    /// User plus system time of this process (load generator, and the origin when it runs
    /// in-process as under `peers`).
    pub lab_s: f64,
}

/// Takes [`CpuSample`]s and turns pairs of them into [`CpuUsage`].
#[derive(Debug, Clone)]
pub struct CpuSampler {
    proxy: ProxyProcesses,
    ticks_per_s: f64,
}

impl CpuSampler {
    /// A sampler for the machine and the given proxy processes.
    pub fn new(proxy: ProxyProcesses) -> CpuSampler {
        CpuSampler {
            proxy,
            ticks_per_s: clock_ticks_per_second(),
        }
    }

    /// Reads the counters now.
    pub fn sample(&self) -> CpuSample {
        let (machine_busy, machine_total) = machine_ticks().unwrap_or((0, 0));
        let proxy = self
            .proxy
            .resolve()
            .into_iter()
            .filter_map(|pid| Some((pid, process_ticks(&pid.to_string())?)))
            .collect();
        let lab = process_ticks("self").unwrap_or(0);
        CpuSample {
            machine_busy,
            machine_total,
            proxy,
            lab,
        }
    }

    /// CPU used from `start` to `end`. A proxy process that appeared in between counts from
    /// zero (it was forked during the window); one that exited is lost.
    pub fn usage(&self, start: &CpuSample, end: &CpuSample) -> CpuUsage {
        let secs = |ticks: u64| ticks as f64 / self.ticks_per_s;
        let proxy_ticks: u64 = end
            .proxy
            .iter()
            .map(|&(pid, ticks)| {
                let before = start.proxy.iter().find(|p| p.0 == pid).map_or(0, |p| p.1);
                ticks.saturating_sub(before)
            })
            .sum();
        CpuUsage {
            machine_busy_s: secs(end.machine_busy.saturating_sub(start.machine_busy)),
            machine_total_s: secs(end.machine_total.saturating_sub(start.machine_total)),
            proxy_s: (!self.proxy.is_empty()).then(|| secs(proxy_ticks)),
            proxy_pids: end.proxy.iter().map(|p| p.0).collect(),
            lab_s: secs(end.lab.saturating_sub(start.lab)),
        }
    }
}

/// USER_HZ, the unit of /proc/stat and /proc/PID/stat (proc(5)). `getconf` rather than
/// `sysconf(3)` because this crate has no unsafe code; 100 is the value on every Linux
/// architecture we run on, used if getconf is missing.
fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| {
            String::from_utf8(out.stdout)
                .ok()?
                .trim()
                .parse::<f64>()
                .ok()
        })
        .filter(|&hz| hz > 0.0)
        .unwrap_or(100.0)
}

/// (busy, total) ticks over all CPUs from the first line of /proc/stat.
fn machine_ticks() -> Option<(u64, u64)> {
    parse_proc_stat(&fs::read_to_string("/proc/stat").ok()?)
}

fn parse_proc_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map_while(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice]; guest time is
    // already inside user and nice, so it is not added again.
    let field = |i: usize| fields.get(i).copied().unwrap_or(0);
    let idle = field(3) + field(4);
    let busy = field(0) + field(1) + field(2) + field(5) + field(6) + field(7);
    Some((busy, busy + idle))
}

/// utime + stime of `/proc/{pid}/stat` (all threads of the process).
fn process_ticks(pid: &str) -> Option<u64> {
    parse_pid_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn parse_pid_stat(text: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may contain spaces or ')', so count
    // fields from the last ')'. After it: state (3), ... utime (14), stime (15).
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat() {
        let text = "cpu  100 5 50 1000 20 3 7 0 0 0\ncpu0 50 2 25 500 10 1 3 0 0 0\n";
        assert_eq!(parse_proc_stat(text), Some((165, 1185)));
    }

    #[test]
    fn parses_pid_stat_with_awkward_names() {
        let text = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 17 4 0 0 20 0 1 0 5 0 0";
        assert_eq!(parse_pid_stat(text), Some(21));
    }

    #[test]
    fn samples_this_machine() {
        let sampler = CpuSampler::new(ProxyProcesses {
            pids: vec![std::process::id()],
            name: None,
        });
        let start = sampler.sample();
        // Burn a little CPU so the counters can move; nothing is asserted about how much.
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let usage = sampler.usage(&start, &sampler.sample());
        assert!(usage.machine_busy_s >= 0.0);
        assert!(usage.machine_total_s >= usage.machine_busy_s);
        assert_eq!(usage.proxy_pids, vec![std::process::id()]);
        assert!(usage.proxy_s.is_some());
    }

    #[test]
    fn finds_children_of_a_pid() {
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        let found = with_descendants(&[std::process::id()]);
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&child.id()), "{found:?}");
    }

    #[test]
    fn finds_this_process_by_name() {
        let comm = fs::read_to_string("/proc/self/comm").unwrap();
        assert!(pids_named(comm.trim_end()).contains(&std::process::id()));
    }
}
