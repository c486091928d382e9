//! Repeated runs, optionally each paired with a direct run of the same load, summarised as
//! means with 90% intervals; the pair gives the proxy's overhead per request.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::report::{summary_lines, table_row, LabelledRun, Provenance, Summary, TABLE_HEADER};
use super::{run, LoadConfig, Via};
use crate::stats::Interval;

/// Label of runs straight to the origin.
pub const DIRECT: &str = "direct";
/// Label of runs through the proxy.
pub const PROXIED: &str = "proxied";

/// All runs of one `sluice-lab load` invocation.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesReport {
    /// Machine, date, command.
    pub provenance: Provenance,
    /// The load as configured.
    pub config: LoadConfig,
    /// Every run, in the order run.
    pub runs: Vec<LabelledRun>,
    /// Per label: means and 90% intervals.
    pub summary: BTreeMap<String, Summary>,
    /// Machine CPU per request through the proxy minus direct, per repetition, summarised:
    /// the proxy's cost, kernel work included. Only with `--compare-direct`.
    pub overhead_us_per_req: Option<Interval>,
}

/// Runs `config` `repetitions` times; with `compare_direct`, each repetition first runs the
/// same load straight to the origin.
pub fn run_series(
    config: &LoadConfig,
    repetitions: usize,
    compare_direct: bool,
) -> anyhow::Result<SeriesReport> {
    anyhow::ensure!(repetitions > 0, "--runs must be at least 1");
    if compare_direct && config.endpoint.via == Via::Direct {
        anyhow::bail!("--compare-direct needs --proxy: the direct run is the comparison");
    }
    let mut direct_config = config.clone();
    direct_config.endpoint.via = Via::Direct;
    direct_config.proxy = Default::default();
    let label = if config.endpoint.via == Via::Direct {
        DIRECT
    } else {
        PROXIED
    };

    let mut runs = Vec::new();
    let mut overheads = Vec::new();
    for repetition in 1..=repetitions {
        let mut direct_machine = None;
        if compare_direct {
            let report = run(&direct_config)?;
            direct_machine = Some(report.cpu_per_request.machine_us);
            runs.push(LabelledRun {
                label: DIRECT.into(),
                repetition,
                report,
            });
        }
        let report = run(config)?;
        if let Some(direct) = direct_machine {
            overheads.push(report.cpu_per_request.machine_us - direct);
        }
        runs.push(LabelledRun {
            label: label.into(),
            repetition,
            report,
        });
    }

    let mut summary = BTreeMap::new();
    for name in [DIRECT, PROXIED] {
        let of_label: Vec<_> = runs
            .iter()
            .filter(|r| r.label == name)
            .map(|r| &r.report)
            .collect();
        if let Some(s) = Summary::of(&of_label) {
            summary.insert(name.to_owned(), s);
        }
    }
    Ok(SeriesReport {
        provenance: Provenance::collect(),
        config: config.clone(),
        runs,
        summary,
        overhead_us_per_req: Interval::of(&overheads),
    })
}

impl SeriesReport {
    /// The human report: provenance, a row per run, then the summaries.
    pub fn human(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.provenance.line());
        let _ = writeln!(out, "{}\n", self.provenance.command);
        out.push_str(TABLE_HEADER);
        for run in &self.runs {
            out.push_str(&table_row(run));
        }
        out.push('\n');
        for (label, summary) in &self.summary {
            out.push_str(&summary_lines(label, summary));
        }
        if let Some(overhead) = &self.overhead_us_per_req {
            let _ = writeln!(
                out,
                "proxy overhead: {} µs of machine CPU per request (proxied minus direct)",
                overhead.display(1)
            );
        }
        out
    }

    /// Whether any run had errors or unfinished requests.
    pub fn had_errors(&self) -> bool {
        self.runs.iter().any(|r| r.report.error_total > 0)
    }
}
