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
//!   [`IoError::Timeout`]. It holds its command slot all the while;
//! - **stall** (`stall_rate`): the request completes successfully, `stall`
//!   later than the model says (a drive's internal retry or a firmware
//!   housekeeping pause).
//!
//! Scripted faults come on top: the first request completing at or after
//! each `eio_at` time fails with EIO, and each `stall_at` time delays the
//! first completion at or after it by `stall`.
//!
//! Invariant: every submitted request completes exactly once (with or
//! without an error); a held request counts as in flight.

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
    /// Timed-out requests the inner device still holds (they are in `held`
    /// too; `in_flight` counts them once).
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
            if fate == Fate::Timeout {
                // Already held since submission; the inner completion of a
                // timed-out command is lost.
                self.timed_out_inside -= 1;
                continue;
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
                Fate::Ok | Fate::Timeout => (at, None),
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
        Some((id, status))
    }

    fn in_flight(&self) -> usize {
        // Timed-out requests are counted by the inner device until it
        // finishes them, and in `held` from submission; count them once.
        self.inner.in_flight() + self.held.len() - self.timed_out_inside
    }

    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
}
