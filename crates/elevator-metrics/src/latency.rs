//! Latency recording with an HDR histogram (3 significant digits, 1 ns to
//! one hour) plus exact count, sum, maximum and the tiotest thresholds.

use elevator_core::Duration;
use hdrhistogram::Histogram;

/// Longest latency the histogram resolves; longer values are clamped (the
/// exact maximum is kept separately).
const HIST_MAX_NS: u64 = 3_600_000_000_000;

/// Latency samples of one job.
#[derive(Clone, Debug)]
pub struct LatencyStats {
    hist: Histogram<u64>,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
    /// Samples over 2 s and over 10 s (tiotest's LATENCY_STAT1/2).
    over_2s: u64,
    over_10s: u64,
}

impl Default for LatencyStats {
    fn default() -> Self {
        LatencyStats::new()
    }
}

impl LatencyStats {
    pub fn new() -> Self {
        LatencyStats {
            hist: Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("valid bounds"),
            count: 0,
            sum_ns: 0,
            max_ns: 0,
            over_2s: 0,
            over_10s: 0,
        }
    }

    pub fn record(&mut self, d: Duration) {
        let ns = d.nanos();
        self.hist.saturating_record(ns.clamp(1, HIST_MAX_NS));
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.max_ns = self.max_ns.max(ns);
        if ns > 2_000_000_000 {
            self.over_2s += 1;
        }
        if ns > 10_000_000_000 {
            self.over_10s += 1;
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn mean(&self) -> Duration {
        if self.count == 0 {
            Duration::ZERO
        } else {
            Duration((self.sum_ns / u128::from(self.count)) as u64)
        }
    }

    pub fn max(&self) -> Duration {
        Duration(self.max_ns)
    }

    /// The latency at quantile `q` (0..=1), within the histogram's precision.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            Duration::ZERO
        } else {
            Duration(self.hist.value_at_quantile(q).min(self.max_ns))
        }
    }

    /// Percentage of samples strictly longer than the 2 s or 10 s threshold
    /// (other thresholds fall back to the histogram).
    pub fn percent_over(&self, threshold: Duration) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let over = match threshold.nanos() {
            2_000_000_000 => self.over_2s,
            10_000_000_000 => self.over_10s,
            t => self.count - self.hist.count_between(0, t),
        };
        100.0 * over as f64 / self.count as f64
    }

    /// Fold another job's samples into this one.
    pub fn merge(&mut self, other: &LatencyStats) {
        self.hist.add(&other.hist).expect("same bounds");
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
        self.over_2s += other.over_2s;
        self.over_10s += other.over_10s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarises_samples() {
        let mut l = LatencyStats::new();
        for ms in 1..=100 {
            l.record(Duration::from_millis(ms));
        }
        l.record(Duration::from_secs(3));
        l.record(Duration::from_secs(11));
        assert_eq!(l.count(), 102);
        assert_eq!(l.max(), Duration::from_secs(11));
        let p50 = l.quantile(0.5).as_millis_f64();
        assert!((50.0..53.0).contains(&p50), "{p50}");
        assert!((l.percent_over(Duration::from_secs(2)) - 200.0 / 102.0).abs() < 1e-9);
        assert!((l.percent_over(Duration::from_secs(10)) - 100.0 / 102.0).abs() < 1e-9);
    }
}
