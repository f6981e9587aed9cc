//! One fio thread (a clone of a job): what it issues next and when, as
//! fio's `do_io` loop decides (`backend.c`, `io_u.c`).
//!
//! [`Thread::next`] is asked "what now?" and answers with an I/O to issue,
//! a time to sleep until, "wait for a completion", "wait for another job",
//! or "done". Both drivers ask it: the direct driver (async I/O at the
//! job's depth, [`super::run`]) and the host's buffered-job program (one
//! system call at a time). Everything here is a function of the seed and
//! of the times it is told.
//!
//! What it follows from fio:
//! - direction: `rwmixread` by fio's rule (a new random direction once
//!   the current one has had its share of issues, `get_rw_ddir`), a sync
//!   every `fsync`/`fdatasync` writes after a write;
//! - offsets: sequential with `rw=...:N` holes or backwards steps
//!   (`get_next_seq_offset`), random with the map or without
//!   (`norandommap`), a new random offset every N I/Os
//!   (`rw=randread:N`, `rw_sequencer`), `percentage_random`, the
//!   distributions, strided zones (`zonemode=strided`) and emulated zoned
//!   devices (`zonemode=zbd`), several files by `file_service_type`;
//! - sizes: `bs`, `bsrange`, `bssplit`, `blocksize_unaligned`;
//! - when: `rate`/`rate_iops` (linear or poisson; inline submission waits
//!   for the queue to drain before sleeping, offload does not),
//!   `thinktime` (every `thinktime_blocks`, after the queue drains),
//!   `latency_target` (depth probing), `flow`, `startdelay`, `ramp_time`,
//!   `runtime`, `time_based`, `loops`, `number_ios`, `size`/`io_size`;
//! - after the I/O: `end_fsync`, then the verify pass over what was
//!   written (`verify_backlog` verifies as it goes).

use super::data::{Contents, Stamp};
use super::job::Job;
use super::options::{CmdprioSplit, Distribution, FileService, ZoneMode, READ, WRITE};
use super::plan::PlanThread;
use super::random::{FullPeriod, Gauss, Pareto, RandomMap, Zipf};
use super::zbd::Zones;
use elevator_core::{Duration, Instant, IoClass, IoPrio, Prng};
use elevator_metrics::fio::FioStats;
mod offsets;

/// What an I/O does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Read,
    Write,
    /// fsync (or fdatasync) of the file.
    Sync,
}

/// One I/O of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub dir: Dir,
    /// Index into the run's files.
    pub file: usize,
    /// Bytes from the file's start.
    pub offset: u64,
    pub len: u64,
    pub prio: IoPrio,
    /// The `ioprio` value fio reports it under (class << 13 | level).
    pub ioprio: u16,
    pub issued: Instant,
    /// A read of the verify pass: check what comes back.
    pub verify: bool,
    pub stamp: Stamp,
}

/// What a thread wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Issue(Unit),
    /// Nothing before this instant.
    Sleep(Instant),
    /// Nothing until one of its I/Os completes.
    Wait,
    /// Waiting for other threads (a start gate, `flow`).
    Blocked,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Pending,
    Io,
    EndSync,
    Verify,
    Done,
}

/// Per thread, per file.
#[derive(Clone, Debug)]
struct TFile {
    file: usize,
    start: u64,
    offset: u64,
    io_size: u64,
    real: u64,
    last_pos: [u64; 2],
    last_start: [Option<u64>; 2],
    map: Option<RandomMap>,
    lfsr: Option<FullPeriod>,
    done: bool,
    zone_range: (usize, usize),
}

/// The random streams of a thread (fio's `td->*_state`).
#[derive(Clone, Debug)]
struct Rngs {
    offset: Prng,
    bs: Prng,
    rwmix: Prng,
    file: Prng,
    zone: Prng,
    seqrand: Prng,
    poisson: Prng,
    prio: Prng,
    buf: Prng,
    zbd: Prng,
}

impl Rngs {
    fn new(seed: u64, label: &str) -> Self {
        let d = |what: &str| Prng::derive(seed, &format!("{label}/{what}"));
        Rngs {
            offset: d("offset"),
            bs: d("bs"),
            rwmix: d("rwmix"),
            file: d("file"),
            zone: d("zone"),
            seqrand: d("seqrand"),
            poisson: d("poisson"),
            prio: d("prio"),
            buf: d("buf"),
            zbd: d("zbd"),
        }
    }
}

#[derive(Debug)]
enum Dist {
    Uniform,
    Zipf(Zipf),
    Pareto(Pareto),
    Gauss(Gauss),
}

/// `latency_target` probing (`io_u.c` `lat_target_*`).
#[derive(Clone, Copy, Debug, Default)]
struct LatTarget {
    qd: u32,
    low: u32,
    high: u32,
    window_start: Instant,
    ios_at_start: u64,
    failed: u64,
    end_run: bool,
    stable: u32,
}

/// A write to read back.
#[derive(Clone, Copy, Debug)]
struct Logged {
    file: usize,
    offset: u64,
    len: u64,
}

/// Settings a thread reads from its job.
#[derive(Clone, Debug)]
pub struct ThreadSpec {
    pub job: usize,
    pub contents: Contents,
    pub prio: IoPrio,
    pub cmdprio_perc: [u32; 2],
    pub cmdprio: [(u32, u32, u32); 2],
    pub cmdprio_split: Option<[Vec<CmdprioSplit>; 2]>,
    /// The depth fio runs the job at (1 for sync engines).
    pub depth: u32,
}

/// One fio thread.
#[derive(Debug)]
pub struct Thread {
    pub index: usize,
    pub job: usize,
    pub clone: u32,
    pub number: u32,
    pub spec: ThreadSpec,
    files: Vec<TFile>,
    dists: Vec<Dist>,
    cur_file: usize,
    file_ios: u64,
    phase: Phase,
    pub epoch: Instant,
    pub started: bool,
    pub measure_from: Instant,
    ramp_done: bool,
    pub in_flight: u32,
    io_issues: [u64; 2],
    /// Bytes issued, all passes (`io_issue_bytes`).
    issue_bytes: [u64; 2],
    /// Bytes issued in this pass (`bytes_issued` of `do_io`).
    pass_bytes: u64,
    /// Completed bytes and I/Os (`io_bytes`, `io_blocks`).
    pub bytes_done: [u64; 2],
    pub blocks_done: [u64; 2],
    loops_left: u32,
    rwmix_ddir: usize,
    rwmix_issues: u64,
    seq_nr_left: u64,
    last_dir: Option<Dir>,
    rng: Rngs,
    seed: u64,
    rate_next_us: [u64; 2],
    rate_bytes: [u64; 2],
    rate_last_us: [u64; 2],
    think_blocks: u64,
    think_last: u64,
    think_sleep_until: Option<Instant>,
    verify_log: Vec<Logged>,
    verify_pos: usize,
    /// Verify-backlog reads owed.
    backlog: u64,
    end_sync: Vec<usize>,
    lat: LatTarget,
    rate_check: [(Instant, u64, u64); 2],
    pub terminate: bool,
    pub error: i32,
    pub stats: FioStats,
    numberio: u64,
    buffer_seed: u64,
    zone_bytes: u64,
    pub flow_counter: u64,
    pub finished_at: Option<Instant>,
    /// When the thread must stop (runtime).
    runtime_end: Option<Instant>,
    bw_window: (Instant, u64, u64),
    iops_window: (Instant, u64),
    /// The verify pass's start, for the read runtime.
    pass_started: Instant,
    run_ms: [u64; 2],
    /// Bytes of one pass and the byte limit (the plan's).
    size: u64,
    limit: u64,
    iops_prev: [u64; 2],
    /// `rate_min` was not met.
    pub rate_min_failed: bool,
}

/// What the thread may ask of the run while deciding.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub jobs: &'a [Job],
    /// The zones of each file (`zonemode=zbd`), shared by its threads.
    pub zones: &'a mut [Option<Zones>],
    /// Bytes of each file as laid out.
    pub file_sizes: &'a [u64],
    /// Whether the gate before this thread is open (stonewall,
    /// wait_for).
    pub gate_open: bool,
    /// `flow`: whether this thread is ahead of its share.
    pub flow_blocked: bool,
}

impl Thread {
    pub fn new(
        index: usize,
        plan: &PlanThread,
        job: &Job,
        spec: ThreadSpec,
        seed: u64,
        file_sizes: &[u64],
    ) -> Self {
        let o = &job.o;
        let label = format!("{}#{}.{}", job.name, plan.job, plan.clone);
        let thread_seed = if o.randrepeat || o.randseed.is_some() {
            // fio seeds repeatably from randseed (default 0x89) and the
            // thread number; ours mixes in the run's seed.
            o.randseed.unwrap_or(0x89) ^ seed
        } else {
            seed
        };
        let rng = Rngs::new(thread_seed, &label);
        let files: Vec<TFile> = plan
            .files
            .iter()
            .map(|tf| TFile {
                file: tf.file,
                start: tf.offset,
                offset: tf.offset,
                io_size: tf.io_size,
                real: file_sizes[tf.file],
                last_pos: [tf.offset; 2],
                last_start: [None; 2],
                map: None,
                lfsr: None,
                done: false,
                zone_range: (0, 1),
            })
            .collect();
        let mut t = Thread {
            index,
            job: plan.job,
            clone: plan.clone,
            number: plan.number,
            spec,
            files,
            dists: Vec::new(),
            cur_file: 0,
            file_ios: 0,
            phase: Phase::Pending,
            epoch: Instant::ZERO,
            started: false,
            measure_from: Instant::ZERO,
            ramp_done: o.ramp_time_us == 0,
            in_flight: 0,
            io_issues: [0; 2],
            issue_bytes: [0; 2],
            pass_bytes: 0,
            bytes_done: [0; 2],
            blocks_done: [0; 2],
            loops_left: o.loops.max(1),
            rwmix_ddir: if o.rw.read { READ } else { WRITE },
            rwmix_issues: 0,
            seq_nr_left: 1,
            last_dir: None,
            rng,
            seed: thread_seed,
            rate_next_us: [0; 2],
            rate_bytes: [0; 2],
            rate_last_us: [0; 2],
            think_blocks: 0,
            think_last: 0,
            think_sleep_until: None,
            verify_log: Vec::new(),
            verify_pos: 0,
            backlog: 0,
            end_sync: Vec::new(),
            lat: LatTarget::default(),
            rate_check: [(Instant::ZERO, 0, 0); 2],
            terminate: false,
            error: 0,
            stats: FioStats::default(),
            numberio: 0,
            buffer_seed: 0,
            zone_bytes: 0,
            flow_counter: 0,
            finished_at: None,
            runtime_end: None,
            bw_window: (Instant::ZERO, 0, 0),
            iops_window: (Instant::ZERO, 0),
            pass_started: Instant::ZERO,
            run_ms: [0; 2],
            size: plan.size,
            limit: plan.limit,
            iops_prev: [0; 2],
            rate_min_failed: false,
        };
        t.reset_pass(job, file_sizes);
        t
    }

    /// fio's `clear_io_state` between passes: positions, maps and (with
    /// `randrepeat`) the random streams start over.
    fn reset_pass(&mut self, job: &Job, _file_sizes: &[u64]) {
        let o = &job.o;
        let label = format!("{}#{}.{}", job.name, self.job, self.clone);
        self.rng = Rngs::new(self.seed, &label);
        self.buffer_seed = self.rng.buf.next_u64();
        self.pass_bytes = 0;
        self.rwmix_issues = 0;
        self.zone_bytes = 0;
        self.seq_nr_left = 1;
        self.cur_file = 0;
        self.file_ios = 0;
        let min_bs = job.rw_min_bs().max(1);
        self.dists.clear();
        for f in &mut self.files {
            f.offset = f.start;
            f.last_pos = [f.start; 2];
            f.last_start = [None; 2];
            f.done = false;
            let blocks = last_block(job, f, READ, o.zonerange);
            if o.rw.random && !o.norandommap && job.zonemode != ZoneMode::Zbd {
                f.map = Some(RandomMap::new(blocks));
            }
            if o.rw.random && o.lfsr {
                f.lfsr = Some(FullPeriod::new(blocks, &mut self.rng.offset));
            }
            let fsize = f.real.min(f.io_size);
            let nranges = fsize.div_ceil(min_bs);
            let d = match &o.distribution {
                Distribution::Zipf(t) => {
                    Dist::Zipf(Zipf::new(nranges, *t, None, &mut self.rng.offset))
                }
                Distribution::Pareto(h) => {
                    Dist::Pareto(Pareto::new(nranges, *h, None, &mut self.rng.offset))
                }
                Distribution::Normal { dev, center } => {
                    Dist::Gauss(Gauss::new(nranges, *dev, *center))
                }
                _ => Dist::Uniform,
            };
            self.dists.push(d);
        }
    }

    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    pub fn is_pending(&self) -> bool {
        self.phase == Phase::Pending
    }

    /// Whether the ramp is over (stats count).
    pub fn measuring(&self, now: Instant) -> bool {
        self.started && now >= self.measure_from
    }

    /// The next thing the thread does at `now`.
    pub fn next(&mut self, now: Instant, job: &Job, ctx: &mut Ctx<'_>) -> Action {
        let o = &job.o;
        loop {
            match self.phase {
                Phase::Done => return Action::Done,
                Phase::Pending => {
                    if !ctx.gate_open {
                        return Action::Blocked;
                    }
                    // startdelay counts from the start of the run.
                    let delay = Instant::ZERO + Duration::from_micros(o.startdelay.0);
                    if now < delay {
                        return Action::Sleep(delay);
                    }
                    self.start(now, job, ctx);
                }
                Phase::Io => {
                    if let Some(a) = self.io_step(now, job, ctx) {
                        return a;
                    }
                }
                Phase::EndSync => {
                    if self.in_flight > 0 {
                        return Action::Wait;
                    }
                    match self.end_sync.pop() {
                        Some(f) => return Action::Issue(self.sync_unit(f, now)),
                        None => self.after_io(now, job),
                    }
                }
                Phase::Verify => {
                    if self.terminate {
                        if self.in_flight > 0 {
                            return Action::Wait;
                        }
                        self.finish(now);
                        continue;
                    }
                    if self.verify_pos < self.verify_log.len() {
                        if self.in_flight >= self.depth() {
                            return Action::Wait;
                        }
                        let l = self.verify_log[self.verify_pos];
                        self.verify_pos += 1;
                        return Action::Issue(self.verify_unit(l, now));
                    }
                    if self.in_flight > 0 {
                        return Action::Wait;
                    }
                    self.run_ms[READ] += now
                        .since(self.pass_started.max(self.measure_from))
                        .nanos()
                        .div_ceil(1_000_000);
                    self.next_pass(now, job, ctx.file_sizes);
                }
            }
        }
    }

    fn depth(&self) -> u32 {
        if self.lat.qd > 0 {
            self.lat.qd.min(self.spec.depth)
        } else {
            self.spec.depth
        }
    }

    fn start(&mut self, now: Instant, job: &Job, _ctx: &mut Ctx<'_>) {
        let o = &job.o;
        self.started = true;
        self.epoch = now;
        self.pass_started = now;
        self.measure_from = now + Duration::from_micros(o.ramp_time_us);
        self.ramp_done = o.ramp_time_us == 0;
        if o.runtime_us > 0 {
            self.runtime_end = Some(self.measure_from + Duration::from_micros(o.runtime_us));
        }
        self.bw_window = (self.measure_from, 0, 0);
        self.iops_window = (self.measure_from, 0);
        self.rate_check = [(self.measure_from, 0, 0); 2];
        if o.latency_target_us > 0 {
            self.lat = LatTarget {
                qd: 1,
                low: 1,
                high: self.spec.depth,
                window_start: now,
                ..LatTarget::default()
            };
        }
        self.stats.latency_depth = self.depth();
        self.loops_left = self.loops_left.saturating_sub(1);
        self.phase = Phase::Io;
    }

    /// The run ended for the thread (time, `exitall`, an error): stop
    /// issuing.
    pub fn stop(&mut self) {
        self.terminate = true;
    }

    fn finish(&mut self, now: Instant) {
        self.phase = Phase::Done;
        self.finished_at = Some(now);
    }

    fn runtime_exceeded(&self, now: Instant) -> bool {
        self.runtime_end.is_some_and(|e| now >= e)
    }

    /// One step of `do_io`; `None` to go round again.
    fn io_step(&mut self, now: Instant, job: &Job, ctx: &mut Ctx<'_>) -> Option<Action> {
        let o = &job.o;
        if self.runtime_exceeded(now) {
            self.terminate = true;
        }
        if !self.ramp_done && now >= self.measure_from {
            self.ramp_done = true;
            // ramp_period_over: the statistics start now.
            let keep = (self.stats.latency_depth, self.stats.name.clone());
            self.stats = FioStats {
                latency_depth: keep.0,
                name: keep.1,
                ..FioStats::default()
            };
            // reset_all_stats: the counters and the rate start over from
            // here (fio's epoch moves to the end of the ramp).
            self.bytes_done = [0; 2];
            self.blocks_done = [0; 2];
            self.io_issues = [0; 2];
            self.iops_prev = [0; 2];
            self.rate_bytes = [0; 2];
            self.rate_next_us = [0; 2];
            self.rate_last_us = [0; 2];
            self.epoch = now;
        }
        let stop_issuing = self.terminate || self.pass_over(job);
        if stop_issuing {
            if self.in_flight > 0 {
                return Some(Action::Wait);
            }
            self.end_of_io(now, job);
            return None;
        }
        // Queue depth (the latency target's while probing).
        if self.in_flight >= self.depth() {
            return Some(Action::Wait);
        }
        // thinktime after every `thinktime_blocks` I/Os, once the queue
        // has drained (io_u_quiesce).
        if o.thinktime_us > 0 {
            if let Some(until) = self.think_sleep_until {
                if now < until {
                    return Some(Action::Sleep(until));
                }
                self.think_sleep_until = None;
            } else if self.think_blocks >= self.think_last + o.thinktime_blocks {
                if self.in_flight > 0 {
                    return Some(Action::Wait);
                }
                self.think_last = self.think_blocks;
                let mut until = now + Duration::from_micros(o.thinktime_us);
                if let Some(e) = self.runtime_end {
                    until = until.min(e);
                }
                self.think_sleep_until = Some(until);
                return Some(Action::Sleep(until));
            }
        }
        if ctx.flow_blocked {
            if o.flow_sleep_us > 0 {
                if self.in_flight > 0 {
                    return Some(Action::Wait);
                }
                return Some(Action::Sleep(now + Duration::from_micros(o.flow_sleep_us)));
            }
            return Some(if self.in_flight > 0 {
                Action::Wait
            } else {
                Action::Blocked
            });
        }
        // Verify backlog: read back written blocks as we go.
        if self.backlog > 0 && self.verify_pos < self.verify_log.len() {
            self.backlog -= 1;
            let l = self.verify_log[self.verify_pos];
            self.verify_pos += 1;
            return Some(Action::Issue(self.verify_unit(l, now)));
        }
        // Direction (and fsync).
        let dir = self.choose_dir(job);
        if dir == Dir::Sync {
            // fio's libaio and sync engines wait for queued writes first.
            if self.in_flight > 0 {
                return Some(Action::Wait);
            }
            self.last_dir = Some(Dir::Sync);
            let f = self.files[self.cur_file].file;
            return Some(Action::Issue(self.sync_unit(f, now)));
        }
        let mut d = if dir == Dir::Read { READ } else { WRITE };
        // Rate: wait until this direction (or the other) is due.
        if self.rate_limited(job) {
            let due = |t: &Self, d: usize| t.epoch + Duration::from_micros(t.rate_next_us[d]);
            if due(self, d) > now {
                let other = d ^ 1;
                let mixed = o.rw.read && o.rw.write;
                if mixed && self.rate_on(job, other) && due(self, other) <= now {
                    d = other;
                } else {
                    if !o.offload && self.in_flight > 0 {
                        return Some(Action::Wait);
                    }
                    let mut at = due(self, d);
                    if mixed && self.rate_on(job, other) {
                        at = at.min(due(self, other));
                    }
                    if let Some(e) = self.runtime_end {
                        // fio sleeps until the timeout at most.
                        at = at.min(e);
                    }
                    return Some(Action::Sleep(at));
                }
            }
        }
        match self.make_unit(d, now, job, ctx) {
            Some(u) => {
                self.issued(&u, job);
                Some(Action::Issue(u))
            }
            None => {
                // Every file is at its end: the pass is over.
                for f in &mut self.files {
                    f.done = true;
                }
                if self.in_flight > 0 {
                    return Some(Action::Wait);
                }
                self.end_of_io(now, job);
                None
            }
        }
    }

    /// Whether this pass has issued all it should (`do_io`'s loop
    /// conditions and `io_issue_bytes_exceeded`).
    fn pass_over(&self, job: &Job) -> bool {
        let o = &job.o;
        let p = self.plan_sizes(job);
        if o.number_ios > 0 {
            let n = self.blocks_done[0] + self.blocks_done[1] + u64::from(self.in_flight);
            if n >= o.number_ios * u64::from(o.loops.max(1)) {
                return true;
            }
        }
        if o.time_based {
            return false;
        }
        let bytes = match (o.rw.read, o.rw.write) {
            (true, true) => self.issue_bytes[0] + self.issue_bytes[1],
            (false, true) => self.issue_bytes[WRITE],
            _ => self.issue_bytes[READ],
        };
        if bytes >= p.1 * u64::from(o.loops.max(1)) {
            return true;
        }
        self.pass_bytes >= p.0
    }

    /// (bytes of one pass, the byte limit) for this thread.
    fn plan_sizes(&self, job: &Job) -> (u64, u64) {
        let o = &job.o;
        let size = self.size;
        let limit = self.limit;
        let mut total = size;
        if o.rw.write && (o.norandommap || !o.rw.random) {
            total = total.max(limit);
        }
        if o.verify != super::options::Verify::None && o.rw.write && o.verify_backlog > 0 {
            total += size;
        }
        (total, limit)
    }

    fn rate_on(&self, job: &Job, d: usize) -> bool {
        job.o.rate[d] > 0 || job.o.rate_iops[d] > 0
    }

    fn rate_limited(&self, job: &Job) -> bool {
        self.rate_on(job, READ) || self.rate_on(job, WRITE)
    }

    /// `get_rw_ddir`.
    fn choose_dir(&mut self, job: &Job) -> Dir {
        let o = &job.o;
        if self.last_dir == Some(Dir::Write) {
            let w = self.io_issues[WRITE];
            if (o.fsync > 0 && w > 0 && w % o.fsync == 0)
                || (o.fdatasync > 0 && w > 0 && w % o.fdatasync == 0)
            {
                return Dir::Sync;
            }
        }
        let d = if o.rw.read && o.rw.write {
            if self.io_issues[self.rwmix_ddir] >= self.rwmix_issues {
                let v = self.rng.rwmix.below(100) + 1;
                let d = if v <= u64::from(o.rwmixread) {
                    READ
                } else {
                    WRITE
                };
                if d != self.rwmix_ddir {
                    let diff = if d == READ {
                        o.rwmixread
                    } else {
                        100 - o.rwmixread
                    };
                    self.rwmix_issues = self.io_issues[self.rwmix_ddir] * u64::from(diff) / 100;
                }
                self.rwmix_ddir = d;
            }
            self.rwmix_ddir
        } else if o.rw.write {
            WRITE
        } else {
            READ
        };
        if d == READ {
            Dir::Read
        } else {
            Dir::Write
        }
    }

    /// The file for the next I/O (`get_next_file`).
    fn pick_file(&mut self, job: &Job) -> Option<usize> {
        let n = self.files.len();
        if self.files.iter().all(|f| f.done) {
            return None;
        }
        match job.o.file_service {
            FileService::Sequential => {
                while self.files[self.cur_file].done {
                    self.cur_file = (self.cur_file + 1) % n;
                }
            }
            FileService::RoundRobin(k) => {
                if self.file_ios >= k || self.files[self.cur_file].done {
                    self.file_ios = 0;
                    loop {
                        self.cur_file = (self.cur_file + 1) % n;
                        if !self.files[self.cur_file].done {
                            break;
                        }
                    }
                }
            }
            FileService::Random(k) => {
                if self.file_ios >= k || self.files[self.cur_file].done {
                    self.file_ios = 0;
                    loop {
                        self.cur_file = self.rng.file.below(n as u64) as usize;
                        if !self.files[self.cur_file].done {
                            break;
                        }
                    }
                }
            }
        }
        self.file_ios += 1;
        Some(self.cur_file)
    }

    /// `fill_io_u` for a read or write: file, offset, length; `None` when
    /// every file is at its end.
    fn make_unit(&mut self, d: usize, now: Instant, job: &Job, ctx: &mut Ctx<'_>) -> Option<Unit> {
        let o = &job.o;
        let mut d = d;
        for _attempt in 0..self.files.len().max(1) * 2 {
            let fi = self.pick_file(job)?;
            // zbd_adjust_ddir: a mixed job's first I/O writes, so there is
            // something to read.
            if job.zonemode == ZoneMode::Zbd
                && d == READ
                && o.rw.read
                && o.rw.write
                && !o.read_beyond_wp
            {
                if let Some(z) = &ctx.zones[self.files[fi].file] {
                    if !z.written(self.files[fi].zone_range) && o.rwmixread < 100 {
                        d = WRITE;
                    }
                }
            }
            if job.zonemode == ZoneMode::Strided {
                self.strided(fi, d, job);
            }
            let Some((offset, random)) = self.next_offset(fi, d, job) else {
                self.files[fi].done = true;
                continue;
            };
            let Some(mut len) = self.next_buflen(fi, d, offset, random, job) else {
                self.files[fi].done = true;
                continue;
            };
            let mut offset = offset;
            if job.zonemode == ZoneMode::Zbd {
                let f = &self.files[fi];
                let range = f.zone_range;
                let z = ctx.zones[f.file].as_mut()?;
                let adj = if d == WRITE {
                    z.write(
                        offset,
                        len,
                        job.min_bs[WRITE],
                        range,
                        f.io_size,
                        (o.zone_reset_threshold, o.zone_reset_frequency),
                        &mut self.rng.zbd,
                    )
                } else if o.read_beyond_wp {
                    Some((offset, len))
                } else {
                    z.read(offset, len, job.min_bs[READ], o.rw.random, range)
                };
                match adj {
                    Some((off, l)) => {
                        offset = off;
                        len = l;
                    }
                    None => {
                        self.files[fi].done = true;
                        continue;
                    }
                }
            }
            let f = &mut self.files[fi];
            if offset + len > f.real {
                f.done = true;
                continue;
            }
            // Mark the map (it may shorten the I/O).
            if let Some(map) = &mut f.map {
                let bs = job.min_bs[d].max(1);
                let block = (offset - f.offset) / bs;
                let n = len.div_ceil(bs);
                let got = map.set_nr(block, n);
                if got == 0 {
                    continue;
                }
                len = len.min(got * bs);
            }
            f.last_start[d] = Some(offset);
            f.last_pos[d] = offset + len;
            let file = f.file;
            self.zone_bytes += len;
            let (prio, ioprio) = self.prio_for(d, len);
            let stamp = if d == WRITE {
                self.numberio += 1;
                let seed = if self.spec.contents.refill
                    || self.spec.contents.verify != super::options::Verify::None
                {
                    self.rng.buf.next_u64()
                } else {
                    self.buffer_seed
                };
                Stamp {
                    seed,
                    numberio: self.numberio,
                }
            } else {
                Stamp {
                    seed: 0,
                    numberio: 0,
                }
            };
            return Some(Unit {
                dir: if d == READ { Dir::Read } else { Dir::Write },
                file,
                offset,
                len,
                prio,
                ioprio,
                issued: now,
                // A job that only reads, with verify=, checks every read
                // (fio's `!td_rw(td)` case).
                verify: d == READ && o.verify != super::options::Verify::None && !o.rw.write,
                stamp,
            });
        }
        None
    }

    /// The priority of an I/O of `len` bytes (`prio`/`prioclass`, and the
    /// cmdprio options of libaio and io_uring).
    fn prio_for(&mut self, d: usize, len: u64) -> (IoPrio, u16) {
        let base = self.spec.prio;
        let value = |p: IoPrio| -> u16 {
            let class: u16 = match p.class() {
                IoClass::None => 0,
                IoClass::RealTime => 1,
                IoClass::BestEffort => 2,
                IoClass::Idle => 3,
            };
            if class == 0 {
                0
            } else {
                (class << 13) | u16::from(p.level())
            }
        };
        let make = |c: u32, l: u32| -> IoPrio {
            let class = match c {
                1 => IoClass::RealTime,
                3 => IoClass::Idle,
                _ => IoClass::BestEffort,
            };
            IoPrio::new(class, l as u8)
        };
        if let Some(split) = &self.spec.cmdprio_split {
            let entries = &split[d.min(1)];
            if let Some(e) = entries.iter().find(|e| e.bs == len) {
                if e.perc > 0 && self.rng.prio.below(100) < u64::from(e.perc) {
                    let (c, l, _) = e.prio.unwrap_or(self.spec.cmdprio[d.min(1)]);
                    let p = make(c, l);
                    return (p, value(p));
                }
            }
            return (base, value(base));
        }
        let perc = self.spec.cmdprio_perc[d.min(1)];
        if perc > 0 && self.rng.prio.below(100) < u64::from(perc) {
            let (c, l, _) = self.spec.cmdprio[d.min(1)];
            let p = make(c, l);
            return (p, value(p));
        }
        (base, value(base))
    }

    fn issued(&mut self, u: &Unit, job: &Job) {
        let o = &job.o;
        let d = if u.dir == Dir::Read { READ } else { WRITE };
        self.io_issues[d] += 1;
        self.issue_bytes[d] += u.len;
        self.pass_bytes += u.len;
        self.last_dir = Some(u.dir);
        if o.thinktime_blocks_issue {
            self.think_blocks += 1;
        }
        if self.rate_on(job, d) {
            self.rate_bytes[d] += u.len;
            self.rate_next_us[d] = self.usec_for_io(d, job);
        }
        if u.dir == Dir::Write && job.verifies() {
            let l = Logged {
                file: u.file,
                offset: u.offset,
                len: u.len,
            };
            self.verify_log.push(l);
            if o.verify_backlog > 0 && self.verify_log.len() as u64 % o.verify_backlog == 0 {
                self.backlog += if o.verify_backlog_batch > 0 {
                    o.verify_backlog_batch
                } else {
                    o.verify_backlog
                };
            }
        }
    }

    /// `usec_for_io`: when the next I/O of direction `d` is due, in µs
    /// since the thread started.
    fn usec_for_io(&mut self, d: usize, job: &Job) -> u64 {
        let o = &job.o;
        let min_bs = job.min_bs[d].max(1);
        let bps = if o.rate[d] > 0 {
            o.rate[d]
        } else {
            o.rate_iops[d] * min_bs
        };
        if bps == 0 {
            return 0;
        }
        if o.poisson {
            let iops = (bps / min_bs).max(1);
            let u = self.rng.poisson.unit().max(1e-12);
            let val = (1_000_000 / iops) as f64 * -u.ln();
            self.rate_last_us[d] += val as u64;
            return self.rate_last_us[d];
        }
        if o.rate[d] == 0 && !o.bssplit[d].is_empty() {
            let iops = bps / min_bs;
            if iops == 0 {
                return 0;
            }
            self.rate_last_us[d] += 1_000_000 / iops;
            return self.rate_last_us[d];
        }
        let bytes = self.rate_bytes[d];
        let secs = bytes / bps;
        let rem = bytes % bps;
        secs * 1_000_000 + rem * 1_000_000 / bps
    }

    fn sync_unit(&mut self, file: usize, now: Instant) -> Unit {
        Unit {
            dir: Dir::Sync,
            file,
            offset: 0,
            len: 0,
            prio: self.spec.prio,
            ioprio: 0,
            issued: now,
            verify: false,
            stamp: Stamp {
                seed: 0,
                numberio: 0,
            },
        }
    }

    fn verify_unit(&mut self, l: Logged, now: Instant) -> Unit {
        Unit {
            dir: Dir::Read,
            file: l.file,
            offset: l.offset,
            len: l.len,
            prio: self.spec.prio,
            ioprio: 0,
            issued: now,
            verify: true,
            stamp: Stamp {
                seed: 0,
                numberio: 0,
            },
        }
    }

    /// The pass's I/O is over: end_fsync, then verify, then another pass
    /// or the end.
    fn end_of_io(&mut self, now: Instant, job: &Job) {
        let o = &job.o;
        for d in [READ, WRITE] {
            if self.bytes_done[d] > 0 || job.does(d) && self.io_issues[d] > 0 {
                self.run_ms[d] += now
                    .since(self.pass_started.max(self.measure_from))
                    .nanos()
                    .div_ceil(1_000_000);
            }
        }
        self.pass_started = now;
        if (o.end_fsync || o.fsync_on_close) && o.rw.write && !self.terminate {
            let mut files: Vec<usize> = self.files.iter().map(|f| f.file).collect();
            files.dedup();
            self.end_sync = files;
            self.phase = Phase::EndSync;
            return;
        }
        self.after_io(now, job);
    }

    fn after_io(&mut self, now: Instant, job: &Job) {
        if job.verifies() && !self.terminate && self.verify_pos < self.verify_log.len() {
            // Random writes with a map are read back in offset order
            // (fio's io_hist tree); the rest in the order written.
            if job.o.rw.random && !job.o.norandommap && job.o.verify_backlog == 0 {
                self.verify_log[self.verify_pos..].sort_by_key(|l| (l.file, l.offset));
            }
            self.pass_started = now;
            self.phase = Phase::Verify;
            return;
        }
        self.phase = Phase::Verify;
        self.verify_pos = self.verify_log.len();
    }

    /// `keep_running`: another pass, or done.
    fn next_pass(&mut self, now: Instant, job: &Job, file_sizes: &[u64]) {
        let o = &job.o;
        self.verify_log.clear();
        self.verify_pos = 0;
        self.backlog = 0;
        let again = if self.terminate || self.error != 0 {
            false
        } else if o.time_based {
            !self.runtime_exceeded(now)
        } else if self.loops_left > 0 {
            self.loops_left -= 1;
            true
        } else if o.number_ios > 0
            && self.blocks_done[0] + self.blocks_done[1] >= o.number_ios * u64::from(o.loops.max(1))
        {
            false
        } else {
            let limit = self.limit;
            let done = self.bytes_done[0] + self.bytes_done[1];
            let all_files = self.files.iter().all(|f| f.done);
            done < limit && limit - done >= job.rw_max_bs() && !(all_files && o.io_size.is_none())
        };
        // A pass that issued nothing ends the thread (fio marks it
        // terminated when do_io moved no bytes).
        if again && self.pass_bytes > 0 {
            self.reset_pass(job, file_sizes);
            self.phase = Phase::Io;
        } else {
            self.finish(now);
        }
    }

    /// An I/O of this thread completed at `now`, `clat` after it was
    /// issued; `error` is its errno, 0 if none.
    #[allow(clippy::too_many_arguments)]
    pub fn completed(
        &mut self,
        u: &Unit,
        now: Instant,
        slat: u64,
        clat: u64,
        error: i32,
        reaped: u64,
        job: &Job,
    ) {
        let o = &job.o;
        self.in_flight = self.in_flight.saturating_sub(1);
        if error != 0 {
            let ignored = match u.dir {
                Dir::Read => {
                    o.continue_on_error.read
                        || o.continue_on_error.io
                        || o.ignore_error[READ].contains(&error)
                }
                Dir::Write => {
                    o.continue_on_error.write
                        || o.continue_on_error.io
                        || o.ignore_error[WRITE].contains(&error)
                }
                Dir::Sync => o.continue_on_error.io,
            } || (u.verify && o.continue_on_error.verify && !o.verify_fatal);
            self.stats.total_err += 1;
            if self.stats.first_error == 0 {
                self.stats.first_error = error;
            }
            if !ignored {
                self.error = error;
                self.stats.error = error;
                self.terminate = true;
            }
            return;
        }
        let measured = self.measuring(u.issued) && self.ramp_done;
        if u.dir == Dir::Sync {
            if measured && !o.gtod_reduce && !o.disable_lat {
                self.stats.record_sync(clat);
            } else if measured {
                self.stats.sync_ios += 1;
            }
            return;
        }
        let d = if u.dir == Dir::Read { READ } else { WRITE };
        if !o.thinktime_blocks_issue {
            self.think_blocks += 1;
        }
        self.bytes_done[d] += u.len;
        self.blocks_done[d] += 1;
        if !measured {
            return;
        }
        if o.gtod_reduce || o.disable_clat {
            self.stats.record_bytes(d, u.len, false);
        } else {
            self.stats.record(d, u.len, slat, clat, u.ioprio, false);
        }
        self.stats.mark_complete(reaped.max(1));
        // Latency target: a completion over the target fails the window.
        if o.latency_target_us > 0 && clat + slat > o.latency_target_us * 1000 {
            if o.latency_percentile >= 100.0 {
                self.lat_failed(now);
            } else {
                self.lat.failed += 1;
            }
        }
        self.sample(now, job);
    }

    /// An I/O was handed to the engine; `depth` counts it.
    pub fn submitted(&mut self, now: Instant) {
        self.in_flight += 1;
        if self.measuring(now) {
            self.stats.mark_submit(self.in_flight);
        }
    }

    /// bw and IOPS samples (`add_bw_samples`, `add_iops_samples`), the
    /// minimum rate, the latency-target window.
    fn sample(&mut self, now: Instant, job: &Job) {
        let o = &job.o;
        let bytes = self.bytes_done[0] + self.bytes_done[1];
        let _ = bytes;
        if !o.disable_bw && !o.gtod_reduce {
            let win = Duration::from_millis(o.bwavgtime_ms);
            let (start, rb, wb) = self.bw_window;
            let spent = now.since(start);
            if spent >= win {
                let ms = spent.nanos() / 1_000_000;
                for (d, prev) in [(READ, rb), (WRITE, wb)] {
                    if job.does(d) && ms > 0 {
                        let kib = (self.bytes_done[d] - prev) * 1000 / ms / 1024;
                        self.stats.dirs[d].bw.add(kib);
                    }
                }
                self.bw_window = (now, self.bytes_done[READ], self.bytes_done[WRITE]);
            }
            let win = Duration::from_millis(o.iopsavgtime_ms);
            let (start, _) = self.iops_window;
            let spent = now.since(start);
            if spent >= win {
                let ms = spent.nanos() / 1_000_000;
                for d in [READ, WRITE] {
                    if job.does(d) && ms > 0 {
                        let prev = self.iops_prev[d];
                        let iops = (self.blocks_done[d] - prev) * 1000 / ms;
                        self.stats.dirs[d].iops.add(iops);
                        self.iops_prev[d] = self.blocks_done[d];
                    }
                }
                self.iops_window = (now, 0);
            }
        }
        // check_min_rate: after 2 s, every rate_cycle.
        for d in [READ, WRITE] {
            if (o.rate_min[d] == 0 && o.rate_iops_min[d] == 0)
                || now.since(self.epoch) < Duration::from_secs(2)
            {
                continue;
            }
            let (t, b, n) = self.rate_check[d];
            let spent = now.since(t).nanos() / 1_000_000;
            if b == 0 && n == 0 {
                self.rate_check[d] = (now, self.bytes_done[d], self.blocks_done[d]);
                continue;
            }
            if spent < o.rate_cycle_ms || spent == 0 {
                continue;
            }
            let failed = if o.rate_min[d] > 0 {
                (self.bytes_done[d] - b) * 1000 / spent < o.rate_min[d]
            } else {
                (self.blocks_done[d] - n) * 1000 / spent < o.rate_iops_min[d]
            };
            self.rate_check[d] = (now, self.bytes_done[d], self.blocks_done[d]);
            if failed {
                self.rate_min_failed = true;
                self.error = 5;
                self.stats.error = 5;
                self.terminate = true;
            }
        }
        if o.latency_target_us > 0 && !self.lat.end_run {
            self.lat_check(now, job);
        }
    }

    fn lat_failed(&mut self, now: Instant) {
        if self.lat.qd <= 1 {
            return;
        }
        self.lat.high = self.lat.qd;
        if self.lat.qd == self.lat.low {
            self.lat.low = self.lat.low.saturating_sub(1).max(1);
        }
        self.lat.qd = ((self.lat.qd + self.lat.low) / 2).max(1);
        self.lat.stable = 0;
        self.lat_new_cycle(now);
    }

    fn lat_new_cycle(&mut self, now: Instant) {
        self.lat.window_start = now;
        self.lat.ios_at_start = self.blocks_done[0] + self.blocks_done[1];
        self.lat.failed = 0;
    }

    /// `lat_target_check`.
    fn lat_check(&mut self, now: Instant, job: &Job) {
        let o = &job.o;
        if now.since(self.lat.window_start) < Duration::from_micros(o.latency_window_us) {
            return;
        }
        let ios = self.blocks_done[0] + self.blocks_done[1] - self.lat.ios_at_start;
        if ios == 0 {
            return;
        }
        let success = (ios - self.lat.failed.min(ios)) as f64 / ios as f64 * 100.0;
        if success >= o.latency_percentile {
            let qd = self.lat.qd;
            self.lat.low = self.lat.qd;
            if self.lat.qd + 1 == self.lat.high {
                self.lat.stable += 1;
                if self.lat.stable >= 3 {
                    self.lat.high += 1;
                    self.lat.stable = 0;
                }
            }
            if self.lat.high != self.spec.depth {
                self.lat.qd = (self.lat.qd + self.lat.high) / 2;
            } else {
                self.lat.qd *= 2;
            }
            self.lat.qd = self.lat.qd.min(self.spec.depth).max(1);
            if !o.latency_run && self.lat.qd == qd {
                // Settled: one more window at this depth, measured alone.
                self.lat.end_run = true;
                let keep = self.stats.name.clone();
                self.stats = FioStats {
                    name: keep,
                    ..FioStats::default()
                };
            }
        } else {
            self.lat_failed(now);
        }
        self.stats.latency_depth = self.depth();
        self.lat_new_cycle(now);
    }

    /// Set each file's zone range from `range(file, start, io_size)`.
    pub(crate) fn for_files(&mut self, range: impl Fn(usize, u64, u64) -> Option<(usize, usize)>) {
        for f in &mut self.files {
            if let Some(r) = range(f.file, f.start, f.io_size) {
                f.zone_range = r;
            }
        }
    }

    /// The run's indices of the thread's files.
    pub fn file_indices(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.files.iter().map(|f| f.file).collect();
        v.dedup();
        v
    }

    /// Runtime of each direction, ms.
    pub fn runtime_ms(&self, d: usize) -> u64 {
        self.run_ms[d]
    }
}

/// `last_block`: how many `ba` blocks a random offset may start at.
fn last_block(job: &Job, f: &TFile, d: usize, zonerange: u64) -> u64 {
    let mut max = f.io_size.min(f.real);
    if job.zonemode == ZoneMode::Strided && zonerange > 0 {
        max = zonerange;
    }
    if job.min_bs[d] > job.ba[d] {
        max = max.saturating_sub(job.min_bs[d] - job.ba[d]);
    }
    max / job.ba[d].max(1)
}
