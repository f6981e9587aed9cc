//! The invariant checker: one set of promises, checked from outside around
//! any policy, wherever it runs.
//!
//! [`Checked`] wraps a policy and checks every call it answers:
//!
//! - **conservation**: every inserted id is dispatched exactly once (as a
//!   request's `id` or inside its `merged` list), never before it was
//!   inserted, and no id is invented; every dispatched request completes
//!   exactly once, and nothing is left queued or in flight at the end;
//! - **merges**: a merged request keeps its survivor's op, sync flag and
//!   group, its parts tile `[sector, end)` exactly, and it fits the
//!   device's `max_sectors`;
//! - **counts**: `queued()` never exceeds the ids inserted and not yet
//!   dispatched, is zero exactly when they are, and `has_work()` agrees;
//! - **slots**: after every call, the block-layer slots the caller holds,
//!   counted as the simulator counts them (one per insert, less the fall
//!   of `queued()` across it, one back per completion and per
//!   [`Scheduler::take_freed_slot`]), equal `queued()` plus the requests on
//!   the device. A request that leaves `queued()` by a merge outside
//!   `insert` (a layer letting a held request into its policy, which
//!   merges it) without reporting its slot breaks it: the slot would stay
//!   allocated forever, and a full list would stall its submitters;
//! - **time**: a `Dispatch::Wait` points into the future; `Empty` is never
//!   the answer while requests are queued and the device is idle (nothing
//!   would ever ask again); a policy that keeps the device idle with
//!   requests queued, answering `Wait` after `Wait` with nothing else
//!   happening, fails the liveness limit;
//! - **starvation**: at the end, no request waited between insertion and
//!   dispatch longer than the policy's own
//!   [`Scheduler::starvation_bound`], computed from the longest time a
//!   request stayed on the device and the deepest queue seen;
//! - **structure**: the policy's own [`Scheduler::check_invariants`]
//!   (BFQ's B-WF2Q+ trees, CFQ's service trees, AS's state), after every
//!   call.
//!
//! The simulator runs every policy through a `Checked` when debug
//! assertions are on or a run asks for checking (`elevator run --check`);
//! a violation then panics with the scenario, policy, seed and simulated
//! time ([`OnViolation::Panic`]). The test harness records the first
//! violation instead ([`OnViolation::Record`]) so that proptest can shrink
//! the case. A disabled `Checked` passes every call straight through.

use crate::{Dispatch, FreedSlot, Scheduler};
use elevator_core::{Duration, GroupTree, Instant, Op, QueueLimits, Request, RequestId, TaskId};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::fmt;

/// A broken promise, with enough context to find it again.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// What happens when a check fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OnViolation {
    /// Panic at once, naming the violation and then `context` (the
    /// simulator puts the scenario, seed and a replay command there).
    Panic { context: String },
    /// Keep the first violation for [`Checked::violation`]; later calls
    /// pass through unchecked.
    Record,
}

/// How strict the checker is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// A policy that answers `Wait` while requests are queued and the
    /// device is idle fails once nothing (insert, dispatch, completion) has
    /// happened for this long. `None`: no limit on the time (a throttled
    /// group may legitimately wait as long as its limit says).
    pub liveness_limit: Option<Duration>,
    /// Consecutive `Wait`s with nothing else happening beyond which the
    /// policy fails (one waiting in tiny steps forever).
    pub max_idle_waits: u32,
    /// Check each request's wait against the policy's starvation bound.
    pub check_starvation: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            liveness_limit: Some(Duration::from_secs(10)),
            max_idle_waits: 100_000,
            check_starvation: true,
        }
    }
}

/// What a checked run looked like (for coverage checks and curiosity).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub inserted: u64,
    /// Requests sent to the device (a merged request counts once).
    pub dispatches: u64,
    /// Ids that reached the device inside another request's `merged`.
    pub merged_ids: u64,
    /// Requests the device completed (a merged request counts once).
    pub completions: u64,
    pub max_queued: usize,
    pub waits: u64,
    pub end: Instant,
    /// The longest insert-to-dispatch time of a read, and of a write.
    pub max_read_wait: Duration,
    pub max_write_wait: Duration,
    /// The longest a dispatched request stayed on the device.
    pub max_service: Duration,
    pub starvation_bound: Option<Duration>,
    /// FNV-1a over every dispatch (time, ids, extent): two runs dispatched
    /// the same requests at the same times iff their digests agree (up to
    /// hash collisions). For checking that a refactor keeps behaviour.
    pub digest: u64,
}

/// What the checker remembers of one inserted id until it completes.
#[derive(Clone, Debug)]
struct Part {
    /// As inserted (its `merged` list empty).
    request: Request,
    inserted: Instant,
    dispatched: Option<Instant>,
}

/// The request that waited longest for dispatch so far.
#[derive(Clone, Debug)]
struct Worst {
    wait: Duration,
    text: String,
    inserted: Instant,
    dispatched: Instant,
}

/// A policy wrapped in the checker. It is itself a [`Scheduler`], so it
/// goes wherever the policy would. `S` is `dyn Scheduler` in the engine; a
/// unit test that drives one concrete policy through the harness keeps its
/// type (`Checked<Bfq>`) so that it can look inside between steps
/// ([`Checked::inner_mut`]).
#[derive(Debug)]
pub struct Checked<S: Scheduler + ?Sized = dyn Scheduler> {
    inner: Box<S>,
    enabled: bool,
    on_violation: OnViolation,
    options: CheckOptions,
    max_sectors: u32,
    parts: FxHashMap<RequestId, Part>,
    /// Dispatched and not yet completed: id → (parts, dispatch time).
    in_flight: FxHashMap<RequestId, (usize, Instant)>,
    undispatched: u64,
    /// The caller's slots for requests queued or on the device (see the
    /// module docs), and the slots the policy freed after a call, taken
    /// from it at once and kept until the caller takes them.
    slots: usize,
    freed: VecDeque<FreedSlot>,
    worst: Option<Worst>,
    last_progress: Instant,
    idle_waits: u32,
    violation: Option<Violation>,
    report: CheckReport,
}

impl<S: Scheduler + ?Sized> Checked<S> {
    /// Check `inner`, a fresh policy built for a device with `limits`.
    pub fn new(
        inner: Box<S>,
        limits: &QueueLimits,
        options: CheckOptions,
        on_violation: OnViolation,
    ) -> Self {
        Checked {
            inner,
            enabled: true,
            on_violation,
            options,
            max_sectors: limits.max_sectors,
            parts: FxHashMap::default(),
            in_flight: FxHashMap::default(),
            undispatched: 0,
            slots: 0,
            freed: VecDeque::new(),
            worst: None,
            last_progress: Instant::ZERO,
            idle_waits: 0,
            violation: None,
            report: CheckReport {
                digest: 0xcbf2_9ce4_8422_2325,
                ..CheckReport::default()
            },
        }
    }

    /// The checker as the engines run it: on when `asked` or when debug
    /// assertions are (the `ci` profile), panicking with the run's context
    /// ([`Checked::set_context`]) on a violation, with no liveness limit in
    /// time (a throttled group waits as long as its limit says); off, every
    /// call goes straight through.
    pub fn for_engine(inner: Box<S>, limits: &QueueLimits, asked: bool) -> Self {
        if asked || cfg!(debug_assertions) {
            let options = CheckOptions {
                liveness_limit: None,
                ..CheckOptions::default()
            };
            let on_violation = OnViolation::Panic {
                context: String::from("(no run context given)"),
            };
            Checked::new(inner, limits, options, on_violation)
        } else {
            Checked::unchecked(inner)
        }
    }

    /// `inner` with every check off: each call goes straight through.
    pub fn unchecked(inner: Box<S>) -> Self {
        let mut c = Checked::new(
            inner,
            &QueueLimits::default(),
            CheckOptions::default(),
            OnViolation::Record,
        );
        c.enabled = false;
        c
    }

    /// Whether calls are checked.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The wrapped policy.
    pub fn inner(&self) -> &S {
        self.inner.as_ref()
    }

    /// The wrapped policy, to change by hand (a unit test's direct
    /// feedback). Calls made through it are not checked; the next checked
    /// call checks the structure it left.
    pub fn inner_mut(&mut self) -> &mut S {
        self.inner.as_mut()
    }

    /// Replace the text a panic ends with (the simulator learns the
    /// scenario and seed after it built the engine).
    pub fn set_context(&mut self, context: String) {
        if let OnViolation::Panic { context: c } = &mut self.on_violation {
            *c = context;
        }
    }

    /// The first violation seen ([`OnViolation::Record`]).
    pub fn violation(&self) -> Option<&Violation> {
        self.violation.as_ref()
    }

    /// What the run looked like so far.
    pub fn report(&self) -> &CheckReport {
        &self.report
    }

    /// The request `id` was inserted as (until it completes).
    pub fn inserted_as(&self, id: RequestId) -> Option<&Request> {
        self.parts.get(&id).map(|p| &p.request)
    }

    /// Requests dispatched and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn fail(&mut self, at: Instant, message: String) {
        let v = Violation {
            policy: self.inner.name(),
            at,
            message,
        };
        match &self.on_violation {
            OnViolation::Panic { context } => panic!("invariant violated: {v}\n{context}"),
            OnViolation::Record => {
                if self.violation.is_none() {
                    self.violation = Some(v);
                }
            }
        }
    }

    fn active(&self) -> bool {
        self.enabled && self.violation.is_none()
    }

    /// After the run: every wait (including that of requests still
    /// queued) within the policy's starvation bound for `service` (the
    /// longest a request may stay on the device: the harness knows its fake
    /// device's; the simulator passes zero and the longest one seen is
    /// used), and, if the run `drained` (nothing more was to come), nothing
    /// queued, in flight or lost. Returns the first violation of the run.
    pub fn finish(
        &mut self,
        service: Duration,
        now: Instant,
        drained: bool,
    ) -> Result<CheckReport, Violation> {
        if self.active() {
            self.check_end(service, now, drained);
        }
        match self.violation.clone() {
            Some(v) => Err(v),
            None => Ok(self.report.clone()),
        }
    }

    fn check_end(&mut self, service: Duration, now: Instant, drained: bool) {
        self.report.end = now;
        self.check_counts(now);
        // Requests still queued have waited at least this long.
        let pending = self
            .parts
            .values()
            .filter(|p| p.dispatched.is_none())
            .max_by_key(|p| (now.since(p.inserted), p.request.id));
        if let Some(p) = pending {
            let wait = now.since(p.inserted);
            if self.worst.as_ref().is_none_or(|w| wait > w.wait) {
                self.worst = Some(Worst {
                    wait,
                    text: format!("{} (still queued)", p.request),
                    inserted: p.inserted,
                    dispatched: now,
                });
            }
        }
        if !drained {
            return self.check_starvation(service);
        }
        if self.undispatched > 0 {
            let message = format!(
                "run ended with {} of {} inserted ids never dispatched (lost); {}",
                self.undispatched,
                self.report.inserted,
                self.missing_list()
            );
            return self.fail(now, message);
        }
        if !self.in_flight.is_empty() {
            let ids: Vec<u64> = self.in_flight.keys().take(10).map(|id| id.0).collect();
            let message = format!(
                "run ended with {} requests dispatched and never completed: {ids:?}",
                self.in_flight.len()
            );
            return self.fail(now, message);
        }
        if self.inner.queued() != 0 || self.inner.has_work() {
            let message = format!(
                "at the end queued() = {} and has_work() = {}",
                self.inner.queued(),
                self.inner.has_work()
            );
            return self.fail(now, message);
        }
        self.check_starvation(service);
    }

    fn check_starvation(&mut self, service: Duration) {
        let service = service.max(self.report.max_service);
        self.report.starvation_bound = self.inner.starvation_bound(service, self.report.max_queued);
        if let (Some(bound), true, Some(worst)) = (
            self.report.starvation_bound,
            self.options.check_starvation,
            &self.worst,
        ) {
            if worst.wait > bound {
                let message = format!(
                    "starvation: {} waited {} (inserted {}, dispatched {}), more than \
                     starvation_bound({service}, max_queued {}) = {bound}",
                    worst.text,
                    worst.wait,
                    worst.inserted,
                    worst.dispatched,
                    self.report.max_queued
                );
                let at = worst.dispatched;
                self.fail(at, message);
            }
        }
    }

    /// The checks of a call that changed what is queued.
    fn after_call(&mut self, now: Instant) {
        self.check_counts(now);
        self.check_slots(now);
        if self.active() {
            if let Err(message) = self.inner.check_invariants() {
                self.fail(now, format!("check_invariants: {message}"));
            }
        }
    }

    /// `queued()` against what the checker knows, and `has_work()` against
    /// `queued()`.
    fn check_counts(&mut self, now: Instant) {
        if !self.active() {
            return;
        }
        let queued = self.inner.queued();
        let undispatched = self.undispatched;
        if queued as u64 > undispatched {
            let message = format!(
                "queued() = {queued} but only {undispatched} inserted ids are undispatched \
                 ({} inserted, {} dispatched)",
                self.report.inserted,
                self.report.inserted - undispatched
            );
            return self.fail(now, message);
        }
        if (queued == 0) != (undispatched == 0) {
            let message = format!(
                "queued() = {queued} with {undispatched} ids undispatched: {}",
                self.missing_list()
            );
            return self.fail(now, message);
        }
        let has_work = self.inner.has_work();
        if has_work != (queued > 0) {
            return self.fail(
                now,
                format!("has_work() = {has_work} but queued() = {queued}"),
            );
        }
        self.report.max_queued = self.report.max_queued.max(queued);
    }

    /// Take the slots the policy freed in the call just made, and check
    /// that the caller's slots are those of the requests queued and on the
    /// device.
    fn check_slots(&mut self, now: Instant) {
        if !self.active() {
            return;
        }
        while let Some(slot) = self.inner.take_freed_slot() {
            let Some(slots) = self.slots.checked_sub(1) else {
                let message = format!(
                    "freed a slot of a merged {:?} request with none held",
                    slot.op
                );
                return self.fail(now, message);
            };
            self.slots = slots;
            self.freed.push_back(slot);
        }
        let queued = self.inner.queued();
        let held = queued + self.in_flight.len();
        if self.slots != held {
            let message = format!(
                "slots: {} allocated (inserts less merges in them, completions and freed \
                 slots) but {queued} queued and {} on the device; a request that merged \
                 outside insert must give its slot back through take_freed_slot",
                self.slots,
                self.in_flight.len()
            );
            self.fail(now, message);
        }
    }

    /// Up to ten inserted requests that were never dispatched.
    fn missing_list(&self) -> String {
        let mut missing: Vec<&Part> = self
            .parts
            .values()
            .filter(|p| p.dispatched.is_none())
            .collect();
        missing.sort_by_key(|p| p.request.id);
        let texts: Vec<String> = missing
            .iter()
            .take(10)
            .map(|p| p.request.to_string())
            .collect();
        format!("undispatched: [{}]", texts.join("; "))
    }

    fn on_insert(&mut self, r: &Request, now: Instant) {
        if self.parts.contains_key(&r.id) {
            return self.fail(now, format!("id {} inserted twice (caller bug)", r.id.0));
        }
        if !r.merged.is_empty() {
            return self.fail(now, format!("{r} inserted with a merged list already"));
        }
        self.parts.insert(
            r.id,
            Part {
                request: r.clone(),
                inserted: now,
                dispatched: None,
            },
        );
        self.undispatched += 1;
        self.report.inserted += 1;
        self.progress(now);
    }

    fn progress(&mut self, now: Instant) {
        self.last_progress = now;
        self.idle_waits = 0;
    }

    fn on_dispatch(&mut self, r: &Request, now: Instant) {
        // Every id known, not dispatched before, listed once.
        let mut seen: Vec<RequestId> = Vec::with_capacity(1 + r.merged.len());
        for id in r.ids() {
            let message = match self.parts.get(&id) {
                None => format!("dispatched id {} that was never inserted, in {r}", id.0),
                Some(Part {
                    dispatched: Some(earlier),
                    request,
                    ..
                }) => format!(
                    "request {request} dispatched twice (first at {earlier}), now inside {r}"
                ),
                Some(_) if seen.contains(&id) => format!("id {} listed twice in {r}", id.0),
                Some(_) => {
                    seen.push(id);
                    continue;
                }
            };
            return self.fail(now, message);
        }
        // The survivor's identity is unchanged; parts agree with it.
        let head = &self.parts[&r.id].request;
        if (head.op, head.sync, head.group) != (r.op, r.sync, r.group) {
            let message = format!("dispatched {r} changed op/sync/group of inserted {head}");
            return self.fail(now, message);
        }
        if r.merged.is_empty() {
            if (head.sector, head.sectors) != (r.sector, r.sectors) {
                let message = format!("dispatched {r} but {head} was inserted");
                return self.fail(now, message);
            }
        } else if let Err(message) = self.merge_error(r) {
            return self.fail(now, message);
        }
        for id in r.ids() {
            let part = self.parts.get_mut(&id).expect("checked above");
            part.dispatched = Some(now);
            let wait = now.since(part.inserted);
            let max = match part.request.op {
                Op::Read => &mut self.report.max_read_wait,
                Op::Write | Op::Flush => &mut self.report.max_write_wait,
            };
            *max = (*max).max(wait);
            if self.worst.as_ref().is_none_or(|w| wait > w.wait) {
                self.worst = Some(Worst {
                    wait,
                    text: part.request.to_string(),
                    inserted: part.inserted,
                    dispatched: now,
                });
            }
        }
        for word in [now.nanos(), r.sector, u64::from(r.sectors)]
            .into_iter()
            .chain(r.ids().map(|id| id.0))
        {
            self.report.digest = fnv(self.report.digest, word);
        }
        self.undispatched -= seen.len() as u64;
        self.report.dispatches += 1;
        self.report.merged_ids += r.merged.len() as u64;
        self.in_flight.insert(r.id, (seen.len(), now));
        self.progress(now);
    }

    /// A merged request: same op, sync flag and group throughout, its
    /// parts tile `[sector, end)` exactly, and it fits `max_sectors`.
    fn merge_error(&self, r: &Request) -> Result<(), String> {
        let mut parts: Vec<&Request> = r.ids().map(|id| &self.parts[&id].request).collect();
        let ids: Vec<u64> = r.ids().map(|id| id.0).collect();
        if let Some(p) = parts
            .iter()
            .find(|p| (p.op, p.sync, p.group) != (r.op, r.sync, r.group))
        {
            return Err(format!(
                "merged {r} (parts {ids:?}) mixes in {p} with another op, sync flag or group"
            ));
        }
        let total: u64 = parts.iter().map(|p| u64::from(p.sectors)).sum();
        if total != u64::from(r.sectors) {
            return Err(format!(
                "merged {r} has {} sectors but its parts {ids:?} have {total}",
                r.sectors
            ));
        }
        parts.sort_by_key(|p| p.sector);
        let mut at = r.sector;
        for p in &parts {
            if p.sector != at {
                return Err(format!(
                    "merged {r} does not cover its parts exactly: {p} should start at sector \
                     {at} (parts {ids:?})"
                ));
            }
            at = p.sector + u64::from(p.sectors);
        }
        if r.sectors > self.max_sectors {
            return Err(format!(
                "merged {r} is larger than max_sectors {} (parts {ids:?})",
                self.max_sectors
            ));
        }
        Ok(())
    }

    fn on_complete(&mut self, r: &Request, now: Instant) {
        let Some((parts, dispatched)) = self.in_flight.remove(&r.id) else {
            let message = format!(
                "completion of {r}, which is not in flight (never dispatched, or completed twice)"
            );
            return self.fail(now, message);
        };
        if parts != 1 + r.merged.len() {
            let message = format!(
                "completion of {r} lists {} parts where {parts} were dispatched",
                1 + r.merged.len()
            );
            return self.fail(now, message);
        }
        for id in r.ids() {
            self.parts.remove(&id);
        }
        self.report.completions += 1;
        self.report.max_service = self.report.max_service.max(now.since(dispatched));
        self.progress(now);
    }

    fn on_wait(&mut self, until: Instant, now: Instant) {
        self.report.waits += 1;
        if until <= now {
            let message = format!(
                "Wait {{ until: {until} }} is not in the future ({} queued, {} in flight)",
                self.inner.queued(),
                self.in_flight.len()
            );
            return self.fail(now, message);
        }
        let queued = self.inner.queued();
        if !self.in_flight.is_empty() || queued == 0 {
            return;
        }
        // The device is idle with requests queued, and the policy waits.
        self.idle_waits += 1;
        let idle_for = until.since(self.last_progress);
        if let Some(limit) = self.options.liveness_limit {
            if idle_for > limit {
                let message = format!(
                    "liveness: {queued} requests queued, device idle, and the policy waits \
                     until {until}, {idle_for} after anything last happened (at {}); limit {limit}",
                    self.last_progress
                );
                return self.fail(now, message);
            }
        }
        if self.idle_waits > self.options.max_idle_waits {
            let message = format!(
                "liveness: {} waits in a row with nothing else happening ({queued} queued)",
                self.idle_waits
            );
            self.fail(now, message);
        }
    }

    fn on_empty(&mut self, now: Instant) {
        let queued = self.inner.queued();
        if self.in_flight.is_empty() && queued > 0 {
            let message = format!(
                "dispatch returned Empty with {queued} requests queued and the device idle \
                 (they would never be served)"
            );
            self.fail(now, message);
        }
    }
}

impl<S: Scheduler + ?Sized> Scheduler for Checked<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn insert(&mut self, request: Request, now: Instant) {
        if !self.active() {
            return self.inner.insert(request, now);
        }
        self.on_insert(&request, now);
        let before = self.inner.queued();
        self.inner.insert(request, now);
        // The engine's count: a slot, less the fall of `queued()` (a merge
        // takes none; coalescing two queued requests frees one).
        let after = self.inner.queued();
        match (self.slots + after).checked_sub(before) {
            Some(slots) => self.slots = slots,
            None => {
                let message = format!("insert left {after} queued of {before}");
                self.fail(now, message);
            }
        }
        self.after_call(now);
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        let answer = self.inner.dispatch(now);
        if !self.active() {
            return answer;
        }
        match &answer {
            Dispatch::Request(r) => self.on_dispatch(r, now),
            Dispatch::Wait { until } => self.on_wait(*until, now),
            Dispatch::Empty => self.on_empty(now),
        }
        self.after_call(now);
        answer
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        if self.active() {
            self.on_complete(request, now);
            self.slots = self.slots.saturating_sub(1);
        }
        self.inner.complete(request, now);
        self.after_call(now);
    }

    fn queued(&self) -> usize {
        self.inner.queued()
    }

    fn would_merge(&self, request: &Request) -> bool {
        self.inner.would_merge(request)
    }

    fn take_freed_slot(&mut self) -> Option<FreedSlot> {
        self.freed
            .pop_front()
            .or_else(|| self.inner.take_freed_slot())
    }

    fn has_work(&self) -> bool {
        self.inner.has_work()
    }

    fn task_exited(&mut self, task: TaskId, now: Instant) {
        self.inner.task_exited(task, now);
        self.after_call(now);
    }

    fn set_groups(&mut self, groups: &GroupTree) {
        self.inner.set_groups(groups);
    }

    fn may_queue(&mut self, request: &Request, now: Instant) -> crate::MayQueue {
        self.inner.may_queue(request, now)
    }

    fn starvation_bound(&self, service: Duration, max_queued: usize) -> Option<Duration> {
        self.inner.starvation_bound(service, max_queued)
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.inner.check_invariants()
    }

    fn dispatch_reason(&self) -> Option<&'static str> {
        self.inner.dispatch_reason()
    }
}

fn fnv(mut hash: u64, word: u64) -> u64 {
    for byte in word.to_le_bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
