//! Bytes completed per interval of simulated time: the throughput timeline
//! of one job, what `vmstat 1`'s `bi`/`bo` columns showed the seeds' authors
//! (Morton's 2003 mails quote `vmstat 1` beside every timing).
//!
//! Recording is opt-in ([`JobStats::record_series`](crate::JobStats)): a
//! normal run keeps no series and pays one branch per completion.
//!
//! Invariants: the series is a pure function of the completions recorded
//! (time, direction, bytes); its interval is [`BASE_INTERVAL`] × 2^k and
//! it never holds more than [`MAX_BUCKETS`] buckets: when a completion
//! falls past the last one, neighbouring buckets are summed in pairs and
//! the interval doubles (exact, since every bucket boundary of the coarser
//! series is one of the finer). Bytes are never lost: the sum over buckets
//! equals the bytes recorded.

use elevator_core::{Duration, Instant};

/// The finest interval: 100 ms, a tenth of `vmstat 1`'s, so that the
/// 3.8 s runs of the 2003 mails still draw some 40 points.
pub const BASE_INTERVAL: Duration = Duration::from_millis(100);

/// At most this many buckets per job: enough for a smooth line 500 pixels
/// wide, and 8 KiB per job however long the run.
pub const MAX_BUCKETS: usize = 512;

/// Read and write bytes per interval of simulated time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Throughput {
    interval: Duration,
    /// `(read bytes, write bytes)` completed in `[i·interval, (i+1)·interval)`.
    buckets: Vec<(u64, u64)>,
}

impl Default for Throughput {
    fn default() -> Self {
        Throughput::new()
    }
}

impl Throughput {
    pub fn new() -> Self {
        Throughput {
            interval: BASE_INTERVAL,
            buckets: Vec::new(),
        }
    }

    /// The current bucket width.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// `(read bytes, write bytes)` per bucket, from time zero.
    pub fn buckets(&self) -> &[(u64, u64)] {
        &self.buckets
    }

    /// Count `bytes` completed at `now`.
    pub fn record(&mut self, now: Instant, read: bool, bytes: u64) {
        let mut index = now.nanos() / self.interval.nanos();
        while index >= MAX_BUCKETS as u64 {
            self.coarsen();
            index = now.nanos() / self.interval.nanos();
        }
        let index = index as usize;
        if self.buckets.len() <= index {
            self.buckets.resize(index + 1, (0, 0));
        }
        let b = &mut self.buckets[index];
        if read {
            b.0 += bytes;
        } else {
            b.1 += bytes;
        }
    }

    /// Double the interval, summing buckets in pairs.
    fn coarsen(&mut self) {
        self.interval = self.interval.mul(2);
        self.buckets = self
            .buckets
            .chunks(2)
            .map(|p| p.iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)))
            .collect();
    }

    /// This series at `interval` (a multiple of its own by a power of two,
    /// as every series' interval is), so that several jobs share one axis.
    pub fn at_interval(&self, interval: Duration) -> Throughput {
        assert!(
            interval.nanos() % self.interval.nanos() == 0
                && (interval.nanos() / self.interval.nanos()).is_power_of_two(),
            "{interval:?} is not {:?} times a power of two",
            self.interval
        );
        let mut out = self.clone();
        while out.interval < interval {
            out.coarsen();
        }
        out
    }

    /// Fold another series into this one (at the coarser of the two
    /// intervals).
    pub fn merge(&mut self, other: &Throughput) {
        let interval = self.interval.max(other.interval);
        let mut other = other.at_interval(interval);
        *self = self.at_interval(interval);
        if other.buckets.len() > self.buckets.len() {
            std::mem::swap(self, &mut other);
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            a.0 += b.0;
            a.1 += b.1;
        }
    }

    /// Bytes in all buckets, `(read, write)`.
    pub fn total(&self) -> (u64, u64) {
        self.buckets
            .iter()
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_ms(ms: u64) -> Instant {
        Instant(ms * 1_000_000)
    }

    #[test]
    fn buckets_by_interval_and_direction() {
        let mut t = Throughput::new();
        t.record(at_ms(0), true, 4096);
        t.record(at_ms(99), true, 4096);
        t.record(at_ms(100), false, 512);
        t.record(at_ms(350), true, 1);
        assert_eq!(t.interval(), BASE_INTERVAL);
        assert_eq!(t.buckets(), &[(8192, 0), (0, 512), (0, 0), (1, 0)]);
    }

    #[test]
    fn coarsens_without_losing_bytes() {
        let mut t = Throughput::new();
        let mut bytes = 0;
        // One completion per 70 ms for 200 s: 2000 base buckets, so the
        // interval doubles twice (400 ms gives 500 buckets).
        for i in 0..2858u64 {
            t.record(at_ms(i * 70), i % 3 == 0, i + 1);
            bytes += i + 1;
        }
        assert_eq!(t.interval(), Duration::from_millis(400));
        assert!(t.buckets().len() <= MAX_BUCKETS);
        let (r, w) = t.total();
        assert_eq!(r + w, bytes);
        // Completions at 0, 70, ..., 350 ms fall in the first 400 ms.
        assert_eq!(t.buckets()[0].0 + t.buckets()[0].1, 1 + 2 + 3 + 4 + 5 + 6);
    }

    #[test]
    fn merge_aligns_intervals() {
        let mut fine = Throughput::new();
        fine.record(at_ms(150), true, 10);
        let mut coarse = Throughput::new();
        coarse.record(at_ms(100_000), false, 7);
        assert_eq!(coarse.interval(), Duration::from_millis(200));
        fine.merge(&coarse);
        assert_eq!(fine.interval(), Duration::from_millis(200));
        assert_eq!(fine.buckets()[0], (10, 0));
        assert_eq!(fine.buckets()[500], (0, 7));
        assert_eq!(fine.total(), (10, 7));
    }
}
