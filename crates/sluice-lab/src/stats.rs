//! Summaries over repeated runs: the mean with a 90% confidence interval from Student's t,
//! as both papers report their figures.

use serde::Serialize;

/// Two-sided 90% quantiles of Student's t, `t(0.95, df)`, for df = 1..=30.
const T90: [f64; 30] = [
    6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771,
    1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706,
    1.703, 1.701, 1.699, 1.697,
];

/// Larger df, from the same tables; between rows we interpolate in 1/df, which is how the
/// quantile behaves (it tends to the normal's 1.645 linearly in 1/df).
const T90_TAIL: [(f64, f64); 4] = [(30.0, 1.697), (40.0, 1.684), (60.0, 1.671), (120.0, 1.658)];
const Z90: f64 = 1.645;

/// `t(0.95, df)`: the half-width of a 90% interval is this times the standard error.
pub fn t90(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T90[df - 1],
        _ => {
            let inv = 1.0 / df as f64;
            for pair in T90_TAIL.windows(2) {
                let ((d0, t0), (d1, t1)) = (pair[0], pair[1]);
                if (df as f64) <= d1 {
                    let w = (1.0 / d0 - inv) / (1.0 / d0 - 1.0 / d1);
                    return t0 + w * (t1 - t0);
                }
            }
            let (d0, t0) = T90_TAIL[T90_TAIL.len() - 1];
            t0 + (1.0 - inv * d0) * (Z90 - t0)
        }
    }
}

/// Mean of several runs' values with the half-width of its 90% confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Sample mean.
    pub mean: f64,
    /// Half-width of the 90% interval (Student t); `None` from a single run.
    pub ci90: Option<f64>,
    /// Number of runs.
    pub runs: usize,
}

impl Interval {
    /// Summarises `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Interval> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let ci90 = (n > 1).then(|| {
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            t90(n - 1) * (var / n as f64).sqrt()
        });
        Some(Interval {
            mean,
            ci90,
            runs: n,
        })
    }

    /// `mean ± ci` with `decimals` places, or the mean alone from one run.
    pub fn display(&self, decimals: usize) -> String {
        match self.ci90 {
            Some(ci) => format!("{:.*} ± {:.*}", decimals, self.mean, decimals, ci),
            None => format!("{:.*}", decimals, self.mean),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        assert_eq!(t90(1), 6.314);
        assert_eq!(t90(9), 1.833);
        assert_eq!(t90(30), 1.697);
        assert!((t90(40) - 1.684).abs() < 1e-9);
        assert!((t90(120) - 1.658).abs() < 1e-9);
        // Tabulated values the code does not store: df 50 is 1.676, df 100 is 1.660.
        assert!((t90(50) - 1.676).abs() < 0.002, "{}", t90(50));
        assert!((t90(100) - 1.660).abs() < 0.002, "{}", t90(100));
        assert!((t90(1_000_000) - Z90).abs() < 0.001);
        // Monotone: more runs never widen the multiplier.
        for df in 1..500 {
            assert!(t90(df + 1) <= t90(df), "df {df}");
        }
    }

    #[test]
    fn interval_of_ten_runs() {
        // Mean 10.5, sample sd 1.4337, se 0.4534; t(0.95, 9) = 1.833, half-width 0.8310.
        let values = [9.0, 10.0, 11.0, 12.0, 8.0, 13.0, 10.0, 11.0, 10.0, 11.0];
        let interval = Interval::of(&values).unwrap();
        assert!((interval.mean - 10.5).abs() < 1e-12);
        let ci = interval.ci90.unwrap();
        assert!((ci - 0.8310).abs() < 1e-3, "{ci}");
        assert_eq!(interval.display(2), "10.50 ± 0.83");
    }

    #[test]
    fn one_run_has_no_interval() {
        let interval = Interval::of(&[42.0]).unwrap();
        assert_eq!(interval.ci90, None);
        assert_eq!(interval.display(1), "42.0");
        assert_eq!(Interval::of(&[]), None);
    }

    #[test]
    fn identical_runs_have_zero_width() {
        let interval = Interval::of(&[5.0, 5.0, 5.0]).unwrap();
        assert_eq!(interval.ci90, Some(0.0));
    }
}
