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
//!   stream is served as the head reaches it, without repositioning. A
//!   read that misses takes the heads only once the stream has read
//!   `min_read_ahead` sectors past the last request it served (DiskSim's
//!   "Minimum read-ahead (blks)": `disk_buffer_stopable_access` in
//!   disksim_diskctlr.c refuses to stop such a prefetch; SCSI's MINIMUM
//!   PRE-FETCH, caching mode page 08h). With none, a command queued behind
//!   a read stops its read-ahead at once, and interleaved streams find
//!   nothing in their segments. Departures from DiskSim: a read served
//!   whole from another segment goes to the host at once (DiskSim makes it
//!   wait for the minimum too), writes (write-through and write-back)
//!   still stop the read-ahead at once, and the SPTF key ignores it.
//! * **Write cache**: with it on, a write completes once its data has
//!   crossed the bus into the buffer (write data crosses one command after
//!   another). Write-back (destaging) runs on its own timeline whenever
//!   dirty data is buffered and no host command holds the mechanism, in
//!   pieces of at most `max_sectors` taken in C-LOOK order; a piece that
//!   starts where the previous one ended follows it under the head without
//!   repositioning, so a contiguous dirty stream is written at the media
//!   rate while the host keeps filling the buffer (DiskSim's buffer model
//!   overlaps media and bus the same way). Buffer space frees sector by
//!   sector as the head writes; a write that finds the buffer full waits
//!   for that room, then crosses the bus. Write-back ends any read-ahead; a
//!   read miss waits for the piece in progress, then seeks; a flush waits
//!   for everything buffered. With the cache off, a write completes when
//!   it is on the media; the head writes each sector as it passes if its
//!   data has crossed the bus by then (DiskSim's sector-by-sector buffer),
//!   else the write waits for all its data and the next pass.
//! * **Queueing**: depth 1 is plain FIFO; with NCQ the drive picks the
//!   queued command with the shortest positioning time (SPTF), with an age
//!   limit against starvation. A flush is a barrier: commands queued before
//!   it go first, later ones wait for it.
//!
//! The model is lazy: nothing happens between calls. Every call first
//! replays what the drive did on its own since the last call (write-back
//! pieces, read-ahead), then handles the call. The next queued command is
//! chosen when the host command before it completes; when a command
//! arrives while no host command is being served (the drive idle or
//! writing back on its own), it is committed at once so that its
//! completion time is known to [`Device::next_completion`]. Each piece of
//! write-back is one step of that replay, and a write adds at most a
//! piece or two, so the work per request stays O(1) amortised, plus a
//! binary search and a short shift in the dirty set (at most
//! `write_buffer_runs` runs).
//!
//! * **Layout**: DiskSim's spare cylinders between zones, empty zone
//!   fronts, slipped blocks and spare tracks ([`geometry`]).
//! * **Stale data**: a buffered write first settles what the idle
//!   read-ahead brought in, then invalidates the read segments it overlaps:
//!   cut at its first sector, or (`write_empties_segment`, DiskSim's
//!   `disk_buffer_set_segment`) emptied. A write into what a running
//!   read-ahead has read ends the stream in either case: its segment no
//!   longer ends where the head is.
//!
//! Simplifications: the SPTF key treats a read of dirty data as a miss (it is still served
//! from the buffer); a flush waits for everything dirty, not only for what
//! was acknowledged before it.
//!
//! * **Controller**: DiskSim's command overheads per kind (read hit, read
//!   miss, write) and per previous command (after a read, after a write),
//!   its completion overheads, and its read watermark (how much of a read
//!   is buffered before the data starts across the bus); see [`Overheads`]
//!   and [`Watermark`].
//!
//! Validation: replaying DiskSim's validation traces (the real drives'
//! measured service times) on profiles made by `elevator device
//! import-disksim` from DiskSim's own files gives demerits (RMS distance
//! between the two distributions) of 0.291 ms for the HP C3323A (DiskSim's
//! own model: 0.306 ms) and 0.133 ms for the IBM 18ES (DiskSim: 0.135 ms);
//! on both traces 99 % of our service times are within 0.05 ms of DiskSim
//! 4.0's own. `elevator-scenario/tests/validate.rs` holds both under
//! ceilings.
//!
//! Invariants: at most one mechanical operation at a time; whenever a
//! command is queued, a host command is being served and its completion
//! is scheduled; write data never reaches the media before it has crossed
//! the bus; buffered plus incoming data stays within the write buffer
//! (except one oversized write into an otherwise empty buffer); every
//! submitted request is scheduled for completion exactly once; a running
//! read-ahead's segment ends where the stream is (checked after every
//! call with debug assertions on); no allocation after construction.

pub(crate) mod cache;
pub(crate) mod geometry;
pub(crate) mod seek;

use crate::completions::Completions;
use crate::{Device, DeviceStats};
use cache::{DirtySet, Lookup, Segments};
use elevator_core::{Duration, Instant, Op, QueueLimits, Request, RequestId, Sector, SECTOR_SIZE};
use geometry::{Geometry, Place, ZoneSpec};
use seek::Seek;
use std::collections::VecDeque;

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
    /// Added to a write's seek or head switch, in nanoseconds; negative
    /// when the drive settles for writing faster than for reading
    /// (DiskSim's "Add. write settling delay" may be negative:
    /// `dm_seek_time_g1` adds it to the seek, mech_g1.modspec tests no
    /// range). The move never takes less than nothing.
    pub write_settle_ns: i64,
    pub overheads: Overheads,
    /// Host interface rate, bytes per second.
    pub bus_rate: f64,
    pub segments: u32,
    pub segment_sectors: u64,
    pub write_cache: bool,
    pub write_buffer_sectors: u64,
    pub write_buffer_runs: u32,
    /// A write empties every read segment it overlaps (DiskSim), instead
    /// of cutting it at the write's first sector.
    pub write_empties_segment: bool,
    /// When a read's data may start across the bus; `None`: as soon as
    /// its first sector is read.
    pub read_watermark: Option<Watermark>,
    /// Sectors read ahead past a read miss before the next command that
    /// misses may take the heads (DiskSim's "Minimum read-ahead (blks)").
    pub min_read_ahead: u64,
    pub queue_depth: u32,
    pub max_sectors: u32,
    /// A queued command older than this is served next regardless of
    /// position.
    pub age_limit: Duration,
}

/// The controller's command and completion overheads, DiskSim's
/// (`disksim_diskctlr.c`): a command's overhead depends on whether it is a
/// read hit, a read miss or a write, and on whether the command completed
/// before it was a read or a write (`currdisk->lastflags`, READ at
/// start-up); index 0 is "after a read", 1 "after a write". A completion
/// reaches the host `read_completion` / `write_completion` after the
/// data's last sector has crossed the bus (`overhead_complete_read`,
/// `overhead_complete_write`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Overheads {
    pub read_miss: [Duration; 2],
    pub read_hit: [Duration; 2],
    /// A write: DiskSim's "write hit" overheads with write caching on
    /// (`Fast write level` > 0), its "write miss" ones with it off.
    pub write: [Duration; 2],
    pub read_completion: Duration,
    pub write_completion: Duration,
}

/// DiskSim's read watermark (`disksim_diskctlr.c`, `readwater` and
/// `reqwater`): a read's data starts across the bus only once this much
/// of it is in the buffer, `max(1, min(segment, request) × fraction)`
/// sectors (by request size) or `⌈segment × fraction⌉`. At 1.0 by request
/// size (the HP C3323A's "High (read) water mark = 1.0") the whole request
/// is read from the media before the first byte goes to the host.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Watermark {
    pub fraction: f64,
    pub by_request_size: bool,
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
///
/// Invariant: the segment ends at `origin` (everything the stream has
/// read up to its last settling is in it, and nothing else follows), and
/// `origin` and `hold` are at most `limit` ([`Hdd::readahead_consistent`]).
/// `origin_at` may lie after the current instant: settled during a head
/// or cylinder switch, the stream's next sector is still to come.
#[derive(Clone, Copy, Debug)]
struct ReadAhead {
    segment: usize,
    origin: Sector,
    origin_at: Instant,
    limit: Sector,
    /// The stream holds the heads against a command that misses until it
    /// has read up to here (the minimum read-ahead; `origin` or less when
    /// there is none).
    hold: Sector,
}

/// Write data on its way from the host into the buffer: sectors
/// `start..end` are all in at `ready`.
#[derive(Clone, Copy, Debug)]
struct Incoming {
    start: Sector,
    end: Sector,
    ready: Instant,
}

/// One piece of write-back committed to the mechanism: sectors
/// `start..end`, the start of `start` passing the head at `arrive`, the
/// last sector written at `done`. Its buffer space frees sector by sector
/// as the head writes it.
#[derive(Clone, Copy, Debug)]
struct Piece {
    start: Sector,
    end: Sector,
    arrive: Instant,
    done: Instant,
}

/// A simulated hard disk.
#[derive(Debug)]
pub(crate) struct Hdd {
    p: HddParams,
    geo: Geometry,
    /// Seek times by distance, when the profile's curve is a measured
    /// table ([`Seek::times_ns`]).
    seek_ns: Vec<u64>,
    bus_ns_per_sector: f64,
    limits: QueueLimits,
    segments: Segments,
    dirty: DirtySet,
    /// Acknowledged or accepted writes whose data is (or will be) in the
    /// buffer but not yet among the dirty runs, in the order the bus
    /// carries them (so `ready` never decreases). At most two per tag:
    /// those in flight and those that completed at the current instant.
    incoming: VecDeque<Incoming>,
    incoming_sectors: u64,
    /// The latest piece of write-back (done or still on the mechanism).
    piece: Option<Piece>,
    /// When the host interface has finished carrying write data already
    /// accepted.
    bus_free: Instant,
    pending: Vec<Job>,
    next_seq: u64,
    head: Head,
    readahead: Option<ReadAhead>,
    /// When the mechanism finishes what it is doing (a host command, or
    /// the piece of write-back in progress).
    free_at: Instant,
    /// When the host command being served finishes; queued commands are
    /// chosen then.
    host_until: Instant,
    /// 1 when the command completed last was a write (or flush), 0 when a
    /// read: which column of [`Overheads`] the next command pays.
    after_write: usize,
    done: Completions,
}

impl Hdd {
    pub fn new(p: HddParams) -> Self {
        let geo = Geometry::new(&p.zones, p.surfaces, p.rpm, p.cylinder_switch);
        // The last sector's cylinder is the longest seek.
        let seek_ns = p
            .seek
            .times_ns(geo.locate(geo.capacity().saturating_sub(1)).cylinder);
        let limits = QueueLimits {
            rotational: true,
            queue_depth: p.queue_depth,
            max_sectors: p.max_sectors,
            capacity: geo.capacity(),
        };
        let bus_ns_per_sector = SECTOR_SIZE as f64 * 1e9 / p.bus_rate;
        let segments = Segments::new(p.segments, p.segment_sectors, p.write_empties_segment);
        let dirty = DirtySet::new(p.write_buffer_sectors, p.write_buffer_runs as usize);
        let head = Head {
            cylinder: 0,
            head: 0,
            lba: 0,
        };
        Hdd {
            pending: Vec::with_capacity(p.queue_depth as usize),
            incoming: VecDeque::with_capacity(2 * p.queue_depth as usize + 2),
            incoming_sectors: 0,
            piece: None,
            bus_free: Instant::ZERO,
            done: Completions::new(p.queue_depth),
            geo,
            seek_ns,
            bus_ns_per_sector,
            limits,
            segments,
            dirty,
            next_seq: 0,
            head,
            readahead: None,
            free_at: Instant::ZERO,
            host_until: Instant::ZERO,
            after_write: 0,
            p,
        }
    }

    /// Sectors of a `len`-sector read that must be buffered before its
    /// transfer to the host starts (`None`: it streams from the first).
    fn watermark(&self, len: u64) -> Option<u64> {
        let w = self.p.read_watermark?;
        let seg = self.p.segment_sectors;
        Some(if w.by_request_size {
            ((seg.min(len) as f64 * w.fraction) as u64).max(1)
        } else {
            (seg as f64 * w.fraction).ceil() as u64
        })
    }

    fn read_miss_overhead(&self) -> Duration {
        self.p.overheads.read_miss[self.after_write]
    }

    fn read_hit_overhead(&self) -> Duration {
        self.p.overheads.read_hit[self.after_write]
    }

    fn write_overhead(&self) -> Duration {
        self.p.overheads.write[self.after_write]
    }

    /// From the end of `op`'s transfer to its completion at the host.
    fn completion_overhead(&self, op: Op) -> Duration {
        match op {
            Op::Read => self.p.overheads.read_completion,
            _ => self.p.overheads.write_completion,
        }
    }

    fn bus(&self, sectors: u64) -> Duration {
        // Non-negative, so adding a half and truncating rounds.
        Duration((sectors as f64 * self.bus_ns_per_sector + 0.5) as u64)
    }

    fn seek_time(&self, cylinders: u32) -> Duration {
        match self.seek_ns.get(cylinders as usize) {
            Some(&ns) => Duration(ns),
            None => Duration(self.p.seek.time_ns(cylinders)),
        }
    }

    /// When the start of the sector at `place` comes under the head if
    /// positioning from `head` starts at `ready`.
    fn reach_place(&self, head: Head, place: Place, ready: Instant, write: bool) -> Instant {
        let moving = if place.cylinder != head.cylinder {
            Some(self.seek_time(place.cylinder.abs_diff(head.cylinder)))
        } else if place.head != head.head {
            Some(self.p.head_switch)
        } else {
            None
        };
        let t = match moving {
            Some(d) if write => {
                let settled = i128::from(d.0) + i128::from(self.p.write_settle_ns);
                ready + Duration(settled.clamp(0, i128::from(u64::MAX)) as u64)
            }
            Some(d) => ready + d,
            None => ready,
        };
        t + self.geo.rotational_wait(place.angle_ns, t)
    }

    /// Move the heads to `lba` (counting the seek) and return when its
    /// start passes under them.
    fn position(&mut self, lba: Sector, ready: Instant, write: bool) -> Instant {
        self.position_placed(lba, self.geo.locate(lba), ready, write)
    }

    /// [`Hdd::position`] to `lba`, already located at `place` (a job's
    /// start is located once, at submission).
    fn position_placed(
        &mut self,
        lba: Sector,
        place: Place,
        ready: Instant,
        write: bool,
    ) -> Instant {
        let t = self.reach_place(self.head, place, ready, write);
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

    /// Whether the read-ahead stream agrees with its segment (the
    /// invariant on [`ReadAhead`]): a read that the stream seems to cover
    /// is otherwise timed from sectors the stream never reads.
    fn readahead_consistent(&self) -> bool {
        self.readahead.is_none_or(|ra| {
            self.segments.get(ra.segment).end == ra.origin
                && ra.origin <= ra.limit
                && ra.hold <= ra.limit
        })
    }

    /// When a command that misses, arriving at `t`, may take the heads:
    /// once the running stream has read up to its `hold`.
    fn released_at(&self, t: Instant) -> Instant {
        match self.readahead {
            Some(ra) if ra.hold > ra.origin => t.max(self.geo.run_end(
                ra.origin,
                ra.hold - ra.origin,
                ra.origin_at,
            )),
            _ => t,
        }
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
                (place, t + self.read_miss_overhead(), false)
            }
            Op::Write if self.p.write_cache => match self.space_at(job.end - job.start, t) {
                // Room frees up without repositioning.
                Some(at) => return at.since(t),
                None => match destage {
                    Some(place) => (place, t, true),
                    None => return Duration::ZERO,
                },
            },
            Op::Write => (job.place, t + self.write_overhead(), true),
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

    /// A flush from `t`: write back everything buffered, including data
    /// still coming in, then report.
    fn run_flush(&mut self, t: Instant) -> Instant {
        while let Some(s) = self.destage_from(self.free_at.max(t)) {
            self.destage_piece(s);
        }
        self.free_at.max(t) + self.write_overhead()
    }

    fn run_read(&mut self, job: &Job, t: Instant) -> Instant {
        let len = job.end - job.start;
        self.settle_readahead(t);
        let hit_end = t + self.read_hit_overhead() + self.bus(len);
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
                let hold = (job.end + self.p.min_read_ahead).min(limit);
                if let Some(ra) = &mut self.readahead {
                    ra.limit = ra.limit.max(limit);
                    ra.hold = ra.hold.max(hold);
                }
                self.segments.touch(ra.segment);
                let start = match self.watermark(len) {
                    Some(w) if job.start + w > seg.end => {
                        let wet = (job.start + w).min(job.end);
                        let at = self.geo.run_end(ra.origin, wet - ra.origin, ra.origin_at);
                        at.max(t + self.read_hit_overhead())
                    }
                    _ => t + self.read_hit_overhead(),
                };
                return hit_end
                    .max(start + self.bus(len))
                    .max(media_end + self.bus(1));
            }
        }
        let lookup = self.segments.lookup(job.start, job.end);
        if let Lookup::Whole(i) = lookup {
            self.segments.touch(i);
            return hit_end;
        }
        let buffered = |w: &Incoming| w.ready <= t && w.start <= job.start && job.end <= w.end;
        if self.dirty.contains(job.start, job.end) || self.incoming.iter().any(buffered) {
            return hit_end;
        }
        // A miss: the heads leave the stream, once it has read its
        // minimum. A segment holding the front of the request is
        // continued, otherwise the oldest is reused.
        let released = self.released_at(t);
        self.settle_readahead(released);
        self.readahead = None;
        let (segment, seg_start, from) = match lookup {
            Lookup::Front(i) => {
                let s = *self.segments.get(i);
                (i, s.start, s.end)
            }
            _ => (self.segments.take_lru(), job.start, job.start),
        };
        // The command is decoded while the stream finishes its minimum.
        let ready = (t + self.read_miss_overhead()).max(released);
        let arrive = if from == job.start {
            self.position_placed(from, job.place, ready, false)
        } else {
            self.position(from, ready, false)
        };
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
            hold: (job.end + self.p.min_read_ahead).min(limit),
        });
        // Sectors go to the host as they come off the media, no faster than
        // the interface allows: the slower of the two sets the end.
        let streamed = match self.watermark(len) {
            None => arrive + self.bus(job.end - from),
            Some(w) => {
                // The transfer starts once the watermark's sectors are in.
                let wet = (job.start + w).min(job.end).max(from);
                let at = self.geo.run_end(from, wet - from, arrive);
                at.max(ready) + self.bus(len)
            }
        };
        (ready + self.bus(len))
            .max(streamed)
            .max(media_end + self.bus(1))
    }

    fn run_write_through(&mut self, job: &Job, t: Instant) -> Instant {
        let len = job.end - job.start;
        self.settle_readahead(t);
        self.readahead = None;
        self.segments.invalidate(job.start, job.end, None);
        let ready = t + self.write_overhead();
        let mut arrive = self.position_placed(job.start, job.place, ready, true);
        // A sector cannot be written before the host has sent it. The head
        // writes each sector as it passes if its data is in by then, as
        // DiskSim does sector by sector (`disk_buffer_sector_done`,
        // "Calc sector by sector"): with both rates steady, the first and
        // the last sector are the ones to check. Otherwise the write waits
        // for all its data and the next pass.
        let data_in = ready + self.bus(len);
        let first_in = ready + self.bus(1);
        let last_under_head = self.geo.run_start(job.start, len.saturating_sub(1), arrive);
        if first_in > arrive || data_in > last_under_head {
            let angle = job.place.angle_ns;
            arrive = data_in + self.geo.rotational_wait(angle, data_in);
        }
        let end = self.geo.run_end(job.start, len, arrive);
        self.park_after(job.end);
        end
    }

    /// A write that found the buffer full, taken up by the drive when the
    /// host side is free at `c`: it waits until the write-back in progress
    /// (continued as needed) has freed room for it, then crosses the bus.
    fn run_blocked_write(&mut self, job: &Job, c: Instant) -> Instant {
        let len = job.end - job.start;
        let mut t = c;
        let room = loop {
            if let Some(at) = self.space_at(len, t) {
                break at;
            }
            let Some(s) = self.destage_from(self.free_at.max(t)) else {
                break t;
            };
            self.destage_piece(s);
            t = t.max(s);
        };
        let from = room.max(job.arrival + self.write_overhead());
        self.take_in(job.start, job.end, from)
    }

    /// The earliest instant from `t` at which `len` more sectors fit in
    /// the write-back buffer, counting the piece on the mechanism as
    /// freeing its sectors as the head writes them (its run slot frees
    /// when it is done); `None` if more must be written back first. With
    /// nothing else buffered a write goes in whatever its size (after the
    /// piece in progress).
    fn space_at(&self, len: u64, t: Instant) -> Option<Instant> {
        let (cap, max_runs) = (self.dirty.max_sectors(), self.dirty.max_runs());
        let other = self.dirty.sectors() + self.incoming_sectors;
        let runs = self.dirty.runs() + self.incoming.len();
        let alone = other == 0 && runs == 0;
        if !alone && (runs >= max_runs || other + len > cap) {
            return None;
        }
        let Some(p) = self.piece.filter(|p| p.done > t) else {
            return Some(t);
        };
        if runs + 1 >= max_runs || other + len > cap {
            return Some(p.done);
        }
        // Sectors of the piece that must be on the media first.
        let need = (other + len + (p.end - p.start)).saturating_sub(cap);
        if need == 0 {
            return Some(t);
        }
        Some(t.max(self.geo.run_end(p.start, need, p.arrive)))
    }

    /// Carry `start..end` from the host into the buffer, starting no
    /// earlier than `from` and after the write data already accepted;
    /// returns when it is all in (the write's completion).
    fn take_in(&mut self, start: Sector, end: Sector, from: Instant) -> Instant {
        let ready = from.max(self.bus_free) + self.bus(end - start);
        self.bus_free = ready;
        let watch = self.readahead.map(|ra| ra.segment);
        if self.segments.invalidate(start, end, watch) {
            // The write lands in what the running stream has read (its
            // segment ends at the stream's position), so its segment is
            // emptied or cut at `start`, behind the stream. Going on, the
            // stream would either fill a segment with a hole or, settled,
            // extend the cut segment back over the stale sectors: it ends
            // here, where the last settle left the heads.
            self.readahead = None;
        }
        if end > start {
            debug_assert!(self.incoming.len() < self.incoming.capacity());
            self.incoming.push_back(Incoming { start, end, ready });
            self.incoming_sectors += end - start;
        }
        ready
    }

    /// Move the write data that is in the buffer by `t` among the dirty
    /// runs.
    fn drain_incoming(&mut self, t: Instant) {
        while let Some(w) = self.incoming.front().copied() {
            if w.ready > t {
                return;
            }
            self.incoming.pop_front();
            self.incoming_sectors -= w.end - w.start;
            self.dirty.insert(w.start, w.end);
        }
    }

    /// When a mechanism free from `from` can start writing back: at once
    /// if dirty data is buffered, else when the next write's data is in;
    /// `None` with nothing to write back.
    fn destage_from(&self, from: Instant) -> Option<Instant> {
        if !self.dirty.is_empty() {
            return Some(from);
        }
        self.incoming.front().map(|w| from.max(w.ready))
    }

    /// Commit the next piece of write-back (at most `max_sectors` of the
    /// next dirty run in C-LOOK order) to the mechanism, free at `s`. A
    /// piece that starts where the previous one ended, with nothing in
    /// between, continues under the head without repositioning, as the
    /// read-ahead stream does; any other pays seek, settle and rotation.
    fn destage_piece(&mut self, s: Instant) {
        self.drain_incoming(s);
        self.settle_readahead(s);
        self.readahead = None;
        let follows = self.piece.filter(|p| p.done == s && self.head.lba == p.end);
        let max = u64::from(self.p.max_sectors);
        let Some((start, end)) = self.dirty.take_next(self.head.lba, max) else {
            return;
        };
        let arrive = match follows {
            Some(p) if p.end == start => self.geo.run_start(p.start, p.end - p.start, p.arrive),
            _ => self.position(start, s, true),
        };
        let done = self.geo.run_end(start, end - start, arrive);
        self.park_after(end);
        self.piece = Some(Piece {
            start,
            end,
            arrive,
            done,
        });
        self.free_at = done;
    }

    /// Start `pending[i]`, taken up when the host side is free at `c`, and
    /// schedule its completion.
    fn start(&mut self, i: usize, c: Instant) {
        let job = self.pending.swap_remove(i);
        let t = c.max(self.free_at);
        let end = match job.op {
            // Waits on the write-back, which goes on by itself.
            Op::Write if self.p.write_cache => self.run_blocked_write(&job, c),
            op => {
                let end = match op {
                    Op::Read => self.run_read(&job, t),
                    Op::Write => self.run_write_through(&job, t),
                    Op::Flush => self.run_flush(t),
                };
                self.free_at = end;
                end
            }
        };
        // The host side stays busy until the completion is sent.
        let end = end + self.completion_overhead(job.op);
        self.after_write = usize::from(job.op != Op::Read);
        self.host_until = end;
        self.done.schedule(job.id, end);
    }

    /// Replay what the drive did up to `now`: write back whenever dirty
    /// data is buffered and the mechanism is free, piece after piece, and
    /// take up queued commands as the host side frees.
    fn advance(&mut self, now: Instant) {
        loop {
            // Write-back runs until a queued command can be taken up.
            let limit = if self.pending.is_empty() {
                now
            } else {
                self.host_until.min(now)
            };
            if let Some(s) = self.destage_from(self.free_at) {
                if s < limit {
                    self.destage_piece(s);
                    continue;
                }
            }
            if !self.pending.is_empty() && self.host_until <= now {
                let c = self.host_until;
                let i = self.choose(c.max(self.free_at));
                self.start(i, c);
                continue;
            }
            break;
        }
        // Nothing is written back before the mechanism frees, so data in
        // by then can join the dirty runs now.
        self.drain_incoming(self.free_at);
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
        if job.op == Op::Write
            && self.p.write_cache
            && !blocked_writes
            && self.space_at(len, now) == Some(now)
        {
            // Write-back: done once the data is in the buffer; it is
            // written back from there once it is in. What the read-ahead
            // brought in while the drive was idle is settled first, so
            // that the write invalidates it (DiskSim never hits on data
            // older than a write to it: `disk_buffer_check_segments`).
            self.settle_readahead(now);
            let acked = self.take_in(start, end, now + self.write_overhead());
            self.after_write = 1;
            self.done
                .schedule(job.id, acked + self.completion_overhead(Op::Write));
            debug_assert!(self.readahead_consistent(), "{:?}", self.readahead);
            return;
        }
        self.pending.push(job);
        if self.host_until <= now {
            // No host command is being served (the mechanism is idle, or
            // writing back on its own): take this one up now.
            debug_assert_eq!(self.pending.len(), 1);
            self.start(0, now);
        }
        debug_assert!(self.readahead_consistent(), "{:?}", self.readahead);
    }

    fn next_completion(&self) -> Option<Instant> {
        self.done.next_due()
    }

    fn complete(&mut self, now: Instant) -> Option<RequestId> {
        self.advance(now);
        debug_assert!(self.readahead_consistent(), "{:?}", self.readahead);
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
    fn with_a_full_read_watermark_the_transfer_starts_once_the_request_is_read() {
        // A fast bus: the read ends when its last sector leaves the media.
        let mut fast = profile("ide-2003", |t| {
            t.replace("transfer_mb_per_s = 100.0", "transfer_mb_per_s = 100000.0")
        });
        let r = req(1, Op::Read, 3_000_000, 64);
        let media_end = serve(fast.as_mut(), &r, Instant::ZERO);
        // A 3.5 MB/s bus (the HP C3323A's): streaming, the bus is the
        // bottleneck from the first sector; with DiskSim's "High (read)
        // water mark = 1" by request size, it starts when the media is done.
        let slow = |t: String| t.replace("transfer_mb_per_s = 100.0", "transfer_mb_per_s = 3.5");
        let mut streaming = profile("ide-2003", slow);
        let mut watermark = profile("ide-2003", |t| {
            slow(t).replace("[cache]\n", "[cache]\nread_watermark = 1.0\n")
        });
        let streamed = serve(streaming.as_mut(), &r, Instant::ZERO);
        let waited = serve(watermark.as_mut(), &r, Instant::ZERO);
        let bus_ns = 64.0 * 512.0 * 1e9 / 3.5e6;
        let expected = media_end.since(Instant::ZERO).0 as f64 + bus_ns;
        assert!((waited.since(Instant::ZERO).0 as f64 - expected).abs() < 1_000.0);
        assert!(streamed < waited);
    }

    #[test]
    fn overheads_follow_the_previous_command_and_completion_is_delayed() {
        let after_write = |t: String| {
            t.replace("write_cache = true", "write_cache = false")
                .replace(
                    "[controller]\n",
                    "[controller]\nread_miss_overhead_after_write_ms = 50.0\n",
                )
        };
        let mut dev = profile("ide-2003", after_write);
        let far = req(2, Op::Read, 90_000_000, 8);
        let t = serve(dev.as_mut(), &req(1, Op::Read, 1_000, 8), Instant::ZERO);
        let after_read = serve(dev.as_mut(), &far, t).since(t).as_millis_f64();
        let t = serve(
            dev.as_mut(),
            &req(3, Op::Write, 1_000, 8),
            Instant::ZERO + ms(100),
        );
        let after_a_write = serve(dev.as_mut(), &far, t).since(t).as_millis_f64();
        // A full seek and a revolution are under 30 ms on this disk.
        assert!(after_read < 30.0, "{after_read}");
        assert!(after_a_write >= 50.0, "{after_a_write}");

        // A read's completion reaches the host `read_completion_ms` after
        // its data: everything else is unchanged.
        let mut plain = profile("ide-2003", |t| t);
        let mut slow_ack = profile("ide-2003", |t| {
            t.replace("[controller]\n", "[controller]\nread_completion_ms = 2.0\n")
        });
        let r = req(4, Op::Read, 5_000_000, 16);
        let a = serve(plain.as_mut(), &r, Instant::ZERO);
        let b = serve(slow_ack.as_mut(), &r, Instant::ZERO);
        assert_eq!(b.since(a), ms(2));
    }

    fn ms(n: u64) -> elevator_core::Duration {
        elevator_core::Duration::from_millis(n)
    }

    #[test]
    fn a_write_invalidates_what_the_idle_read_ahead_brought_in() {
        // A read, then a second of idleness: the read-ahead fills its
        // segment (384 sectors past the read). A buffered write into that
        // range arrives; a read of the old data after the written sectors
        // must go to the media. With DiskSim's rule the whole segment
        // goes, so the sectors before the write are misses too.
        let probe = |empties: bool, sector: u64| {
            let mut dev = profile("ide-2003", |t| {
                t.replace(
                    "write_cache = true",
                    &format!("write_cache = true\nwrite_empties_segment = {empties}"),
                )
            });
            let base = 2_000_000;
            let idle = elevator_core::Duration::from_secs(1);
            let t = serve(dev.as_mut(), &req(1, Op::Read, base, 8), Instant::ZERO) + idle;
            let t = serve(dev.as_mut(), &req(2, Op::Write, base + 100, 8), t) + idle;
            let done = serve(dev.as_mut(), &req(3, Op::Read, base + sector, 8), t);
            done.since(t).as_millis_f64()
        };
        // A hit costs the hit overhead and the bus (0.14 ms here); a miss
        // at least the 0.3 ms miss overhead.
        let hit = |ms: f64| ms < 0.2;
        assert!(!hit(probe(false, 200)), "stale read-ahead data served");
        assert!(hit(probe(false, 50)));
        assert!(!hit(probe(true, 200)));
        assert!(!hit(probe(true, 50)));
    }

    #[test]
    fn a_write_behind_the_running_read_ahead_ends_it() {
        // A write-back write lands in sectors the running read-ahead has
        // already read (sata-hdd: NCQ, writes cut segments), so the cut
        // segment ends behind the head. Left running, the stream was
        // inconsistent with its segment: a read between the cut and the
        // stream's position was timed from sectors the stream never reads
        // again (an overflow with debug assertions: swarm runs 2843 and
        // 2992), or, once settled, the segment grew back over the written
        // sectors and served the stale data as a hit. Both while the
        // stream is between a track's end and the next sector (a switch)
        // and in mid-track.
        for in_gap in [true, false] {
            let text = include_str!("../profiles/sata-hdd.toml");
            let mut dev = crate::profile::parse_hdd("sata-hdd", text).unwrap();
            let read_done = serve(&mut dev, &req(1, Op::Read, 2_000_000, 8), Instant::ZERO);
            let ra = dev.readahead.expect("a read leaves the head reading ahead");
            // The instant the stream has read `k` sectors, and when the
            // next one starts under the head.
            let read_by = |k| dev.geo.run_end(ra.origin, k, ra.origin_at);
            let next_at = |k| dev.geo.run_start(ra.origin, k, ra.origin_at);
            let k = (128..ra.limit - ra.origin)
                .find(|&k| read_by(k) > read_done && (next_at(k) > read_by(k)) == in_gap)
                .expect("a track boundary within one segment of the read");
            let (now, pos) = (read_by(k), ra.origin + k);
            dev.submit(&req(2, Op::Write, pos - 64, 32), now);
            assert!(dev.readahead.is_none(), "{:?}", dev.readahead);
            // Between the write and the stream's position: in no segment.
            // Taken up at once, before any write-back.
            let stale = req(3, Op::Read, pos - 32, 24);
            dev.submit(&stale, now);
            let mut read_end = None;
            while let Some(due) = dev.next_completion() {
                if dev.complete(due) == Some(stale.id) {
                    read_end = Some(due);
                }
            }
            let served = read_end.expect("the read completes").since(now);
            // A hit costs 0.05 ms and 24 sectors over the bus (0.04 ms),
            // a miss at least its 0.15 ms overhead.
            assert!(
                served > elevator_core::Duration(150_000),
                "in gap {in_gap}: {served:?}"
            );
        }
    }

    #[test]
    fn a_segment_cut_under_the_running_read_ahead_serves_only_its_front() {
        // As `a_write_behind_the_running_read_ahead_ends_it`, on the
        // 2003 disk without NCQ: the write arrives 0.5 ms after the read,
        // while the read-ahead streams (some 50 sectors past the read by
        // then, past the written ones), and cuts the segment. A read just
        // past the written sectors, which the stream had read, misses: the
        // stream ended and did not grow the segment back on its next
        // settle. The sectors before the write still hit.
        let mut dev = profile("ide-2003", |t| t);
        let base = 2_000_000;
        let streaming = elevator_core::Duration::from_micros(500);
        let t = serve(dev.as_mut(), &req(1, Op::Read, base, 8), Instant::ZERO) + streaming;
        let t = serve(dev.as_mut(), &req(2, Op::Write, base + 10, 8), t);
        let done = serve(dev.as_mut(), &req(3, Op::Read, base + 20, 8), t);
        // A hit costs the hit overhead and the bus (0.14 ms); a miss at
        // least the 0.3 ms miss overhead.
        let took = done.since(t).as_millis_f64();
        assert!(
            took > 0.3,
            "read of the cut range served from the buffer in {took} ms"
        );
        // Before the written sectors the segment still serves (once the
        // write is on the media: a hit waits for the piece in progress).
        let t = done + elevator_core::Duration::from_secs(1);
        let before = serve(dev.as_mut(), &req(4, Op::Read, base + 2, 4), t);
        let took = before.since(t).as_millis_f64();
        assert!(took < 0.2, "read before the cut missed: {took} ms");
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
    fn without_write_cache_sectors_are_written_as_their_data_arrives() {
        // A slow bus (3.5 MB/s, 0.146 ms a sector) and no write cache. A
        // write right behind the previous one finds its first sector just
        // gone: it comes round a revolution (8.33 ms) later. By then the
        // first sectors of the 60 are in, though not all (8.78 ms of bus):
        // the head writes each as it passes and the last one's data is in
        // before the head reaches it, as DiskSim writes sector by sector.
        // Waiting for all 60 first would cost another revolution.
        let mut dev = profile("ide-2003", |t| {
            t.replace("write_cache = true", "write_cache = false")
                .replace("transfer_mb_per_s = 100.0", "transfer_mb_per_s = 3.5")
        });
        let t = serve(dev.as_mut(), &req(1, Op::Write, 0, 8), Instant::ZERO);
        let done = serve(dev.as_mut(), &req(2, Op::Write, 8, 60), t);
        let ms = done.since(t).as_millis_f64();
        // A revolution, then 60 of the track's 845 sectors (0.6 ms).
        assert!((8.5..10.0).contains(&ms), "{ms}");
    }

    #[test]
    fn a_read_during_streaming_write_back_waits_for_one_piece_then_seeks() {
        let mut dev = profile("ide-2003", |t| t);
        let base = 40_000_000;
        let mut now = Instant::ZERO;
        let mut services = Vec::new();
        // 40 sequential 128 KiB writes at depth 1: the 512 KiB buffer
        // fills, then each write waits for write-back to free room.
        for k in 0..40 {
            let done = serve(dev.as_mut(), &req(k, Op::Write, base + k * 256, 256), now);
            services.push(done.since(now).as_millis_f64());
            now = done;
        }
        // In steady state a write takes what the media needs for 128 KiB
        // (about 3.5 ms here), not a lost revolution plus the transfer.
        let steady = &services[10..];
        let mean = steady.iter().sum::<f64>() / steady.len() as f64;
        println!("streaming 128 KiB write-back writes: {mean:.2} ms each");
        assert!((2.5..4.5).contains(&mean), "{services:?}");
        // A read miss far away now: it waits for the piece of write-back
        // in progress (at most 128 KiB, ~3.5 ms), then seeks.
        let read = serve(dev.as_mut(), &req(100, Op::Read, 120_000_000, 8), now);
        let read_ms = read.since(now).as_millis_f64();
        println!("a read miss during write-back: {read_ms:.2} ms");
        assert!((3.0..32.0).contains(&read_ms), "{read_ms}");
        // The buffer still holds most of 512 KiB: a flush right after the
        // read pays for seeking back and writing it.
        let flush = serve(dev.as_mut(), &req(101, Op::Flush, 0, 0), read);
        let flush_ms = flush.since(read).as_millis_f64();
        println!("flush after the read: {flush_ms:.2} ms");
        assert!(flush_ms > 8.0, "{flush_ms}");
        let idle = flush + elevator_core::Duration::from_secs(1);
        let again = serve(dev.as_mut(), &req(102, Op::Flush, 0, 0), idle);
        assert!(again.since(idle).as_millis_f64() < 0.1);
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

    #[test]
    fn a_negative_write_settle_shortens_a_writes_move_never_below_nothing() {
        // DiskSim adds "Add. write settling delay" to a write's seek or
        // head switch, negative values included (dm_seek_time_g1).
        let hdd = |settle: &str| {
            let text = include_str!("../profiles/ide-2003.toml").replace(
                "write_settle_ms = 1.0",
                &format!("write_settle_ms = {settle}"),
            );
            crate::profile::parse_hdd("ide-2003", &text).unwrap()
        };
        let dev = hdd("-0.2");
        let from = super::Head {
            cylinder: 0,
            head: 0,
            lba: 0,
        };
        let ready = Instant::ZERO + ms(3);
        let far = dev.geo.locate(40_000_000);
        let settle = elevator_core::Duration(200_000);
        // A write that seeks arrives as a read started 0.2 ms earlier.
        assert_eq!(
            dev.reach_place(from, far, ready, true),
            dev.reach_place(from, far, ready - settle, false)
        );
        // A head switch (1.4 ms) less 2 ms of settling takes no time: the
        // write waits only for its sector to come round.
        let dev = hdd("-2.0");
        let other_head = dev.geo.locate(1_000);
        assert_ne!(other_head.head, from.head);
        assert_eq!(other_head.cylinder, from.cylinder);
        assert_eq!(
            dev.reach_place(from, other_head, ready, true),
            ready + dev.geo.rotational_wait(other_head.angle_ns, ready)
        );
        // And a profile says how far it may go.
        let text = include_str!("../profiles/ide-2003.toml")
            .replace("write_settle_ms = 1.0", "write_settle_ms = -25.0");
        let e = crate::profile::parse_hdd("ide-2003", &text).unwrap_err();
        assert!(e.to_string().contains("write_settle_ms"), "{e}");
    }

    #[test]
    fn interleaved_streams_keep_their_read_ahead_while_segments_outnumber_them() {
        // DiskSim's disk_buffer_select_read_segment: a miss takes an empty
        // segment, else the least recently used clean one; a segment the
        // head left keeps what it read ahead. With `streams` readers taking
        // 16 sectors in turn, one at a time, each miss reads 64 sectors
        // ahead (the minimum) before the next command may seek away, so a
        // stream's next request is in its segment if the segment survived
        // the round: with 8 segments up to 8 streams hit, a 9th recycles
        // every segment before its owner comes back.
        let hits = |streams: u64| {
            let mut dev = profile("ide-2003", |t| t);
            let mut now = Instant::ZERO;
            let mut hits = 0;
            for round in 0..4u64 {
                for s in 0..streams {
                    let r = req(round * 100 + s, Op::Read, s * 2_000_000 + round * 16, 16);
                    let done = serve(dev.as_mut(), &r, now);
                    // A hit: 0.1 ms of overhead and 16 sectors of bus.
                    if round > 0 && done.since(now) < ms(1) {
                        hits += 1;
                    }
                    now = done;
                }
            }
            hits
        };
        assert_eq!(hits(8), 3 * 8);
        assert_eq!(hits(9), 0);
    }

    /// ide-2003 with `min_read_ahead_sectors` replaced by `n`.
    fn min_read_ahead(n: u64) -> Box<dyn Device> {
        profile("ide-2003", |t| {
            let kept: Vec<&str> = t
                .lines()
                .filter(|l| !l.starts_with("min_read_ahead_sectors"))
                .collect();
            kept.join("\n") + &format!("\nmin_read_ahead_sectors = {n}\n")
        })
    }

    #[test]
    fn a_miss_waits_until_the_stream_has_read_its_minimum() {
        let a = req(1, Op::Read, 2_000_000, 8);
        let far = req(2, Op::Read, 40_000_000, 8);
        // The stream's next 64 sectors, then one sector more.
        let next = req(3, Op::Read, 2_000_008, 64);
        let longer = req(4, Op::Read, 2_000_008, 65);
        // A hit: 0.1 ms of command overhead and 64 sectors over a 100 MB/s bus.
        let hit = elevator_core::Duration(100_000 + 64 * 512 * 10);
        for (min, expect_hit) in [(64, true), (0, false)] {
            let mut dev = min_read_ahead(min);
            // The far read arrives the instant the first completes, as the
            // next queued command does: only the minimum is read ahead.
            let t = serve(dev.as_mut(), &a, Instant::ZERO);
            let t = serve(dev.as_mut(), &far, t);
            let mut probe = min_read_ahead(min);
            let u = serve(probe.as_mut(), &a, Instant::ZERO);
            let u = serve(probe.as_mut(), &far, u);
            let served = serve(dev.as_mut(), &next, t).since(t);
            assert_eq!(served == hit, expect_hit, "min {min}: {served:?}");
            // One sector past the minimum is not in the buffer: the heads
            // go back for it.
            let beyond = serve(probe.as_mut(), &longer, u).since(u);
            assert!(beyond > ms(1), "min {min}: {beyond:?}");
        }
    }
}
