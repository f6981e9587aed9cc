//! A flash SSD with internal parallelism, in the spirit of MQSim (Tavakkol
//! et al., FAST 2018) but much smaller.
//!
//! * **Parallel units**: `channels × dies × planes` units that read and
//!   program independently; the dies of a channel share its bus.
//! * **Mapping**: logical pages are striped over the units, channel first
//!   (page `p` lives on unit `p mod units`), as a sequentially written
//!   drive would have them. Reads use this map.
//! * **Reads**: the unit senses the page (`tR`), then the channel moves the
//!   requested bytes to the controller, then the host link moves them to
//!   the host.
//! * **Writes**: the host link moves the data into the DRAM write buffer
//!   and the write completes; full pages are then programmed (`tPROG`) on
//!   units taken round-robin, as a log-structured FTL places new data. A
//!   write waits for buffer space when the buffer is full. A flush
//!   completes when everything acknowledged has been programmed.
//! * **Host link**: one serial resource (SATA is half-duplex; an NVMe
//!   queue pair shares one PCIe link) with a bandwidth and a per-command
//!   cost. It is a calendar: a transfer takes the first idle gap long
//!   enough after its data is ready, so commands complete out of order as
//!   NCQ and NVMe allow. Channel buses are calendars too, so a page whose
//!   unit is free is not held up behind one whose unit is busy.
//!
//! * **Service-time variability** (optional, off in every built-in
//!   profile): each command's controller stage takes an extra delay drawn
//!   from a lognormal with a given median and 99th percentile, and a
//!   given fraction of commands stalls a given time besides, from the
//!   run's seeded `Prng` ([`Device::reseed`]). The delay overlaps other
//!   commands (it holds no unit, bus or link), so it gives latency a tail
//!   without lowering the device's rate; a host-side cause (a loop
//!   device's worker thread waiting for a CPU, an interrupt coalesced)
//!   looks like this from above. `elevator device probe` fits it from the
//!   measured percentiles (crates/elevator-tune/src/fit.rs).
//!
//! Everything is decided at submission: resources are reserved first come,
//! first served, so a completion time never changes after `submit`.
//! Garbage collection and the SLC cache running out are not modelled: the
//! device behaves as a fresh, sequentially preconditioned drive.
//!
//! Invariants: each unit and channel does one thing at a time; the link
//! calendar holds at most one interval per request in flight, a channel's
//! at most one per page in flight; the buffer never holds more than its
//! size; no allocation after construction.

use crate::completions::Completions;
use crate::{Device, DeviceStats};
use elevator_core::{Duration, Instant, Op, Prng, QueueLimits, Request, RequestId, SECTOR_SIZE};
use std::collections::VecDeque;

/// Everything an SSD model is built from (validated by the profile
/// loader).
#[derive(Clone, Debug)]
pub(crate) struct SsdParams {
    pub name: String,
    pub capacity_sectors: u64,
    pub queue_depth: u32,
    pub max_sectors: u32,
    pub channels: u32,
    pub dies_per_channel: u32,
    pub planes_per_die: u32,
    pub page_bytes: u64,
    pub read_latency: Duration,
    pub program_latency: Duration,
    /// Channel (flash bus) rate, bytes per second.
    pub channel_rate: f64,
    /// Host link payload rate, bytes per second.
    pub link_rate: f64,
    /// Link time per command besides its data.
    pub command_overhead: Duration,
    /// Controller latency per command, overlapped between commands.
    pub firmware_latency: Duration,
    pub write_buffer_bytes: u64,
    /// Reported to the kernel as rotational (a drive that does not set
    /// ATA IDENTIFY word 217); the model itself has no mechanics.
    pub rotational: bool,
    /// Extra per-command controller delay, if any.
    pub variability: Option<Variability>,
}

/// A lognormal extra delay per command: `median x exp(sigma x Z)`, `Z`
/// standard normal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Variability {
    pub median: Duration,
    pub sigma: f64,
    /// Besides: with this probability a command also stalls `stall` (a
    /// host's rare long waits, which a lognormal through the p99 does not
    /// reach but the mean, and so every rate, feels).
    pub stall_probability: f64,
    pub stall: Duration,
}

/// The standard normal's 99th percentile (z such that P(Z < z) = 0.99).
pub const Z99: f64 = 2.326_347_874;

impl Variability {
    /// From the delay's median and 99th percentile (`p99 >= p50 > 0`).
    pub fn from_percentiles(p50: Duration, p99: Duration) -> Self {
        let ratio = p99.nanos().max(1) as f64 / p50.nanos().max(1) as f64;
        Variability {
            median: p50,
            sigma: ratio.max(1.0).ln() / Z99,
            stall_probability: 0.0,
            stall: Duration::ZERO,
        }
    }

    /// With a stall of `stall` for a `probability` of the commands.
    pub fn with_stalls(self, probability: f64, stall: Duration) -> Self {
        Variability {
            stall_probability: probability,
            stall,
            ..self
        }
    }

    /// One draw (Box-Muller; two uniforms per draw, the cosine branch).
    fn draw(&self, rng: &mut Prng) -> Duration {
        let u1 = 1.0 - rng.unit(); // (0, 1]: ln is finite
        let u2 = rng.unit();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let ns = self.median.nanos() as f64 * (self.sigma * z).exp();
        // A draw past a second is a modelling accident, not a device.
        let body = Duration(ns.min(1e9).round() as u64);
        // No draw without stalls: the stream stays what it was.
        if self.stall_probability > 0.0 && rng.unit() < self.stall_probability {
            body + self.stall
        } else {
            body
        }
    }
}

/// Busy intervals of a serial resource, sorted and disjoint.
#[derive(Debug)]
struct Calendar {
    busy: VecDeque<(Instant, Instant)>,
}

impl Calendar {
    fn new(capacity: usize) -> Self {
        Calendar {
            busy: VecDeque::with_capacity(capacity),
        }
    }

    /// Forget intervals over by `now`.
    fn prune(&mut self, now: Instant) {
        while self.busy.front().is_some_and(|&(_, end)| end <= now) {
            self.busy.pop_front();
        }
    }

    /// Book the first gap of `len` at or after `ready`; returns its end.
    fn book(&mut self, ready: Instant, len: Duration) -> Instant {
        let mut t = ready;
        // Intervals are disjoint and sorted, so their ends are sorted too:
        // skip those over before `ready`.
        let first = self.busy.partition_point(|&(_, e)| e <= t);
        let mut at = self.busy.len();
        for (i, &(s, e)) in self.busy.iter().enumerate().skip(first) {
            if s >= t + len {
                at = i;
                break;
            }
            t = e;
        }
        let end = t + len;
        self.busy.insert(at, (t, end));
        end
    }
}

/// The label of the model's stream, derived from the run's seed.
const RNG_LABEL: &str = "ssd service variability";

/// A simulated SSD.
#[derive(Debug)]
pub(crate) struct Ssd {
    p: SsdParams,
    limits: QueueLimits,
    units: u64,
    unit_free: Vec<Instant>,
    channels: Vec<Calendar>,
    link: Calendar,
    /// Program completion times of buffered pages, in the order they
    /// entered; the buffer frees in this order.
    buffer: VecDeque<Instant>,
    buffer_pages: usize,
    /// Bytes written but not yet filling a page.
    open_page_bytes: u64,
    /// Round-robin write point over the units.
    write_unit: u64,
    /// When the last page acknowledged so far is programmed.
    last_program: Instant,
    done: Completions,
    /// Draws of the service-time variability (unused without it).
    rng: Prng,
}

impl Ssd {
    pub fn new(p: SsdParams) -> Self {
        let units = u64::from(p.channels * p.dies_per_channel * p.planes_per_die);
        let buffer_pages = (p.write_buffer_bytes / p.page_bytes).max(1) as usize;
        // Pages of the largest request, spread over the channels, for a
        // full queue.
        let pages = u64::from(p.max_sectors) * SECTOR_SIZE / p.page_bytes + 2;
        let per_channel = pages.div_ceil(u64::from(p.channels));
        let channel_slots = (u64::from(p.queue_depth) * per_channel + 1) as usize;
        Ssd {
            limits: QueueLimits {
                rotational: p.rotational,
                queue_depth: p.queue_depth,
                max_sectors: p.max_sectors,
                capacity: p.capacity_sectors,
            },
            units,
            unit_free: vec![Instant::ZERO; units as usize],
            channels: (0..p.channels)
                .map(|_| Calendar::new(channel_slots))
                .collect(),
            link: Calendar::new(p.queue_depth as usize + 1),
            buffer: VecDeque::with_capacity(buffer_pages),
            buffer_pages,
            open_page_bytes: 0,
            write_unit: 0,
            last_program: Instant::ZERO,
            done: Completions::new(p.queue_depth),
            rng: Prng::derive(0, RNG_LABEL),
            p,
        }
    }

    fn time(bytes: u64, rate: f64) -> Duration {
        Duration((bytes as f64 * 1e9 / rate).round() as u64)
    }

    /// Sense and move to the controller every page of `start..end`
    /// (bytes); returns when the last byte is in the controller.
    fn read_pages(&mut self, start: u64, end: u64, t0: Instant) -> Instant {
        let page = self.p.page_bytes;
        let channels = u64::from(self.p.channels);
        let mut ready = t0;
        let mut pos = start;
        while pos < end {
            let p = pos / page;
            let chunk = end.min((p + 1) * page) - pos;
            let unit = (p % self.units) as usize;
            let channel = (p % self.units % channels) as usize;
            let sensed = t0.max(self.unit_free[unit]) + self.p.read_latency;
            let bus_time = Self::time(chunk, self.p.channel_rate);
            let bus = &mut self.channels[channel];
            bus.prune(t0);
            let moved = bus.book(sensed, bus_time);
            self.unit_free[unit] = moved;
            ready = ready.max(moved);
            pos += chunk;
        }
        ready
    }

    /// When `pages` more pages fit in the buffer, at or after `now`.
    fn buffer_room(&mut self, pages: usize, now: Instant) -> Instant {
        while self.buffer.front().is_some_and(|&t| t <= now) {
            self.buffer.pop_front();
        }
        let excess = (self.buffer.len() + pages).saturating_sub(self.buffer_pages);
        let mut room = now;
        for _ in 0..excess {
            // The oldest pages leave first; by the time this write's data
            // is in, they are gone.
            if let Some(t) = self.buffer.pop_front() {
                room = room.max(t);
            }
        }
        room
    }

    /// Program one page from the buffer, starting no earlier than `t`.
    fn program_page(&mut self, t: Instant) {
        let unit = self.write_unit as usize;
        self.write_unit = (self.write_unit + 1) % self.units;
        // The data-in transfer is charged to the unit, not the channel
        // bus: it keeps reads from queueing behind programs booked ahead.
        let start = t.max(self.unit_free[unit]);
        let end =
            start + Self::time(self.p.page_bytes, self.p.channel_rate) + self.p.program_latency;
        self.unit_free[unit] = end;
        self.buffer.push_back(end);
        self.last_program = self.last_program.max(end);
    }

    fn link_time(&self, bytes: u64) -> Duration {
        self.p.command_overhead + Self::time(bytes, self.p.link_rate)
    }
}

impl Device for Ssd {
    fn name(&self) -> &str {
        &self.p.name
    }

    fn limits(&self) -> QueueLimits {
        self.limits
    }

    fn submit(&mut self, request: &Request, now: Instant) {
        debug_assert!(self.in_flight() < self.p.queue_depth as usize);
        self.done.submitted(now);
        self.link.prune(now);
        let cap = self.limits.capacity;
        let start = request.sector.min(cap) * SECTOR_SIZE;
        let end = request.end().min(cap) * SECTOR_SIZE;
        let bytes = end.saturating_sub(start);
        let extra = match self.p.variability {
            Some(v) => v.draw(&mut self.rng),
            None => Duration::ZERO,
        };
        let t0 = now + self.p.firmware_latency + extra;
        let due = match request.op {
            Op::Read => {
                let ready = self.read_pages(start, end, t0);
                self.link.book(ready, self.link_time(bytes))
            }
            Op::Write => {
                let filled = self.open_page_bytes + bytes;
                let pages = (filled / self.p.page_bytes) as usize;
                let ready = t0.max(self.buffer_room(pages, now));
                let acked = self.link.book(ready, self.link_time(bytes));
                self.open_page_bytes = filled % self.p.page_bytes;
                for _ in 0..pages {
                    self.program_page(acked);
                }
                acked
            }
            Op::Flush => {
                if self.open_page_bytes > 0 {
                    // Pad and program the partly filled page.
                    self.open_page_bytes = 0;
                    let _ = self.buffer_room(1, now);
                    self.program_page(t0);
                }
                let acked = self.link.book(t0, self.p.command_overhead);
                acked.max(self.last_program)
            }
        };
        self.done.schedule(request.id, due);
    }

    fn next_completion(&self) -> Option<Instant> {
        self.done.next_due()
    }

    fn complete(&mut self, now: Instant) -> Option<RequestId> {
        self.done.pop_due(now)
    }

    fn in_flight(&self) -> usize {
        self.done.in_flight()
    }

    fn stats(&self) -> DeviceStats {
        self.done.stats
    }

    fn reseed(&mut self, seed: u64) {
        self.rng = Prng::derive(seed, RNG_LABEL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_fills_gaps_first() {
        let mut c = Calendar::new(4);
        assert_eq!(c.book(Instant(100), Duration(10)), Instant(110));
        assert_eq!(c.book(Instant(0), Duration(50)), Instant(50));
        // No 60-long gap before 110.
        assert_eq!(c.book(Instant(0), Duration(60)), Instant(170));
        // A 40-long gap fits between 50 and 100.
        assert_eq!(c.book(Instant(55), Duration(40)), Instant(95));
        c.prune(Instant(96));
        assert_eq!(c.busy.len(), 2);
    }

    /// Long sequential writes: the buffer fills, then writes go at the
    /// flash program rate (units x page / tPROG) when that is below the
    /// link rate.
    #[test]
    fn sustained_writes_run_at_the_program_rate_once_the_buffer_is_full() {
        let p = SsdParams {
            name: "slow".into(),
            capacity_sectors: 1 << 30,
            queue_depth: 4,
            max_sectors: 256,
            channels: 2,
            dies_per_channel: 1,
            planes_per_die: 1,
            page_bytes: 16 << 10,
            read_latency: Duration::from_micros(50),
            program_latency: Duration::from_millis(1),
            channel_rate: 400e6,
            link_rate: 500e6,
            command_overhead: Duration::ZERO,
            firmware_latency: Duration::ZERO,
            write_buffer_bytes: 1 << 20,
            rotational: false,
            variability: None,
        };
        let mut ssd = Ssd::new(p);
        let mut now = Instant::ZERO;
        let (mut id, mut bytes) = (0u64, 0u64);
        for _ in 0..4 {
            ssd.submit(&Request::write(id, 0, id * 256, 256), now);
            id += 1;
        }
        let mut start_late = None;
        while id < 2000 {
            now = ssd.next_completion().unwrap();
            while ssd.complete(now).is_some() {
                if id == 1000 {
                    start_late = Some((now, bytes));
                }
                bytes += 128 << 10;
                ssd.submit(&Request::write(id, 0, id * 256, 256), now);
                id += 1;
            }
        }
        let (t0, b0) = start_late.unwrap();
        let rate = (bytes - b0) as f64 / now.since(t0).as_secs_f64();
        // 2 units x 16 KiB per (1 ms + 41 us data-in) = 31.5 MB/s.
        assert!((30e6..33e6).contains(&rate), "{rate}");
    }

    fn one_at_a_time(ssd: &mut Ssd, n: u64) -> Vec<u64> {
        let mut now = Instant::ZERO;
        let mut lat = Vec::new();
        for id in 0..n {
            ssd.submit(&Request::read(id, 0, (id * 7919 % 100_000) * 8, 8), now);
            let due = ssd.next_completion().unwrap();
            assert_eq!(ssd.complete(due), Some(RequestId(id)));
            lat.push(due.since(now).nanos());
            now = due;
        }
        lat.sort_unstable();
        lat
    }

    fn small(variability: Option<Variability>) -> Ssd {
        Ssd::new(SsdParams {
            name: "v".into(),
            capacity_sectors: 1 << 30,
            queue_depth: 4,
            max_sectors: 256,
            channels: 2,
            dies_per_channel: 1,
            planes_per_die: 1,
            page_bytes: 4096,
            read_latency: Duration::from_micros(20),
            program_latency: Duration::from_micros(200),
            channel_rate: 4e9,
            link_rate: 4e9,
            command_overhead: Duration::ZERO,
            firmware_latency: Duration::ZERO,
            write_buffer_bytes: 1 << 20,
            rotational: false,
            variability,
        })
    }

    /// The extra delay's median and 99th percentile come out as asked,
    /// the same seed gives the same draws, another seed others, and none
    /// leaves the device as deterministic as it was.
    #[test]
    fn variability_has_the_asked_percentiles_and_follows_the_seed() {
        let v = Variability::from_percentiles(Duration::from_micros(5), Duration::from_micros(50));
        let base = one_at_a_time(&mut small(None), 20_000);
        assert_eq!(base.first(), base.last(), "no variability: one latency");
        let b = base[0] as f64;
        let mut a = small(Some(v));
        a.reseed(7);
        let lat = one_at_a_time(&mut a, 20_000);
        let q = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize] as f64 - b;
        assert!((q(0.5) / 5e3 - 1.0).abs() < 0.05, "p50 extra {}", q(0.5));
        assert!((q(0.99) / 50e3 - 1.0).abs() < 0.1, "p99 extra {}", q(0.99));
        let mut again = small(Some(v));
        again.reseed(7);
        assert_eq!(one_at_a_time(&mut again, 20_000), lat);
        let mut other = small(Some(v));
        other.reseed(8);
        assert_ne!(one_at_a_time(&mut other, 20_000), lat);
    }
}
