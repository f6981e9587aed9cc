//! Per-task statistics that AS, CFQ and BFQ keep: think time and seek
//! distance as fixed-point moving averages, and a seek history bitmap.
//!
//! The averages follow the kernel's arithmetic (as-iosched.c, cfq-iosched.c):
//! weight 7/8 on the past, values scaled by 256,
//! `samples = (7·samples + 256) / 8`, `total = (7·total + 256·x) / 8`,
//! `mean = (total + 128) / samples`. A mean is trusted once `samples`
//! exceeds 80, about a dozen observations.

/// A kernel-style exponentially weighted mean of `u64` samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ewma {
    samples: u64,
    total: u64,
}

/// Above this many (scaled) samples a mean counts as valid (CFQ/BFQ's 80).
pub const EWMA_VALID_SAMPLES: u64 = 80;

impl Ewma {
    pub fn add(&mut self, x: u64) {
        self.samples = (7 * self.samples + 256) / 8;
        self.total = (7 * self.total + 256u64.saturating_mul(x)) / 8;
    }

    /// The mean, or 0 before the first sample.
    pub fn mean(&self) -> u64 {
        (self.total + 128).checked_div(self.samples).unwrap_or(0)
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Enough samples for the mean to be trusted.
    pub fn valid(&self) -> bool {
        self.samples > EWMA_VALID_SAMPLES
    }
}

/// CFQ/BFQ's 32-request seek history: one bit per arrival, set when the
/// request was far from where the previous one ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeekHistory(pub u32);

impl SeekHistory {
    pub fn record(&mut self, seeky: bool) {
        self.0 = (self.0 << 1) | u32::from(seeky);
    }
    /// How many of the last 32 arrivals were seeks.
    pub fn seeks(&self) -> u32 {
        self.0.count_ones()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ewma_converges_and_becomes_valid() {
        let mut e = Ewma::default();
        assert_eq!(e.mean(), 0);
        for _ in 0..12 {
            e.add(1000);
        }
        assert!(e.valid());
        // Integer truncation biases the kernel's mean a little high.
        assert!((980..=1050).contains(&e.mean()), "{}", e.mean());
        for _ in 0..40 {
            e.add(0);
        }
        assert!(e.mean() < 10);
    }

    #[test]
    fn seek_history_counts_last_32() {
        let mut h = SeekHistory::default();
        for i in 0..40 {
            h.record(i % 2 == 0);
        }
        assert_eq!(h.seeks(), 16);
    }
}
