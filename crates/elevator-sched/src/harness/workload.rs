//! Workloads as data: tasks that follow scripts, and the fake device.
//!
//! A task is a closed-loop client: it keeps at most `outstanding` requests
//! in the system (queued or in flight), waits a think time before each
//! issue, and walks through its phases in order. A burst phase issues all
//! its requests at once, whatever `outstanding` says (writeback flushing a
//! file). Everything random inside a task (sizes, random sectors, think
//! times) is drawn from a `Prng` seeded by the script, so a case replays
//! exactly. Ranges (`min_request..=max_request`, `min_think..=max_think`)
//! are drawn uniformly; an empty spread is a fixed value, which is how a
//! unit test writes "a reader of 256 sectors that thinks 100 ms"
//! ([`Phase::reads`]).
//!
//! The device ([`Service`]) is either the conformance suite's: requests
//! served independently in random times, completing in a random order; or
//! a serial one: one request at a time in dispatch order, costing a fixed
//! time, a time per sector and a seek when it does not start where the
//! previous one ended (a disk without NCQ, or a FIFO queue in front of
//! flash), for tests that measure shares and latencies.

use elevator_core::{
    Duration, GroupId, Instant, IoPrio, Op, Prng, QueueLimits, Request, RequestId, Sector, TaskId,
};
use std::collections::VecDeque;

/// One generated test case: who issues what, and the device that serves it.
#[derive(Clone, Debug)]
pub struct Case {
    pub workload: Workload,
    pub device: DeviceSpec,
}

impl Case {
    /// `tasks` on a device that serves one request after another, each in
    /// `fixed` whatever its size or place (`Service::Serial` without
    /// per-sector or seek cost), with `limits`.
    pub fn serial(tasks: Vec<TaskScript>, limits: QueueLimits, fixed: Duration) -> Self {
        Case {
            workload: Workload { tasks },
            device: DeviceSpec {
                limits,
                service: Service::Serial {
                    fixed,
                    per_sector: Duration::ZERO,
                    seek: Duration::ZERO,
                },
                seed: 1,
            },
        }
    }
}

/// The tasks of a case.
#[derive(Clone, Debug)]
pub struct Workload {
    pub tasks: Vec<TaskScript>,
}

/// A fake device: a queue depth (in `limits.queue_depth`, the requests
/// the driver lets it hold at once) and how it serves them.
#[derive(Clone, Debug)]
pub struct DeviceSpec {
    pub limits: QueueLimits,
    pub service: Service,
    /// Seeds the random service times and completion orders of
    /// [`Service::Uniform`].
    pub seed: u64,
}

/// How long the fake device takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// Each request in flight is served on its own in a time drawn
    /// uniformly from `min..=max`; several due at once complete in a random
    /// order. The conformance suite's device: any order a policy may meet.
    Uniform { min: Duration, max: Duration },
    /// One request at a time, in dispatch order (the rest wait inside the
    /// device): `fixed` + `per_sector` × sectors, plus `seek` unless the
    /// request starts where the previous one ended. With `seek` and
    /// `per_sector` zero, every request takes `fixed`.
    Serial {
        fixed: Duration,
        per_sector: Duration,
        seek: Duration,
    },
}

impl DeviceSpec {
    /// The longest a request can stay on the device (the checker's
    /// starvation bound is computed from it).
    pub fn max_service(&self) -> Duration {
        match self.service {
            Service::Uniform { max, .. } => max,
            Service::Serial {
                fixed,
                per_sector,
                seek,
            } => {
                let one = fixed + seek + per_sector.mul(u64::from(self.limits.max_sectors));
                one.mul(u64::from(self.limits.queue_depth))
            }
        }
    }
}

/// What a request does, as a workload sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Read,
    SyncWrite,
    AsyncWrite,
}

impl OpKind {
    const ALL: [OpKind; 3] = [OpKind::Read, OpKind::SyncWrite, OpKind::AsyncWrite];

    fn op_and_sync(self) -> (Op, bool) {
        match self {
            OpKind::Read => (Op::Read, true),
            OpKind::SyncWrite => (Op::Write, true),
            OpKind::AsyncWrite => (Op::Write, false),
        }
    }
}

/// Which ops a phase issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpMix {
    Only(OpKind),
    /// Each request picks one of the three at random.
    Any,
}

/// Where a phase puts its requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Each request starts where the task's previous one ended (back merges).
    Sequential,
    /// Each request ends where the task's previous one started (front merges).
    Descending,
    /// Leave a hole the size of the request, then fill it with the next
    /// one, so a merge closes a gap between two queued requests. Going
    /// down, the request that fills the hole makes a newer queued request
    /// swallow an older one.
    Holes { descending: bool },
    /// Uniformly within `span` sectors of the task's base (a small span
    /// makes overlapping and identical requests).
    Random { span: u64 },
    /// Right after or right before a request another task issued recently
    /// (merges across tasks and groups).
    NearOthers,
    /// The same sectors as the task's previous request.
    Repeat,
    /// Each request starts `stride` sectors after the previous one
    /// started: two tasks with a stride of twice their size, one starting
    /// a size further on, read alternate chunks of one file.
    Strided { stride: u64 },
    /// Any of the above but `Strided`, chosen per request.
    Mixed,
}

/// A stretch of a task's life with one pattern.
#[derive(Clone, Debug)]
pub struct Phase {
    pub requests: u32,
    pub ops: OpMix,
    pub layout: Layout,
    /// Request sizes are drawn from `min_request..=max_request`, and never
    /// exceed the queue's `max_sectors` (the block layer splits larger
    /// bios).
    pub max_request: u32,
    /// The smallest request (at least 1); `min_request == max_request`
    /// makes every request that size.
    pub min_request: u32,
    /// Each issue comes a random `min_think..=max_think` after the task may
    /// issue (after its previous request completed, with `outstanding` 1).
    pub min_think: Duration,
    pub max_think: Duration,
    /// Issue every request of the phase at once.
    pub burst: bool,
    /// Idle time before the phase's first request.
    pub pause: Duration,
    /// Priority for this phase (`ionice` mid-run); the task's otherwise.
    pub prio: Option<IoPrio>,
    /// One read in eight is file-system metadata (`REQ_META`, which CFQ
    /// serves first); off, no request is.
    pub metadata: bool,
}

impl Phase {
    /// `requests` plain reads of `sectors` each, laid out by `layout`, each
    /// issued as soon as the task may (no think time, no pause, no
    /// metadata). `u32::MAX` requests: a reader that never ends.
    pub fn reads(requests: u32, sectors: u32, layout: Layout) -> Phase {
        Phase {
            requests,
            ops: OpMix::Only(OpKind::Read),
            layout,
            max_request: sectors,
            min_request: sectors,
            min_think: Duration::ZERO,
            max_think: Duration::ZERO,
            burst: false,
            pause: Duration::ZERO,
            prio: None,
            metadata: false,
        }
    }

    /// The same phase with a fixed think time before each issue.
    pub fn think(self, think: Duration) -> Phase {
        Phase {
            min_think: think,
            max_think: think,
            ..self
        }
    }

    /// The same phase, idle for `pause` before its first request.
    pub fn pause(self, pause: Duration) -> Phase {
        Phase { pause, ..self }
    }
}

/// When a task tells the policy it exited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Never,
    /// Once its last request completed.
    WhenDone,
    /// Right after issuing its last request, with requests still queued.
    AfterLastIssue,
}

/// One task's script.
#[derive(Clone, Debug)]
pub struct TaskScript {
    pub task: TaskId,
    pub prio: IoPrio,
    pub group: GroupId,
    pub start: Duration,
    /// Closed loop: at most this many requests in the system at once.
    pub outstanding: u32,
    pub phases: Vec<Phase>,
    pub exit: Exit,
    pub seed: u64,
    /// Where the task's sectors start; at least [`REGION`] (descending
    /// layouts need room below it), and sequential ones go on for up to
    /// `capacity - 2 × REGION`. `None`: a place drawn from `seed`.
    pub base: Option<Sector>,
}

impl TaskScript {
    /// Task `task` at best-effort level 4 in the root group, from time
    /// zero, one request outstanding, never exiting, at `base`, going
    /// through `phases`.
    pub fn new(task: u32, base: Sector, phases: Vec<Phase>) -> TaskScript {
        TaskScript {
            task: TaskId(task),
            prio: IoPrio::be(4),
            group: GroupId::ROOT,
            start: Duration::ZERO,
            outstanding: 1,
            phases,
            exit: Exit::Never,
            seed: u64::from(task),
            base: Some(base),
        }
    }
}

impl Workload {
    /// How many requests the tasks will issue in all.
    pub fn total_requests(&self) -> u64 {
        self.tasks
            .iter()
            .flat_map(|t| &t.phases)
            .map(|p| u64::from(p.requests))
            .sum()
    }
}

/// Recently issued extents of all tasks, for `Layout::NearOthers`.
#[derive(Debug, Default)]
pub struct Recent(VecDeque<(Sector, u32)>);

impl Recent {
    const KEEP: usize = 16;

    pub fn push(&mut self, sector: Sector, sectors: u32) {
        if self.0.len() == Self::KEEP {
            self.0.pop_front();
        }
        self.0.push_back((sector, sectors));
    }
}

/// A task's base is at least this far from the start of the device and
/// twice this far from its end; a layout whose cursor runs below `REGION`
/// or into the last `2 × REGION` sectors starts over at the base.
pub const REGION: Sector = 1 << 22;

/// A running task: the script plus where it is in it.
#[derive(Debug)]
pub struct Client {
    pub script: TaskScript,
    prng: Prng,
    phase: usize,
    issued_in_phase: u32,
    /// Issued and not yet completed.
    pub in_system: u32,
    /// An issue is scheduled (at most one at a time).
    scheduled: bool,
    pub exited: bool,
    base: Sector,
    /// Where sequential and hole layouts go on.
    cursor: Sector,
    last: Option<(Sector, u32)>,
    hole: Option<(Sector, u32)>,
}

/// What a client asks the driver to do after an event.
#[derive(Debug, Default)]
pub struct ClientStep {
    /// Issue again at this time.
    pub issue_at: Option<Instant>,
    /// Tell the policy this task exited.
    pub exit: bool,
}

impl Client {
    pub fn new(script: TaskScript, capacity: Sector) -> Self {
        let mut prng = Prng::new(script.seed);
        let base = match script.base {
            Some(base) => {
                assert!(
                    base >= REGION && base + 2 * REGION <= capacity,
                    "task {:?}: base {base} outside {REGION}..={}",
                    script.task,
                    capacity.saturating_sub(2 * REGION)
                );
                base
            }
            None => {
                // Leave room below the base for descending layouts.
                let room = capacity.saturating_sub(3 * REGION).max(1);
                REGION + prng.below(room) / 8 * 8
            }
        };
        Client {
            script,
            prng,
            phase: 0,
            issued_in_phase: 0,
            in_system: 0,
            scheduled: false,
            exited: false,
            base,
            cursor: base,
            last: None,
            hole: None,
        }
    }

    pub fn task(&self) -> TaskId {
        self.script.task
    }

    fn done_issuing(&self) -> bool {
        self.phase >= self.script.phases.len()
    }

    /// The first issue, at the script's start.
    pub fn start(&mut self) -> ClientStep {
        self.next(Instant::ZERO + self.script.start)
    }

    /// Decide whether and when to issue next.
    fn next(&mut self, now: Instant) -> ClientStep {
        let mut step = ClientStep::default();
        if self.exited {
            return step;
        }
        if self.done_issuing() {
            step.exit = match self.script.exit {
                Exit::Never => false,
                Exit::WhenDone => self.in_system == 0,
                Exit::AfterLastIssue => true,
            };
            if step.exit {
                self.exited = true;
            }
            return step;
        }
        if self.scheduled {
            return step;
        }
        let phase = &self.script.phases[self.phase];
        if !phase.burst && self.in_system >= self.script.outstanding {
            return step;
        }
        let mut at = now;
        if self.issued_in_phase == 0 {
            at += phase.pause;
        }
        if !phase.burst {
            let spread = phase.max_think.saturating_sub(phase.min_think);
            at += phase.min_think + Duration(self.prng.below(spread.nanos() + 1));
        }
        self.scheduled = true;
        step.issue_at = Some(at);
        step
    }

    /// The scheduled issue is due: build its requests (one, or a whole
    /// burst) with ids from `next_id`.
    pub fn issue(
        &mut self,
        now: Instant,
        next_id: &mut u64,
        recent: &mut Recent,
        limits: &QueueLimits,
    ) -> (Vec<Request>, ClientStep) {
        debug_assert!(self.scheduled && !self.done_issuing());
        self.scheduled = false;
        let phase = self.script.phases[self.phase].clone();
        let count = if phase.burst {
            phase.requests - self.issued_in_phase
        } else {
            1
        };
        let mut out = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let request = self.build(&phase, RequestId(*next_id), now, recent, limits);
            *next_id += 1;
            recent.push(request.sector, request.sectors);
            self.last = Some((request.sector, request.sectors));
            out.push(request);
        }
        self.in_system += count;
        self.issued_in_phase += count;
        if self.issued_in_phase >= phase.requests {
            self.phase += 1;
            self.issued_in_phase = 0;
        }
        let step = self.next(now);
        (out, step)
    }

    /// One of this task's requests completed.
    pub fn completed(&mut self, now: Instant) -> ClientStep {
        debug_assert!(self.in_system > 0);
        self.in_system -= 1;
        self.next(now)
    }

    fn build(
        &mut self,
        phase: &Phase,
        id: RequestId,
        now: Instant,
        recent: &Recent,
        limits: &QueueLimits,
    ) -> Request {
        let kind = match phase.ops {
            OpMix::Only(k) => k,
            OpMix::Any => OpKind::ALL[self.prng.below(3) as usize],
        };
        let (op, sync) = kind.op_and_sync();
        let cap = phase.max_request.clamp(1, limits.max_sectors.max(1));
        let least = phase.min_request.clamp(1, cap);
        let mut sectors = least + self.prng.below(u64::from(cap - least + 1)) as u32;
        let layout = match phase.layout {
            Layout::Mixed => match self.prng.below(7) {
                0 => Layout::Sequential,
                1 => Layout::Descending,
                2 => Layout::Holes { descending: false },
                3 => Layout::Holes { descending: true },
                4 => Layout::Random { span: 1 << 12 },
                5 => Layout::NearOthers,
                _ => Layout::Repeat,
            },
            other => other,
        };
        let sector = match layout {
            Layout::Sequential | Layout::Mixed => {
                let s = self.cursor;
                self.cursor += u64::from(sectors);
                s
            }
            Layout::Strided { stride } => {
                let s = self.cursor;
                self.cursor += stride;
                s
            }
            Layout::Descending => {
                let s = self.cursor.saturating_sub(u64::from(sectors));
                self.cursor = s;
                s
            }
            Layout::Holes { descending } => match self.hole.take() {
                Some((s, n)) => {
                    sectors = n;
                    s
                }
                None => {
                    let n = u64::from(sectors);
                    if descending {
                        // Queue [c-2n, c-n), leaving [c-n, c) for the next.
                        let s = self.cursor.saturating_sub(2 * n);
                        self.hole = Some((s + n, sectors));
                        self.cursor = s;
                        s
                    } else {
                        // Queue [c+n, c+2n), leaving [c, c+n) for the next.
                        self.hole = Some((self.cursor, sectors));
                        let s = self.cursor + n;
                        self.cursor += 2 * n;
                        s
                    }
                }
            },
            Layout::Random { span } => self.base + self.prng.below(span.max(1)),
            Layout::NearOthers => {
                let near = recent
                    .0
                    .get(self.prng.below(recent.0.len().max(1) as u64) as usize);
                match near {
                    Some(&(s, n)) if self.prng.below(2) == 0 => s + u64::from(n),
                    Some(&(s, _)) => s.saturating_sub(u64::from(sectors)),
                    None => self.cursor,
                }
            }
            Layout::Repeat => match self.last {
                Some((s, n)) => {
                    sectors = n.min(cap);
                    s
                }
                None => self.cursor,
            },
        };
        // Stay on the device.
        let sector = sector.min(limits.capacity.saturating_sub(u64::from(sectors)));
        if self.cursor < REGION || self.cursor + 2 * REGION > limits.capacity {
            self.cursor = self.base;
        }
        // Some reads are filesystem metadata (CFQ serves them first).
        let meta = phase.metadata && op == Op::Read && self.prng.below(8) == 0;
        // Sync writes are fsync's (REQ_NOIDLE) or O_DIRECT's (not), half each.
        let noidle = op == Op::Write && sync && self.prng.below(2) == 0;
        Request {
            id,
            op,
            sync,
            sector,
            sectors,
            task: self.script.task,
            prio: phase.prio.unwrap_or(self.script.prio),
            group: self.script.group,
            arrival: now,
            merged: Vec::new(),
            meta,
            noidle,
        }
    }
}
