//! kyber: token-limited domains whose depths chase latency targets.
//!
//! Omar Sandoval's blk-mq scheduler (block/kyber-iosched.c, 4.12; this is
//! the 5.x/6.x form with latency histograms, 5.1+). Requests are split
//! into scheduling domains by operation: READ, WRITE, DISCARD and OTHER
//! (flushes). Each domain has a FIFO (new requests back-merge into it) and
//! a pool of tokens; a request needs a token to go to the device and holds
//! it until it completes, so a domain's depth is the most requests of it
//! in flight. Depths start at the maximum (256, 128, 64, 16).
//!
//! Dispatch (`kyber_dispatch_request`): keep serving the current domain
//! while fewer than its batch size (16, 8, 1, 1) went in a row and it has a
//! request and a free token; otherwise go round READ → WRITE → DISCARD →
//! OTHER from the next domain and take the first with both.
//!
//! Depth adaptation (`kyber_timer_fn`): every completion of READ, WRITE or
//! DISCARD adds its *total* latency (insertion to completion) and its
//! *I/O* latency (dispatch to completion) to the domain's 8-bucket
//! histograms, buckets a quarter of the domain's target wide (the first
//! four are "good"). A timer armed 100 ms after a completion (when none is
//! armed) then reads the percentiles of each domain that has 500 samples or
//! whose first sample is a second old. If any domain's I/O-latency p90 is
//! in a bad bucket the device is congested; then every domain with a
//! total-latency p99 bucket `b` (or the one remembered from a window that
//! had no congestion) gets `depth × (b + 1) / 4`, clamped to [1, max]; with
//! no congestion only domains with a bad p99 are resized (grown). Reading a
//! percentile clears its histogram. Here the timer is lazy: it runs at the
//! first call at or after its time (a completion or dispatch always follows
//! soon while I/O is in flight).
//!
//! Kyber ignores I/O priorities and groups, as the kernel does. Async
//! allocations get 75 % of the scheduler tags in the kernel
//! (`KYBER_ASYNC_PERCENT`); the engine's slots are the tags here, so the
//! limit becomes a cap on async requests in flight at 75 % of blk-mq's
//! `nr_requests` (twice the device depth, at most 256): more than a device
//! holds, so it never binds on our profiles, as in the kernel. Our request
//! vocabulary has no discards, so the DISCARD domain is kept for fidelity
//! but never used.
//!
//! Invariants: requests in flight of a domain never exceed its depth; each
//! queued request is in its domain's FIFO once; depths stay in [1, max].
//!
//! Starvation bound: none promised. A domain whose depth has shrunk to 1
//! still gets a turn in every round, but how long a round takes depends on
//! the device's completions, not on the policy.

use crate::queue::FifoQueue;
use crate::{Dispatch, MergeRule, Scheduler, SchedulerType, Tunable, Tunables};
use elevator_core::{Duration, Instant, Op, QueueLimits, Request, RequestId};
use std::collections::HashMap;

/// Reads aim at 2 ms (`read_lat_nsec`, `kyber_latency_targets[READ]`).
pub const READ_LAT_NSEC: i64 = 2_000_000;
/// Writes aim at 10 ms (`write_lat_nsec`).
pub const WRITE_LAT_NSEC: i64 = 10_000_000;
/// Discards aim at 5 s, not tunable (`kyber_latency_targets[DISCARD]`).
const DISCARD_LAT_NSEC: u64 = 5_000_000_000;

/// Domains in round-robin order (`enum kyber_sched_domain`).
const READ: usize = 0;
const WRITE: usize = 1;
const DISCARD: usize = 2;
const OTHER: usize = 3;
const DOMAINS: usize = 4;
/// Most tokens per domain, and the starting depths (`kyber_depth`).
const MAX_DEPTH: [u32; DOMAINS] = [256, 128, 64, 16];
/// Requests per turn of a domain (`kyber_batch_size`).
const BATCH_SIZE: [u32; DOMAINS] = [16, 8, 1, 1];
/// Histogram buckets, and how many of them are within the target
/// (`KYBER_LATENCY_BUCKETS`, `KYBER_GOOD_BUCKETS`); a bucket is a quarter
/// of the target wide (`KYBER_LATENCY_SHIFT` 2).
const BUCKETS: usize = 8;
const GOOD_BUCKETS: usize = 4;
const LATENCY_SHIFT: u32 = 2;
/// A percentile needs this many samples, or a second since the first.
const MIN_SAMPLES: u32 = 500;
const SAMPLE_WINDOW: Duration = Duration::from_secs(1);
/// The timer runs this long after a completion (`HZ / 10`).
const TIMER_DELAY: Duration = Duration::from_millis(100);
/// Async requests may hold 75 % of the scheduler tags
/// (`KYBER_ASYNC_PERCENT`).
const ASYNC_PERCENT: u32 = 75;
/// blk-mq's `nr_requests` is `2 * min(queue_depth, 128)`.
const BLKDEV_DEFAULT_RQ: u32 = 128;

pub const TYPE: SchedulerType = SchedulerType {
    name: "kyber",
    aliases: &[],
    about: "token-limited read/write/discard/other domains tuned to latency targets (Linux kyber)",
    honours: &[],
    tunables: &[
        Tunable {
            name: "read_lat_nsec",
            default: READ_LAT_NSEC,
            unit: "ns",
            about: "target total latency of reads",
        },
        Tunable {
            name: "write_lat_nsec",
            default: WRITE_LAT_NSEC,
            unit: "ns",
            about: "target total latency of writes",
        },
    ],
    build: |t, limits| Box::new(Kyber::from_tunables(t, limits)),
};

fn domain_of(r: &Request) -> usize {
    match r.op {
        Op::Read => READ,
        Op::Write => WRITE,
        Op::Flush => OTHER,
    }
}

/// Which latency a histogram counts.
const TOTAL: usize = 0;
const IO: usize = 1;

/// A latency histogram of one domain and kind.
#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: [u32; BUCKETS],
    /// When a percentile may be read with fewer than `MIN_SAMPLES`
    /// (`latency_timeout`), set at the first attempt.
    timeout: Option<Instant>,
}

impl Histogram {
    fn add(&mut self, target: u64, latency: Duration) {
        let bucket = if latency.0 > 0 {
            let divisor = (target >> LATENCY_SHIFT).max(1);
            (((latency.0 - 1) / divisor) as usize).min(BUCKETS - 1)
        } else {
            0
        };
        self.buckets[bucket] += 1;
    }

    /// `calculate_percentile`: the bucket holding the `percentile`th
    /// sample, once there are enough; reading it clears the histogram.
    fn percentile(&mut self, percentile: u32, now: Instant) -> Option<usize> {
        let samples: u32 = self.buckets.iter().sum();
        if samples == 0 {
            return None;
        }
        let timeout = *self.timeout.get_or_insert(now + SAMPLE_WINDOW);
        if samples < MIN_SAMPLES && now < timeout {
            return None;
        }
        self.timeout = None;
        let mut left = (samples * percentile).div_ceil(100);
        let mut bucket = 0;
        while bucket < BUCKETS - 1 {
            if self.buckets[bucket] >= left {
                break;
            }
            left -= self.buckets[bucket];
            bucket += 1;
        }
        self.buckets = [0; BUCKETS];
        Some(bucket)
    }
}

/// One scheduling domain.
#[derive(Debug)]
struct Domain {
    queue: FifoQueue,
    depth: u32,
    in_flight: u32,
    target: u64,
    latency: [Histogram; 2],
    /// The last p99 bucket read outside congestion, for the next congested
    /// window (`domain_p99`).
    remembered_p99: Option<usize>,
}

/// The kyber policy.
#[derive(Debug)]
pub struct Kyber {
    domains: [Domain; DOMAINS],
    current: usize,
    batching: u32,
    rule: MergeRule,
    async_depth: u32,
    async_in_flight: u32,
    /// When each request in flight was dispatched.
    in_flight: HashMap<RequestId, Instant>,
    timer: Option<Instant>,
}

impl Kyber {
    pub fn from_tunables(t: &Tunables, limits: &QueueLimits) -> Self {
        // OTHER has no target: its latencies are not recorded.
        let mut targets = [0; DOMAINS];
        targets[READ] = t.get("read_lat_nsec").max(1) as u64;
        targets[WRITE] = t.get("write_lat_nsec").max(1) as u64;
        targets[DISCARD] = DISCARD_LAT_NSEC;
        let nr_requests = 2 * limits.queue_depth.clamp(1, BLKDEV_DEFAULT_RQ);
        Kyber {
            domains: std::array::from_fn(|d| Domain {
                queue: FifoQueue::new(),
                depth: MAX_DEPTH[d],
                in_flight: 0,
                target: targets[d],
                latency: Default::default(),
                remembered_p99: None,
            }),
            current: READ,
            batching: 0,
            rule: MergeRule {
                max_sectors: limits.max_sectors,
                front_merges: false,
                same_task: false,
            },
            async_depth: (nr_requests * ASYNC_PERCENT / 100).max(1),
            async_in_flight: 0,
            in_flight: HashMap::new(),
            timer: None,
        }
    }

    /// With the kernel's defaults.
    pub fn new(limits: &QueueLimits) -> Self {
        let t = TYPE.tunables(std::iter::empty()).expect("defaults");
        Kyber::from_tunables(&t, limits)
    }

    /// The current depth of each domain (READ, WRITE, DISCARD, OTHER).
    pub fn depths(&self) -> [u32; DOMAINS] {
        std::array::from_fn(|d| self.domains[d].depth)
    }

    /// `kyber_dispatch_cur_domain`: a request of the current domain, if
    /// it has one and a token for it.
    fn dispatch_current(&mut self, now: Instant) -> Option<Request> {
        let d = &mut self.domains[self.current];
        if d.in_flight >= d.depth {
            return None;
        }
        let head_async = d.queue.iter().next().map(|r| !r.sync)?;
        if head_async && self.async_in_flight >= self.async_depth {
            return None;
        }
        let request = d.queue.pop_front().expect("a head");
        d.in_flight += 1;
        if !request.sync {
            self.async_in_flight += 1;
        }
        self.batching += 1;
        self.in_flight.insert(request.id, now);
        Some(request)
    }

    /// `kyber_timer_fn`: adjust the depths from the latency percentiles.
    fn run_timer(&mut self, now: Instant) {
        let mut congested = false;
        for d in &mut self.domains[..OTHER] {
            if d.latency[IO]
                .percentile(90, now)
                .is_some_and(|b| b >= GOOD_BUCKETS)
            {
                congested = true;
            }
        }
        for (i, d) in self.domains[..OTHER].iter_mut().enumerate() {
            let mut p99 = d.latency[TOTAL].percentile(99, now);
            if congested {
                p99 = p99.or(d.remembered_p99);
                d.remembered_p99 = None;
            } else if p99.is_some() {
                d.remembered_p99 = p99;
            }
            let Some(p99) = p99 else { continue };
            if congested || p99 >= GOOD_BUCKETS {
                let depth = (d.depth * (p99 as u32 + 1)) >> LATENCY_SHIFT;
                d.depth = depth.clamp(1, MAX_DEPTH[i]);
            }
        }
    }

    fn timer_due(&mut self, now: Instant) {
        if let Some(at) = self.timer {
            if now >= at {
                self.timer = None;
                self.run_timer(now);
            }
        }
    }
}

impl Scheduler for Kyber {
    fn name(&self) -> &'static str {
        "kyber"
    }

    fn insert(&mut self, request: Request, _now: Instant) {
        let d = domain_of(&request);
        self.domains[d].queue.insert(request, &self.rule);
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        self.timer_due(now);
        if self.batching < BATCH_SIZE[self.current] {
            if let Some(r) = self.dispatch_current(now) {
                return Dispatch::Request(r);
            }
        }
        self.batching = 0;
        for _ in 0..DOMAINS {
            self.current = (self.current + 1) % DOMAINS;
            if let Some(r) = self.dispatch_current(now) {
                return Dispatch::Request(r);
            }
        }
        // Queued requests (if any) wait for a token: one is in flight.
        Dispatch::Empty
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        let d = domain_of(request);
        let domain = &mut self.domains[d];
        domain.in_flight = domain.in_flight.saturating_sub(1);
        if !request.sync {
            self.async_in_flight = self.async_in_flight.saturating_sub(1);
        }
        let dispatched = self.in_flight.remove(&request.id).unwrap_or(now);
        if d != OTHER {
            let target = domain.target;
            domain.latency[TOTAL].add(target, now.since(request.arrival));
            domain.latency[IO].add(target, now.since(dispatched));
        }
        self.timer_due(now);
        if self.timer.is_none() {
            self.timer = Some(now + TIMER_DELAY);
        }
    }

    fn queued(&self) -> usize {
        self.domains.iter().map(|d| d.queue.len()).sum()
    }

    fn check_invariants(&self) -> Result<(), String> {
        for (i, d) in self.domains.iter().enumerate() {
            if !(1..=MAX_DEPTH[i]).contains(&d.depth) {
                return Err(format!("domain {i} depth {} out of range", d.depth));
            }
            if let Some(r) = d.queue.iter().find(|r| domain_of(r) != i) {
                return Err(format!("{r} queued in domain {i}"));
            }
        }
        let tokens: u32 = self.domains.iter().map(|d| d.in_flight).sum();
        if tokens as usize != self.in_flight.len() {
            return Err(format!(
                "{tokens} tokens held for {} requests in flight",
                self.in_flight.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nvme() -> QueueLimits {
        QueueLimits {
            rotational: false,
            queue_depth: 1023,
            max_sectors: 256,
            capacity: 1 << 30,
        }
    }

    #[test]
    fn a_domain_holds_at_most_its_depth_in_flight() {
        let mut s = Kyber::new(&nvme());
        s.domains[WRITE].depth = 3;
        for i in 0..10u64 {
            s.insert(Request::write(i, 1, i * 100, 8), Instant::ZERO);
        }
        let mut sent = Vec::new();
        while let Dispatch::Request(r) = s.dispatch(Instant::ZERO) {
            sent.push(r);
        }
        assert_eq!(sent.len(), 3);
        s.complete(&sent[0], Instant(10));
        assert!(matches!(s.dispatch(Instant(10)), Dispatch::Request(_)));
        assert_eq!(s.dispatch(Instant(10)), Dispatch::Empty);
    }

    #[test]
    fn reads_and_writes_alternate_in_batches() {
        let mut s = Kyber::new(&nvme());
        for i in 0..40u64 {
            s.insert(Request::read(i, 1, i * 100, 8), Instant::ZERO);
            s.insert(
                Request::write(100 + i, 2, 100_000 + i * 100, 8),
                Instant::ZERO,
            );
        }
        let kinds: String = (0..48)
            .map(|_| match s.dispatch(Instant::ZERO) {
                Dispatch::Request(r) if r.is_read() => 'R',
                Dispatch::Request(_) => 'W',
                other => panic!("{other:?}"),
            })
            .collect();
        let expect = format!("{}{}", "R".repeat(16), "W".repeat(8)).repeat(2);
        assert_eq!(kinds, expect);
    }

    #[test]
    fn histogram_percentiles_follow_the_kernel() {
        let mut h = Histogram::default();
        let target = 2_000_000;
        // 98 good samples (bucket 1), 2 slow ones (bucket 7).
        for _ in 0..98 {
            h.add(target, Duration::from_micros(700));
        }
        for _ in 0..2 {
            h.add(target, Duration::from_millis(50));
        }
        // Too few samples within the first second.
        assert_eq!(h.percentile(99, Instant::ZERO), None);
        let later = Instant::ZERO + SAMPLE_WINDOW;
        assert_eq!(h.percentile(99, later), Some(7));
        assert_eq!(h.percentile(99, later), None, "reading clears it");
        for _ in 0..MIN_SAMPLES {
            h.add(target, Duration::from_micros(700));
        }
        assert_eq!(h.percentile(90, later), Some(1));
    }

    #[test]
    fn congestion_shrinks_a_good_domain_and_a_bad_one_grows() {
        let mut s = Kyber::new(&nvme());
        s.domains[READ].depth = 64;
        s.domains[WRITE].depth = 64;
        let now = Instant::ZERO + Duration::from_secs(2);
        // Reads: p99 in bucket 7 (way over 2 ms): I/O p90 bad → congestion.
        for _ in 0..MIN_SAMPLES {
            s.domains[READ].latency[TOTAL].add(READ_LAT_NSEC as u64, Duration::from_millis(9));
            s.domains[READ].latency[IO].add(READ_LAT_NSEC as u64, Duration::from_millis(9));
            // Writes well within 10 ms: bucket 0.
            s.domains[WRITE].latency[TOTAL].add(WRITE_LAT_NSEC as u64, Duration::from_millis(1));
            s.domains[WRITE].latency[IO].add(WRITE_LAT_NSEC as u64, Duration::from_millis(1));
        }
        s.run_timer(now);
        // Read depth × 8/4 (capped at 256), write depth × 1/4.
        assert_eq!(s.depths()[READ], 128);
        assert_eq!(s.depths()[WRITE], 16);
    }
}
