//! The jobs of a file running together: [`FioRun`], a [`Workload`] for
//! either engine.
//!
//! It starts each thread when fio would (`startdelay`, after the jobs a
//! `stonewall` or `wait_for` names), drives the threads that issue block
//! I/O (direct jobs, and every job on the io_uring runtime) at their
//! depth, stops threads as `exitall`/`exit_what`, steady state and
//! `runtime` say, shares `flow` counters, and records fio's statistics
//! per thread. On the simulator, jobs with `direct=0` run as processes of
//! the simulated host (`elevator-host`), through its page cache; they ask
//! the same [`Coord`] what to do next.
//!
//! An I/O crosses the file's extents on the device and the block layer's
//! largest request as several requests and completes with its last, as
//! the kernel splits a bio. `null` engine I/O and `/dev/null`/`/dev/zero`
//! on the simulator reach no device: each completes after the simulated
//! host's per-call CPU time.

use super::data::{Contents, Stamp};
use super::job::Job;
use super::options::{Engine, ExitWhat, READ, WRITE};
use super::plan::Plan;
use super::thread::{Action, Ctx, Dir, Thread, ThreadSpec, Unit};
use super::zbd::Zones;
use elevator_core::{
    BlockIo, Completion, Duration, GroupId, Instant, Io, IoClass, IoPrio, Op, RequestId, Sector,
    TaskId, Workload, SECTOR_SIZE,
};
use elevator_metrics::fio::{FioStats, SteadyStateReport};
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where a file lies on the target: extents of (byte offset in the file,
/// first sector, bytes), or nowhere (`null`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub extents: Vec<(u64, Sector, u64)>,
    /// I/O to it reaches no device.
    pub null: bool,
}

impl Place {
    /// One extent from `sector`.
    pub fn at(sector: Sector, bytes: u64) -> Self {
        Place {
            extents: vec![(0, sector, bytes)],
            null: false,
        }
    }

    pub fn null() -> Self {
        Place {
            extents: Vec::new(),
            null: true,
        }
    }

    /// The device runs `[sector, sectors)` covering `bytes` from `offset`.
    fn map(&self, offset: u64, bytes: u64, out: &mut Vec<(Sector, u64, u64)>) {
        out.clear();
        let mut at = offset;
        let end = offset + bytes;
        for &(off, sector, len) in &self.extents {
            if at >= end {
                break;
            }
            if at >= off + len || at < off {
                continue;
            }
            let take = (off + len).min(end) - at;
            out.push((sector + (at - off) / SECTOR_SIZE, take, at));
            at += take;
        }
    }
}

/// What the io_uring runtime needs to fill writes and check reads: per
/// request, its job's contents and where its bytes belong.
#[derive(Debug, Default)]
pub struct DataBook {
    pub contents: Vec<Contents>,
    pending: FxHashMap<RequestId, DataOp>,
    /// Requests whose read-back did not match (and why).
    pub failed: FxHashMap<RequestId, String>,
    /// Each job's one write buffer, filled once as fio fills it.
    templates: Vec<super::data::Template>,
}

#[derive(Clone, Copy, Debug)]
struct DataOp {
    job: usize,
    offset: u64,
    stamp: Stamp,
    verify: bool,
}

impl DataBook {
    /// A book for jobs with these contents (one per job).
    pub fn new(contents: Vec<Contents>) -> Self {
        DataBook {
            contents,
            ..DataBook::default()
        }
    }

    /// Fill the buffer of write request `id`; false if it is not ours.
    pub fn fill(&mut self, id: RequestId, buf: &mut [u8]) -> bool {
        let Some(op) = self.pending.remove(&id) else {
            return false;
        };
        if self.templates.len() < self.contents.len() {
            self.templates
                .resize(self.contents.len(), super::data::Template::default());
        }
        super::data::fill_reusing(
            &self.contents[op.job],
            op.stamp,
            op.offset,
            buf,
            &mut self.templates[op.job],
        );
        true
    }

    /// Check the bytes read for request `id`; false if they do not
    /// match what was written.
    pub fn check(&mut self, id: RequestId, buf: &[u8]) -> bool {
        let Some(op) = self.pending.remove(&id) else {
            return true;
        };
        if !op.verify {
            return true;
        }
        match super::data::check(&self.contents[op.job], op.offset, buf) {
            Ok(()) => true,
            Err(e) => {
                self.failed.insert(id, e.to_string());
                false
            }
        }
    }
}

/// Counters a progress line reads from another thread (they never reach
/// a result).
#[derive(Debug, Default)]
pub struct Progress {
    /// Bytes and I/Os completed, read and write.
    pub bytes: [AtomicU64; 2],
    pub ios: [AtomicU64; 2],
    /// Threads finished.
    pub done: AtomicU64,
}

/// An I/O in flight: its pieces at the device.
#[derive(Debug)]
struct Flying {
    thread: usize,
    unit: Unit,
    pieces: u32,
    error: i32,
    dispatched: Instant,
}

/// Steady-state detection of one job (or group): fio's
/// `steadystate_data`.
#[derive(Clone, Debug, Default)]
struct Steady {
    iops_data: Vec<u64>,
    bw_data: Vec<u64>,
    attained: bool,
    prev: (u64, u64),
    prev_time: Instant,
    deviation: f64,
    slope: f64,
    criterion: f64,
    ramp_over: bool,
    /// The job whose options rule it (the group's first).
    job: usize,
}

/// Everything the threads share.
pub struct Coord {
    pub jobs: Vec<Job>,
    pub threads: Vec<Thread>,
    zones: Vec<Option<Zones>>,
    file_sizes: Vec<u64>,
    /// Per flow id: total weight and counter.
    flows: FxHashMap<i64, (i64, u64)>,
    steady: FxHashMap<(bool, usize), Steady>,
    /// Threads run by the host (buffered on the simulator).
    pub hosted: Vec<bool>,
    pub start: Instant,
    /// Notes for the user (rate_min misses and the like).
    pub notes: Vec<String>,
    /// Per thread: its logs; and where their lines go.
    logs: Vec<super::logs::ThreadLogs>,
    sink: Option<Box<dyn super::logs::LogSink>>,
}

impl std::fmt::Debug for Coord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coord")
            .field("jobs", &self.jobs.len())
            .field("threads", &self.threads.len())
            .finish_non_exhaustive()
    }
}

impl Coord {
    /// Whether thread `i` may start: the jobs before a `stonewall` and the
    /// one `wait_for` names are done.
    fn gate_open(&self, i: usize) -> bool {
        let t = &self.threads[i];
        let job = &self.jobs[t.job];
        if job.o.stonewall && self.threads.iter().any(|o| o.job < t.job && !o.is_done()) {
            return false;
        }
        if let Some(w) = &job.o.wait_for {
            if self
                .threads
                .iter()
                .any(|o| &self.jobs[o.job].name == w && !o.is_done())
            {
                return false;
            }
        }
        true
    }

    fn flow_blocked(&self, i: usize) -> bool {
        let t = &self.threads[i];
        let o = &self.jobs[t.job].o;
        if o.flow == 0 {
            return false;
        }
        let Some(&(weight, counter)) = self.flows.get(&o.flow_id) else {
            return false;
        };
        if counter == 0 || weight <= 0 {
            return false;
        }
        let share = t.flow_counter as f64 / counter as f64;
        let due = o.flow as f64 / weight as f64;
        share > due
    }

    /// What thread `i` does next at `now` (for either driver).
    pub fn next(&mut self, i: usize, now: Instant) -> Action {
        let gate_open = self.gate_open(i);
        let flow_blocked = self.flow_blocked(i);
        let t = &mut self.threads[i];
        let job = &self.jobs[t.job];
        let mut ctx = Ctx {
            jobs: &self.jobs,
            zones: &mut self.zones,
            file_sizes: &self.file_sizes,
            gate_open,
            flow_blocked,
        };
        let was_pending = t.is_pending();
        let a = t.next(now, job, &mut ctx);
        if was_pending && !t.is_pending() {
            if job.o.flow != 0 {
                let e = self.flows.entry(job.o.flow_id).or_insert((0, 0));
                e.0 += job.o.flow.abs();
            }
            if job.o.steadystate.is_some() && job.o.ss_dur_us > 0 {
                let ji = t.job;
                self.steady
                    .entry(steady_key(job, ji))
                    .or_insert_with(|| Steady {
                        prev_time: now,
                        ramp_over: job.o.ss_ramp_us == 0,
                        job: ji,
                        ..Steady::default()
                    });
            }
        }
        if let Action::Issue(u) = &a {
            if u.dir != Dir::Sync && job.o.flow != 0 {
                t.flow_counter += 1;
                if let Some(e) = self.flows.get_mut(&job.o.flow_id) {
                    e.1 += 1;
                }
            }
        }
        if a == Action::Done {
            self.thread_done(i);
        }
        a
    }

    /// Thread `i` ended: its flow weight goes, and `exitall` stops others.
    fn thread_done(&mut self, i: usize) {
        let t = &self.threads[i];
        if t.finished_at.is_none() {
            return;
        }
        let job = &self.jobs[t.job];
        if job.o.flow != 0 {
            if let Some(e) = self.flows.get_mut(&job.o.flow_id) {
                e.0 -= job.o.flow.abs();
            }
        }
        let stop_all = job.o.exitall || (job.o.exitall_on_error && t.error != 0);
        if !stop_all {
            return;
        }
        let (group, what, ji) = (job.group, job.o.exit_what, t.job);
        // The stonewall block: from the last stonewall at or before this
        // job to the next one.
        let block_start = (0..=ji)
            .rev()
            .find(|&j| self.jobs[j].o.stonewall)
            .unwrap_or(0);
        let block_end = (ji + 1..self.jobs.len())
            .find(|&j| self.jobs[j].o.stonewall)
            .unwrap_or(self.jobs.len());
        for o in &mut self.threads {
            let stop = match what {
                ExitWhat::All => true,
                ExitWhat::Group => self.jobs[o.job].group == group,
                ExitWhat::Stonewall => (block_start..block_end).contains(&o.job),
            };
            if stop && !o.is_done() {
                o.stop();
            }
        }
    }

    /// Thread `i`'s I/O `u` completed.
    #[allow(clippy::too_many_arguments)]
    pub fn completed(
        &mut self,
        i: usize,
        u: &Unit,
        now: Instant,
        slat: u64,
        clat: u64,
        error: i32,
        reaped: u64,
    ) {
        let t = &mut self.threads[i];
        let job = &self.jobs[t.job];
        t.completed(u, now, slat, clat, error, reaped, job);
        if error == 0 && u.dir != Dir::Sync && t.measuring(u.issued) {
            if let Some(sink) = &mut self.sink {
                let l = &mut self.logs[i];
                if l.enabled() {
                    let t_ms = now.since(t.epoch).nanos() / 1_000_000;
                    let d = usize::from(u.dir == Dir::Write);
                    l.record(
                        sink.as_mut(),
                        t_ms,
                        d,
                        u.len,
                        u.offset,
                        u.ioprio,
                        slat,
                        clat,
                    );
                }
            }
        }
        if t.rate_min_failed {
            t.rate_min_failed = false;
            self.notes.push(format!(
                "{}: rate_min not met: the job stopped (fio: \"rate_min=... not met\")",
                job.name
            ));
        }
    }

    /// The files thread `i` drops from the page cache when it starts
    /// (`invalidate=1`, buffered jobs).
    pub fn invalidate_files(&self, i: usize) -> Vec<usize> {
        let t = &self.threads[i];
        let o = &self.jobs[t.job].o;
        if o.invalidate && !o.direct && !o.pre_read {
            t.file_indices()
        } else {
            Vec::new()
        }
    }

    /// Record that thread `i` handed an I/O to the engine.
    pub fn submitted(&mut self, i: usize, now: Instant) {
        self.threads[i].submitted(now);
    }

    /// Steady-state check, once per interval (`steadystate_check`).
    fn steady_check(&mut self, now: Instant) {
        let mut keys: Vec<(bool, usize)> = self.steady.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            let job = &self.jobs[self.steady[&key].job];
            let Some(ss) = job.o.steadystate else {
                continue;
            };
            let interval_s = (job.o.ss_interval_us / 1_000_000).max(1);
            let intervals = ((job.o.ss_dur_us / 1_000_000) / interval_s).max(1) as usize;
            let members: Vec<usize> = (0..self.threads.len())
                .filter(|&i| {
                    steady_key(&self.jobs[self.threads[i].job], self.threads[i].job) == key
                })
                .collect();
            let running = members
                .iter()
                .any(|&i| self.threads[i].started && !self.threads[i].is_done());
            let st = self.steady.get_mut(&key).expect("a key from the map");
            if st.attained || !running {
                continue;
            }
            let (mut ios, mut bytes, mut lat_sum, mut lat_n) = (0u64, 0u64, 0.0f64, 0u64);
            let mut epoch = now;
            for &i in &members {
                let t = &self.threads[i];
                ios += t.blocks_done[0] + t.blocks_done[1];
                bytes += t.bytes_done[0] + t.bytes_done[1];
                for d in 0..2 {
                    let c = &t.stats.dirs[d].clat.stat;
                    lat_sum += c.mean() * c.samples as f64;
                    lat_n += c.samples;
                }
                epoch = epoch.min(t.epoch);
            }
            if !st.ramp_over
                && now.since(epoch)
                    >= Duration::from_micros(job.o.ss_ramp_us + job.o.ss_interval_us)
            {
                st.ramp_over = true;
                st.prev = (ios, bytes);
                st.prev_time = now;
                continue;
            }
            let ms = now.since(st.prev_time).nanos() / 1_000_000;
            let interval_ms = interval_s * 1000;
            let (pi, pb) = st.prev;
            st.prev = (ios, bytes);
            st.prev_time = now;
            if !st.ramp_over || ms == 0 {
                continue;
            }
            let iops = ms * (ios - pi) / (interval_ms * interval_ms / 1000);
            let bw = ms * (bytes - pb) / (interval_ms * interval_ms / 1000);
            let lat = if lat_n > 0 {
                lat_sum / lat_n as f64
            } else {
                0.0
            };
            let _ = lat;
            st.iops_data.push(iops);
            st.bw_data.push(bw);
            if st.iops_data.len() > intervals {
                st.iops_data.remove(0);
                st.bw_data.remove(0);
            }
            if st.iops_data.len() < intervals {
                continue;
            }
            let data: Vec<f64> = if ss.iops {
                st.iops_data.iter().map(|v| *v as f64).collect()
            } else {
                st.bw_data.iter().map(|v| *v as f64).collect()
            };
            let n = data.len() as f64;
            let mean = data.iter().sum::<f64>() / n;
            let attained = if ss.slope {
                let sx: f64 = (0..data.len()).map(|x| x as f64).sum();
                let sxx: f64 = (0..data.len()).map(|x| (x * x) as f64).sum();
                let sy: f64 = data.iter().sum();
                let sxy: f64 = data.iter().enumerate().map(|(x, y)| x as f64 * y).sum();
                st.slope = (sxy - sx * sy / n) / (sxx - sx * sx / n);
                st.criterion = if ss.pct && mean > 0.0 {
                    100.0 * st.slope / mean
                } else {
                    st.slope
                };
                st.criterion.abs() < ss.limit
            } else {
                st.deviation = data.iter().map(|y| (y - mean).abs()).fold(0.0, f64::max);
                st.criterion = if ss.pct && mean > 0.0 {
                    100.0 * st.deviation / mean
                } else {
                    st.deviation
                };
                st.criterion < ss.limit
            };
            if attained {
                st.attained = true;
                for &i in &members {
                    self.threads[i].stop();
                }
            }
        }
    }

    /// The steady-state report of the job (or group) of `job`.
    fn steady_report(&self, job: usize) -> Option<SteadyStateReport> {
        let j = &self.jobs[job];
        let ss = j.o.steadystate?;
        if j.o.ss_dur_us == 0 {
            return None;
        }
        let st = self
            .steady
            .get(&steady_key(j, job))
            .cloned()
            .unwrap_or_default();
        let kind = format!(
            "{}{}",
            if ss.iops {
                "iops"
            } else if ss.lat {
                "lat"
            } else {
                "bw"
            },
            if ss.slope { "_slope" } else { "" }
        );
        let pct = if ss.pct { "%" } else { "" };
        Some(SteadyStateReport {
            ss: format!("{kind}:{:.6}{pct}", ss.limit),
            duration_s: j.o.ss_dur_us / 1_000_000,
            attained: st.attained,
            criterion: format!("{:.6}{pct}", st.criterion),
            max_deviation: st.deviation,
            slope: st.slope,
            bw: st.bw_data.clone(),
            iops: st.iops_data.clone(),
        })
    }
}

/// Jobs share steady-state detection when they report as a group.
fn steady_key(job: &Job, index: usize) -> (bool, usize) {
    if job.o.group_reporting {
        (true, job.group as usize)
    } else {
        (false, index)
    }
}

/// A shared handle on the run's coordinator, for the host's programs.
pub type Shared = Rc<RefCell<Coord>>;

const TICK: u64 = 1 << 61;
/// How far a thread doing null I/O may run ahead of the engine's clock.
const NULL_AHEAD: Duration = Duration::from_millis(1);
const NULL_DONE: u64 = 1 << 60;
const HOST: u64 = 1 << 62;

/// The run: direct threads driven here, buffered ones by the host part.
pub struct FioRun {
    coord: Shared,
    places: Vec<Place>,
    /// The block layer's largest request, sectors.
    pub max_request: u32,
    /// Per-call CPU time of I/O that reaches no device.
    pub null_cost: Duration,
    host: Option<Box<dyn crate::Part>>,
    host_tasks: rustc_hash::FxHashSet<TaskId>,
    pieces: FxHashMap<RequestId, u64>,
    flying: FxHashMap<u64, Flying>,
    next_flight: u64,
    /// Per thread: the generation of its current timer.
    timer_gen: Vec<u64>,
    blocked: Vec<usize>,
    data: Option<Arc<Mutex<DataBook>>>,
    stop: Option<&'static AtomicBool>,
    progress: Option<Arc<Progress>>,
    tick: Option<Duration>,
    started: bool,
    scratch: Vec<(Sector, u64, u64)>,
    /// Per thread: task and group.
    tasks: Vec<(TaskId, GroupId)>,
    completions_this_batch: u64,
    /// Requests completed by the device, reads and writes (direct and the
    /// host's).
    device_ios: [u64; 2],
    /// Per thread: device time its requests took (`Completion::disk_time`).
    disk_time: Vec<Duration>,
    /// Host tasks to the thread each runs.
    task_thread: FxHashMap<TaskId, usize>,
}

impl std::fmt::Debug for FioRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FioRun")
            .field("threads", &self.timer_gen.len())
            .finish_non_exhaustive()
    }
}

/// How the run was built: the jobs, the plan, where each file lies.
#[derive(Debug)]
pub struct Setup<'a> {
    pub jobs: &'a [Job],
    pub plan: &'a Plan,
    pub places: Vec<Place>,
    pub seed: u64,
    /// Control groups of the jobs' `cgroup=` (`GroupId::ROOT` otherwise).
    pub groups: Vec<GroupId>,
    /// Threads the host runs (direct=0 on the simulator).
    pub hosted: Vec<bool>,
    pub first_task: u32,
}

impl FioRun {
    pub fn new(s: Setup<'_>) -> Self {
        let jobs = s.jobs.to_vec();
        let file_sizes: Vec<u64> = s.plan.files.iter().map(|f| f.size).collect();
        let mut zones: Vec<Option<Zones>> = vec![None; s.plan.files.len()];
        for (fi, z) in s.plan.zone_size.iter().enumerate() {
            if *z > 0 {
                let max_open = s
                    .plan
                    .threads
                    .iter()
                    .filter(|t| t.files.iter().any(|f| f.file == fi))
                    .map(|t| jobs[t.job].o.max_open_zones)
                    .max()
                    .unwrap_or(0);
                zones[fi] = Some(Zones::new(file_sizes[fi], *z, max_open));
            }
        }
        let mut threads = Vec::new();
        let mut tasks = Vec::new();
        for (i, pt) in s.plan.threads.iter().enumerate() {
            let job = &jobs[pt.job];
            let spec = thread_spec(pt.job, job);
            let mut t = Thread::new(i, pt, job, spec, s.seed, &file_sizes);
            t.set_zone_ranges(&zones);
            t.stats.name = job.name.clone();
            t.stats.groupid = job.group;
            t.stats.description = job.o.description.clone();
            t.stats.options = job.options.clone();
            t.stats.continue_on_error = job.o.continue_on_error != Default::default();
            t.stats.latency_target_us = job.o.latency_target_us;
            t.stats.latency_window_us = job.o.latency_window_us;
            t.stats.latency_percentile = job.o.latency_percentile;
            if let Some(list) = &job.o.percentile_list {
                t.stats.percentile_list = list.clone();
            }
            t.stats.clat_percentiles = job.o.clat_percentiles && !job.o.disable_clat;
            t.stats.lat_percentiles = job.o.lat_percentiles && !job.o.disable_lat;
            t.stats.slat_percentiles = job.o.slat_percentiles && !job.o.disable_slat;
            threads.push(t);
            tasks.push((TaskId(s.first_task + i as u32), s.groups[pt.job]));
        }
        let logs = s
            .plan
            .threads
            .iter()
            .map(|pt| super::logs::ThreadLogs::new(&jobs[pt.job], pt.number))
            .collect();
        let tick = jobs
            .iter()
            .filter(|j| j.o.steadystate.is_some() && j.o.ss_dur_us > 0)
            .map(|j| Duration::from_micros(j.o.ss_interval_us))
            .min();
        let n = threads.len();
        FioRun {
            coord: Rc::new(RefCell::new(Coord {
                jobs,
                threads,
                zones,
                file_sizes,
                flows: FxHashMap::default(),
                steady: FxHashMap::default(),
                hosted: s.hosted,
                start: Instant::ZERO,
                notes: Vec::new(),
                logs,
                sink: None,
            })),
            places: s.places,
            max_request: u32::MAX,
            null_cost: Duration::from_micros(1),
            host: None,
            host_tasks: Default::default(),
            pieces: FxHashMap::default(),
            flying: FxHashMap::default(),
            next_flight: 0,
            timer_gen: vec![0; n],
            blocked: Vec::new(),
            data: None,
            stop: None,
            progress: None,
            tick,
            started: false,
            scratch: Vec::new(),
            tasks,
            completions_this_batch: 0,
            device_ios: [0; 2],
            disk_time: vec![Duration::ZERO; n],
            task_thread: FxHashMap::default(),
        }
    }

    /// The coordinator, for host programs.
    pub fn shared(&self) -> Shared {
        self.coord.clone()
    }

    /// The task of thread `i`.
    pub fn task(&self, i: usize) -> TaskId {
        self.tasks[i].0
    }

    /// Run the buffered threads' host as part of this run.
    pub fn set_host(&mut self, host: Box<dyn crate::Part>) {
        self.host_tasks = host.tasks().into_iter().collect();
        self.host = Some(host);
    }

    /// Fill and check data through `book` (the io_uring runtime).
    pub fn set_data(&mut self, book: Arc<Mutex<DataBook>>) {
        self.data = Some(book);
    }

    /// Stop when `flag` is set (Ctrl-C): the run reports what completed.
    pub fn set_stop(&mut self, flag: &'static AtomicBool) {
        self.stop = Some(flag);
    }

    /// Write the jobs' logs (`write_lat_log` and the like) through `sink`.
    pub fn set_log_sink(&mut self, sink: Box<dyn super::logs::LogSink>) {
        self.coord.borrow_mut().sink = Some(sink);
    }

    /// Whether any job writes a log.
    pub fn logs_wanted(&self) -> bool {
        self.coord.borrow().logs.iter().any(|l| l.enabled())
    }

    /// Write the last averaging windows and hand back the sink.
    pub fn finish_logs(&mut self, end: Instant) -> Option<Box<dyn super::logs::LogSink>> {
        let mut c = self.coord.borrow_mut();
        let mut sink = c.sink.take()?;
        let epochs: Vec<Instant> = c.threads.iter().map(|t| t.epoch).collect();
        for (l, e) in c.logs.iter_mut().zip(epochs) {
            if l.enabled() {
                l.flush_window(sink.as_mut(), end.since(e).nanos() / 1_000_000);
            }
        }
        Some(sink)
    }

    /// Count completions into `p` for a progress line.
    pub fn set_progress(&mut self, p: Arc<Progress>) {
        self.progress = Some(p);
    }

    /// Whether the run was stopped from outside.
    pub fn interrupted(&self) -> bool {
        self.stopped()
    }

    fn stopped(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// Whether thread `i`'s unit `u` reaches no device.
    fn is_null(&self, i: usize, u: &Unit) -> bool {
        if self.places[u.file].null {
            return true;
        }
        let c = self.coord.borrow();
        c.jobs[c.threads[i].job].o.engine == Engine::Null
    }

    /// Drive direct thread `i` as far as it goes at `now`.
    ///
    /// I/O that reaches no device (the `null` engine, `/dev/null`) costs
    /// `null_cost` each and is done right here, the thread running ahead
    /// of the engine's clock by up to [`NULL_AHEAD`] before it sleeps until
    /// then: a timer per I/O would make a CPU-bound job cost an event per
    /// microsecond of simulated time.
    fn drive(&mut self, i: usize, io: &mut Io<'_>) {
        let mut now = io.now();
        let horizon = now + NULL_AHEAD;
        // With no cost (a real clock measures the CPU time), a batch ends
        // after a few hundred I/Os so the clock moves on.
        let mut batch = 0u32;
        loop {
            let action = self.coord.borrow_mut().next(i, now);
            match action {
                Action::Issue(u) if self.is_null(i, &u) => {
                    self.coord.borrow_mut().submitted(i, now);
                    now += self.null_cost;
                    if let Some(p) = &self.progress {
                        if u.dir != Dir::Sync {
                            let d = usize::from(u.dir == Dir::Write);
                            p.bytes[d].fetch_add(u.len, Ordering::Relaxed);
                            p.ios[d].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    let clat = now.since(u.issued).nanos();
                    self.coord.borrow_mut().completed(i, &u, now, 0, clat, 0, 1);
                    batch += 1;
                    if now >= horizon || (self.null_cost == Duration::ZERO && batch >= 256) {
                        self.timer_gen[i] += 1;
                        io.wake_at(now, (i as u64) << 20 | (self.timer_gen[i] & 0xfffff));
                        return;
                    }
                }
                Action::Issue(u) => self.issue(i, u, io),
                Action::Sleep(at) => {
                    self.timer_gen[i] += 1;
                    io.wake_at(
                        at.max(now),
                        (i as u64) << 20 | (self.timer_gen[i] & 0xfffff),
                    );
                    return;
                }
                Action::Wait => {
                    if now > io.now() {
                        // Ran ahead with null I/O: continue when the clock is there.
                        self.timer_gen[i] += 1;
                        io.wake_at(now, (i as u64) << 20 | (self.timer_gen[i] & 0xfffff));
                    }
                    return;
                }
                Action::Blocked => {
                    if !self.blocked.contains(&i) {
                        self.blocked.push(i);
                    }
                    return;
                }
                Action::Done => {
                    if let Some(p) = &self.progress {
                        p.done.fetch_add(1, Ordering::Relaxed);
                    }
                    self.unblock(io);
                    return;
                }
            }
        }
    }

    /// Threads waiting on others get another look.
    fn unblock(&mut self, io: &mut Io<'_>) {
        if self.blocked.is_empty() {
            return;
        }
        let waiting = std::mem::take(&mut self.blocked);
        for i in waiting {
            self.drive(i, io);
        }
    }

    fn issue(&mut self, i: usize, u: Unit, io: &mut Io<'_>) {
        let now = io.now();
        self.coord.borrow_mut().submitted(i, now);
        let key = self.next_flight;
        self.next_flight += 1;
        let place = &self.places[u.file];
        let (task, group) = self.tasks[i];
        let op = match u.dir {
            Dir::Read => Op::Read,
            Dir::Write => Op::Write,
            Dir::Sync => Op::Flush,
        };
        let mut pieces = 0u32;
        let job = self.coord.borrow().threads[i].job;
        if u.dir == Dir::Sync {
            let sector = place.extents.first().map_or(0, |e| e.1);
            let id = io.submit(BlockIo {
                op,
                sync: true,
                sector,
                sectors: 0,
                task,
                prio: u.prio,
                group,
                meta: false,
                noidle: false,
            });
            self.pieces.insert(id, key);
            pieces = 1;
        } else {
            let mut runs = std::mem::take(&mut self.scratch);
            place.map(u.offset, u.len, &mut runs);
            let max = u64::from(self.max_request.max(1)) * SECTOR_SIZE;
            for &(sector, bytes, file_off) in &runs {
                let mut done = 0;
                while done < bytes {
                    let piece = (bytes - done).min(max);
                    let id = io.submit(BlockIo {
                        op,
                        sync: true,
                        sector: sector + done / SECTOR_SIZE,
                        sectors: piece.div_ceil(SECTOR_SIZE) as u32,
                        task,
                        prio: u.prio,
                        group,
                        meta: false,
                        noidle: false,
                    });
                    if let Some(book) = &self.data {
                        let want = u.dir == Dir::Write || u.verify;
                        if want {
                            book.lock().expect("not poisoned").pending.insert(
                                id,
                                DataOp {
                                    job,
                                    offset: file_off + done,
                                    stamp: u.stamp,
                                    verify: u.verify,
                                },
                            );
                        }
                    }
                    self.pieces.insert(id, key);
                    pieces += 1;
                    done += piece;
                }
            }
            self.scratch = runs;
        }
        // O_DIRECT runs the queue once an I/O's bios are out.
        io.unplug();
        self.flying.insert(
            key,
            Flying {
                thread: i,
                unit: u,
                pieces: pieces.max(1),
                error: 0,
                dispatched: now,
            },
        );
        if pieces == 0 {
            // Nothing mapped (cannot happen for a planned range): finish.
            io.wake_at(now, NULL_DONE | key);
        }
    }

    fn land(&mut self, key: u64, now: Instant, io: &mut Io<'_>) {
        let Some(f) = self.flying.remove(&key) else {
            return;
        };
        let clat = now.since(f.unit.issued).nanos();
        let _ = f.dispatched;
        let reaped = self.completions_this_batch.max(1);
        if let Some(p) = &self.progress {
            let d = match f.unit.dir {
                Dir::Read => Some(READ),
                Dir::Write => Some(WRITE),
                Dir::Sync => None,
            };
            if let (Some(d), 0) = (d, f.error) {
                p.bytes[d].fetch_add(f.unit.len, Ordering::Relaxed);
                p.ios[d].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.coord
            .borrow_mut()
            .completed(f.thread, &f.unit, now, 0, clat, f.error, reaped);
        self.drive(f.thread, io);
        self.unblock(io);
    }

    /// Per-thread statistics, ended at `end` (unfinished threads count
    /// their time to `end`).
    pub fn stats(&self, end: Instant) -> Vec<FioStats> {
        let c = self.coord.borrow();
        c.threads
            .iter()
            .map(|t| {
                let mut s = t.stats.clone();
                let job = &c.jobs[t.job];
                let stop = t.finished_at.unwrap_or(end);
                for d in [READ, WRITE] {
                    let mut ms = t.runtime_ms(d);
                    if t.finished_at.is_none() && t.started && s.dirs[d].total_ios > 0 {
                        ms += end
                            .since(t.measure_from)
                            .nanos()
                            .div_ceil(1_000_000)
                            .saturating_sub(ms);
                    }
                    s.dirs[d].runtime_ms = if s.dirs[d].total_ios > 0 {
                        ms.max(1)
                    } else {
                        0
                    };
                }
                s.job_runtime_ms = if t.started {
                    stop.since(t.measure_from).nanos() / 1_000_000
                } else {
                    0
                };
                s.elapsed_s = end.since(c.start).nanos().div_ceil(1_000_000_000);
                s.steadystate = c.steady_report(t.job);
                s.error = if t.error != 0 { t.error } else { s.error };
                let _ = job;
                s
            })
            .collect()
    }

    /// The statistics as fio reports them: per thread, or per group for
    /// jobs with `group_reporting` (consecutive threads of one group).
    pub fn report(&self, end: Instant) -> Vec<FioStats> {
        let c = self.coord.borrow();
        let per = self.stats(end);
        let mut out: Vec<FioStats> = Vec::new();
        let mut last_group: Option<u32> = None;
        for (t, s) in c.threads.iter().zip(per) {
            let job = &c.jobs[t.job];
            if !job.o.stats {
                continue;
            }
            if job.o.group_reporting && last_group == Some(job.group) {
                out.last_mut().expect("a group's first job").merge(&s);
                continue;
            }
            last_group = job.o.group_reporting.then_some(job.group);
            out.push(s);
        }
        out
    }

    /// Host task `task` runs thread `i` (its device time is the thread's).
    pub fn set_task_thread(&mut self, task: TaskId, i: usize) {
        self.task_thread.insert(task, i);
    }

    /// Device time each thread's requests took.
    pub fn disk_times(&self) -> Vec<Duration> {
        self.disk_time.clone()
    }

    /// Reads and writes the device completed.
    pub fn device_ios(&self) -> [u64; 2] {
        self.device_ios
    }

    /// Notes gathered while running.
    pub fn notes(&self) -> Vec<String> {
        self.coord.borrow().notes.clone()
    }

    /// Zone resets per thread (for the table).
    pub fn zone_resets(&self) -> u64 {
        self.coord
            .borrow()
            .zones
            .iter()
            .flatten()
            .map(|z| z.resets)
            .sum()
    }

    /// Jobs, for reporting.
    pub fn jobs(&self) -> Vec<Job> {
        self.coord.borrow().jobs.clone()
    }
}

/// The settings a thread reads from its job.
fn thread_spec(index: usize, job: &Job) -> ThreadSpec {
    let o = &job.o;
    let prio = match (o.prioclass, o.prio) {
        (None, None) => IoPrio::from_nice(o.nice.clamp(-20, 19) as i8),
        (class, level) => {
            let class = match class.unwrap_or(2) {
                1 => IoClass::RealTime,
                3 => IoClass::Idle,
                _ => IoClass::BestEffort,
            };
            IoPrio::new(class, level.unwrap_or(4) as u8)
        }
    };
    ThreadSpec {
        job: index,
        contents: contents(job),
        prio,
        cmdprio_perc: o.cmdprio_percentage,
        cmdprio: [0, 1].map(|d| (o.cmdprio_class[d], o.cmdprio[d], o.cmdprio_hint[d])),
        cmdprio_split: o.cmdprio_bssplit.clone(),
        depth: job.depth,
    }
}

/// How a job fills its buffers.
pub fn contents(job: &Job) -> Contents {
    let o = &job.o;
    Contents {
        zero: o.zero_buffers,
        pattern: o.buffer_pattern.clone(),
        compress_percentage: o.buffer_compress_percentage,
        compress_chunk: o.buffer_compress_chunk,
        refill: o.refill_buffers.unwrap_or(false),
        scramble: o.scramble_buffers,
        verify: o.verify,
        verify_interval: o.verify_interval,
        verify_offset: o.verify_offset,
        verify_pattern: o.verify_pattern.clone(),
    }
}

impl Workload for FioRun {
    fn start(&mut self, io: &mut Io<'_>) {
        self.coord.borrow_mut().start = io.now();
        self.started = true;
        if let Some(h) = &mut self.host {
            io.tag_timers(HOST, |io| h.start(io));
        }
        let hosted = self.coord.borrow().hosted.clone();
        for (i, h) in hosted.iter().enumerate() {
            if !h {
                self.drive(i, io);
            }
        }
        if let Some(t) = self.tick {
            io.wake_at(io.now() + t, TICK);
        }
    }

    fn wake(&mut self, token: u64, io: &mut Io<'_>) {
        if token & HOST != 0 {
            if let Some(h) = &mut self.host {
                io.tag_timers(HOST, |io| h.wake(token & !HOST, io));
            }
            self.unblock(io);
            return;
        }
        if token == TICK {
            self.coord.borrow_mut().steady_check(io.now());
            let hosted = self.coord.borrow().hosted.clone();
            for (i, h) in hosted.iter().enumerate() {
                if !h {
                    self.drive(i, io);
                }
            }
            if !self.finished() {
                if let Some(t) = self.tick {
                    io.wake_at(io.now() + t, TICK);
                }
            }
            return;
        }
        if token & NULL_DONE != 0 {
            self.completions_this_batch = 1;
            self.land(token & !NULL_DONE, io.now(), io);
            return;
        }
        let i = (token >> 20) as usize;
        if i < self.timer_gen.len() && (token & 0xfffff) == (self.timer_gen[i] & 0xfffff) {
            self.drive(i, io);
            self.unblock(io);
        }
    }

    fn completed(&mut self, done: &Completion, io: &mut Io<'_>) {
        match done.op {
            Op::Read => self.device_ios[0] += 1,
            Op::Write => self.device_ios[1] += 1,
            Op::Flush => {}
        }
        let thread = match self.task_thread.get(&done.task) {
            Some(&i) => Some(i),
            None => {
                let base = self.tasks.first().map_or(0, |t| t.0 .0);
                let i = done.task.0.wrapping_sub(base) as usize;
                (i < self.tasks.len()).then_some(i)
            }
        };
        if let Some(i) = thread {
            self.disk_time[i] += done.disk_time;
        }
        if self.host_tasks.contains(&done.task) {
            if let Some(h) = &mut self.host {
                io.tag_timers(HOST, |io| h.completed(done, io));
            }
            self.unblock(io);
            return;
        }
        let Some(key) = self.pieces.remove(&done.id) else {
            return;
        };
        let verify_failed = self
            .data
            .as_ref()
            .and_then(|b| b.lock().expect("not poisoned").failed.remove(&done.id));
        let Some(f) = self.flying.get_mut(&key) else {
            return;
        };
        f.pieces -= 1;
        if let Some(e) = done.error {
            f.error = match e {
                elevator_core::IoError::Timeout => 110,
                _ => 5,
            };
        }
        if verify_failed.is_some() {
            f.error = 84;
        }
        if let Some(msg) = verify_failed {
            self.coord.borrow_mut().notes.push(msg);
        }
        if f.pieces == 0 {
            self.completions_this_batch = 1;
            self.land(key, done.completed, io);
        }
    }

    fn request_done(&mut self, io: &mut Io<'_>) {
        if let Some(h) = &mut self.host {
            io.tag_timers(HOST, |io| h.request_done(io));
        }
    }

    fn finished(&self) -> bool {
        if self.stopped() {
            return true;
        }
        let c = self.coord.borrow();
        c.threads.iter().all(|t| t.is_done())
            && self.flying.is_empty()
            && self
                .host
                .as_ref()
                .is_none_or(|h| h.finished() || c.hosted.iter().all(|h| !h))
    }
}

impl Thread {
    /// Zone ranges of the thread's files (`zonemode=zbd`).
    pub fn set_zone_ranges(&mut self, zones: &[Option<Zones>]) {
        self.for_files(|f, start, io_size| zones[f].as_ref().map(|z| z.range(start, io_size)));
    }
}
