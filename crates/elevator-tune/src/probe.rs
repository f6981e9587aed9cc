//! The probe's workload: short microbenchmarks, spoken through the port.
//!
//! A [`ProbePlan`] is a list of [`Phase`]s run one after another: 4 KiB
//! random reads at queue depths 1 to 128, sequential reads (and, where
//! writing is allowed, writes) of 4 KiB to 1 MiB at depth 1, random
//! writes and a 70/30 read/write mix, a rotational check that reads
//! pairs of blocks a growing distance apart, and a backward walk (each
//! read the block before the last) that times a disk's revolution. [`ProbeWorkload`] runs the
//! plan through the [`Workload`]/[`Io`] port of `elevator-core`, so the
//! same plan runs on a real device (`elevator_uring::probe`) and on a
//! simulated one (the fit's tests): what the fit sees is the same either
//! way. [`ProbePlan::repeated`] splits each phase into short rounds and
//! runs the whole list round after round, so that one stall of a loaded
//! host spoils one round of a phase, not the phase: the fit takes the
//! median over rounds ([`summarize`]). Each phase keeps its depth of requests in flight until its time
//! is up or it has done its count of I/Os, then drains before the next
//! phase starts; it records every completion's latency (submission to
//! completion) in an HDR histogram.
//!
//! Invariant: a plan without `writes` submits no write (the
//! `--allow-write` rule of the runtime, checked by a test here as well as
//! by the target's open mode).

use elevator_core::{
    BlockIo, Completion, Duration, GroupId, Instant, Io, IoPrio, Op, Prng, TaskId, Workload,
    SECTOR_SIZE,
};
use elevator_metrics::LatencyStats;

/// What one phase does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Uniformly random aligned blocks over the target.
    Random,
    /// One sequential stream from the start of the target's second half
    /// (the first half is where the random phases spend most time, so the
    /// stream is unlikely to start in a cache they warmed).
    Sequential,
    /// Each read `distance` plus [`DISTANCE_STEP`] plus up to 1 MiB at
    /// random past the one before, at
    /// depth 1: the rotational check (a disk's latency grows with the seek
    /// distance; flash's does not).
    Distance { distance_bytes: u64 },
    /// Each read one block before the one before, at depth 1: on a disk
    /// the head has just passed it, so every read waits about one
    /// revolution (the spindle speed's measure); flash does not care.
    Backward,
}

/// One microbenchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Phase {
    pub pattern: Pattern,
    /// Percent of reads (100: reads only, 0: writes only).
    pub read_percent: u8,
    /// Bytes per I/O, a multiple of 4096.
    pub bs: u32,
    /// I/Os kept in flight.
    pub depth: u32,
    /// Stop submitting after this long ...
    pub time: Duration,
    /// ... or after this many I/Os, whichever comes first.
    pub max_ios: u64,
}

impl Phase {
    pub fn writes(&self) -> bool {
        self.read_percent < 100
    }

    /// A short name: `randread 4k qd32`, `seqwrite 1m qd1`, `dist 64m`.
    pub fn label(&self) -> String {
        if let Pattern::Distance { distance_bytes } = self.pattern {
            return format!("dist {}", size_label(distance_bytes));
        }
        if self.pattern == Pattern::Backward {
            return format!("back {}", size_label(u64::from(self.bs)));
        }
        let random = self.pattern == Pattern::Random;
        let kind = match (random, self.read_percent) {
            (true, 100) => "randread",
            (true, 0) => "randwrite",
            (true, _) => "randrw",
            (false, 100) => "seqread",
            (false, 0) => "seqwrite",
            (false, _) => "seqrw",
        };
        format!("{kind} {} qd{}", size_label(u64::from(self.bs)), self.depth)
    }
}

/// `4k`, `128k`, `1m`, `64m`, `2g`.
pub fn size_label(bytes: u64) -> String {
    const K: u64 = 1024;
    if bytes >= K * K * K && bytes % (K * K * K) == 0 {
        format!("{}g", bytes / (K * K * K))
    } else if bytes >= K * K && bytes % (K * K) == 0 {
        format!("{}m", bytes / (K * K))
    } else if bytes % K == 0 {
        format!("{}k", bytes / K)
    } else {
        format!("{bytes}b")
    }
}

/// How much further than the phase's distance each read of a distance
/// phase moves: past any drive read-ahead segment, so that no read hits.
pub const DISTANCE_STEP: u64 = 2 << 20;

/// Queue depths of the random-read sweep.
pub const DEPTHS: [u32; 8] = [1, 2, 4, 8, 16, 32, 64, 128];
/// Request sizes of the sequential phases.
pub const SEQ_SIZES: [u32; 6] = [4 << 10, 16 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20];

/// The phases of one probe and what it may touch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbePlan {
    pub phases: Vec<Phase>,
    /// Bytes of the target the probe addresses (from offset 0).
    pub span_bytes: u64,
    pub seed: u64,
}

impl ProbePlan {
    /// The default plan on a target of `span_bytes`: every phase gets
    /// `phase_time` (at most `max_ios` I/Os). With `writes`, the
    /// sequential writes, random writes at depth 1 and 32, and a 70/30
    /// mix at depth 32 are added. With the defaults (1.5 s per phase,
    /// 0.5 s per distance) a read-only probe takes about 27 s and one
    /// with writes about 42 s, under the minute the issue asks.
    pub fn standard(span_bytes: u64, writes: bool, phase_time: Duration, max_ios: u64) -> Self {
        let mut phases = Vec::new();
        for depth in DEPTHS {
            phases.push(Phase {
                pattern: Pattern::Random,
                read_percent: 100,
                bs: 4096,
                depth,
                time: phase_time,
                max_ios,
            });
        }
        for bs in SEQ_SIZES {
            phases.push(Phase {
                pattern: Pattern::Sequential,
                read_percent: 100,
                bs,
                depth: 1,
                time: phase_time,
                max_ios,
            });
        }
        // The rotational check: a third of a phase per distance, from one
        // MiB to half the span, by factors of eight.
        let mut d = 1u64 << 20;
        while d <= span_bytes / 2 {
            phases.push(Phase {
                pattern: Pattern::Distance { distance_bytes: d },
                read_percent: 100,
                bs: 4096,
                depth: 1,
                time: phase_time.div(3),
                max_ios: max_ios / 3 + 1,
            });
            d *= 8;
        }
        phases.push(Phase {
            pattern: Pattern::Backward,
            read_percent: 100,
            bs: 4096,
            depth: 1,
            time: phase_time.div(3),
            max_ios: max_ios / 3 + 1,
        });
        if writes {
            for bs in SEQ_SIZES {
                phases.push(Phase {
                    pattern: Pattern::Sequential,
                    read_percent: 0,
                    bs,
                    depth: 1,
                    time: phase_time,
                    max_ios,
                });
            }
            for depth in [1, 32] {
                phases.push(Phase {
                    pattern: Pattern::Random,
                    read_percent: 0,
                    bs: 4096,
                    depth,
                    time: phase_time,
                    max_ios,
                });
            }
            phases.push(Phase {
                pattern: Pattern::Random,
                read_percent: 70,
                bs: 4096,
                depth: 32,
                time: phase_time,
                max_ios,
            });
        }
        ProbePlan {
            phases,
            span_bytes,
            seed: 1,
        }
    }

    pub fn writes(&self) -> bool {
        self.phases.iter().any(Phase::writes)
    }

    /// The same plan in `rounds` rounds: each phase gets a `rounds`-th of
    /// its time and I/Os, and the list runs `rounds` times over (the whole
    /// list per round, so that a stall of a few seconds hits one round of
    /// several phases rather than every round of one). The total time
    /// bound stays what it was.
    pub fn repeated(mut self, rounds: u32) -> Self {
        let rounds = rounds.max(1);
        let one: Vec<Phase> = self
            .phases
            .iter()
            .map(|p| Phase {
                time: p.time.div(u64::from(rounds)),
                max_ios: p.max_ios.div_ceil(u64::from(rounds)),
                ..*p
            })
            .collect();
        self.phases = (0..rounds).flat_map(|_| one.iter().copied()).collect();
        self
    }

    /// The deepest phase: the queue depth the engine must allow.
    pub fn max_depth(&self) -> u32 {
        self.phases.iter().map(|p| p.depth).max().unwrap_or(1)
    }

    /// An upper bound of the plan's duration (every phase to its time).
    pub fn time_bound(&self) -> Duration {
        Duration(self.phases.iter().map(|p| p.time.nanos()).sum())
    }
}

/// What one phase measured.
#[derive(Clone, Debug)]
pub struct PhaseResult {
    pub phase: Phase,
    pub reads: LatencyStats,
    pub writes: LatencyStats,
    /// From the phase's first submission to its last completion.
    pub elapsed: Duration,
    pub bytes: u64,
    pub errors: u64,
}

impl PhaseResult {
    pub fn ios(&self) -> u64 {
        self.reads.count() + self.writes.count()
    }

    pub fn iops(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.ios() as f64 / s
        } else {
            0.0
        }
    }

    pub fn mb_s(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.bytes as f64 / 1e6 / s
        } else {
            0.0
        }
    }

    /// Every completion's latency, reads and writes together.
    pub fn latency(&self) -> LatencyStats {
        let mut l = self.reads.clone();
        l.merge(&self.writes);
        l
    }

    /// Latency quantile `q` in microseconds.
    pub fn lat_us(&self, q: f64) -> f64 {
        self.latency().quantile(q).nanos() as f64 / 1e3
    }
}

/// Called with each finished phase, its index and the number of phases.
type PhaseCallback = Box<dyn FnMut(&PhaseResult, usize, usize) + Send>;

/// The plan as a workload: one phase at a time, each its own task.
pub struct ProbeWorkload {
    plan: ProbePlan,
    rng: Prng,
    /// The running phase (== phases.len() once done).
    current: usize,
    started: Instant,
    first_submit: Option<Instant>,
    last_complete: Instant,
    submitted: u64,
    in_flight: u32,
    /// Next byte of the sequential stream.
    cursor: u64,
    /// A distance phase has placed its first read.
    far: bool,
    results: Vec<PhaseResult>,
    partial: Option<PhaseResult>,
    /// Called as each phase finishes (for a progress line).
    on_phase: Option<PhaseCallback>,
}

impl std::fmt::Debug for ProbeWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeWorkload")
            .field("phase", &self.current)
            .field("of", &self.plan.phases.len())
            .finish_non_exhaustive()
    }
}

impl ProbeWorkload {
    pub fn new(plan: ProbePlan) -> Self {
        let rng = Prng::derive(plan.seed, "probe");
        ProbeWorkload {
            plan,
            rng,
            current: 0,
            started: Instant::ZERO,
            first_submit: None,
            last_complete: Instant::ZERO,
            submitted: 0,
            in_flight: 0,
            cursor: 0,
            far: false,
            results: Vec::new(),
            partial: None,
            on_phase: None,
        }
    }

    /// Call `f(result, index, phases)` as each phase ends.
    pub fn on_phase(mut self, f: impl FnMut(&PhaseResult, usize, usize) + Send + 'static) -> Self {
        self.on_phase = Some(Box::new(f));
        self
    }

    pub fn results(&self) -> &[PhaseResult] {
        &self.results
    }

    pub fn into_results(self) -> Vec<PhaseResult> {
        self.results
    }

    fn phase(&self) -> Option<Phase> {
        self.plan.phases.get(self.current).copied()
    }

    fn begin(&mut self, io: &mut Io<'_>) {
        while let Some(phase) = self.phase() {
            self.started = io.now();
            self.first_submit = None;
            self.submitted = 0;
            self.far = false;
            self.cursor = (self.plan.span_bytes / 2) / 4096 * 4096;
            self.partial = Some(PhaseResult {
                phase,
                reads: LatencyStats::new(),
                writes: LatencyStats::new(),
                elapsed: Duration::ZERO,
                bytes: 0,
                errors: 0,
            });
            for _ in 0..phase.depth {
                self.submit_one(phase, io);
            }
            if self.in_flight > 0 {
                return;
            }
            // A phase that could submit nothing (a span below its block).
            self.end_phase();
        }
    }

    fn submit_one(&mut self, phase: Phase, io: &mut Io<'_>) {
        let now = io.now();
        if self.submitted >= phase.max_ios || now.since(self.started) >= phase.time {
            return;
        }
        let bs = u64::from(phase.bs);
        let blocks = self.plan.span_bytes / bs;
        if blocks == 0 {
            return;
        }
        let offset = match phase.pattern {
            Pattern::Random => self.rng.below(blocks) * bs,
            Pattern::Sequential => {
                if self.cursor + bs > self.plan.span_bytes {
                    self.cursor = 0;
                }
                let at = self.cursor;
                self.cursor += bs;
                at
            }
            Pattern::Distance { distance_bytes } => {
                // Each read lies `distance + DISTANCE_STEP` past the one
                // before (wrapping), so every seek spans about the distance
                // and no read lands in what an earlier one read ahead.
                let room = (self.plan.span_bytes / bs).max(1) * bs;
                if !self.far {
                    self.far = true;
                    self.cursor = self.rng.below(blocks) * bs;
                } else {
                    // Up to 1 MiB more at random (about a track), so that
                    // reads do not land at one angle a fixed time apart.
                    let jitter = self.rng.below(256) * 4096;
                    self.cursor =
                        (self.cursor + distance_bytes + DISTANCE_STEP + jitter) % room / bs * bs;
                }
                self.cursor
            }
            Pattern::Backward => {
                // Start in the second quarter; step back one block a read.
                if !self.far {
                    self.far = true;
                    self.cursor = (self.plan.span_bytes / 4 + bs) / bs * bs + bs * 4096;
                }
                self.cursor = self.cursor.checked_sub(bs).unwrap_or(blocks / 2 * bs);
                self.cursor.min((blocks - 1) * bs)
            }
        };
        let write = phase.read_percent < 100
            && (phase.read_percent == 0 || self.rng.below(100) >= u64::from(phase.read_percent));
        io.submit(BlockIo {
            op: if write { Op::Write } else { Op::Read },
            sync: true,
            sector: offset / SECTOR_SIZE,
            sectors: phase.bs / SECTOR_SIZE as u32,
            task: TaskId(self.current as u32 + 1),
            prio: IoPrio::default(),
            group: GroupId::ROOT,
            meta: false,
            noidle: false,
        });
        self.first_submit.get_or_insert(now);
        self.submitted += 1;
        self.in_flight += 1;
    }

    fn end_phase(&mut self) {
        if let Some(mut r) = self.partial.take() {
            r.elapsed = self
                .last_complete
                .since(self.first_submit.unwrap_or(self.last_complete));
            let total = self.plan.phases.len();
            if let Some(f) = &mut self.on_phase {
                f(&r, self.current, total);
            }
            self.results.push(r);
        }
        self.current += 1;
    }
}

impl Workload for ProbeWorkload {
    fn start(&mut self, io: &mut Io<'_>) {
        self.begin(io);
    }

    fn wake(&mut self, _token: u64, _io: &mut Io<'_>) {}

    fn completed(&mut self, done: &Completion, io: &mut Io<'_>) {
        self.in_flight -= 1;
        self.last_complete = done.completed;
        if let Some(r) = &mut self.partial {
            if done.error.is_some() {
                r.errors += 1;
            } else {
                let lat = done.completed.since(done.submitted);
                if done.op == Op::Read {
                    r.reads.record(lat);
                } else {
                    r.writes.record(lat);
                }
                r.bytes += u64::from(done.sectors) * SECTOR_SIZE;
            }
        }
        let Some(phase) = self.phase() else { return };
        self.submit_one(phase, io);
        if self.in_flight == 0 {
            let task = TaskId(self.current as u32 + 1);
            self.end_phase();
            io.task_exited(task);
            self.begin(io);
        }
    }

    fn finished(&self) -> bool {
        self.current >= self.plan.phases.len()
    }
}

/// One phase's figures over its rounds ([`ProbePlan::repeated`]).
#[derive(Clone, Debug)]
pub struct Summary {
    /// The phase of one round.
    pub phase: Phase,
    /// Rounds that completed any I/O.
    pub rounds: usize,
    /// Medians over the rounds: one stalled round does not move them.
    pub iops: f64,
    pub mb_s: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    /// Every round's latencies together, for the tail: a stall that hits
    /// one round in a hundred shows in the p99 as it would in one long run.
    pub pooled: LatencyStats,
}

impl Summary {
    /// Quantile `q` of the pooled latencies, microseconds.
    pub fn q_us(&self, q: f64) -> f64 {
        self.pooled.quantile(q).nanos() as f64 / 1e3
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The results of a repeated plan, one [`Summary`] per distinct phase in
/// the order they first ran; rounds that completed nothing are left out
/// (a phase none of whose rounds did is left out altogether).
pub fn summarize(results: &[PhaseResult]) -> Vec<Summary> {
    let mut phases: Vec<Phase> = Vec::new();
    for r in results {
        if !phases.contains(&r.phase) {
            phases.push(r.phase);
        }
    }
    phases
        .into_iter()
        .filter_map(|phase| {
            let rounds: Vec<&PhaseResult> = results
                .iter()
                .filter(|r| r.phase == phase && r.ios() > 0)
                .collect();
            if rounds.is_empty() {
                return None;
            }
            let mut pooled = LatencyStats::new();
            for r in &rounds {
                pooled.merge(&r.latency());
            }
            let of =
                |f: &dyn Fn(&PhaseResult) -> f64| median(rounds.iter().map(|r| f(r)).collect());
            Some(Summary {
                phase,
                rounds: rounds.len(),
                iops: of(&PhaseResult::iops),
                mb_s: of(&PhaseResult::mb_s),
                mean_us: of(&|r| r.latency().mean().nanos() as f64 / 1e3),
                p50_us: of(&|r| r.lat_us(0.5)),
                pooled,
            })
        })
        .collect()
}
