//! Deliberately broken policies. The conformance suite runs its own checks
//! against them and expects failures: a checker that cannot fail proves
//! nothing.

use crate::policy::deadline::Deadline;
use crate::{Dispatch, FreedSlot, MergeRule, Scheduler};
use elevator_core::{Duration, Instant, Op, QueueLimits, Request};
use std::collections::VecDeque;

/// Reads always go first; writes wait until no read is queued. It claims
/// deadline's starvation bound without deadline's `writes_starved`, so a
/// steady reader starves writers past it.
#[derive(Debug)]
pub struct ReadsFirst {
    reads: VecDeque<Request>,
    writes: VecDeque<Request>,
    promise: Deadline,
}

impl ReadsFirst {
    pub fn new(limits: &QueueLimits) -> Self {
        ReadsFirst {
            reads: VecDeque::new(),
            writes: VecDeque::new(),
            promise: Deadline::new(limits),
        }
    }
}

impl Scheduler for ReadsFirst {
    fn name(&self) -> &'static str {
        "toy-reads-first"
    }
    fn insert(&mut self, request: Request, _now: Instant) {
        match request.op {
            Op::Read => self.reads.push_back(request),
            _ => self.writes.push_back(request),
        }
    }
    fn dispatch(&mut self, _now: Instant) -> Dispatch {
        match self.reads.pop_front().or_else(|| self.writes.pop_front()) {
            Some(r) => Dispatch::Request(r),
            None => Dispatch::Empty,
        }
    }
    fn complete(&mut self, _request: &Request, _now: Instant) {}
    fn queued(&self) -> usize {
        self.reads.len() + self.writes.len()
    }
    fn starvation_bound(&self, service: Duration, max_queued: usize) -> Option<Duration> {
        self.promise.starvation_bound(service, max_queued)
    }
}

/// How a `Fifo` toy misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flaw {
    /// Forgets every 50th request it is given.
    Loses,
    /// Dispatches every 20th request twice.
    Duplicates,
    /// Appends a new request to the queue's tail whenever it is adjacent,
    /// whatever its op, group or size.
    MergesCarelessly,
    /// Idles forever (`Wait` one second at a time) once 5 requests queue up.
    Stalls,
    /// Answers `Wait` until now (not in the future) once 5 requests queue up.
    WaitsInThePast,
    /// Answers `Empty` with requests queued once 5 queue up.
    ForgetsToDispatch,
    /// `queued()` counts one request too many once 5 queue up.
    MiscountsQueued,
    /// Its own structure check fails once 5 requests queue up.
    CorruptsItself,
}

/// A FIFO with one flaw.
#[derive(Debug)]
pub struct Fifo {
    flaw: Flaw,
    queue: VecDeque<Request>,
    /// Requests until the next lost or duplicated one.
    countdown: u32,
}

impl Fifo {
    pub fn new(flaw: Flaw) -> Self {
        Fifo {
            flaw,
            queue: VecDeque::new(),
            countdown: match flaw {
                Flaw::Loses => 50,
                _ => 20,
            },
        }
    }
}

impl Scheduler for Fifo {
    fn name(&self) -> &'static str {
        match self.flaw {
            Flaw::Loses => "toy-loses",
            Flaw::Duplicates => "toy-duplicates",
            Flaw::MergesCarelessly => "toy-merges-carelessly",
            Flaw::Stalls => "toy-stalls",
            Flaw::WaitsInThePast => "toy-waits-in-the-past",
            Flaw::ForgetsToDispatch => "toy-forgets-to-dispatch",
            Flaw::MiscountsQueued => "toy-miscounts-queued",
            Flaw::CorruptsItself => "toy-corrupts-itself",
        }
    }
    fn insert(&mut self, request: Request, _now: Instant) {
        match self.flaw {
            Flaw::Loses => {
                self.countdown -= 1;
                if self.countdown == 0 {
                    self.countdown = 50;
                    return;
                }
            }
            Flaw::MergesCarelessly => {
                if let Some(tail) = self.queue.back_mut() {
                    if tail.end() == request.sector {
                        tail.sectors += request.sectors;
                        tail.merged.extend(request.ids());
                        return;
                    }
                }
            }
            _ => {}
        }
        self.queue.push_back(request);
    }
    fn dispatch(&mut self, now: Instant) -> Dispatch {
        if self.queue.len() >= 5 {
            match self.flaw {
                Flaw::Stalls => {
                    return Dispatch::Wait {
                        until: now + Duration::from_secs(1),
                    }
                }
                Flaw::WaitsInThePast => return Dispatch::Wait { until: now },
                Flaw::ForgetsToDispatch => return Dispatch::Empty,
                _ => {}
            }
        }
        let Some(r) = self.queue.pop_front() else {
            return Dispatch::Empty;
        };
        if self.flaw == Flaw::Duplicates {
            self.countdown -= 1;
            if self.countdown == 0 {
                self.countdown = 20;
                self.queue.push_back(r.clone());
            }
        }
        Dispatch::Request(r)
    }
    fn complete(&mut self, _request: &Request, _now: Instant) {}
    fn queued(&self) -> usize {
        let n = self.queue.len();
        n + usize::from(self.flaw == Flaw::MiscountsQueued && n >= 5)
    }
    fn starvation_bound(&self, service: Duration, max_queued: usize) -> Option<Duration> {
        Some(service.mul(max_queued as u64 + 1))
    }
    fn check_invariants(&self) -> Result<(), String> {
        if self.flaw == Flaw::CorruptsItself && self.queue.len() >= 5 {
            return Err(format!(
                "{} queued: the toy's list is corrupt",
                self.queue.len()
            ));
        }
        Ok(())
    }
}

/// A layer and its policy in one: each request is held until the next
/// `dispatch`, then handed to a FIFO that back-merges it into a queued
/// request it continues (same op, sync flag and group, within
/// `max_sectors`), as io.max or iocost in front of noop does. With
/// `gives_slots_back` the slot of a request so merged is reported through
/// [`Scheduler::take_freed_slot`] and the toy conforms; without, the slot
/// leaks and the checker's slot count catches it.
#[derive(Debug)]
pub struct LateMerger {
    gives_slots_back: bool,
    rule: MergeRule,
    held: VecDeque<Request>,
    queue: VecDeque<Request>,
    freed: VecDeque<FreedSlot>,
}

impl LateMerger {
    pub fn new(limits: &QueueLimits, gives_slots_back: bool) -> Self {
        LateMerger {
            gives_slots_back,
            rule: MergeRule {
                max_sectors: limits.max_sectors,
                front_merges: false,
                same_task: false,
            },
            held: VecDeque::new(),
            queue: VecDeque::new(),
            freed: VecDeque::new(),
        }
    }
}

impl Scheduler for LateMerger {
    fn name(&self) -> &'static str {
        if self.gives_slots_back {
            "toy-late-merger"
        } else {
            "toy-late-merger-leaks-slots"
        }
    }
    fn insert(&mut self, request: Request, _now: Instant) {
        self.held.push_back(request);
    }
    fn dispatch(&mut self, _now: Instant) -> Dispatch {
        while let Some(r) = self.held.pop_front() {
            let rule = self.rule;
            let survivor = self
                .queue
                .iter_mut()
                .find(|q| q.end() == r.sector && rule.compatible(q, &r));
            match survivor {
                Some(q) => {
                    q.sectors += r.sectors;
                    q.merged.extend(r.ids());
                    if self.gives_slots_back {
                        self.freed.push_back(FreedSlot {
                            op: r.op,
                            sync: r.sync,
                        });
                    }
                }
                None => self.queue.push_back(r),
            }
        }
        match self.queue.pop_front() {
            Some(r) => Dispatch::Request(r),
            None => Dispatch::Empty,
        }
    }
    fn complete(&mut self, _request: &Request, _now: Instant) {}
    fn queued(&self) -> usize {
        self.held.len() + self.queue.len()
    }
    fn take_freed_slot(&mut self) -> Option<FreedSlot> {
        self.freed.pop_front()
    }
    fn starvation_bound(&self, service: Duration, max_queued: usize) -> Option<Duration> {
        Some(service.mul(max_queued as u64 + 1))
    }
}

/// A toy group layer: it holds every request of a group other than the
/// root one dispatch, then lets it into its policy, as a rate limiter
/// would; with `loses`, it forgets every 50th request it holds. It
/// registers as any layer does ([`PASS_LAYER`], [`LOSING_LAYER`]), which is
/// all the builder and the shared layer tests need of it.
#[derive(Debug)]
pub struct HoldOne {
    inner: Box<dyn Scheduler>,
    held: VecDeque<Request>,
    late: crate::group::LateInsert,
    seen: u64,
    loses: bool,
}

impl HoldOne {
    pub fn new(inner: Box<dyn Scheduler>, loses: bool) -> Self {
        HoldOne {
            inner,
            held: VecDeque::new(),
            late: crate::group::LateInsert::default(),
            seen: 0,
            loses,
        }
    }
}

impl Scheduler for HoldOne {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn insert(&mut self, request: Request, now: Instant) {
        if request.group == elevator_core::GroupId::ROOT {
            return self.inner.insert(request, now);
        }
        self.seen += 1;
        if self.loses && self.seen % 50 == 0 {
            return;
        }
        self.held.push_back(request);
    }
    fn dispatch(&mut self, now: Instant) -> Dispatch {
        // Let one held request in first, giving back the slot of one that
        // merges there (`LateInsert`, as every layer does).
        if let Some(r) = self.held.pop_front() {
            self.late.insert(&mut *self.inner, r, now);
        }
        self.inner.dispatch(now)
    }
    fn complete(&mut self, request: &Request, now: Instant) {
        self.inner.complete(request, now);
    }
    fn queued(&self) -> usize {
        self.inner.queued() + self.held.len()
    }
    fn set_groups(&mut self, groups: &elevator_core::GroupTree) {
        self.inner.set_groups(groups);
    }
    fn take_freed_slot(&mut self) -> Option<FreedSlot> {
        self.late.take(&mut *self.inner)
    }
}

/// [`HoldOne`] without the flaw, as a registered layer: on when the run
/// has groups besides the root.
pub const PASS_LAYER: crate::group::GroupLayerType = crate::group::GroupLayerType {
    name: "toy-hold-one",
    honours: "-",
    about: "toy: holds each grouped request for one dispatch",
    keys: &["group.name"],
    build: |inner, cx| hold_one(inner, cx, false),
};

/// [`HoldOne`] with the flaw: loses every 50th request it holds.
pub const LOSING_LAYER: crate::group::GroupLayerType = crate::group::GroupLayerType {
    name: "toy-loses-held",
    honours: "-",
    about: "toy: holds grouped requests and loses every 50th",
    keys: &["group.name"],
    build: |inner, cx| hold_one(inner, cx, true),
};

fn hold_one(
    inner: Box<dyn Scheduler>,
    cx: &crate::group::LayerContext<'_>,
    loses: bool,
) -> crate::group::Layered {
    if cx.groups.len() <= 1 {
        return crate::group::Layered::absent(inner);
    }
    crate::group::Layered {
        scheduler: Box::new(HoldOne::new(inner, loses)),
        shown: Some(if loses { "loses" } else { "on" }.to_string()),
    }
}
