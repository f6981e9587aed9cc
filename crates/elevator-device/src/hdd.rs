//! A hard disk after Ruemmler & Wilkes, "An introduction to disk drive
//! modeling" (IEEE Computer 27(3), 1994), with the buffer behaviour of
//! DiskSim's disk module (Ganger, Worthington & Patt, CMU PDL).
//!
//! Service time = command overhead + seek (+ write settle) + rotational
//! latency + media transfer (with head and cylinder switches hidden by
//! track skew), minus what the buffer saves:
//!
//! * **Seek**: a √/linear curve fitted to the datasheet's track-to-track,
//!   average and full-stroke times, or a measured table ([`seek`]).
//! * **Rotation**: the angle is `(t mod T) / T`, a pure function of time;
//!   no random draw ([`geometry`]).
//! * **Zoned recording**: sectors per track fall from LBA 0 (outer) inward.
//! * **Read-ahead**: after a read the head keeps reading into the request's
//!   segment while the drive is idle, up to one segment past the last
//!   requested sector. How much it read is computed from the time that
//!   elapsed, when the next command arrives; a read that continues the
//!   stream is served as the head reaches it, without repositioning.
//! * **Write cache**: with it on, a write completes once its data is in the
//!   buffer; dirty runs are written back (destaged) in C-LOOK order as
//!   soon as the drive is idle (which ends any read-ahead), or in the
//!   foreground when the buffer is full or a flush arrives. With it off,
//!   a write completes when it is on the media.
//! * **Queueing**: depth 1 is plain FIFO; with NCQ the drive picks the
//!   queued command with the shortest positioning time (SPTF), with an age
//!   limit against starvation. A flush is a barrier: commands queued before
//!   it go first, later ones wait for it.
//!
//! The model is lazy: nothing happens between calls. Every call first
//! replays what the drive did on its own since the last call (destaging in
//! idle time, read-ahead), then handles the call. The next command is
//! chosen when the mechanism frees up; when a command arrives while the
//! drive is destaging on its own, it is committed at once so that its
//! completion time is known to [`Device::next_completion`].
//!
//! Simplifications: spare cylinders and slipped sectors are not laid out;
//! the SPTF key treats a read of dirty data as a miss (it is still served
//! from the buffer); a flush waits for everything dirty, not only for what
//! was acknowledged before it.
//!
//! Validation: replaying DiskSim's `ibm18es.trace` (10 000 requests with
//! the real drive's measured service times) against the `ibm18es` profile
//! gives a mean service time 2 % below the measured one and a demerit
//! (RMS distance between the two distributions) of 0.22 ms, 4 % of the
//! mean, against 0.135 ms for DiskSim's own model (`tests/calibration.rs`).
//!
//! Invariants: at most one mechanical operation at a time; whenever a
//! command is queued, a host command is running on the mechanism and its
//! completion is scheduled; every submitted request is scheduled for
//! completion exactly once; no allocation after construction.

pub(crate) mod cache;
pub(crate) mod geometry;
pub(crate) mod seek;

use crate::completions::Completions;
use crate::{Device, DeviceStats};
use cache::{DirtySet, Lookup, Segments};
use elevator_core::{Duration, Instant, Op, QueueLimits, Request, RequestId, Sector, SECTOR_SIZE};
use geometry::{Geometry, Place, ZoneSpec};
use seek::Seek;

/// Everything a disk model is built from (validated by the profile
/// loader).
#[derive(Clone, Debug)]
pub(crate) struct HddParams {
    pub name: String,
    pub rpm: u32,
    pub surfaces: u32,
    pub zones: Vec<ZoneSpec>,
    pub seek: Seek,
    pub head_switch: Duration,
    pub cylinder_switch: Duration,
    pub write_settle: Duration,
    pub read_miss_overhead: Duration,
    pub read_hit_overhead: Duration,
    pub write_overhead: Duration,
    /// Host interface rate, bytes per second.
    pub bus_rate: f64,
    pub segments: u32,
    pub segment_sectors: u64,
    pub write_cache: bool,
    pub write_buffer_sectors: u64,
    pub write_buffer_runs: u32,
    pub queue_depth: u32,
    pub max_sectors: u32,
    /// A queued command older than this is served next regardless of
    /// position.
    pub age_limit: Duration,
}

/// Where the heads are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Head {
    cylinder: u32,
    head: u32,
    /// The next sector under the head (for seek distances in sectors).
    lba: Sector,
}

/// A command waiting for the mechanism.
#[derive(Clone, Copy, Debug)]
struct Job {
    id: RequestId,
    op: Op,
    start: Sector,
    end: Sector,
    seq: u64,
    arrival: Instant,
    /// Where `start` is on the platters (located once, at submission).
    place: Place,
}

/// The head reading ahead into a segment while the drive is otherwise
/// idle: sector `origin + k` finishes passing the head at
/// `run_end(origin, k + 1, origin_at)`, for `origin + k < limit`.
#[derive(Clone, Copy, Debug)]
struct ReadAhead {
    segment: usize,
    origin: Sector,
    origin_at: Instant,
    limit: Sector,
}

/// A simulated hard disk.
#[derive(Debug)]
pub(crate) struct Hdd {
    p: HddParams,
    geo: Geometry,
    bus_ns_per_sector: f64,
    limits: QueueLimits,
    segments: Segments,
    dirty: DirtySet,
    pending: Vec<Job>,
    next_seq: u64,
    head: Head,
    readahead: Option<ReadAhead>,
    /// When the mechanism finishes what it is doing.
    free_at: Instant,
    /// When the host command now on the mechanism finishes.
    host_until: Instant,
    done: Completions,
}

impl Hdd {
    pub fn new(p: HddParams) -> Self {
        let geo = Geometry::new(&p.zones, p.surfaces, p.rpm, p.cylinder_switch);
        let limits = QueueLimits {
            rotational: true,
            queue_depth: p.queue_depth,
            max_sectors: p.max_sectors,
            capacity: geo.capacity(),
        };
        let bus_ns_per_sector = SECTOR_SIZE as f64 * 1e9 / p.bus_rate;
        let segments = Segments::new(p.segments, p.segment_sectors);
        let dirty = DirtySet::new(p.write_buffer_sectors, p.write_buffer_runs as usize);
        let head = Head {
            cylinder: 0,
            head: 0,
            lba: 0,
        };
        Hdd {
            pending: Vec::with_capacity(p.queue_depth as usize),
            done: Completions::new(p.queue_depth),
            geo,
            bus_ns_per_sector,
            limits,
            segments,
            dirty,
            next_seq: 0,
            head,
            readahead: None,
            free_at: Instant::ZERO,
            host_until: Instant::ZERO,
            p,
        }
    }

    fn bus(&self, sectors: u64) -> Duration {
        // Non-negative, so adding a half and truncating rounds.
        Duration((sectors as f64 * self.bus_ns_per_sector + 0.5) as u64)
    }

    fn seek_time(&self, cylinders: u32) -> Duration {
        Duration((self.p.seek.time_ms(cylinders) * 1e6 + 0.5) as u64)
    }

    /// When the start of `lba` comes under the head if positioning from
    /// `head` starts at `ready`; also the target's place.
    fn reach(&self, head: Head, lba: Sector, ready: Instant, write: bool) -> (Instant, Place) {
        let place = self.geo.locate(lba);
        (self.reach_place(head, place, ready, write), place)
    }

    /// [`Hdd::reach`] for a sector already located.
    fn reach_place(&self, head: Head, place: Place, ready: Instant, write: bool) -> Instant {
        let mut t = ready;
        let moved = if place.cylinder != head.cylinder {
            t += self.seek_time(place.cylinder.abs_diff(head.cylinder));
            true
        } else if place.head != head.head {
            t += self.p.head_switch;
            true
        } else {
            false
        };
        if write && moved {
            t += self.p.write_settle;
        }
        t + self.geo.rotational_wait(place.angle_ns, t)
    }

    /// Move the heads to `lba` (counting the seek) and return when its
    /// start passes under them.
    fn position(&mut self, lba: Sector, ready: Instant, write: bool) -> Instant {
        let (t, place) = self.reach(self.head, lba, ready, write);
        if place.cylinder != self.head.cylinder {
            self.done.stats.seeks += 1;
            self.done.stats.seek_distance += lba.abs_diff(self.head.lba);
        }
        self.head = Head {
            cylinder: place.cylinder,
            head: place.head,
            lba,
        };
        t
    }

    /// The heads rest after the last sector of a transfer ending at `end`.
    fn park_after(&mut self, end: Sector) {
        let place = self.geo.locate(end.saturating_sub(1));
        self.head = Head {
            cylinder: place.cylinder,
            head: place.head,
            lba: end,
        };
    }

    /// Where the read-ahead stream is at `t`: (position, still running).
    fn readahead_at(&self, ra: &ReadAhead, t: Instant) -> (Sector, bool) {
        let span = ra.limit.saturating_sub(ra.origin);
        let done = self.geo.sectors_done(ra.origin, ra.origin_at, t, span);
        (ra.origin + done, done < span)
    }

    /// Account for the read-ahead done by `t`: grow its segment, move the
    /// heads along, and forget it once the segment is full.
    fn settle_readahead(&mut self, t: Instant) {
        let Some(ra) = self.readahead else { return };
        if t < ra.origin_at {
            return;
        }
        let (pos, running) = self.readahead_at(&ra, t);
        self.segments.extend(ra.segment, pos);
        if pos > ra.origin {
            self.park_after(pos);
        }
        self.readahead = running.then(|| ReadAhead {
            // Restart the stream's clock at the next sector, so later
            // questions about it span a segment, not the whole stream.
            origin: pos,
            origin_at: self.geo.run_start(ra.origin, pos - ra.origin, ra.origin_at),
            ..ra
        });
    }

    /// The heads at `t`, counting read-ahead, without changing state.
    fn head_at(&self, t: Instant) -> Head {
        match &self.readahead {
            Some(ra) if t > ra.origin_at => {
                let (pos, _) = self.readahead_at(ra, t);
                if pos > ra.origin {
                    let place = self.geo.locate(pos - 1);
                    Head {
                        cylinder: place.cylinder,
                        head: place.head,
                        lba: pos,
                    }
                } else {
                    self.head
                }
            }
            _ => self.head,
        }
    }

    /// Whether a read from `start` is served by the running read-ahead
    /// stream, without moving the heads.
    fn in_stream(&self, start: Sector) -> bool {
        self.readahead.is_some_and(|ra| {
            let seg = self.segments.get(ra.segment);
            seg.start <= start && start <= seg.end.max(ra.limit)
        })
    }

    /// Positioning time of `job` if started at `t` (the SPTF key).
    /// `destage` is where a blocked write's destaging would start. A read
    /// of dirty data is keyed as a miss: the check would cost a search of
    /// the dirty runs per candidate, and such reads are rare (they are
    /// still served from the buffer).
    fn positioning(&self, job: &Job, head: Head, t: Instant, destage: Option<Place>) -> Duration {
        let (place, ready, write) = match job.op {
            Op::Flush => return Duration::ZERO,
            Op::Read => {
                let place = match self.segments.lookup(job.start, job.end) {
                    Lookup::Whole(_) => return Duration::ZERO,
                    _ if self.in_stream(job.start) => return Duration::ZERO,
                    Lookup::Front(i) => self.geo.locate(self.segments.get(i).end),
                    Lookup::None => job.place,
                };
                (place, t + self.p.read_miss_overhead, false)
            }
            Op::Write if self.p.write_cache => match destage {
                Some(place) => (place, t, true),
                None => return Duration::ZERO,
            },
            Op::Write => (job.place, t + self.p.write_overhead, true),
        };
        self.reach_place(head, place, ready, write).since(t)
    }

    /// Which queued command the drive serves next, at `t`.
    fn choose(&self, t: Instant) -> usize {
        if self.pending.len() == 1 {
            return 0;
        }
        // A flush is a barrier: only older commands may pass it.
        let barrier = self
            .pending
            .iter()
            .filter(|j| j.op == Op::Flush)
            .map(|j| j.seq)
            .min()
            .unwrap_or(u64::MAX);
        let eligible = |j: &&Job| j.seq <= barrier;
        let oldest = self
            .pending
            .iter()
            .enumerate()
            .filter(|(_, j)| eligible(j))
            .min_by_key(|(_, j)| j.seq)
            .map(|(i, _)| i)
            .unwrap_or(0);
        let oldest_job = &self.pending[oldest];
        if oldest_job.op == Op::Flush || t.since(oldest_job.arrival) >= self.p.age_limit {
            return oldest;
        }
        let head = self.head_at(t);
        let destage = self.dirty.peek_next(head.lba).map(|l| self.geo.locate(l));
        let mut best = (Duration::MAX, u64::MAX, oldest);
        for (i, j) in self.pending.iter().enumerate() {
            if j.op == Op::Flush || j.seq > barrier {
                continue;
            }
            let key = (self.positioning(j, head, t, destage), j.seq, i);
            if key < best {
                best = key;
            }
        }
        best.2
    }

    /// Serve `job` on the mechanism from `t`; returns when it completes.
    fn run(&mut self, job: Job, t: Instant) -> Instant {
        match job.op {
            Op::Read => self.run_read(&job, t),
            Op::Write if self.p.write_cache => self.run_blocked_write(&job, t),
            Op::Write => self.run_write_through(&job, t),
            Op::Flush => {
                let mut t = t;
                while !self.dirty.is_empty() {
                    t = self.destage_one(t);
                }
                t + self.p.write_overhead
            }
        }
    }

    fn run_read(&mut self, job: &Job, t: Instant) -> Instant {
        let len = job.end - job.start;
        self.settle_readahead(t);
        let hit_end = t + self.p.read_hit_overhead + self.bus(len);
        // The running stream covers the request: no repositioning, the data
        // is there when the head has read it.
        if let Some(ra) = self.readahead {
            let seg = *self.segments.get(ra.segment);
            if seg.start <= job.start && job.start <= seg.end.max(ra.limit) {
                let media_end = if job.end <= seg.end {
                    t
                } else {
                    self.geo
                        .run_end(ra.origin, job.end - ra.origin, ra.origin_at)
                };
                let limit = (job.end + self.segments.segment_sectors).min(self.limits.capacity);
                if let Some(ra) = &mut self.readahead {
                    ra.limit = ra.limit.max(limit);
                }
                self.segments.touch(ra.segment);
                return hit_end.max(media_end + self.bus(1));
            }
        }
        let lookup = self.segments.lookup(job.start, job.end);
        if let Lookup::Whole(i) = lookup {
            self.segments.touch(i);
            return hit_end;
        }
        if self.dirty.contains(job.start, job.end) {
            return hit_end;
        }
        // A miss: the heads leave the stream. A segment holding the front
        // of the request is continued, otherwise the oldest is reused.
        self.readahead = None;
        let (segment, seg_start, from) = match lookup {
            Lookup::Front(i) => {
                let s = *self.segments.get(i);
                (i, s.start, s.end)
            }
            _ => (self.segments.take_lru(), job.start, job.start),
        };
        let ready = t + self.p.read_miss_overhead;
        let arrive = self.position(from, ready, false);
        let media_end = self.geo.run_end(from, job.end - from, arrive);
        // The segment grows as the stream passes (see settle_readahead).
        self.segments.set(segment, seg_start, from);
        self.park_after(job.end);
        let limit = (job.end + self.segments.segment_sectors).min(self.limits.capacity);
        self.readahead = Some(ReadAhead {
            segment,
            origin: from,
            origin_at: arrive,
            limit,
        });
        // Sectors go to the host as they come off the media, no faster than
        // the interface allows: the slower of the two sets the end.
        (ready + self.bus(len))
            .max(arrive + self.bus(job.end - from))
            .max(media_end + self.bus(1))
    }

    fn run_write_through(&mut self, job: &Job, t: Instant) -> Instant {
        let len = job.end - job.start;
        self.settle_readahead(t);
        self.readahead = None;
        self.segments.invalidate(job.start, job.end, None);
        let ready = t + self.p.write_overhead;
        let mut arrive = self.position(job.start, ready, true);
        // The sectors cannot be written before the host has sent them.
        let data_in = ready + self.bus(len);
        if data_in > arrive {
            let angle = self.geo.locate(job.start).angle_ns;
            arrive = data_in + self.geo.rotational_wait(angle, data_in);
        }
        let end = self.geo.run_end(job.start, len, arrive);
        self.park_after(job.end);
        end
    }

    /// A write that found the buffer full: destage until it fits, then
    /// take it into the buffer.
    fn run_blocked_write(&mut self, job: &Job, t: Instant) -> Instant {
        let len = job.end - job.start;
        let mut t = t;
        while !self.dirty.fits(len) && !self.dirty.is_empty() {
            t = self.destage_one(t);
        }
        self.accept_write(job.start, job.end);
        t + self.p.write_overhead + self.bus(len)
    }

    /// Put `start..end` in the write-back buffer.
    fn accept_write(&mut self, start: Sector, end: Sector) {
        let watch = self.readahead.map(|ra| ra.segment);
        if self.segments.invalidate(start, end, watch) {
            // The stream must not refill the stale range.
            if let Some(ra) = &mut self.readahead {
                ra.limit = ra.limit.min(start.max(ra.origin));
            }
        }
        self.dirty.insert(start, end);
    }

    /// Write one dirty run (at most `max_sectors`) to the media from `t`.
    fn destage_one(&mut self, t: Instant) -> Instant {
        self.settle_readahead(t);
        self.readahead = None;
        let max = u64::from(self.p.max_sectors);
        let Some((start, end)) = self.dirty.take_next(self.head.lba, max) else {
            return t;
        };
        let arrive = self.position(start, t, true);
        let done = self.geo.run_end(start, end - start, arrive);
        self.park_after(end);
        done
    }

    /// Start `pending[i]` at `t` and schedule its completion.
    fn start(&mut self, i: usize, t: Instant) {
        let job = self.pending.swap_remove(i);
        let end = self.run(job, t);
        self.free_at = end;
        self.host_until = end;
        self.done.schedule(job.id, end);
    }

    /// Replay what the drive did up to `now`: start queued commands as the
    /// mechanism frees up, and destage in idle time.
    fn advance(&mut self, now: Instant) {
        loop {
            if !self.pending.is_empty() {
                if self.free_at > now {
                    return;
                }
                let t = self.free_at;
                let i = self.choose(t);
                self.start(i, t);
                continue;
            }
            if self.p.write_cache && !self.dirty.is_empty() {
                // Idle: write back at once; destaging stops read-ahead.
                let s = self.free_at;
                if s < now {
                    self.free_at = self.destage_one(s);
                    continue;
                }
            }
            return;
        }
    }
}

impl Device for Hdd {
    fn name(&self) -> &str {
        &self.p.name
    }

    fn limits(&self) -> QueueLimits {
        self.limits
    }

    fn submit(&mut self, request: &Request, now: Instant) {
        debug_assert!(self.in_flight() < self.p.queue_depth as usize);
        self.done.submitted(now);
        self.advance(now);
        let cap = self.limits.capacity;
        let start = request.sector.min(cap);
        let end = request.end().min(cap).max(start);
        let job = Job {
            id: request.id,
            op: request.op,
            start,
            end,
            seq: self.next_seq,
            arrival: now,
            place: self.geo.locate(start),
        };
        self.next_seq += 1;
        let len = end - start;
        let blocked_writes = self.pending.iter().any(|j| j.op == Op::Write);
        if job.op == Op::Write && self.p.write_cache && !blocked_writes && self.dirty.fits(len) {
            // Write-back: done once the data is in the buffer. An idle
            // mechanism cannot have started writing it back before it came.
            let acked = now + self.p.write_overhead + self.bus(len);
            self.accept_write(start, end);
            self.done.schedule(job.id, acked);
            if self.free_at < acked && self.host_until <= now {
                self.free_at = acked;
            }
            return;
        }
        self.pending.push(job);
        if self.host_until <= now {
            // Nothing of the host's is on the mechanism (it is idle, or
            // destaging on its own): commit to this command now.
            debug_assert_eq!(self.pending.len(), 1);
            let t = self.free_at.max(now);
            self.start(0, t);
        }
    }

    fn next_completion(&self) -> Option<Instant> {
        self.done.next_due()
    }

    fn complete(&mut self, now: Instant) -> Option<RequestId> {
        self.advance(now);
        self.done.pop_due(now)
    }

    fn in_flight(&self) -> usize {
        self.done.in_flight()
    }

    fn stats(&self) -> DeviceStats {
        self.done.stats
    }
}

#[cfg(test)]
mod tests {
    use crate::{parse, Device};
    use elevator_core::{Instant, Op, Request, RequestId};

    fn profile(name: &str, edit: impl Fn(String) -> String) -> Box<dyn Device> {
        let text = match name {
            "ide-2003" => include_str!("../profiles/ide-2003.toml"),
            _ => include_str!("../profiles/sata-hdd.toml"),
        };
        parse(name, &edit(text.to_string())).unwrap()
    }

    fn req(id: u64, op: Op, sector: u64, sectors: u32) -> Request {
        let mut r = Request::read(id, 0, sector, sectors);
        r.op = op;
        r
    }

    /// Submit `r` at `now` on an idle device and return when it completes.
    fn serve(dev: &mut dyn Device, r: &Request, now: Instant) -> Instant {
        dev.submit(r, now);
        let due = dev.next_completion().unwrap();
        assert_eq!(dev.complete(due), Some(r.id));
        due
    }

    #[test]
    fn without_write_cache_each_sequential_write_waits_a_revolution() {
        let mut dev = profile("ide-2003", |t| {
            t.replace("write_cache = true", "write_cache = false")
        });
        let mut now = Instant::ZERO;
        let mut times = Vec::new();
        for k in 0..20 {
            let done = serve(dev.as_mut(), &req(k, Op::Write, 1_000_000 + k * 8, 8), now);
            times.push(done.since(now).as_millis_f64());
            now = done;
        }
        // After the first, each write just misses its sector: one
        // revolution (8.33 ms) less the overhead, plus the transfer.
        for t in &times[1..] {
            assert!((7.5..9.0).contains(t), "{times:?}");
        }
    }

    #[test]
    fn idle_time_destages_so_a_later_flush_is_quick() {
        let mut dev = profile("ide-2003", |t| t);
        let mut now = Instant::ZERO;
        for k in 0..16 {
            now = serve(dev.as_mut(), &req(k, Op::Write, k * 1_000_000, 8), now);
        }
        // One second of idleness is plenty to write 16 blocks back.
        let later = now + elevator_core::Duration::from_secs(1);
        let done = serve(dev.as_mut(), &req(99, Op::Flush, 0, 0), later);
        assert!(done.since(later).as_millis_f64() < 0.1);
        assert!(dev.stats().seeks >= 15);
    }

    #[test]
    fn a_queued_flush_is_a_barrier() {
        let mut dev = profile("sata-hdd", |t| t);
        let cap = dev.limits().capacity;
        let now = Instant::ZERO;
        // Three scattered reads, a flush, then two more reads: the flush
        // completes after the first three and before the last two.
        for (id, op, frac) in [
            (1, Op::Read, 0.9),
            (2, Op::Read, 0.1),
            (3, Op::Read, 0.5),
            (4, Op::Flush, 0.0),
            (5, Op::Read, 0.11),
            (6, Op::Read, 0.89),
        ] {
            let sector = (cap as f64 * frac) as u64 / 8 * 8;
            dev.submit(&req(id, op, sector, 8), now);
        }
        let mut order = Vec::new();
        while let Some(t) = dev.next_completion() {
            while let Some(RequestId(id)) = dev.complete(t) {
                order.push(id);
            }
        }
        let flush_at = order.iter().position(|&i| i == 4).unwrap();
        assert_eq!(flush_at, 3, "{order:?}");
        assert_eq!(dev.in_flight(), 0);
        assert_eq!(dev.stats().requests, 6);
    }

    #[test]
    fn sptf_serves_the_nearest_first() {
        let mut dev = profile("sata-hdd", |t| t);
        let cap = dev.limits().capacity;
        let sector = |f: f64| (cap as f64 * f) as u64 / 8 * 8;
        // The heads start at cylinder 0: after the first read, the near
        // request goes before the far one queued earlier.
        dev.submit(&req(1, Op::Read, sector(0.3), 8), Instant::ZERO);
        dev.submit(&req(2, Op::Read, sector(0.95), 8), Instant::ZERO);
        dev.submit(&req(3, Op::Read, sector(0.31), 8), Instant::ZERO);
        let mut order = Vec::new();
        while let Some(t) = dev.next_completion() {
            while let Some(RequestId(id)) = dev.complete(t) {
                order.push(id);
            }
        }
        assert_eq!(order, vec![1, 3, 2]);
    }
}
