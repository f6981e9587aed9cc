//! The driver: runs one policy through one case in virtual time, checking
//! it from outside at every step.
//!
//! Each step at time `now`: the device completes what is due (in a random
//! order when several are), tasks issue what is due, then the driver asks
//! the policy for requests while the device has a free slot. A `Wait` must
//! point into the future; time then moves to the earliest of the next
//! completion, the next arrival and the wait's end, and the driver asks
//! again. Time strictly increases from step to step.

use crate::common::workload::{Case, Client, ClientStep, Recent};
use elevator_core::{Duration, GroupId, Instant, Op, Prng, Request, RequestId, Sector, TaskId};
use elevator_sched::{Dispatch, Scheduler};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

/// How strict the driver is.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Liveness: a policy that answers `Wait` while requests are queued and
    /// the device is idle fails once nothing (no arrival, dispatch or
    /// completion) has happened for this long.
    pub liveness_limit: Duration,
    /// Check each request's wait against `Scheduler::starvation_bound`.
    pub check_starvation: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            liveness_limit: Duration::from_secs(10),
            check_starvation: true,
        }
    }
}

/// A broken promise, with enough context to find it again.
#[derive(Clone, Debug)]
pub struct Violation {
    pub policy: &'static str,
    pub at: Instant,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "policy {} at {}: {}", self.policy, self.at, self.message)
    }
}

impl std::error::Error for Violation {}

/// What a passing run looked like (for coverage checks and curiosity).
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    pub inserted: u64,
    /// Requests sent to the device (a merged request counts once).
    pub dispatches: u64,
    /// Ids that reached the device inside another request's `merged`.
    pub merged_ids: u64,
    pub max_queued: usize,
    pub waits: u64,
    pub end: Instant,
    /// The longest insert-to-dispatch time of a read, and of a write.
    pub max_read_wait: Duration,
    pub max_write_wait: Duration,
    pub starvation_bound: Option<Duration>,
    /// FNV-1a over every dispatch (time, ids, extent): two runs dispatched
    /// the same requests at the same times iff their digests agree (up to
    /// hash collisions). For checking that a refactor keeps behaviour.
    pub digest: u64,
}

/// What the checker remembers about one inserted request.
#[derive(Clone, Debug)]
struct Part {
    op: Op,
    sync: bool,
    group: GroupId,
    task: TaskId,
    sector: Sector,
    sectors: u32,
    inserted: Instant,
    dispatched: Option<Instant>,
    text: String,
}

/// Checks a policy from outside: ids, merges, counts, waits.
#[derive(Debug)]
pub struct Checker {
    policy: &'static str,
    max_sectors: u32,
    /// Indexed by request id; ids are handed out densely from 1.
    parts: Vec<Option<Part>>,
    inserted: u64,
    dispatched_ids: u64,
    report: RunReport,
}

impl Checker {
    pub fn new(policy: &'static str, max_sectors: u32) -> Self {
        Checker {
            policy,
            max_sectors,
            parts: Vec::new(),
            inserted: 0,
            dispatched_ids: 0,
            report: RunReport {
                digest: 0xcbf2_9ce4_8422_2325,
                ..RunReport::default()
            },
        }
    }

    fn fail(&self, at: Instant, message: String) -> Violation {
        Violation {
            policy: self.policy,
            at,
            message,
        }
    }

    /// Ids inserted and not yet dispatched.
    pub fn undispatched(&self) -> u64 {
        self.inserted - self.dispatched_ids
    }

    pub fn on_insert(&mut self, r: &Request, now: Instant) -> Result<(), Violation> {
        let i = r.id.0 as usize;
        if self.parts.len() <= i {
            self.parts.resize(i + 1, None);
        }
        if self.parts[i].is_some() {
            return Err(self.fail(now, format!("harness bug: id {} inserted twice", r.id.0)));
        }
        self.parts[i] = Some(Part {
            op: r.op,
            sync: r.sync,
            group: r.group,
            task: r.task,
            sector: r.sector,
            sectors: r.sectors,
            inserted: now,
            dispatched: None,
            text: r.to_string(),
        });
        self.inserted += 1;
        self.report.inserted += 1;
        Ok(())
    }

    /// The task that issued `id` (which must have been inserted).
    pub fn task_of(&self, id: RequestId) -> TaskId {
        self.parts[id.0 as usize].as_ref().expect("inserted").task
    }

    pub fn on_dispatch(&mut self, r: &Request, now: Instant) -> Result<(), Violation> {
        // Every id known, not dispatched before, listed once.
        let mut seen: Vec<RequestId> = Vec::with_capacity(1 + r.merged.len());
        for id in r.ids() {
            let known = self.parts.get(id.0 as usize).and_then(|p| p.as_ref());
            let Some(part) = known else {
                return Err(self.fail(
                    now,
                    format!("dispatched id {} that was never inserted, in {r}", id.0),
                ));
            };
            if let Some(earlier) = part.dispatched {
                return Err(self.fail(
                    now,
                    format!(
                        "request {} dispatched twice (first at {earlier}), now inside {r}",
                        part.text
                    ),
                ));
            }
            if seen.contains(&id) {
                return Err(self.fail(now, format!("id {} listed twice in {r}", id.0)));
            }
            seen.push(id);
        }
        // The survivor's identity is unchanged; parts agree with it.
        let head = self.part(r.id);
        if (head.op, head.sync, head.group) != (r.op, r.sync, r.group) {
            return Err(self.fail(
                now,
                format!(
                    "dispatched {r} changed op/sync/group of inserted {}",
                    head.text
                ),
            ));
        }
        if r.merged.is_empty() {
            if (head.sector, head.sectors) != (r.sector, r.sectors) {
                return Err(self.fail(
                    now,
                    format!("dispatched {r} but {} was inserted", head.text),
                ));
            }
        } else {
            self.check_merge(r, now)?;
        }
        for id in r.ids() {
            let part = self.parts[id.0 as usize].as_mut().expect("checked");
            part.dispatched = Some(now);
            let wait = now.since(part.inserted);
            let max = match part.op {
                Op::Read => &mut self.report.max_read_wait,
                Op::Write | Op::Flush => &mut self.report.max_write_wait,
            };
            *max = (*max).max(wait);
        }
        for word in [now.nanos(), r.sector, u64::from(r.sectors)]
            .into_iter()
            .chain(r.ids().map(|id| id.0))
        {
            self.report.digest = fnv(self.report.digest, word);
        }
        self.dispatched_ids += seen.len() as u64;
        self.report.dispatches += 1;
        self.report.merged_ids += r.merged.len() as u64;
        Ok(())
    }

    fn part(&self, id: RequestId) -> &Part {
        self.parts[id.0 as usize].as_ref().expect("inserted")
    }

    /// A merged request: same op, sync flag and group throughout, its
    /// parts tile `[sector, end)` exactly, and it fits `max_sectors`.
    fn check_merge(&self, r: &Request, now: Instant) -> Result<(), Violation> {
        let mut parts: Vec<(RequestId, &Part)> = r.ids().map(|id| (id, self.part(id))).collect();
        for (_, p) in &parts {
            if (p.op, p.sync, p.group) != (r.op, r.sync, r.group) {
                return Err(self.fail(
                    now,
                    format!(
                        "merged {r} (parts {:?}) mixes in {} with another op, sync flag or group",
                        ids(r),
                        p.text
                    ),
                ));
            }
        }
        let total: u64 = parts.iter().map(|(_, p)| u64::from(p.sectors)).sum();
        if total != u64::from(r.sectors) {
            return Err(self.fail(
                now,
                format!(
                    "merged {r} has {} sectors but its parts {:?} have {total}",
                    r.sectors,
                    ids(r)
                ),
            ));
        }
        parts.sort_by_key(|(_, p)| p.sector);
        let mut at = r.sector;
        for (_, p) in &parts {
            if p.sector != at {
                return Err(self.fail(
                    now,
                    format!(
                        "merged {r} does not cover its parts exactly: {} should start at \
                         sector {at} (parts {:?})",
                        p.text,
                        ids(r)
                    ),
                ));
            }
            at = p.sector + u64::from(p.sectors);
        }
        if r.sectors > self.max_sectors {
            return Err(self.fail(
                now,
                format!(
                    "merged {r} is larger than max_sectors {} (parts {:?})",
                    self.max_sectors,
                    ids(r)
                ),
            ));
        }
        Ok(())
    }

    /// `queued()` against what the checker knows, and `has_work()` against
    /// `queued()`.
    pub fn check_counts(&mut self, policy: &dyn Scheduler, now: Instant) -> Result<(), Violation> {
        let queued = policy.queued();
        let undispatched = self.undispatched();
        if queued as u64 > undispatched {
            return Err(self.fail(
                now,
                format!(
                    "queued() = {queued} but only {undispatched} inserted ids are undispatched \
                     ({} inserted, {} dispatched)",
                    self.inserted, self.dispatched_ids
                ),
            ));
        }
        if (queued == 0) != (undispatched == 0) {
            return Err(self.fail(
                now,
                format!(
                    "queued() = {queued} with {undispatched} ids undispatched: {}",
                    self.missing_list()
                ),
            ));
        }
        if policy.has_work() != (queued > 0) {
            return Err(self.fail(
                now,
                format!("has_work() = {} but queued() = {queued}", policy.has_work()),
            ));
        }
        self.report.max_queued = self.report.max_queued.max(queued);
        Ok(())
    }

    /// Up to ten inserted requests that were never dispatched.
    fn missing_list(&self) -> String {
        let missing: Vec<&str> = self
            .parts
            .iter()
            .flatten()
            .filter(|p| p.dispatched.is_none())
            .take(10)
            .map(|p| p.text.as_str())
            .collect();
        format!("undispatched: [{}]", missing.join("; "))
    }

    /// After the run: nothing lost, and every wait within the bound.
    pub fn finish(
        mut self,
        policy: &dyn Scheduler,
        max_service: Duration,
        options: &Options,
        now: Instant,
    ) -> Result<RunReport, Violation> {
        if self.undispatched() > 0 {
            return Err(self.fail(
                now,
                format!(
                    "run ended with {} of {} inserted ids never dispatched (lost); {}",
                    self.undispatched(),
                    self.inserted,
                    self.missing_list()
                ),
            ));
        }
        self.report.end = now;
        self.report.starvation_bound = policy.starvation_bound(max_service, self.report.max_queued);
        if let (Some(bound), true) = (self.report.starvation_bound, options.check_starvation) {
            let worst = self
                .parts
                .iter()
                .flatten()
                .map(|p| (p.dispatched.expect("all dispatched").since(p.inserted), p))
                .max_by_key(|(wait, _)| *wait);
            if let Some((wait, p)) = worst {
                if wait > bound {
                    let dispatched = p.dispatched.expect("all dispatched");
                    return Err(self.fail(
                        dispatched,
                        format!(
                            "starvation: {} waited {wait} (inserted {}, dispatched {dispatched}), \
                             more than starvation_bound({max_service}, max_queued {}) = {bound}",
                            p.text, p.inserted, self.report.max_queued
                        ),
                    ));
                }
            }
        }
        Ok(self.report)
    }
}

fn fnv(mut hash: u64, word: u64) -> u64 {
    for byte in word.to_le_bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn ids(r: &Request) -> Vec<u64> {
    r.ids().map(|id| id.0).collect()
}

/// The fake device's in-flight requests.
#[derive(Debug)]
struct Device {
    depth: usize,
    min: Duration,
    max: Duration,
    prng: Prng,
    in_flight: Vec<(Instant, Request)>,
}

impl Device {
    fn start(&mut self, request: Request, now: Instant) {
        let spread = self.max.nanos() - self.min.nanos();
        let service = self.min + Duration(self.prng.below(spread + 1));
        self.in_flight.push((now + service, request));
    }

    /// The requests due by `now`, in a random order.
    fn take_due(&mut self, now: Instant) -> Vec<Request> {
        let mut due = Vec::new();
        let mut i = 0;
        while i < self.in_flight.len() {
            if self.in_flight[i].0 <= now {
                due.push(self.in_flight.swap_remove(i).1);
            } else {
                i += 1;
            }
        }
        for k in (1..due.len()).rev() {
            let j = self.prng.below(k as u64 + 1) as usize;
            due.swap(k, j);
        }
        due
    }

    fn next_completion(&self) -> Option<Instant> {
        self.in_flight.iter().map(|(t, _)| *t).min()
    }
}

/// Consecutive `Wait` answers without anything else happening, beyond
/// which the driver gives up (a policy waiting in tiny steps forever).
const MAX_IDLE_WAITS: u32 = 100_000;

/// Drive `policy` through `case`. The policy must be fresh and built with
/// `case.device.limits`.
pub fn run(
    policy: &mut dyn Scheduler,
    case: &Case,
    options: &Options,
) -> Result<RunReport, Violation> {
    let limits = case.device.limits;
    assert!(limits.queue_depth >= 1, "device needs a queue depth");
    assert!(case.device.min_service <= case.device.max_service);
    assert!(
        case.device.min_service > Duration::ZERO,
        "service takes time"
    );
    let name = policy.name();
    let mut checker = Checker::new(name, limits.max_sectors);
    let mut device = Device {
        depth: limits.queue_depth as usize,
        min: case.device.min_service,
        max: case.device.max_service,
        prng: Prng::new(case.device.seed),
        in_flight: Vec::new(),
    };
    let mut clients: Vec<Client<'_>> = case
        .workload
        .tasks
        .iter()
        .map(|t| Client::new(t, limits.capacity))
        .collect();
    let client_of = |task: TaskId, clients: &[Client<'_>]| {
        clients
            .iter()
            .position(|c| c.task() == task)
            .expect("task has a client")
    };
    // Issues due: (time, sequence, client index), earliest first.
    let mut issues: BinaryHeap<Reverse<(Instant, u64, usize)>> = BinaryHeap::new();
    let mut sequence = 0u64;
    let mut exits: Vec<TaskId> = Vec::new();
    let mut follow = |step: ClientStep,
                      index: usize,
                      task: TaskId,
                      issues: &mut BinaryHeap<Reverse<(Instant, u64, usize)>>,
                      exits: &mut Vec<TaskId>| {
        if let Some(at) = step.issue_at {
            sequence += 1;
            issues.push(Reverse((at, sequence, index)));
        }
        if step.exit {
            exits.push(task);
        }
    };
    for (i, client) in clients.iter_mut().enumerate() {
        let step = client.start();
        follow(step, i, client.task(), &mut issues, &mut exits);
    }

    let mut now = Instant::ZERO;
    let mut next_id = 1u64;
    let mut recent = Recent::default();
    let mut last_progress = Instant::ZERO;
    let mut idle_waits = 0u32;
    loop {
        // 1. Completions due, in a random order.
        for request in device.take_due(now) {
            policy.complete(&request, now);
            checker.check_counts(policy, now)?;
            last_progress = now;
            for id in request.ids() {
                let index = client_of(checker.task_of(id), &clients);
                let step = clients[index].completed(now);
                follow(step, index, clients[index].task(), &mut issues, &mut exits);
            }
        }
        // 2. Arrivals due (an issue may schedule another one at `now`).
        while let Some(&Reverse((at, _, index))) = issues.peek() {
            if at > now {
                break;
            }
            issues.pop();
            let (requests, step) = clients[index].issue(now, &mut next_id, &mut recent, &limits);
            for request in requests {
                checker.on_insert(&request, now)?;
                policy.insert(request, now);
                checker.check_counts(policy, now)?;
            }
            last_progress = now;
            follow(step, index, clients[index].task(), &mut issues, &mut exits);
        }
        for task in exits.drain(..) {
            policy.task_exited(task, now);
            checker.check_counts(policy, now)?;
        }
        // 3. Fill the device.
        let mut wait_until = None;
        while device.in_flight.len() < device.depth {
            match policy.dispatch(now) {
                Dispatch::Request(request) => {
                    checker.on_dispatch(&request, now)?;
                    checker.check_counts(policy, now)?;
                    device.start(request, now);
                    last_progress = now;
                    idle_waits = 0;
                }
                Dispatch::Wait { until } => {
                    if until <= now {
                        return Err(checker.fail(
                            now,
                            format!(
                                "Wait {{ until: {until} }} is not in the future \
                                 ({} queued, {} in flight)",
                                policy.queued(),
                                device.in_flight.len()
                            ),
                        ));
                    }
                    checker.report.waits += 1;
                    wait_until = Some(until);
                    break;
                }
                Dispatch::Empty => {
                    if device.in_flight.is_empty() && policy.queued() > 0 {
                        return Err(checker.fail(
                            now,
                            format!(
                                "dispatch returned Empty with {} requests queued and the \
                                 device idle (they would never be served)",
                                policy.queued()
                            ),
                        ));
                    }
                    break;
                }
            }
        }
        // 4. Advance to the next event.
        let next = [
            device.next_completion(),
            issues.peek().map(|r| r.0 .0),
            wait_until,
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        assert!(next > now, "harness bug: time must advance");
        if wait_until == Some(next) && device.in_flight.is_empty() {
            // Only the policy's wait is pending.
            idle_waits += 1;
            let queued = policy.queued();
            let idle_for = next.since(last_progress);
            if queued > 0 && idle_for > options.liveness_limit {
                return Err(checker.fail(
                    now,
                    format!(
                        "liveness: {queued} requests queued, device idle, and the policy \
                         waits until {next}, {idle_for} after anything last happened \
                         (at {last_progress}); limit {}",
                        options.liveness_limit
                    ),
                ));
            }
            if idle_waits > MAX_IDLE_WAITS {
                return Err(checker.fail(
                    now,
                    format!(
                        "liveness: {idle_waits} waits in a row with nothing else happening \
                         ({queued} queued)"
                    ),
                ));
            }
        } else {
            idle_waits = 0;
        }
        now = next;
    }

    // The end: nothing queued, nothing more to come.
    checker.check_counts(policy, now)?;
    if policy.queued() != 0 || policy.has_work() {
        return Err(checker.fail(
            now,
            format!(
                "after all completions queued() = {} and has_work() = {}",
                policy.queued(),
                policy.has_work()
            ),
        ));
    }
    match policy.dispatch(now) {
        Dispatch::Empty => {}
        other => {
            return Err(checker.fail(
                now,
                format!("after all completions dispatch returned {other:?}, not Empty"),
            ))
        }
    }
    checker.finish(policy, case.device.max_service, options, now)
}
