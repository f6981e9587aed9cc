//! BFQ's peak-rate estimator (`bfq_update_peak_rate`,
//! `bfq_update_rate_reset` and the late-completion check of
//! `bfq_completed_request` in block/bfq-iosched.c, 4.13+).
//!
//! The device's service rate is not observable from the scheduler, but
//! dispatches are, and over a long enough interval the dispatch rate must
//! approach the service rate (queues in between are finite). So the
//! estimator counts sectors dispatched over an observation interval of up
//! to one second, closes the interval early when the device went idle
//! (no dispatch for 100 ms with nothing in flight, or a completion that
//! implies a rate under 1 M sectors/s), and folds the measured rate into
//! the estimate with a low-pass filter whose weight grows with the share
//! of sequential dispatches and with the interval's length. Rates are in
//! sectors per microsecond, shifted left by [`RATE_SHIFT`].
//!
//! One departure from the kernel: in an interval whose dispatches are
//! mostly sequential (the only intervals the kernel trusts to lower the
//! estimate), the time spent on runs of seeky dispatches is left out of
//! the interval, as the kernel leaves out idle time. The kernel divides the
//! interval's sectors by its whole length, so when a sequential queue
//! alternates with a seeky one (each in its own slot: a seeky queue holds
//! the disk for a whole budget timeout whenever idling is needed for
//! guarantees, as with groups) the "peak" rate it measures is the mix's
//! rate, two to three times below the sequential rate on a disk. Budgets
//! then shrink, and a seeky queue's time charge (`max_budget` per
//! `timeout_sync`) buys it far more than its share of disk time: with a
//! sequential reader in one group and random readers in another at equal
//! weights, the sequential group got 27 % of the disk instead of about
//! half. Pure sequential or pure random workloads estimate exactly as in
//! the kernel.

use elevator_core::{Duration, Instant, Sector};

/// Fixed-point shift of rates (`BFQ_RATE_SHIFT`).
pub(super) const RATE_SHIFT: u32 = 16;
/// An interval needs this many dispatches to yield a rate (`BFQ_RATE_MIN_SAMPLES`).
const RATE_MIN_SAMPLES: u32 = 32;
/// ... and must last this long (`BFQ_RATE_MIN_INTERVAL`, 300 ms).
const RATE_MIN_INTERVAL: Duration = Duration::from_millis(300);
/// Target length of an interval (`BFQ_RATE_REF_INTERVAL`, 1 s).
const RATE_REF_INTERVAL: Duration = Duration::from_secs(1);
/// A device idle this long between dispatches ends the interval.
const RATE_IDLE_GAP: Duration = Duration::from_millis(100);
/// Think times under this are "immediate" (`BFQ_MIN_TT`, 2 ms).
pub(super) const MIN_TT: Duration = Duration::from_millis(2);
/// Seek distance above which a request is seeky (`BFQQ_SEEK_THR`, 800 sectors).
pub(super) const SEEK_THR: u64 = 800;
/// On flash only small requests count as seeky (`BFQQ_SECT_THR_NONROT`, 64).
pub(super) const SECT_THR_NONROT: u32 = 64;

/// `BFQ_RQ_SEEKY`: far from `last_pos`, and on flash also small.
pub(super) fn rq_seeky(rotational: bool, last_pos: Sector, sector: Sector, sectors: u32) -> bool {
    let dist = if last_pos == 0 {
        0
    } else {
        sector.abs_diff(last_pos)
    };
    dist > SEEK_THR && (rotational || sectors < SECT_THR_NONROT)
}

/// Estimator state (fields of `bfq_data`).
#[derive(Clone, Debug)]
pub(super) struct PeakRate {
    /// The estimate, (sectors/µs) << RATE_SHIFT.
    pub rate: u64,
    samples: u32,
    sequential: u32,
    sectors: u64,
    first_dispatch: Instant,
    last_dispatch: Instant,
    delta_from_first: Duration,
    last_rq_max_size: u32,
    /// End of the last dispatched request (`last_position`).
    pub last_position: Sector,
    pub last_completion: Instant,
    /// How many times the estimate was updated.
    pub updates: u32,
    /// Time of the interval spent on runs of seeky dispatches.
    seeky_time: Duration,
    /// Start of the current run of seeky dispatches, if one is open.
    seeky_since: Option<Instant>,
}

impl PeakRate {
    pub(super) fn new(initial: u64) -> Self {
        PeakRate {
            rate: initial,
            samples: 0,
            sequential: 0,
            sectors: 0,
            first_dispatch: Instant::ZERO,
            last_dispatch: Instant::ZERO,
            delta_from_first: Duration::ZERO,
            last_rq_max_size: 0,
            last_position: 0,
            last_completion: Instant::ZERO,
            updates: 0,
            seeky_time: Duration::ZERO,
            seeky_since: None,
        }
    }

    /// A request of `sectors` at `sector` is dispatched at `now` with
    /// `in_driver` others in flight. Returns true if the estimate changed.
    pub(super) fn dispatched(
        &mut self,
        now: Instant,
        sector: Sector,
        sectors: u32,
        in_driver: u32,
        rotational: bool,
    ) -> bool {
        let mut changed = false;
        if self.samples == 0 {
            self.reset(Some((now, sectors)));
        } else if now.since(self.last_dispatch) > RATE_IDLE_GAP && in_driver == 0 {
            changed = self.update_and_reset(Some((now, sectors)));
        } else {
            self.samples += 1;
            let seeky = rq_seeky(rotational, self.last_position, sector, sectors);
            if (in_driver > 0 || now.since(self.last_completion) < MIN_TT) && !seeky {
                self.sequential += 1;
            }
            // A seeky request is served from about its dispatch to the
            // next dispatch; a run of them ends at the next sequential one.
            match (seeky, self.seeky_since) {
                (true, None) => self.seeky_since = Some(now),
                (false, Some(since)) => {
                    self.seeky_time += now.since(since);
                    self.seeky_since = None;
                }
                _ => {}
            }
            self.sectors += u64::from(sectors);
            if !self.samples.is_multiple_of(32) {
                self.last_rq_max_size = self.last_rq_max_size.max(sectors);
            } else {
                self.last_rq_max_size = sectors;
            }
            self.delta_from_first = now.since(self.first_dispatch);
            if self.delta_from_first >= RATE_REF_INTERVAL {
                changed = self.update_and_reset(Some((now, sectors)));
            }
        }
        self.last_position = sector + u64::from(sectors);
        self.last_dispatch = now;
        changed
    }

    /// A request completed at `now`. Returns true if the estimate changed.
    pub(super) fn completed(&mut self, now: Instant) -> bool {
        let delta_us = now.since(self.last_completion).nanos() / 1_000;
        let mut changed = false;
        // A completion this late for the largest recent request means the
        // device was not busy: close the interval here. (Not while seeky
        // requests are being served: their time is left out instead.)
        if self.seeky_since.is_none()
            && delta_us > MIN_TT.nanos() / 1_000
            && (u64::from(self.last_rq_max_size) << RATE_SHIFT) / delta_us < 1 << (RATE_SHIFT - 10)
        {
            changed = self.update_and_reset(None);
        }
        self.last_completion = now;
        changed
    }

    fn reset(&mut self, rq: Option<(Instant, u32)>) {
        match rq {
            Some((now, sectors)) => {
                self.first_dispatch = now;
                self.last_dispatch = now;
                self.samples = 1;
                self.sequential = 0;
                self.sectors = u64::from(sectors);
                self.last_rq_max_size = sectors;
            }
            None => self.samples = 0,
        }
        self.seeky_time = Duration::ZERO;
        self.seeky_since = None;
    }

    fn update_and_reset(&mut self, rq: Option<(Instant, u32)>) -> bool {
        let mut changed = false;
        if self.samples >= RATE_MIN_SAMPLES && self.delta_from_first >= RATE_MIN_INTERVAL {
            let to_completion = self.last_completion.since(self.first_dispatch);
            let interval = self.delta_from_first.max(to_completion);
            let mostly_random = self.sequential < (3 * self.samples) >> 2;
            // The departure described in the module docs.
            let measured = if mostly_random {
                interval
            } else {
                let end = self.first_dispatch + interval;
                let open = self.seeky_since.map_or(Duration::ZERO, |s| end.since(s));
                interval
                    .saturating_sub(self.seeky_time + open)
                    .max(interval.div(4))
            };
            let us = (measured.nanos() / 1_000).max(1);
            let rate = (self.sectors << RATE_SHIFT) / us;
            if !(mostly_random && rate <= self.rate) && rate <= 20 << RATE_SHIFT {
                let weight = (9 * self.sequential) / self.samples;
                let weight =
                    (u64::from(weight) * interval.nanos() / RATE_REF_INTERVAL.nanos()).min(8);
                let divisor = 10 - weight;
                self.rate = (self.rate * (divisor - 1) / divisor + rate / divisor).max(1);
                self.updates += 1;
                changed = true;
            }
        }
        self.reset(rq);
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dispatch 64-sector sequential requests back to back on a device
    /// doing `rate_sps` sectors/s with one request in flight.
    fn drive(p: &mut PeakRate, rate_sps: u64, secs: u64) {
        let per_rq = Duration::from_nanos(64 * 1_000_000_000 / rate_sps);
        let mut now = Instant::ZERO + Duration::from_millis(1);
        let mut pos = 1000;
        let end = Instant::ZERO + Duration::from_secs(secs);
        while now < end {
            p.dispatched(now, pos, 64, 0, true);
            pos += 64;
            now += per_rq;
            p.completed(now);
        }
    }

    #[test]
    fn converges_to_a_sequential_device_rate() {
        // 100 MB/s = 195312 sectors/s; start from the rotational default.
        let mut p = PeakRate::new(14_000 * 2 / 3);
        drive(&mut p, 195_312, 10);
        let sps = p.rate as f64 / 65536.0 * 1e6;
        println!("estimated {sps:.0} sectors/s after {} updates", p.updates);
        assert!(p.updates >= 5);
        assert!((sps / 195_312.0 - 1.0).abs() < 0.05, "{sps}");
    }

    /// A sequential queue's slots (128 KiB requests at 200 MB/s for 50 ms) alternating with a seeky queue's (one 4 KiB
    /// request per 8 ms for 125 ms), as with a sequential group and a
    /// random group: the estimate converges to the sequential rate, not to
    /// the mix's rate (which is what the kernel's would measure).
    #[test]
    fn alternating_sequential_and_seeky_slots_estimate_the_sequential_rate() {
        let mut p = PeakRate::new(14_000 * 2 / 3);
        let seq_rate = 390_625u64; // sectors/s: 200 MB/s
        let per_rq = Duration::from_nanos(256 * 1_000_000_000 / seq_rate);
        let mut now = Instant::ZERO + Duration::from_millis(1);
        let mut pos = 1_000_000u64;
        let mut far = 500_000_000u64;
        while now < Instant::ZERO + Duration::from_secs(20) {
            let slot_end = now + Duration::from_millis(50);
            while now < slot_end {
                p.dispatched(now, pos, 256, 0, true);
                pos += 256;
                now += per_rq;
                p.completed(now);
            }
            let slot_end = now + Duration::from_millis(125);
            while now < slot_end {
                far = (far * 7919) % 1_900_000_000 + 10_000;
                p.dispatched(now, far, 8, 0, true);
                now += Duration::from_millis(8);
                p.completed(now);
            }
        }
        let sps = p.rate as f64 / 65536.0 * 1e6;
        println!(
            "estimated {sps:.0} sectors/s (sequential {seq_rate}, mix {:.0})",
            seq_rate as f64 * 50.0 / 175.0
        );
        assert!((sps / seq_rate as f64 - 1.0).abs() < 0.10, "{sps}");
    }

    #[test]
    fn random_io_below_the_estimate_is_ignored() {
        let mut p = PeakRate::new(30_000);
        let mut now = Instant::ZERO + Duration::from_millis(1);
        for i in 0..2000u64 {
            p.dispatched(now, (i * 7919 * 4096) % 1_000_000_000 + 10_000, 8, 0, true);
            now += Duration::from_millis(5);
            p.completed(now);
        }
        assert_eq!(p.rate, 30_000);
    }
}
