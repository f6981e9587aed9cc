//! Per-call samples of timed system calls: every duration a program timed
//! (fsync-tester's `fsync`, tiotest's `write` of each phase), kept whole so
//! that a report can give the count, minimum, median, 90th percentile and
//! maximum of exactly the calls made, as the tools printed every sample
//! rather than a mean.
//!
//! Quantiles are nearest-rank (the smallest sample with at least `q` of the
//! samples at or below it), so every figure reported is a sample.
//!
//! Invariant: `summary(call).count` is the number of `record(call, _)`
//! calls and `max` the largest duration recorded.

use elevator_core::Duration;
use serde::Serialize;
use std::collections::BTreeMap;

/// The durations of each named call, in the order they were recorded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallSamples {
    calls: BTreeMap<String, Vec<Duration>>,
}

/// Count, minimum, median, 90th percentile and maximum of one call's
/// samples.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallSummary {
    pub count: u64,
    pub min_ms: f64,
    pub median_ms: f64,
    pub p90_ms: f64,
    pub max_ms: f64,
}

impl CallSamples {
    /// Record one call of `call` that took `took`.
    pub fn record(&mut self, call: &str, took: Duration) {
        match self.calls.get_mut(call) {
            Some(v) => v.push(took),
            None => {
                self.calls.insert(call.to_string(), vec![took]);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The samples of `call`, in order (empty if it was never made).
    pub fn samples(&self, call: &str) -> &[Duration] {
        self.calls.get(call).map_or(&[], Vec::as_slice)
    }

    /// The calls made, by name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.calls.keys().map(String::as_str)
    }

    /// The summary of `call`, if it was made.
    pub fn summary(&self, call: &str) -> Option<CallSummary> {
        let v = self.calls.get(call)?;
        let mut sorted = v.clone();
        sorted.sort_unstable();
        let rank = |q: f64| {
            let n = sorted.len();
            let i = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
            sorted[i].as_millis_f64()
        };
        Some(CallSummary {
            count: sorted.len() as u64,
            min_ms: sorted.first().map_or(0.0, |d| d.as_millis_f64()),
            median_ms: rank(0.5),
            p90_ms: rank(0.9),
            max_ms: sorted.last().map_or(0.0, |d| d.as_millis_f64()),
        })
    }

    /// Every call's summary, by name.
    pub fn summaries(&self) -> BTreeMap<String, CallSummary> {
        self.names()
            .map(|n| (n.to_string(), self.summary(n).expect("a recorded call")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts_every_call_and_ranks_by_nearest_rank() {
        let mut c = CallSamples::default();
        for ms in [5, 1, 4, 2, 3, 10, 9, 8, 7, 6] {
            c.record("fsync", Duration::from_millis(ms));
        }
        let s = c.summary("fsync").unwrap();
        assert_eq!(s.count, 10);
        assert_eq!(s.min_ms, 1.0);
        assert_eq!(s.median_ms, 5.0);
        assert_eq!(s.p90_ms, 9.0);
        assert_eq!(s.max_ms, 10.0);
        assert_eq!(c.samples("fsync").len(), 10);
        assert!(c.summary("write").is_none());
        c.record("write", Duration::from_millis(3));
        let w = c.summary("write").unwrap();
        assert_eq!(
            (w.count, w.median_ms, w.p90_ms, w.max_ms),
            (1, 3.0, 3.0, 3.0)
        );
    }
}
