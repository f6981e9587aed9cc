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

    /// The distribution as `(latency, fraction of samples at or below it)`
    /// points, from the histogram's own buckets (HdrHistogram's
    /// `iter_recorded`, 3 significant digits), thinned to at most `points`
    /// steps but always keeping the last (the maximum, fraction 1). Empty
    /// when nothing was recorded.
    pub fn cdf(&self, points: usize) -> Vec<(Duration, f64)> {
        let total = self.hist.len();
        if total == 0 {
            return Vec::new();
        }
        let steps: Vec<(u64, u64)> = self
            .hist
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_since_last_iteration()))
            .scan(0u64, |seen, (value, count)| {
                *seen += count;
                Some((value.min(self.max_ns), *seen))
            })
            .collect();
        let stride = steps.len().div_ceil(points.max(1));
        let last = steps.len() - 1;
        steps
            .iter()
            .enumerate()
            .filter(|(i, _)| i % stride == stride - 1 || *i == last)
            .map(|(_, &(value, seen))| (Duration(value), seen as f64 / total as f64))
            .collect()
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

    #[test]
    fn cdf_rises_to_one_at_the_maximum() {
        let mut l = LatencyStats::new();
        assert!(l.cdf(50).is_empty());
        for ms in 1..=1000 {
            l.record(Duration::from_millis(ms));
        }
        let cdf = l.cdf(50);
        assert!(cdf.len() <= 51 && cdf.len() >= 40, "{}", cdf.len());
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        assert_eq!(*cdf.last().unwrap(), (Duration::from_millis(1000), 1.0));
        // Half the samples lie at or below about 500 ms.
        let half = cdf.iter().find(|p| p.1 >= 0.5).unwrap().0.as_millis_f64();
        assert!((490.0..530.0).contains(&half), "{half}");
    }
}
