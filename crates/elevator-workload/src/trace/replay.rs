//! Replaying a block trace through the simulator.
//!
//! The trace's processes become tasks (one queue each in a per-task
//! policy), in order of first appearance from `first_task` on. Two modes:
//!
//! - **Open loop**: every request is issued at its recorded time (times
//!   `time_scale`), whatever happened to the ones before it. In simulation
//!   each request is submitted exactly at its time, so the drift the
//!   report prints (submission minus schedule) is zero by construction;
//!   fio's replay of the same log on a real machine falls 2–100 % behind
//!   (fio issues #772, #1537). Requests still wait for a block-layer slot
//!   (`nr_requests`) as they would in the kernel; that wait is part of
//!   their latency, not drift.
//! - **Closed loop**: each process has at most one request outstanding;
//!   its next request is issued its think time (times `think_scale`) after
//!   the previous one completed, as S's start-up replayer does. The think
//!   time is the recorded gap from the previous request's end to this
//!   one's issue: its recorded issue time plus its measured service time
//!   where the trace has one (DiskSim's validation traces, MSR's response
//!   times; exactly DiskSim's own closed loop for its validation traces),
//!   else the gap between the two issue times. A process's first request
//!   goes out at its recorded time.
//!
//! Streaming: the reader is pulled as the replay goes. The open loop holds
//! one record ahead; the closed loop holds at most [`LOOKAHEAD`] records
//! read ahead for processes that are behind the trace (a process whose next
//! request lies further ahead waits until the others catch up).
//!
//! Requests past the device's end wrap around onto it (counted in
//! [`ReplaySummary::wrapped`]); requests over the device's largest size
//! go out in pieces, as the kernel splits a bio, and complete when the
//! last piece does. The trace carries no I/O priorities or groups: every
//! process is best-effort in the root group.
//!
//! Invariant: every record read is issued exactly once and completes
//! exactly once; a reader error ends the replay and is kept for the caller.

use super::read::{TraceReader, TraceRecord};
use crate::startup::TraceError;
use elevator_core::{BlockIo, Completion, Io, Workload};
use elevator_core::{Duration, GroupId, Instant, IoPrio, Op, RequestId, TaskId, SECTOR_SIZE};
use elevator_metrics::{JobStats, LatencyStats};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::io::BufRead;

/// Records the closed loop may read ahead of the slowest process.
pub const LOOKAHEAD: usize = 65_536;

/// Timer token of the open loop's next arrival (process tokens are below).
const WAKE_ARRIVAL: u64 = 1 << 40;

/// How requests are paced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReplayMode {
    /// Each request at its recorded time × `time_scale`.
    Open { time_scale: f64 },
    /// Each process's next request its recorded think time × `think_scale`
    /// after its previous one completed.
    Closed { think_scale: f64 },
}

impl ReplayMode {
    pub fn describe(&self) -> String {
        match self {
            ReplayMode::Open { time_scale } => format!("open loop, time scale {time_scale}"),
            ReplayMode::Closed { think_scale } => {
                format!("closed loop, think scale {think_scale}")
            }
        }
    }
}

/// What the replay did, beyond per-process statistics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplaySummary {
    pub records: u64,
    /// Requests that went past the device's end and were wrapped onto it.
    pub wrapped: u64,
    /// Requests split into pieces for the device's largest size.
    pub split: u64,
    /// Open loop: largest and total lateness of a submission against its
    /// scheduled time.
    pub max_drift: Duration,
    pub total_drift: Duration,
    /// Recorded time of the last request (unscaled).
    pub trace_span: Duration,
    /// Sum of measured service times, and how many records had one.
    pub measured_service: Duration,
    pub measured: u64,
    /// Request pieces the device failed (a faulty device); each still
    /// counts as completed.
    pub errors: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing outstanding, no timer: waits for its next record.
    Idle,
    /// A timer for its next request is armed.
    Thinking,
    /// A request is outstanding (closed loop).
    Busy,
    /// Issued its last request and will issue no more.
    Exited,
}

#[derive(Debug)]
struct Process {
    task: TaskId,
    queue: VecDeque<TraceRecord>,
    state: State,
    /// Recorded end of its previous request (issue + measured service).
    last_end: Option<Duration>,
    /// Requests outstanding.
    outstanding: u32,
    stats: JobStats,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    process: u32,
    pieces: u32,
    submitted: Instant,
    read: bool,
    bytes: u64,
}

/// A trace replay: one task per traced process. (Not a [`crate::Part`]:
/// its tasks appear as the trace is read, so it runs alone.)
#[derive(Debug)]
pub struct TraceReplay<R> {
    reader: TraceReader<R>,
    mode: ReplayMode,
    capacity: u64,
    max_sectors: u32,
    first_task: u32,
    /// Open loop: the next record, read but not yet issued.
    next: Option<TraceRecord>,
    /// Closed loop: records read ahead into process queues.
    buffered: usize,
    eof: bool,
    error: Option<TraceError>,
    processes: Vec<Process>,
    slots: Vec<Slot>,
    free_slots: Vec<usize>,
    pieces: FxHashMap<RequestId, usize>,
    outstanding: u64,
    total: JobStats,
    reads: LatencyStats,
    summary: ReplaySummary,
    done: bool,
}

fn scale(d: Duration, factor: f64) -> Duration {
    if factor == 1.0 {
        d
    } else {
        Duration((d.nanos() as f64 * factor).round() as u64)
    }
}

impl<R: BufRead> TraceReplay<R> {
    /// Replay what `reader` reads onto a device of `capacity` sectors
    /// taking requests of at most `max_sectors`, as tasks `first_task ..`.
    ///
    /// # Panics
    /// If a scale factor is negative or not finite (callers check flags).
    pub fn new(
        reader: TraceReader<R>,
        mode: ReplayMode,
        capacity: u64,
        max_sectors: u32,
        first_task: u32,
    ) -> Self {
        let factor = match mode {
            ReplayMode::Open { time_scale } => time_scale,
            ReplayMode::Closed { think_scale } => think_scale,
        };
        assert!(
            factor.is_finite() && factor >= 0.0,
            "scale {factor} is not a finite non-negative number"
        );
        TraceReplay {
            reader,
            mode,
            capacity: capacity.max(1),
            max_sectors: max_sectors.max(1),
            first_task,
            next: None,
            buffered: 0,
            eof: false,
            error: None,
            processes: Vec::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            pieces: FxHashMap::default(),
            outstanding: 0,
            total: JobStats::new("total"),
            reads: LatencyStats::new(),
            summary: ReplaySummary::default(),
            done: false,
        }
    }

    /// The reader's error, if the trace stopped parsing part way.
    pub fn error(&self) -> Option<&TraceError> {
        self.error.as_ref()
    }

    pub fn summary(&self) -> &ReplaySummary {
        &self.summary
    }

    /// Every process's statistics, then the total.
    pub fn process_stats(&self) -> Vec<&JobStats> {
        self.processes.iter().map(|p| &p.stats).collect()
    }

    pub fn total(&self) -> &JobStats {
        &self.total
    }

    /// Latency of every read, all processes together.
    pub fn read_latency(&self) -> &LatencyStats {
        &self.reads
    }

    pub fn reader(&self) -> &TraceReader<R> {
        &self.reader
    }

    /// The next record from the trace, registering its process.
    fn read(&mut self) -> Option<TraceRecord> {
        if self.eof {
            return None;
        }
        match self.reader.next() {
            Some(Ok(r)) => {
                while self.processes.len() <= r.process as usize {
                    let i = self.processes.len();
                    let name = self.reader.processes()[i].clone();
                    self.processes.push(Process {
                        task: TaskId(self.first_task + i as u32),
                        queue: VecDeque::new(),
                        state: State::Idle,
                        last_end: None,
                        outstanding: 0,
                        stats: JobStats::new(name),
                    });
                }
                self.summary.records += 1;
                self.summary.trace_span = r.time;
                if let Some(s) = r.service {
                    self.summary.measured_service += s;
                    self.summary.measured += 1;
                }
                Some(r)
            }
            Some(Err(e)) => {
                self.error = Some(e);
                self.eof = true;
                None
            }
            None => {
                self.eof = true;
                None
            }
        }
    }

    fn issue(&mut self, r: &TraceRecord, scheduled: Instant, io: &mut Io<'_>) {
        let now = io.now();
        let drift = now.since(scheduled);
        self.summary.max_drift = self.summary.max_drift.max(drift);
        self.summary.total_drift += drift;
        let mut sectors = u64::from(r.sectors).min(self.capacity);
        let mut sector = r.sector;
        if sector + sectors > self.capacity {
            sector %= self.capacity - sectors + 1;
            self.summary.wrapped += 1;
        }
        let pieces = sectors.div_ceil(u64::from(self.max_sectors)) as u32;
        if pieces > 1 {
            self.summary.split += 1;
        }
        let slot = Slot {
            process: r.process,
            pieces,
            submitted: now,
            read: r.op == Op::Read,
            bytes: sectors * SECTOR_SIZE,
        };
        let index = match self.free_slots.pop() {
            Some(i) => {
                self.slots[i] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
        };
        let p = &mut self.processes[r.process as usize];
        p.outstanding += 1;
        p.last_end = Some(r.time + r.service.unwrap_or(Duration::ZERO));
        if p.stats.started.is_none() {
            p.stats.started = Some(now);
        }
        if self.total.started.is_none() {
            self.total.started = Some(now);
        }
        let task = p.task;
        self.outstanding += 1;
        while sectors > 0 {
            let n = sectors.min(u64::from(self.max_sectors));
            let id = io.submit(BlockIo {
                op: r.op,
                sync: r.sync,
                sector,
                sectors: n as u32,
                task,
                prio: IoPrio::default(),
                group: GroupId::ROOT,
                meta: r.meta,
                // A traced sync write is taken as fsync's WRITE_SYNC
                // (REQ_NOIDLE); traces do not say whether it was O_DIRECT.
                noidle: r.op == elevator_core::Op::Write && r.sync,
            });
            self.pieces.insert(id, index);
            sector += n;
            sectors -= n;
        }
    }

    // ------------------------------------------------------------ open loop

    fn open_scale(&self) -> f64 {
        match self.mode {
            ReplayMode::Open { time_scale } => time_scale,
            ReplayMode::Closed { .. } => 1.0,
        }
    }

    fn arrivals(&mut self, io: &mut Io<'_>) {
        let factor = self.open_scale();
        loop {
            if self.next.is_none() {
                self.next = self.read();
            }
            let Some(r) = self.next.take() else {
                return;
            };
            let at = Instant::ZERO + scale(r.time, factor);
            if at > io.now() {
                io.wake_at(at, WAKE_ARRIVAL);
                self.next = Some(r);
                return;
            }
            self.issue(&r, at, io);
        }
    }

    // ---------------------------------------------------------- closed loop

    fn think_scale(&self) -> f64 {
        match self.mode {
            ReplayMode::Closed { think_scale } => think_scale,
            ReplayMode::Open { .. } => 1.0,
        }
    }

    /// Read ahead into process queues, waking idle processes that get work.
    fn refill(&mut self, io: &mut Io<'_>) {
        while self.buffered < LOOKAHEAD {
            let Some(r) = self.read() else { break };
            let p = r.process as usize;
            self.processes[p].queue.push_back(r);
            self.buffered += 1;
            if self.processes[p].state == State::Idle {
                self.schedule(p, io);
            }
        }
        if self.eof {
            for p in 0..self.processes.len() {
                self.exit_if_done(p, io);
            }
        }
    }

    /// Arm process `p`'s timer for the request at the head of its queue.
    fn schedule(&mut self, p: usize, io: &mut Io<'_>) {
        let factor = self.think_scale();
        let proc_ = &mut self.processes[p];
        let Some(next) = proc_.queue.front() else {
            return;
        };
        let at = match proc_.last_end {
            // Its first request: at its recorded time.
            None => Instant::ZERO + next.time,
            Some(end) => io.now() + scale(next.time.saturating_sub(end), factor),
        };
        proc_.state = State::Thinking;
        io.wake_at(at, p as u64);
    }

    fn exit_if_done(&mut self, p: usize, io: &mut Io<'_>) {
        let proc_ = &mut self.processes[p];
        if self.eof
            && proc_.queue.is_empty()
            && proc_.outstanding == 0
            && proc_.state == State::Idle
        {
            proc_.state = State::Exited;
            io.task_exited(proc_.task);
        }
    }

    fn closed_issue(&mut self, p: usize, io: &mut Io<'_>) {
        let Some(r) = self.processes[p].queue.pop_front() else {
            self.processes[p].state = State::Idle;
            return;
        };
        self.buffered -= 1;
        self.processes[p].state = State::Busy;
        self.issue(&r, io.now(), io);
        self.refill(io);
    }

    fn check_done(&mut self, io: &mut Io<'_>) {
        if self.done || !self.eof || self.outstanding > 0 || self.next.is_some() {
            return;
        }
        if self
            .processes
            .iter()
            .any(|p| matches!(p.state, State::Thinking | State::Busy) || !p.queue.is_empty())
        {
            return;
        }
        self.done = true;
        let now = io.now();
        self.total.finished = Some(now);
        for p in &mut self.processes {
            if p.state != State::Exited {
                p.state = State::Exited;
                io.task_exited(p.task);
            }
        }
    }
}

impl<R: BufRead> Workload for TraceReplay<R> {
    fn start(&mut self, io: &mut Io<'_>) {
        match self.mode {
            ReplayMode::Open { .. } => self.arrivals(io),
            ReplayMode::Closed { .. } => self.refill(io),
        }
        self.check_done(io);
    }

    fn wake(&mut self, token: u64, io: &mut Io<'_>) {
        if token == WAKE_ARRIVAL {
            self.arrivals(io);
        } else {
            self.closed_issue(token as usize, io);
        }
        self.check_done(io);
    }

    fn completed(&mut self, done: &Completion, io: &mut Io<'_>) {
        let index = self
            .pieces
            .remove(&done.id)
            .expect("completion of a request this replay issued");
        if done.error.is_some() {
            self.summary.errors += 1;
        }
        let slot = &mut self.slots[index];
        slot.pieces -= 1;
        let p = slot.process as usize;
        self.processes[p].stats.disk_time += done.disk_time;
        self.total.disk_time += done.disk_time;
        if slot.pieces > 0 {
            return;
        }
        let slot = *slot;
        self.free_slots.push(index);
        self.outstanding -= 1;
        let latency = done.completed.since(slot.submitted);
        let proc_ = &mut self.processes[p];
        proc_.outstanding -= 1;
        proc_
            .stats
            .record(done.completed, slot.read, slot.bytes, latency);
        proc_.stats.finished = Some(done.completed);
        self.total
            .record(done.completed, slot.read, slot.bytes, latency);
        if slot.read {
            self.reads.record(latency);
        }
        if let ReplayMode::Closed { .. } = self.mode {
            self.processes[p].state = State::Idle;
            if self.processes[p].queue.is_empty() {
                self.refill(io);
            }
            if self.processes[p].state == State::Idle {
                self.schedule(p, io);
            }
            if self.processes[p].state == State::Idle {
                self.exit_if_done(p, io);
            }
        }
        self.check_done(io);
    }

    fn finished(&self) -> bool {
        self.done
    }
}
