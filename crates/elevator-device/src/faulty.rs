//! `Faulty`: any device, with errors, timeouts and stalls injected.
//!
//! After TigerBeetle's simulated storage and redb's fault backends: faults
//! are a wrapper around a healthy model, never a mode of the model. Each
//! request's fate is drawn when it is submitted, from a `Prng` derived from
//! the run's seed, so a faulty run replays exactly:
//!
//! - **EIO** (`eio_rate`): the request is serviced as usual and completes
//!   with [`IoError::Io`] (a media error found while reading or writing);
//! - **timeout** (`timeout_rate`): the device never answers; after
//!   `timeout` (the SCSI `sd` default, 30 s) the request completes with
//!   [`IoError::Timeout`]. It holds its command slot all the while, and
//!   after: the inner model has no abort, so a request it is still
//!   servicing when its timeout fires keeps its slot until the model
//!   finishes it (nor does the kernel reuse a timed-out command's tag
//!   before its error handler has aborted it: Documentation/scsi/
//!   scsi_eh.rst, "Completing a scmd w/ timeout");
//! - **stall** (`stall_rate`): the request completes successfully, `stall`
//!   later than the model says (a drive's internal retry or a firmware
//!   housekeeping pause).
//!
//! Scripted faults come on top: the first request completing at or after
//! each `eio_at` time fails with EIO, and each `stall_at` time delays the
//! first completion at or after it by `stall`.
//!
//! Invariants: every submitted request completes exactly once (with or
//! without an error); `in_flight` counts every request that is held or
//! that the inner device still holds, each once, so the engine never
//! submits to a full inner device.

use crate::{Device, DeviceStats};
use elevator_core::{Duration, Instant, IoError, Prng, QueueLimits, Request, RequestId};

/// The SCSI disk driver's command timeout (`SD_TIMEOUT`, 30 s,
/// drivers/scsi/sd.h).
pub const SD_TIMEOUT: Duration = Duration::from_secs(30);

/// A stall long enough to matter to a latency target, short enough not to
/// look like a timeout: a drive's internal error recovery takes hundreds of
/// milliseconds (the reason for the 7-second ERC limit of RAID-class drives).
pub const DEFAULT_STALL: Duration = Duration::from_millis(500);

/// Which faults to inject.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultSpec {
    /// Fraction of requests that fail with EIO.
    pub eio_rate: f64,
    /// Fraction of requests that time out.
    pub timeout_rate: f64,
    /// Fraction of requests that complete `stall` late.
    pub stall_rate: f64,
    pub timeout: Duration,
    pub stall: Duration,
    /// The first completion at or after each time fails with EIO.
    pub eio_at: Vec<Instant>,
    /// The first completion at or after each time is `stall` late.
    pub stall_at: Vec<Instant>,
}

impl Default for FaultSpec {
    fn default() -> Self {
        FaultSpec {
            eio_rate: 0.0,
            timeout_rate: 0.0,
            stall_rate: 0.0,
            timeout: SD_TIMEOUT,
            stall: DEFAULT_STALL,
            eio_at: Vec::new(),
            stall_at: Vec::new(),
        }
    }
}

impl FaultSpec {
    /// Whether any fault would ever be injected.
    pub fn is_empty(&self) -> bool {
        self.eio_rate == 0.0
            && self.timeout_rate == 0.0
            && self.stall_rate == 0.0
            && self.eio_at.is_empty()
            && self.stall_at.is_empty()
    }

    /// The rates are probabilities that leave room for success (each below
    /// one half, summing below one): a device that fails every request
    /// would make every retrying reader spin forever.
    pub fn validate(&self) -> Result<(), String> {
        for (name, rate) in [
            ("eio_rate", self.eio_rate),
            ("timeout_rate", self.timeout_rate),
            ("stall_rate", self.stall_rate),
        ] {
            if !(0.0..=0.5).contains(&rate) {
                return Err(format!("{name} = {rate}: must be between 0 and 0.5"));
            }
        }
        if self.timeout == Duration::ZERO || self.stall == Duration::ZERO {
            return Err("timeout and stall must be longer than zero".into());
        }
        Ok(())
    }
}

/// How one request ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Ok,
    Eio,
    Timeout,
    /// Timed out and completed, while the inner device still services it.
    Abandoned,
    Stall,
}

/// Counts of injected faults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    pub eio: u64,
    pub timeouts: u64,
    pub stalls: u64,
}

/// A device with faults injected (see the module docs).
#[derive(Debug)]
pub struct Faulty {
    inner: Box<dyn Device>,
    spec: FaultSpec,
    prng: Prng,
    /// Fates drawn at submission, by request, until completion.
    fates: rustc_hash::FxHashMap<RequestId, Fate>,
    /// Requests the inner device finished or never will (timeouts), held
    /// until their release time: (release, sequence, id, status).
    held: Vec<(Instant, u64, RequestId, Option<IoError>)>,
    seq: u64,
    /// Timed-out requests both in `held` and still inside the inner device
    /// (fate `Timeout`): `in_flight` counts them once. Once one leaves
    /// either place it no longer counts here: released, it is `Abandoned`
    /// and counted by the inner device alone; finished inside, by `held`
    /// alone.
    timed_out_inside: usize,
    next_eio: usize,
    next_stall: usize,
    pub stats: FaultStats,
}

impl Faulty {
    /// Wrap `inner`; `seed` is the run's seed (the fault stream is derived
    /// from it, apart from every other stream).
    pub fn new(inner: Box<dyn Device>, spec: FaultSpec, seed: u64) -> Self {
        let mut spec = spec;
        spec.eio_at.sort();
        spec.stall_at.sort();
        Faulty {
            inner,
            spec,
            prng: Prng::derive(seed, "device faults"),
            fates: rustc_hash::FxHashMap::default(),
            held: Vec::new(),
            seq: 0,
            timed_out_inside: 0,
            next_eio: 0,
            next_stall: 0,
            stats: FaultStats::default(),
        }
    }

    fn draw(&mut self) -> Fate {
        let u = self.prng.unit();
        let s = &self.spec;
        if u < s.eio_rate {
            Fate::Eio
        } else if u < s.eio_rate + s.timeout_rate {
            Fate::Timeout
        } else if u < s.eio_rate + s.timeout_rate + s.stall_rate {
            Fate::Stall
        } else {
            Fate::Ok
        }
    }

    /// Move what the inner device finished by `now` into `held`, deciding
    /// each one's release time and status.
    fn collect(&mut self, now: Instant) {
        while let Some(id) = self.inner.complete(now) {
            // The engine asks at `next_completion`, so `now` is when the
            // inner device finished it.
            let at = now;
            let mut fate = self.fates.remove(&id).unwrap_or(Fate::Ok);
            match fate {
                // Held since submission; the inner completion of a
                // timed-out command is lost.
                Fate::Timeout => {
                    self.timed_out_inside -= 1;
                    continue;
                }
                // Already completed with its timeout; the slot is free now.
                Fate::Abandoned => continue,
                Fate::Ok | Fate::Eio | Fate::Stall => {}
            }
            if fate == Fate::Ok
                && self
                    .spec
                    .eio_at
                    .get(self.next_eio)
                    .is_some_and(|&t| t <= at)
            {
                self.next_eio += 1;
                fate = Fate::Eio;
            }
            if fate == Fate::Ok
                && self
                    .spec
                    .stall_at
                    .get(self.next_stall)
                    .is_some_and(|&t| t <= at)
            {
                self.next_stall += 1;
                fate = Fate::Stall;
            }
            let (release, status) = match fate {
                Fate::Eio => {
                    self.stats.eio += 1;
                    (at, Some(IoError::Io))
                }
                Fate::Stall => {
                    self.stats.stalls += 1;
                    (at + self.spec.stall, None)
                }
                Fate::Ok | Fate::Timeout | Fate::Abandoned => (at, None),
            };
            self.hold(release, id, status);
        }
    }

    fn hold(&mut self, release: Instant, id: RequestId, status: Option<IoError>) {
        self.seq += 1;
        self.held.push((release, self.seq, id, status));
    }
}

impl Device for Faulty {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn limits(&self) -> QueueLimits {
        self.inner.limits()
    }

    fn submit(&mut self, request: &Request, now: Instant) {
        let fate = self.draw();
        self.inner.submit(request, now);
        if fate == Fate::Timeout {
            self.stats.timeouts += 1;
            self.timed_out_inside += 1;
            self.hold(now + self.spec.timeout, request.id, Some(IoError::Timeout));
        }
        self.fates.insert(request.id, fate);
    }

    fn next_completion(&self) -> Option<Instant> {
        let held = self.held.iter().map(|h| h.0).min();
        // A timed-out request's inner completion still has to be collected
        // (and dropped) so that the inner device frees its slot.
        [held, self.inner.next_completion()]
            .into_iter()
            .flatten()
            .min()
    }

    fn complete(&mut self, now: Instant) -> Option<RequestId> {
        self.complete_status(now).map(|(id, _)| id)
    }

    fn complete_status(&mut self, now: Instant) -> Option<(RequestId, Option<IoError>)> {
        self.collect(now);
        let due = self
            .held
            .iter()
            .enumerate()
            .filter(|(_, h)| h.0 <= now)
            .min_by_key(|(_, h)| (h.0, h.1))
            .map(|(i, _)| i)?;
        let (_, _, id, status) = self.held.swap_remove(due);
        if let Some(fate) = self.fates.get_mut(&id) {
            if *fate == Fate::Timeout {
                // Its timeout fired before the inner device finished it: it
                // keeps its slot there until it does (collected and dropped).
                *fate = Fate::Abandoned;
                self.timed_out_inside -= 1;
            }
        }
        Some((id, status))
    }

    fn in_flight(&self) -> usize {
        // A timed-out request is counted by the inner device until it
        // finishes it, and in `held` until its timeout fires; while in
        // both, `timed_out_inside` counts it, so it is counted once.
        self.inner.in_flight() + self.held.len() - self.timed_out_inside
    }

    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
    fn reseed(&mut self, seed: u64) {
        self.inner.reseed(seed);
    }
}

#[cfg(test)]
mod tests {
    use super::{FaultSpec, Faulty};
    use crate::{Device, DeviceStats};
    use elevator_core::{Duration, Instant, IoError, Prng, QueueLimits, Request, RequestId};
    use std::collections::BTreeSet;

    /// Serves every request in parallel for as many milliseconds as its
    /// sector number says, and refuses (panics) a request beyond its depth,
    /// as `Hdd::submit` does with debug assertions.
    #[derive(Debug)]
    struct Slots {
        depth: usize,
        busy: Vec<(Instant, RequestId)>,
    }

    impl Device for Slots {
        fn name(&self) -> &str {
            "slots"
        }
        fn limits(&self) -> QueueLimits {
            QueueLimits {
                queue_depth: self.depth as u32,
                ..QueueLimits::default()
            }
        }
        fn submit(&mut self, request: &Request, now: Instant) {
            assert!(
                self.busy.len() < self.depth,
                "{:?} submitted to a full device",
                request.id
            );
            self.busy
                .push((now + Duration::from_millis(request.sector), request.id));
        }
        fn next_completion(&self) -> Option<Instant> {
            self.busy.iter().map(|b| b.0).min()
        }
        fn complete(&mut self, now: Instant) -> Option<RequestId> {
            let i = (0..self.busy.len())
                .filter(|&i| self.busy[i].0 <= now)
                .min_by_key(|&i| self.busy[i])?;
            Some(self.busy.swap_remove(i).1)
        }
        fn in_flight(&self) -> usize {
            self.busy.len()
        }
        fn stats(&self) -> DeviceStats {
            DeviceStats::default()
        }
    }

    fn faulty(depth: usize, spec: FaultSpec) -> Faulty {
        let inner = Slots {
            depth,
            busy: Vec::new(),
        };
        Faulty::new(Box::new(inner), spec, 1)
    }

    /// Every request times out after 10 ms (a rate of one, beyond what
    /// `validate` lets a scenario ask, to leave nothing to the draw).
    fn all_time_out() -> FaultSpec {
        FaultSpec {
            timeout_rate: 1.0,
            timeout: Duration::from_millis(10),
            ..FaultSpec::default()
        }
    }

    fn at_ms(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn a_request_that_times_out_keeps_its_slot_until_the_inner_device_finishes_it() {
        let mut dev = faulty(1, all_time_out());
        // Serviced for 100 ms; its timeout fires at 10 ms.
        dev.submit(&Request::read(1, 0, 100, 8), Instant::ZERO);
        assert_eq!(dev.in_flight(), 1);
        assert_eq!(dev.next_completion(), Some(at_ms(10)));
        assert_eq!(
            dev.complete_status(at_ms(10)),
            Some((RequestId(1), Some(IoError::Timeout)))
        );
        assert_eq!(dev.complete_status(at_ms(10)), None);
        // The engine got its error, but the drive is still busy with it.
        assert_eq!(dev.in_flight(), 1);
        assert_eq!(dev.next_completion(), Some(at_ms(100)));
        // Its late inner completion is dropped, and only then is the slot free.
        assert_eq!(dev.complete_status(at_ms(100)), None);
        assert_eq!(dev.in_flight(), 0);
        assert_eq!(dev.next_completion(), None);
        dev.submit(&Request::read(2, 0, 1, 8), at_ms(100));
        assert_eq!(dev.in_flight(), 1);
    }

    #[test]
    fn a_timed_out_request_the_device_finished_early_holds_its_slot_until_its_timeout() {
        let mut dev = faulty(1, all_time_out());
        dev.submit(&Request::read(1, 0, 1, 8), Instant::ZERO);
        assert_eq!(dev.next_completion(), Some(at_ms(1)));
        // The inner completion is lost; the request waits for its timeout.
        assert_eq!(dev.complete_status(at_ms(1)), None);
        assert_eq!(dev.in_flight(), 1);
        assert_eq!(dev.next_completion(), Some(at_ms(10)));
        assert_eq!(
            dev.complete_status(at_ms(10)),
            Some((RequestId(1), Some(IoError::Timeout)))
        );
        assert_eq!(dev.in_flight(), 0);
        assert_eq!(dev.next_completion(), None);
    }

    /// The engine's loop (submit while `in_flight` is below the depth, then
    /// collect at `next_completion`) over every fate, timeouts both shorter
    /// and longer than the service: the inner device is never overfilled
    /// and every request completes exactly once.
    #[test]
    fn an_engine_loop_never_overfills_the_inner_device_and_completes_each_request_once() {
        let spec = FaultSpec {
            eio_rate: 0.1,
            timeout_rate: 0.3,
            stall_rate: 0.2,
            timeout: Duration::from_millis(20),
            stall: Duration::from_millis(30),
            eio_at: vec![at_ms(500)],
            stall_at: vec![at_ms(900)],
        };
        let depth = 4;
        let mut dev = faulty(depth, spec);
        let mut services = Prng::new(852);
        let total = 2_000;
        let (mut next_id, mut now) = (0, Instant::ZERO);
        let mut done = BTreeSet::new();
        let (mut timeouts, mut abandoned) = (0, 0);
        let mut timed_out_late = BTreeSet::new();
        while done.len() < total {
            while next_id < total as u64 && dev.in_flight() < depth {
                // 1..=50 ms, so that some outlast the 20 ms timeout.
                let ms = 1 + services.below(50);
                next_id += 1;
                if ms > 20 {
                    timed_out_late.insert(RequestId(next_id));
                }
                dev.submit(&Request::read(next_id, 0, ms, 8), now);
            }
            now = dev
                .next_completion()
                .expect("requests in flight have a completion");
            while let Some((id, status)) = dev.complete_status(now) {
                assert!(done.insert(id), "{id:?} completed twice");
                if status == Some(IoError::Timeout) {
                    timeouts += 1;
                    abandoned += usize::from(timed_out_late.contains(&id));
                }
            }
            assert!(dev.in_flight() <= depth);
        }
        assert_eq!(dev.in_flight(), 0);
        assert_eq!(dev.next_completion(), None);
        assert_eq!(dev.stats.timeouts, timeouts);
        // Both timeout orders happened, so the test covers what it claims.
        assert!(
            abandoned > 0 && abandoned < timeouts as usize,
            "{abandoned} of {timeouts}"
        );
    }
}
