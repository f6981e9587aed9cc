//! The engine: one policy in front of one [`Backend`], on a real clock.
//!
//! Requests enter the policy when they are submitted (`insert`, with the
//! clock's `now`); whenever fewer than `depth` operations are in flight the
//! engine asks the policy for the next one (`dispatch`) and pushes it to the
//! backend; completions go back to the policy (`complete`) and, part by
//! part, to whoever submitted them. `Dispatch::Wait { until }` arms a real
//! timer (an io_uring timeout), so the engine sleeps in the kernel until the
//! wait ends or a completion arrives, whichever is first.
//!
//! Invariants: every submitted request comes back exactly once, as a
//! [`Done`] with its result (bytes moved, fewer on a short read, or the
//! errno); a merged request's parts each get their share of the result;
//! at most `depth` operations are in flight.

use crate::backend::{Backend, Submission};
use elevator_core::QueueLimits;
use elevator_core::{
    Completion, Duration, GroupId, Instant, IoPrio, Op, Request, RequestId, TaskId, Workload,
    SECTOR_SIZE,
};
use elevator_core::{Io, IoClass};
use elevator_sched::stack::{ConfigError, Origin, StackBuilder, StackInfo};
use elevator_sched::{Checked, Dispatch, Scheduler};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::io;

/// The real clock, as nanoseconds since the runtime started. The one place
/// in the workspace that reads the OS clock (see `clippy.toml`).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: std::time::Instant,
}

impl Clock {
    pub fn start() -> Self {
        // The runtime's clock is real by design; policies still get `now`
        // as an argument from here.
        #[allow(clippy::disallowed_methods)]
        let origin = std::time::Instant::now();
        Clock { origin }
    }

    pub fn now(&self) -> Instant {
        Instant(self.origin.elapsed().as_nanos() as u64)
    }
}

/// A request as a client describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submit {
    pub op: Op,
    /// Byte offset; a multiple of 512.
    pub offset: u64,
    /// Bytes; a non-zero multiple of 512.
    pub len: u32,
    pub task: TaskId,
    pub prio: IoPrio,
    pub group: GroupId,
}

impl Submit {
    pub fn read(task: u32, offset: u64, len: u32) -> Self {
        Submit {
            op: Op::Read,
            offset,
            len,
            task: TaskId(task),
            prio: IoPrio::default(),
            group: GroupId::ROOT,
        }
    }

    pub fn write(task: u32, offset: u64, len: u32) -> Self {
        Submit {
            op: Op::Write,
            ..Submit::read(task, offset, len)
        }
    }
}

/// A device error, as the kernel reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno {
    pub errno: i32,
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", io::Error::from_raw_os_error(self.errno))
    }
}

impl std::error::Error for Errno {}

/// A finished request, returned once to its submitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    pub id: RequestId,
    pub op: Op,
    pub offset: u64,
    pub len: u32,
    pub task: TaskId,
    /// Bytes moved (fewer than `len` on a short read), or the error.
    pub result: Result<u32, Errno>,
    pub submitted: Instant,
    pub dispatched: Instant,
    pub completed: Instant,
    /// The last part of the device operation it was merged into.
    pub last_part: bool,
}

impl Done {
    pub fn is_short(&self) -> bool {
        matches!(self.result, Ok(n) if n < self.len)
    }
}

/// A submission the runtime refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubmitError {
    Unaligned {
        offset: u64,
        len: u32,
    },
    /// The service's engine thread has stopped.
    EngineGone,
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::Unaligned { offset, len } => write!(
                f,
                "offset {offset} and length {len} must be non-zero multiples of 512 bytes"
            ),
            SubmitError::EngineGone => write!(f, "the runtime's engine thread has stopped"),
        }
    }
}

impl std::error::Error for SubmitError {}

/// Counters of one runtime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    pub submitted: u64,
    pub returned: u64,
    /// Operations sent to the device (merged requests count once).
    pub dispatched: u64,
    /// Of which reads.
    pub dispatched_reads: u64,
    /// Requests merged into another before dispatch, reads and writes.
    pub merged: [u64; 2],
    /// Time with at least one operation at the device.
    pub busy: Duration,
    pub errors: u64,
    pub short: u64,
    /// Timers armed for `Dispatch::Wait` or a caller's deadline.
    pub timers: u64,
}

#[derive(Clone, Copy, Debug)]
struct Part {
    op: Op,
    sector: u64,
    sectors: u32,
    task: TaskId,
    submitted: Instant,
}

/// What the bytes of requests are: a workload that cares (fio's buffer
/// contents and verification) fills its writes and checks its reads here,
/// part by part (a merged operation's buffer holds several requests).
pub trait Payload: Send + std::fmt::Debug {
    /// Fill the bytes of write request `id`.
    fn fill(&mut self, id: RequestId, buf: &mut [u8]);
    /// Check the bytes read for request `id`; `false` fails it (EILSEQ,
    /// as fio's verification fails an I/O).
    fn check(&mut self, id: RequestId, buf: &[u8]) -> bool;
}

/// The errno of a read whose bytes did not check out.
pub const EILSEQ: i32 = libc::EILSEQ;

/// One policy, one backend, a depth limit and a real clock.
#[derive(Debug)]
pub struct Runtime<B> {
    backend: B,
    /// The stack, inside the checker (off unless the stack asked for it
    /// or debug assertions are on).
    policy: Checked,
    depth: usize,
    clock: Clock,
    next_id: u64,
    /// Every submitted request not yet returned.
    parts: FxHashMap<RequestId, Part>,
    /// Dispatched operations by tag (the survivor's id), with dispatch time.
    in_flight: FxHashMap<u64, (Request, Instant)>,
    cqes: Vec<(u64, i32)>,
    /// The earliest pending timer.
    timer: Option<Instant>,
    /// Since when the device has had operations in flight.
    busy_since: Option<Instant>,
    stats: RuntimeStats,
    payload: Option<Box<dyn Payload>>,
    /// Parts whose read-back failed its check.
    bad: rustc_hash::FxHashSet<RequestId>,
}

impl<B: Backend> Runtime<B> {
    /// `policy` as it is, unchecked; `depth` is the device queue-depth
    /// limit (at least 1). Run paths build their stack with
    /// [`Runtime::build`].
    pub fn new(backend: B, policy: Box<dyn Scheduler>, depth: usize) -> Self {
        Runtime::with_checked(backend, Checked::unchecked(policy), depth)
    }

    /// The stack `builder` describes, built for a target with `limits`,
    /// in front of `backend` with `depth` operations in flight at most:
    /// the policy with its tunables and the control groups, the group
    /// layers the run asks for, and the invariant checker around them when
    /// asked or when debug assertions are on (a broken promise panics).
    /// Block-layer settings are refused: the runtime has no request lists
    /// (the kernel's own block layer below the target has them).
    pub fn build(
        builder: StackBuilder,
        backend: B,
        limits: &QueueLimits,
        depth: usize,
    ) -> Result<(Self, StackInfo), ConfigError> {
        if !builder.block_settings().is_empty() {
            return Err(ConfigError::Unsupported {
                origin: Origin::flag("--set block.*"),
                message: "block-layer settings apply to the simulator; the io_uring runtime \
                          sends requests to the kernel's own block layer"
                    .into(),
            });
        }
        let stack = builder.build(limits);
        Ok((
            Runtime::with_checked(backend, stack.scheduler, depth),
            stack.info,
        ))
    }

    fn with_checked(backend: B, policy: Checked, depth: usize) -> Self {
        Runtime {
            backend,
            policy,
            depth: depth.max(1),
            clock: Clock::start(),
            next_id: 0,
            parts: FxHashMap::default(),
            in_flight: FxHashMap::default(),
            cqes: Vec::new(),
            timer: None,
            busy_since: None,
            stats: RuntimeStats::default(),
            payload: None,
            bad: Default::default(),
        }
    }

    /// Fill writes and check reads through `payload`.
    pub fn set_payload(&mut self, payload: Box<dyn Payload>) {
        self.payload = Some(payload);
    }

    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    pub fn policy(&self) -> &dyn Scheduler {
        self.policy.inner()
    }

    /// What the invariant checker has seen, if it is on.
    pub fn check_report(&self) -> Option<&elevator_sched::CheckReport> {
        self.policy.enabled().then(|| self.policy.report())
    }

    /// Slots freed by merges outside `insert`: the runtime holds no
    /// request slots, so it only takes them (the checker keeps them until
    /// taken).
    fn drop_freed_slots(&mut self) {
        while self.policy.take_freed_slot().is_some() {}
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn stats(&self) -> RuntimeStats {
        let mut stats = self.stats;
        if let Some(since) = self.busy_since {
            stats.busy += self.clock.now().since(since);
        }
        stats
    }

    /// Requests submitted and not yet returned.
    pub fn outstanding(&self) -> usize {
        self.parts.len()
    }

    /// Queue a request in the policy; its [`Done`] comes from a later poll.
    pub fn submit(&mut self, s: Submit) -> Result<RequestId, SubmitError> {
        let sector = SECTOR_SIZE as u32;
        if s.len == 0 || !s.len.is_multiple_of(sector) || !s.offset.is_multiple_of(SECTOR_SIZE) {
            return Err(SubmitError::Unaligned {
                offset: s.offset,
                len: s.len,
            });
        }
        let id = RequestId(self.next_id);
        self.next_id += 1;
        let now = self.clock.now();
        self.insert(
            Request {
                id,
                op: s.op,
                sync: true,
                sector: s.offset / SECTOR_SIZE,
                sectors: s.len / sector,
                task: s.task,
                prio: s.prio,
                group: s.group,
                arrival: now,
                merged: Vec::new(),
                meta: false,
                // O_DIRECT I/O: writes are REQ_SYNC without REQ_NOIDLE.
                noidle: false,
            },
            now,
        );
        Ok(id)
    }

    fn insert(&mut self, request: Request, now: Instant) {
        self.parts.insert(
            request.id,
            Part {
                op: request.op,
                sector: request.sector,
                sectors: request.sectors,
                task: request.task,
                submitted: now,
            },
        );
        self.stats.submitted += 1;
        self.policy.insert(request, now);
    }

    /// The task will submit no more requests.
    pub fn task_exited(&mut self, task: TaskId) {
        let now = self.clock.now();
        self.policy.task_exited(task, now);
    }

    /// Fill the device up to `depth`; the policy's wait, if it asked for one.
    fn dispatch(&mut self, now: Instant) -> io::Result<Option<Instant>> {
        while self.in_flight.len() < self.depth {
            match self.policy.dispatch(now) {
                Dispatch::Request(r) => {
                    let tag = r.id.0;
                    let sub = Submission {
                        tag,
                        op: r.op,
                        offset: r.sector * SECTOR_SIZE,
                        len: r.sectors * SECTOR_SIZE as u32,
                        ioprio: sqe_ioprio(r.prio),
                    };
                    match (&mut self.payload, r.op) {
                        (Some(payload), Op::Write) => {
                            let parts = &self.parts;
                            self.backend.push_filled(sub, &mut |buf| {
                                for id in r.ids() {
                                    if let Some(p) = parts.get(&id) {
                                        let skip = ((p.sector - r.sector) * SECTOR_SIZE) as usize;
                                        let len = p.sectors as usize * SECTOR_SIZE as usize;
                                        if let Some(b) = buf.get_mut(skip..skip + len) {
                                            payload.fill(id, b);
                                        }
                                    }
                                }
                            })?;
                        }
                        _ => self.backend.push(sub)?,
                    }
                    self.stats.dispatched += 1;
                    let dir = usize::from(r.op != Op::Read);
                    if dir == 0 {
                        self.stats.dispatched_reads += 1;
                    }
                    self.stats.merged[dir] += r.merged.len() as u64;
                    self.busy_since.get_or_insert(now);
                    self.in_flight.insert(tag, (r, now));
                }
                Dispatch::Wait { until } => {
                    self.drop_freed_slots();
                    return Ok(Some(until));
                }
                Dispatch::Empty => break,
            }
        }
        self.drop_freed_slots();
        Ok(None)
    }

    /// Dispatch, then sleep in the kernel until a request finishes, the
    /// policy's wait or the `deadline` ends, or the doorbell rings; append
    /// the finished requests to `out`. Returns at once when there is
    /// nothing to wait for (then the answer is `false`). May return with
    /// nothing finished (a timer or the doorbell): call again.
    pub fn poll(&mut self, deadline: Option<Instant>, out: &mut Vec<Done>) -> io::Result<bool> {
        loop {
            let now = self.clock.now();
            let wait = self.dispatch(now)?;
            if deadline.is_some_and(|d| d <= now) {
                // What was dispatched reaches the device now, not at the
                // next wait.
                self.backend.flush()?;
                return Ok(false);
            }
            let wake = match (wait, deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if self.in_flight.is_empty() && wake.is_none() {
                self.backend.flush()?;
                return Ok(false);
            }
            if let Some(at) = wake {
                if at <= now {
                    // The policy's wait is already over: ask it again.
                    continue;
                }
                if self.timer.is_none_or(|t| at < t || t <= now) {
                    self.backend
                        .arm_timer(std::time::Duration::from_nanos(at.since(now).nanos()))?;
                    self.timer = Some(at);
                    self.stats.timers += 1;
                }
            }
            self.cqes.clear();
            match &mut self.payload {
                Some(payload) => {
                    let (parts, in_flight, bad) = (&self.parts, &self.in_flight, &mut self.bad);
                    self.backend.wait_checked(&mut self.cqes, &mut |tag, buf| {
                        let Some((r, _)) = in_flight.get(&tag) else {
                            return;
                        };
                        for id in r.ids() {
                            if let Some(p) = parts.get(&id) {
                                let skip = ((p.sector - r.sector) * SECTOR_SIZE) as usize;
                                let len = p.sectors as usize * SECTOR_SIZE as usize;
                                let end = (skip + len).min(buf.len());
                                if skip < end && !payload.check(id, &buf[skip..end]) {
                                    bad.insert(id);
                                }
                            }
                        }
                    })?;
                }
                None => self.backend.wait(&mut self.cqes)?,
            }
            let now = self.clock.now();
            if self.timer.is_some_and(|t| t <= now) {
                self.timer = None;
            }
            let mut cqes = std::mem::take(&mut self.cqes);
            for &(tag, result) in &cqes {
                self.finish(tag, result, now, out);
            }
            cqes.clear();
            self.cqes = cqes;
            return Ok(true);
        }
    }

    /// Let client threads wake [`Runtime::poll`] by writing to `fd`.
    pub fn doorbell(&mut self, fd: std::os::fd::RawFd) -> io::Result<()> {
        self.backend.doorbell(fd)
    }

    /// Wait for every outstanding request; append them to `out`.
    pub fn drain(&mut self, out: &mut Vec<Done>) -> io::Result<()> {
        while self.outstanding() > 0 {
            if !self.poll(None, out)? {
                // The policy holds requests but neither dispatches nor waits:
                // a policy bug, not something to spin on.
                return Err(io::Error::other(format!(
                    "{} holds {} requests and dispatches none",
                    self.policy.name(),
                    self.outstanding()
                )));
            }
        }
        Ok(())
    }

    fn finish(&mut self, tag: u64, result: i32, now: Instant, out: &mut Vec<Done>) {
        let (request, dispatched) = self
            .in_flight
            .remove(&tag)
            .expect("a completion for an operation in flight");
        self.policy.complete(&request, now);
        self.drop_freed_slots();
        if self.in_flight.is_empty() {
            if let Some(since) = self.busy_since.take() {
                self.stats.busy += now.since(since);
            }
        }
        let last = request.ids().count() - 1;
        for (i, id) in request.ids().enumerate() {
            let part = self
                .parts
                .remove(&id)
                .expect("each part of a request returns once");
            let len = part.sectors * SECTOR_SIZE as u32;
            let result = if self.bad.remove(&id) {
                self.stats.errors += 1;
                Err(Errno { errno: EILSEQ })
            } else if result < 0 {
                self.stats.errors += 1;
                Err(Errno { errno: -result })
            } else {
                // The part's share of the bytes the operation moved.
                let skip = (part.sector - request.sector) * SECTOR_SIZE;
                let got = (result as u64).saturating_sub(skip).min(u64::from(len)) as u32;
                if got < len {
                    self.stats.short += 1;
                }
                Ok(got)
            };
            self.stats.returned += 1;
            out.push(Done {
                id,
                op: part.op,
                offset: part.sector * SECTOR_SIZE,
                len,
                task: part.task,
                result,
                submitted: part.submitted,
                dispatched,
                completed: now,
                last_part: i == last,
            });
        }
    }

    /// Drive `workload` until it is finished (or `limit` has passed). Device
    /// errors reach the workload in `Completion::error`; a short transfer,
    /// which the port cannot express, stops the run.
    pub fn run(
        &mut self,
        workload: &mut dyn Workload,
        limit: Option<Duration>,
    ) -> Result<Instant, RunError> {
        let mut timers: BinaryHeap<Reverse<(Instant, u64, u64)>> = BinaryHeap::new();
        let mut armed_seq = 0u64;
        let mut submitted = Vec::new();
        let mut armed = Vec::new();
        let mut exited = Vec::new();
        let mut done = Vec::new();
        let end = limit.map(|l| self.clock.now() + l);
        // `now` is the instant the workload sees: the clock when it is
        // woken or started, the reap instant when it hears of completions
        // (one clock read per batch, not per request).
        let mut call = |rt: &mut Self,
                        timers: &mut BinaryHeap<Reverse<(Instant, u64, u64)>>,
                        now: Instant,
                        f: &mut dyn FnMut(&mut Io<'_>)| {
            let mut io = Io::new(
                now,
                &mut rt.next_id,
                &mut submitted,
                &mut armed,
                &mut exited,
            );
            f(&mut io);
            for r in submitted.drain(..) {
                rt.insert(r, now);
            }
            for (at, token) in armed.drain(..) {
                timers.push(Reverse((at, armed_seq, token)));
                armed_seq += 1;
            }
            for task in exited.drain(..) {
                rt.policy.task_exited(task, now);
            }
        };
        let now = self.clock.now();
        call(self, &mut timers, now, &mut |io| workload.start(io));
        let mut last_completion = self.clock.now();
        while !workload.finished() {
            let now = self.clock.now();
            if end.is_some_and(|e| now >= e) {
                break;
            }
            while let Some(&Reverse((at, _, token))) = timers.peek() {
                if at > now {
                    break;
                }
                timers.pop();
                call(self, &mut timers, now, &mut |io| workload.wake(token, io));
            }
            let next = timers.peek().map(|Reverse((at, _, _))| *at);
            let deadline = match (next, end) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if self.outstanding() == 0 && next.is_none() {
                break;
            }
            done.clear();
            let slept = self.poll(deadline, &mut done).map_err(RunError::Engine)?;
            if !slept && done.is_empty() && deadline.is_none() && self.outstanding() > 0 {
                return Err(RunError::Engine(io::Error::other(format!(
                    "{} holds {} requests and dispatches none",
                    self.policy.name(),
                    self.outstanding()
                ))));
            }
            for (i, d) in done.iter().enumerate() {
                // A device error reaches the workload in the completion, as
                // the simulator's faulty devices report theirs; the port has
                // no short transfers, so one stops the run.
                let error = match d.result {
                    Err(e) if e.errno == libc::ETIMEDOUT => Some(elevator_core::IoError::Timeout),
                    Err(_) => Some(elevator_core::IoError::Io),
                    Ok(n) if n < d.len => return Err(RunError::Short { done: *d, bytes: n }),
                    Ok(_) => None,
                };
                let completion = Completion {
                    id: d.id,
                    op: d.op,
                    sector: d.offset / SECTOR_SIZE,
                    sectors: d.len / SECTOR_SIZE as u32,
                    error,
                    task: d.task,
                    submitted: d.submitted,
                    dispatched: d.dispatched,
                    completed: d.completed,
                    disk_time: d.completed.since(d.dispatched.max(last_completion)),
                };
                call(self, &mut timers, d.completed, &mut |io| {
                    workload.completed(&completion, io)
                });
                if d.last_part {
                    last_completion = d.completed;
                    call(self, &mut timers, d.completed, &mut |io| {
                        workload.request_done(io)
                    });
                }
                // What this completion let the workload submit goes to the
                // device now, not after the whole batch: the device is fed
                // one request at a time as fio feeds it (its default
                // iodepth_batch of 1), instead of idling while the batch is
                // processed (about 20 % more IOPS at QD32 on a loop device).
                // A policy's wait is armed by the next `poll`. After the
                // batch's last completion there is nothing left to do but
                // wait, so the next `poll` submits and waits in one
                // io_uring_enter (fio's io_uring engine spends two: a
                // submit, then a wait with min_complete 1); a flush here
                // would add a second system call to every request at QD1.
                self.dispatch(d.completed).map_err(RunError::Engine)?;
                if i + 1 < done.len() {
                    self.backend.flush().map_err(RunError::Engine)?;
                }
            }
        }
        Ok(self.clock.now())
    }
}

/// Why a workload run stopped early.
#[derive(Debug)]
pub enum RunError {
    /// A read or write moved fewer bytes than asked.
    Short { done: Done, bytes: u32 },
    /// io_uring itself failed.
    Engine(io::Error),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Short { done, bytes } => write!(
                f,
                "short {:?}: {bytes} of {} bytes at offset {} by task {}",
                done.op, done.len, done.offset, done.task.0
            ),
            RunError::Engine(e) => write!(f, "io_uring: {e}"),
        }
    }
}

impl std::error::Error for RunError {}

/// The SQE's ioprio field: class in bits 13-15, level below, as
/// `IOPRIO_PRIO_VALUE` in include/uapi/linux/ioprio.h (0 = none: the
/// kernel derives it from the submitting task).
pub fn sqe_ioprio(prio: IoPrio) -> u16 {
    let class: u16 = match prio.class() {
        IoClass::None => return 0,
        IoClass::RealTime => 1,
        IoClass::BestEffort => 2,
        IoClass::Idle => 3,
    };
    (class << 13) | u16::from(prio.level())
}
