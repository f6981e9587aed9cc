//! Direct jobs: fio-like streams of block requests that bypass the page
//! cache (O_DIRECT).
//!
//! A job keeps up to `iodepth` requests in flight. After each completion it
//! waits `think` and submits the next. Sequential jobs walk their region in
//! `bs` steps; random jobs pick block-aligned offsets uniformly in the
//! region from a `Prng` derived from the run seed and the job's name. A job
//! ends once it has moved `size` bytes or `runtime` has passed and its
//! requests drained; a looping job (a background load) wraps around and
//! never ends.
//!
//! A job with a `period` is a soft real-time reader, a media player: it
//! reads its first frame (`bs` bytes) at its start and begins playing when
//! that frame is in, as a player starts its clock once it has data; from
//! then on it reads one frame at the start of every period, one at a time.
//! A frame whose read completes after the next period begins is late, and
//! a period that begins while the previous frame is still being read skips
//! its own frame; both count in the `frames_missed` figure (with `frames`,
//! the periods played).
//!
//! An I/O larger than the block layer's `max_request` goes to the device as
//! several requests, as the kernel splits a bio at the queue's
//! `max_sectors`; the I/O completes with its last piece, and the job's
//! statistics and depth count I/Os, as fio does.
//!
//! Invariant: `in_flight <= iodepth` (1 for a periodic job); every
//! submitted I/O is recorded once in the job's statistics when its last
//! piece completes.

use crate::Part;
use elevator_core::{BlockIo, Completion, Io, Workload};
use elevator_core::{
    Duration, GroupId, Instant, IoPrio, Op, Prng, RequestId, Sector, TaskId, SECTOR_SIZE,
};
use elevator_metrics::JobStats;
use rustc_hash::FxHashMap;

/// How a job picks its offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Sequential,
    Random,
}

const WAKE_START: u64 = 0;
const WAKE_NEXT: u64 = 1;
const WAKE_TICK: u64 = 2;

/// One direct job (one task).
#[derive(Clone, Debug)]
pub struct DirectJob {
    pub name: String,
    pub task: TaskId,
    pub prio: IoPrio,
    pub group: GroupId,
    pub pattern: Pattern,
    /// Percentage of requests that read (100: a reader, 0: a writer).
    pub read_percent: u8,
    /// Direct writes are synchronous (the submitter waits for them).
    pub sync_writes: bool,
    /// I/O size in sectors.
    pub bs: u32,
    /// Largest request the block layer builds, sectors (the queue's
    /// `max_sectors`); bigger I/Os are split.
    pub max_request: u32,
    pub region_start: Sector,
    pub region_sectors: u64,
    /// Bytes to move before the job ends (`None`: until `runtime`).
    pub size: Option<u64>,
    pub runtime: Option<Duration>,
    pub start: Duration,
    pub iodepth: u32,
    pub think: Duration,
    /// Wrap around and run until the measured jobs end.
    pub looping: bool,
    /// Read one frame per period (a media player) instead of back to back.
    pub period: Option<Duration>,
    frame_deadline: Instant,
    frames: u64,
    frames_missed: u64,
    rng: Prng,
    pos: u64,
    issued: u64,
    /// I/Os in flight (each of one or more requests).
    in_flight: u32,
    /// Request → the I/O it is a piece of.
    pieces: FxHashMap<RequestId, u64>,
    /// I/O → its state until its last piece completes.
    ios: FxHashMap<u64, InFlight>,
    next_io: u64,
    started: Instant,
    stats: JobStats,
    done: bool,
}

/// An I/O whose pieces are at the device.
#[derive(Clone, Debug)]
struct InFlight {
    pieces_left: u32,
    /// A piece failed: the I/O returns the error (EIO) to the job.
    failed: bool,
    bytes: u64,
    read: bool,
    submitted: Instant,
}

impl DirectJob {
    /// A sequential reader of `size` bytes at `region_start`, depth 1.
    pub fn new(name: &str, task: u32, seed: u64) -> Self {
        DirectJob {
            name: name.to_string(),
            task: TaskId(task),
            prio: IoPrio::default(),
            group: GroupId::ROOT,
            pattern: Pattern::Sequential,
            read_percent: 100,
            sync_writes: true,
            bs: 256,
            max_request: u32::MAX,
            region_start: 0,
            region_sectors: 0,
            size: None,
            runtime: None,
            start: Duration::ZERO,
            iodepth: 1,
            think: Duration::ZERO,
            looping: false,
            period: None,
            frame_deadline: Instant::ZERO,
            frames: 0,
            frames_missed: 0,
            rng: Prng::derive(seed, name),
            pos: 0,
            issued: 0,
            in_flight: 0,
            pieces: FxHashMap::default(),
            ios: FxHashMap::default(),
            next_io: 0,
            started: Instant::ZERO,
            stats: JobStats::new(name),
            done: false,
        }
    }

    /// Whether another request may be submitted at `now`.
    fn may_issue(&self, now: Instant) -> bool {
        if self.done {
            return false;
        }
        if let Some(rt) = self.runtime {
            if now >= self.started + rt {
                return false;
            }
        }
        self.looping || self.size.is_none_or(|size| self.issued < size)
    }

    fn submit_one(&mut self, io: &mut Io<'_>) {
        if !self.may_issue(io.now()) || self.in_flight >= self.iodepth {
            return;
        }
        let blocks = (self.region_sectors / u64::from(self.bs)).max(1);
        let offset = match self.pattern {
            Pattern::Sequential => {
                if self.pos >= self.region_sectors {
                    self.pos = 0;
                }
                self.pos
            }
            Pattern::Random => self.rng.below(blocks) * u64::from(self.bs),
        };
        let mut sectors = u64::from(self.bs).min(self.region_sectors - offset).max(1);
        if let (Some(size), false) = (self.size, self.looping) {
            let left = (size - self.issued).div_ceil(SECTOR_SIZE);
            sectors = sectors.min(left.max(1));
        }
        self.pos = offset + sectors;
        let read = match self.read_percent {
            100 => true,
            0 => false,
            p => self.rng.below(100) < u64::from(p),
        };
        let n = self.next_io;
        self.next_io += 1;
        let max = u64::from(self.max_request.max(1));
        let mut done = 0;
        let mut pieces_left = 0;
        while done < sectors {
            let piece = (sectors - done).min(max);
            let id = io.submit(BlockIo {
                op: if read { Op::Read } else { Op::Write },
                sync: read || self.sync_writes,
                sector: self.region_start + offset + done,
                sectors: piece as u32,
                task: self.task,
                prio: self.prio,
                group: self.group,
                meta: false,
                // O_DIRECT writes never carried REQ_NOIDLE: WRITE_ODIRECT
                // (2.6.30-2.6.32), WRITE_ODIRECT_PLUG (2.6.33-2.6.36),
                // REQ_SYNC (3.x) (fs/direct-io.c; era reference, section 2).
                noidle: false,
            });
            self.pieces.insert(id, n);
            pieces_left += 1;
            done += piece;
        }
        // O_DIRECT runs the queue once an I/O's bios are issued, sync or
        // aio (`blk_run_address_space` in fs/direct-io.c
        // `direct_io_worker`, read in a 2.6.30 copy, the `WRITE_ODIRECT`
        // era): a plugged queue never holds a direct I/O.
        io.unplug();
        self.ios.insert(
            n,
            InFlight {
                pieces_left,
                failed: false,
                bytes: sectors * SECTOR_SIZE,
                read,
                submitted: io.now(),
            },
        );
        self.issued += sectors * SECTOR_SIZE;
        self.in_flight += 1;
    }

    fn fill(&mut self, io: &mut Io<'_>) {
        while self.in_flight < self.iodepth && self.may_issue(io.now()) {
            self.submit_one(io);
        }
    }

    fn finish_if_drained(&mut self, io: &mut Io<'_>) {
        if !self.done && self.in_flight == 0 && !self.may_issue(io.now()) {
            self.done = true;
            self.stats.finished = Some(io.now());
            if self.period.is_some() {
                self.stats.extra.insert("frames".into(), self.frames as f64);
                self.stats
                    .extra
                    .insert("frames_missed".into(), self.frames_missed as f64);
            }
            io.task_exited(self.task);
        }
    }

    /// A period begins: read its frame, or skip it if the last one is late.
    fn tick(&mut self, period: Duration, io: &mut Io<'_>) {
        if !self.may_issue(io.now()) {
            return;
        }
        self.frames += 1;
        if self.in_flight > 0 {
            self.frames_missed += 1;
        } else {
            self.frame_deadline = io.now() + period;
            self.submit_one(io);
        }
        io.wake_at(io.now() + period, WAKE_TICK);
    }
}

impl Workload for DirectJob {
    fn start(&mut self, io: &mut Io<'_>) {
        assert!(
            self.region_sectors > 0,
            "job {} has an empty region",
            self.name
        );
        io.wake_at(Instant::ZERO + self.start, WAKE_START);
    }

    fn wake(&mut self, token: u64, io: &mut Io<'_>) {
        match (token, self.period) {
            (WAKE_START, period) => {
                self.started = io.now();
                self.stats.started = Some(io.now());
                match period {
                    // The first frame: playback starts when it is in.
                    Some(_) => {
                        self.frame_deadline = Instant::NEVER;
                        self.submit_one(io);
                    }
                    None => self.fill(io),
                }
            }
            (WAKE_TICK, Some(p)) => self.tick(p, io),
            _ => self.submit_one(io),
        }
        self.finish_if_drained(io);
    }

    fn completed(&mut self, done: &Completion, io: &mut Io<'_>) {
        self.stats.disk_time += done.disk_time;
        let n = self.pieces.remove(&done.id).expect("a piece of this job");
        let state = self.ios.get_mut(&n).expect("an I/O in flight");
        state.pieces_left -= 1;
        state.failed |= done.error.is_some();
        if state.pieces_left > 0 {
            return;
        }
        let state = self.ios.remove(&n).expect("an I/O in flight");
        self.in_flight -= 1;
        if state.failed {
            // fio with `continue_on_error`: count it, move on; no bytes.
            self.stats.errors += 1;
        } else {
            self.stats.record(
                done.completed,
                state.read,
                state.bytes,
                done.completed.since(state.submitted),
            );
        }
        if let Some(period) = self.period {
            if self.frame_deadline == Instant::NEVER {
                // The first frame is in: play, one frame per period.
                self.frame_deadline = done.completed;
                io.wake_at(done.completed + period, WAKE_TICK);
            } else if done.completed > self.frame_deadline {
                self.frames_missed += 1;
            }
        } else if self.think == Duration::ZERO {
            self.fill(io);
        } else if self.may_issue(io.now()) {
            io.wake_at(io.now() + self.think, WAKE_NEXT);
        }
        self.finish_if_drained(io);
    }

    fn finished(&self) -> bool {
        self.done
    }
}

impl Part for DirectJob {
    fn tasks(&self) -> Vec<TaskId> {
        vec![self.task]
    }
    fn measured(&self) -> bool {
        !self.looping
    }
    fn stats(&self) -> Vec<JobStats> {
        vec![self.stats.clone()]
    }
    fn stats_mut(&mut self) -> Vec<&mut JobStats> {
        vec![&mut self.stats]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_over_max_request_goes_out_in_pieces_and_completes_with_the_last() {
        use elevator_sched::stack::{Origin, StackBuilder};
        use elevator_sim::{Engine, EngineConfig};
        let mut job = DirectJob::new("big", 1, 0);
        job.region_sectors = 1 << 20;
        job.bs = 8192; // 4 MiB
        job.max_request = 1024; // 512 KiB
        job.size = Some(3 * (4 << 20));
        job.iodepth = 1;
        let device = elevator_device::open("sata-hdd").expect("profile");
        let noop = StackBuilder::new("noop", Origin::command_line()).expect("noop");
        let mut config = EngineConfig::linux_26();
        config.time_limit = Instant::ZERO + Duration::from_secs(60);
        let (mut engine, _) = Engine::build(noop, device, config);
        let summary = engine.run(&mut job);
        assert_eq!(summary.device.requests, 3 * 8, "three I/Os of eight pieces");
        assert_eq!(job.stats.bytes(), 3 * (4 << 20));
        assert_eq!(job.stats.ios, 3, "statistics count I/Os");
        assert!(job.pieces.is_empty() && job.ios.is_empty());
    }

    /// A FIFO that remembers the flags of what it was given.
    #[derive(Debug, Default)]
    struct Recorder {
        queue: std::collections::VecDeque<elevator_core::Request>,
        seen: std::sync::Arc<std::sync::Mutex<Vec<(Op, bool, bool)>>>,
    }

    impl elevator_sched::Scheduler for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn insert(&mut self, request: elevator_core::Request, _now: Instant) {
            let flags = (request.op, request.sync, request.noidle);
            self.seen.lock().expect("not poisoned").push(flags);
            self.queue.push_back(request);
        }
        fn dispatch(&mut self, _now: Instant) -> elevator_sched::Dispatch {
            self.queue.pop_front().map_or(
                elevator_sched::Dispatch::Empty,
                elevator_sched::Dispatch::Request,
            )
        }
        fn complete(&mut self, _request: &elevator_core::Request, _now: Instant) {}
        fn queued(&self) -> usize {
            self.queue.len()
        }
    }

    #[test]
    fn direct_writes_are_sync_and_never_noidle() {
        use elevator_sim::{Engine, EngineConfig};
        let mut job = DirectJob::new("w", 1, 0);
        job.region_sectors = 1 << 16;
        job.read_percent = 50;
        job.pattern = Pattern::Random;
        job.bs = 8;
        job.size = Some(64 * 4096);
        let device = elevator_device::open("sata-hdd").expect("profile");
        let mut config = EngineConfig::linux_26();
        config.time_limit = Instant::ZERO + Duration::from_secs(60);
        let recorder = Recorder::default();
        let seen = recorder.seen.clone();
        let mut engine = Engine::new(Box::new(recorder), device, config);
        engine.run(&mut job);
        let seen = seen.lock().expect("not poisoned");
        let writes = seen.iter().filter(|(op, ..)| *op == Op::Write).count();
        assert!(writes > 0 && writes < seen.len(), "a read/write mix");
        for &(op, sync, noidle) in seen.iter() {
            assert!(sync, "{op:?}: O_DIRECT I/O is sync");
            assert!(!noidle, "{op:?}: WRITE_ODIRECT carries no REQ_NOIDLE");
        }
    }

    #[test]
    fn stops_issuing_at_its_size() {
        let mut j = DirectJob::new("r", 1, 0);
        j.region_sectors = 2048;
        assert!(j.may_issue(Instant::ZERO));
        j.size = Some(4096);
        j.issued = 4096;
        assert!(!j.may_issue(Instant::ZERO));
    }
}
