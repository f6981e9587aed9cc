//! io-throttle: Andrea Righi's 2008-2009 cgroup I/O controller, which
//! slept the task that went over its group's limit.
//!
//! After the patch series' own descriptions (the code never reached
//! mainline and is not in the reference; all from the posted mails):
//! - the cgroup files `blockio.bandwidth-max` and `blockio.iops-max`, one
//!   rule per device `DEV:LIMIT:STRATEGY:BUCKET-SIZE`, bytes/s and I/Os/s,
//!   strategy 0 a leaky bucket, 1 a token bucket; `DEV:LIMIT:1` without a
//!   size sets the bucket to LIMIT (v4, v5 and v8 changelogs, containers
//!   list, June-August 2008);
//! - the check runs in `submit_bio()` in the context of the submitting
//!   task (`cgroup_io_throttle()` "on every submit_bio()", v9's TODO,
//!   September 2008), which it charges and, over the limit, puts to sleep
//!   before the bio goes on: "imposing additional delays on I/O requests
//!   for those processes that exceed the limits" (v13 documentation, April
//!   2009); the objection it drew from the start was exactly that
//!   ("adding sleeps to it during request submission", Naveen Gupta's
//!   review, January 2008);
//! - writeback, which the flusher threads submit, is not slept but delayed
//!   in a list that a kernel thread (`kiothrottled`) dispatches when due
//!   (v13-v16).
//!
//! So unlike blk-throttle ([`super::throttle`], 2.6.37+, which queues
//! bios per group in 100 ms slices and lets them out in FIFO order), a
//! group's tasks here each charge the group's buckets when they submit and
//! each sleeps its own delay: a task that sleeps submits nothing more, so
//! its later requests (the other pieces of a split I/O) are charged only
//! when it wakes; other tasks of the group keep going and each computes its
//! own delay from the group's state. A token bucket starts full and keeps
//! up to its size of unused credit (a burst, one second of it at the
//! default size); a leaky bucket keeps none.
//!
//! The model: per group, a leaky bucket is a theoretical time (a request
//! charged at `t` passes at `max(t, tat)` and moves `tat` on by its cost
//! over the rate); a token bucket is a credit refilled at the rate up to
//! its size, which a request spends at once and, if that leaves it below
//! zero, passes when the debt is paid. A request that waits for both limits
//! waits for the later. Sync requests (reads, O_DIRECT writes) wait in
//! their task's queue; async writes (writeback) in their group's, charged in
//! arrival order as `kiothrottled`'s list let them out.
//!
//! Departures: limits are per group on the one device and cover reads and
//! writes together (the cgroup files took one rule per device); groups are
//! flat (a rule on a group binds only its own tasks); a dirtier is not slowed
//! in `balance_dirty_pages` by its group's limit (the host sees only its
//! writeback held here); the kernel charged from jiffies, here time is exact.
//!
//! Invariants: every inserted request is held here or handed to the inner
//! policy, exactly once; a task's requests reach the inner policy in the
//! order it submitted them; a held request that merges when let out gives
//! its block-layer slot back (`group::LateInsert`).

use super::{GroupLayerType, LateInsert, LayerContext, Layered};
use crate::{Dispatch, Scheduler};
use elevator_core::{
    Bucket as Strategy, Duration, GroupId, GroupTree, Instant, Request, TaskId, ThrottleRule,
};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// The layer's entry in [`super::registry::GROUP_LAYERS`]: present when a
/// group carries an `io_throttle` rule.
pub const TYPE: GroupLayerType = GroupLayerType {
    name: "io-throttle",
    honours: "limits",
    about: "Righi's 2009 io-throttle: per-group bucket limits, the submitter sleeps",
    keys: &["group.io_throttle"],
    build: |inner, cx: &LayerContext<'_>| {
        if !cx.groups.has_io_throttle() {
            return Layered::absent(inner);
        }
        Layered {
            scheduler: Box::new(IoThrottle::new(inner, cx.groups)),
            shown: None,
        }
    },
};

const NS_PER_S: u128 = 1_000_000_000;

/// One limit's state.
#[derive(Clone, Copy, Debug)]
enum Meter {
    /// The time by which everything charged so far is paid for.
    Leaky { rate: u64, tat: Instant },
    /// Credit in units × ns per s (so a refill of `rate` per second is
    /// exact), at most `size × 10^9`; starts full.
    Token {
        rate: u64,
        size: u64,
        credit: i128,
        last: Instant,
    },
}

impl Meter {
    fn new(rule: ThrottleRule) -> Self {
        let rate = rule.limit.max(1);
        match rule.bucket {
            Strategy::Leaky => Meter::Leaky {
                rate,
                tat: Instant::ZERO,
            },
            Strategy::Token { size } => Meter::Token {
                rate,
                size,
                credit: i128::from(size) * NS_PER_S as i128,
                last: Instant::ZERO,
            },
        }
    }

    /// Charge `cost` units at `now`; how long the request must wait.
    fn charge(&mut self, cost: u64, now: Instant) -> Duration {
        match self {
            Meter::Leaky { rate, tat } => {
                let start = (*tat).max(now);
                let span = (u128::from(cost) * NS_PER_S).div_ceil(u128::from(*rate));
                *tat = start + Duration(span.min(u128::from(u64::MAX)) as u64);
                start.since(now)
            }
            Meter::Token {
                rate,
                size,
                credit,
                last,
            } => {
                let full = i128::from(*size) * NS_PER_S as i128;
                let elapsed = i128::from(now.since(*last).nanos());
                *credit = (*credit + elapsed * i128::from(*rate)).min(full);
                *last = now;
                *credit -= i128::from(cost) * NS_PER_S as i128;
                if *credit >= 0 {
                    Duration::ZERO
                } else {
                    let debt = (-*credit) as u128;
                    Duration(debt.div_ceil(u128::from(*rate)) as u64)
                }
            }
        }
    }
}

/// A group's two meters.
#[derive(Clone, Copy, Debug, Default)]
struct Meters {
    bandwidth: Option<Meter>,
    iops: Option<Meter>,
}

impl Meters {
    fn limited(&self) -> bool {
        self.bandwidth.is_some() || self.iops.is_some()
    }

    /// Charge a request of `bytes` at `now`; its wait.
    fn charge(&mut self, bytes: u64, now: Instant) -> Duration {
        let by_bytes = self.bandwidth.as_mut().map(|m| m.charge(bytes, now));
        let by_ios = self.iops.as_mut().map(|m| m.charge(1, now));
        by_bytes
            .unwrap_or(Duration::ZERO)
            .max(by_ios.unwrap_or(Duration::ZERO))
    }
}

/// Who waits: a sleeping task, or a group's writeback list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Sleeper {
    Task(TaskId),
    Writeback(GroupId),
}

/// Requests waiting for one sleeper; the head has been charged and passes
/// at `wake`.
#[derive(Debug, Default)]
struct Waiting {
    wake: Instant,
    requests: VecDeque<Request>,
}

/// A policy behind io-throttle.
#[derive(Debug)]
pub struct IoThrottle {
    inner: Box<dyn Scheduler>,
    meters: Vec<Meters>,
    waiting: FxHashMap<Sleeper, Waiting>,
    held: usize,
    late: LateInsert,
}

impl IoThrottle {
    pub fn new(inner: Box<dyn Scheduler>, tree: &GroupTree) -> Self {
        let meters = tree
            .iter()
            .map(|g| Meters {
                bandwidth: g.io_throttle.bandwidth.map(Meter::new),
                iops: g.io_throttle.iops.map(Meter::new),
            })
            .collect();
        IoThrottle {
            inner,
            meters,
            waiting: FxHashMap::default(),
            held: 0,
            late: LateInsert::default(),
        }
    }

    fn meters(&mut self, g: GroupId) -> Option<&mut Meters> {
        self.meters.get_mut(g.0 as usize).filter(|m| m.limited())
    }

    fn sleeper(r: &Request) -> Sleeper {
        if r.sync || r.op == elevator_core::Op::Read {
            Sleeper::Task(r.task)
        } else {
            Sleeper::Writeback(r.group)
        }
    }

    /// Let out every head whose wake time has come, charging the request
    /// behind it as its task wakes and submits it.
    fn release(&mut self, now: Instant) {
        if self.held == 0 {
            return;
        }
        let mut due: Vec<Sleeper> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.wake <= now)
            .map(|(s, _)| *s)
            .collect();
        // The order the kernel's timers would wake them in: by wake time,
        // ties in a fixed order (determinism).
        due.sort_by_key(|s| {
            let key = match *s {
                Sleeper::Task(t) => (0, t.0),
                Sleeper::Writeback(g) => (1, g.0),
            };
            (self.waiting[s].wake, key)
        });
        for s in due {
            loop {
                let w = self.waiting.get_mut(&s).expect("due sleeper");
                if w.wake > now {
                    break;
                }
                let request = w
                    .requests
                    .pop_front()
                    .expect("a sleeper waits for something");
                self.held -= 1;
                self.late.insert(&mut *self.inner, request, now);
                let Some(next) = self.waiting[&s].requests.front() else {
                    self.waiting.remove(&s);
                    break;
                };
                let (group, bytes) = (next.group, next.bytes());
                let wait = match self.meters(group) {
                    Some(m) => m.charge(bytes, now),
                    None => Duration::ZERO,
                };
                self.waiting.get_mut(&s).expect("sleeper").wake = now + wait;
            }
        }
    }

    fn next_wake(&self) -> Option<Instant> {
        self.waiting.values().map(|w| w.wake).min()
    }
}

impl Scheduler for IoThrottle {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn insert(&mut self, request: Request, now: Instant) {
        let sleeper = Self::sleeper(&request);
        if let Some(w) = self.waiting.get_mut(&sleeper) {
            // Asleep: this is submitted (and charged) when it wakes.
            w.requests.push_back(request);
            self.held += 1;
            return;
        }
        let bytes = request.bytes();
        let wait = match self.meters(request.group) {
            Some(m) => m.charge(bytes, now),
            None => Duration::ZERO,
        };
        if wait == Duration::ZERO {
            self.inner.insert(request, now);
            return;
        }
        self.waiting.insert(
            sleeper,
            Waiting {
                wake: now + wait,
                requests: VecDeque::from([request]),
            },
        );
        self.held += 1;
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        self.release(now);
        let wake = self.next_wake().map(|t| t.max(now + Duration(1)));
        match self.inner.dispatch(now) {
            Dispatch::Request(r) => Dispatch::Request(r),
            Dispatch::Wait { until } => Dispatch::Wait {
                until: wake.map_or(until, |w| w.min(until)),
            },
            Dispatch::Empty => match wake {
                Some(until) => Dispatch::Wait { until },
                None => Dispatch::Empty,
            },
        }
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        self.inner.complete(request, now);
    }

    fn queued(&self) -> usize {
        self.inner.queued() + self.held
    }

    forward_to_inner!();

    fn check_invariants(&self) -> Result<(), String> {
        let held: usize = self.waiting.values().map(|w| w.requests.len()).sum();
        if held != self.held {
            return Err(format!(
                "io-throttle holds {held} requests, counts {}",
                self.held
            ));
        }
        if let Some((s, _)) = self.waiting.iter().find(|(_, w)| w.requests.is_empty()) {
            return Err(format!("io-throttle: {s:?} waits for nothing"));
        }
        self.inner.check_invariants()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use elevator_core::{IoThrottleLimits, QueueLimits};

    use crate::harness::{
        Case, DeviceSpec, Layout, Options, Phase, Run, Service, TaskScript, Workload, REGION,
    };

    /// Takes every request at once and serves it in a nanosecond.
    fn instant() -> DeviceSpec {
        DeviceSpec {
            limits: QueueLimits {
                queue_depth: 1024,
                max_sectors: 2048,
                ..QueueLimits::default()
            },
            service: Service::Uniform {
                min: Duration(1),
                max: Duration(1),
            },
            seed: 0,
        }
    }

    fn noop() -> Box<dyn Scheduler> {
        crate::find("noop")
            .unwrap()
            .build_default(&instant().limits)
    }

    fn tree(rules: &str) -> (GroupTree, GroupId) {
        let mut t = GroupTree::default();
        let g = t.add("g", GroupId::ROOT, 100, Default::default());
        t.set_io_throttle(g, rules.parse::<IoThrottleLimits>().unwrap());
        (t, g)
    }

    /// `tasks` closed-loop readers of `group`, one request in flight each,
    /// `sectors` a request; dispatch times of all, in order, until `until`.
    fn readers(rules: &str, tasks: u32, sectors: u32, count: u32, until: f64) -> Vec<Instant> {
        let (t, g) = tree(rules);
        let s = IoThrottle::new(noop(), &t);
        let scripts = (1..=tasks)
            .map(|task| TaskScript {
                group: g,
                ..TaskScript::new(
                    task,
                    REGION * u64::from(task),
                    vec![Phase::reads(count, sectors, Layout::Sequential)],
                )
            })
            .collect();
        let case = Case {
            workload: Workload { tasks: scripts },
            device: instant(),
        };
        let options = Options {
            liveness_limit: None,
            check_starvation: false,
            ..Options::default()
        };
        let mut run = Run::new(Box::new(s), &case, &options);
        let end = Instant::ZERO + Duration((until * 1e9) as u64);
        run.run_until(end)
            .and_then(|()| run.finish())
            .unwrap_or_else(|v| panic!("{v}"));
        let mut out: Vec<(u64, Instant)> = (1..=tasks)
            .flat_map(|t| run.stats(TaskId(t)).served.clone())
            .map(|s| (s.order, s.dispatched))
            .collect();
        out.sort();
        out.into_iter().map(|(_, t)| t).collect()
    }

    fn passed_by(times: &[Instant], secs: f64) -> usize {
        times.iter().filter(|t| t.as_secs_f64() <= secs).count()
    }

    #[test]
    fn a_token_bucket_lets_its_size_through_at_once_then_the_rate() {
        // 100 I/Os per second with a full bucket of 100: the first 100 go
        // at once (a nanosecond each on this device), then one every 10
        // ms; over 3 s, 100 + 300.
        let t = readers("iops-max=100:1", 1, 8, 1000, 3.0);
        assert_eq!(passed_by(&t, 0.001), 100, "the bucket");
        let n = passed_by(&t, 3.0);
        assert!((399..=401).contains(&n), "{n}");
    }

    #[test]
    fn a_leaky_bucket_saves_no_credit() {
        // The same limit as a leaky bucket: one every 10 ms from the start.
        let t = readers("iops-max=100:0", 1, 8, 1000, 3.0);
        assert_eq!(passed_by(&t, 0.001), 1);
        let n = passed_by(&t, 3.0);
        assert!((300..=301).contains(&n), "{n}");
    }

    #[test]
    fn bandwidth_and_iops_both_bind_and_the_later_wins() {
        // 64 KiB requests: 1 MiB/s allows 16 a second, 100 I/Os/s more;
        // bandwidth decides.
        let t = readers("bandwidth-max=1m:0 iops-max=100:0", 1, 128, 1000, 2.0);
        let n = passed_by(&t, 2.0);
        assert!((32..=33).contains(&n), "{n}");
    }

    #[test]
    fn the_groups_tasks_share_its_limit() {
        // Four readers of one group at 100 I/Os/s between them.
        let t = readers("iops-max=100:0", 4, 8, 1000, 2.0);
        let n = passed_by(&t, 2.0);
        assert!((200..=202).contains(&n), "{n}");
    }

    #[test]
    fn a_sleeping_task_submits_its_next_piece_only_when_it_wakes() {
        // One task, a 1 MiB read in eight 128 KiB pieces, bandwidth 1 MiB/s
        // leaky: the pieces go 125 ms apart, each charged as the task wakes
        // (blk-throttle would hold them in its queue and charge the same;
        // the difference is who else may pass meanwhile: below).
        let (t, g) = tree("bandwidth-max=1m:0");
        let mut s = IoThrottle::new(noop(), &t);
        for k in 0..8u64 {
            let mut r = Request::read(k, 1, k * 256, 256);
            r.group = g;
            s.insert(r, Instant::ZERO);
        }
        let mut seen = Vec::new();
        let mut now = Instant::ZERO;
        while seen.len() < 8 {
            match s.dispatch(now) {
                Dispatch::Request(r) => {
                    s.complete(&r, now);
                    seen.push(now);
                }
                Dispatch::Wait { until } => now = until,
                Dispatch::Empty => panic!("lost requests"),
            }
        }
        let gaps: Vec<u64> = seen.windows(2).map(|w| w[1].since(w[0]).nanos()).collect();
        assert!(gaps.iter().all(|&g| g == 125_000_000), "{gaps:?}");
        // Another task of the group, submitting meanwhile, is charged at
        // once: it waits behind the debt, not behind the sleeper's queue.
        let mut other = Request::read(100, 2, 1 << 20, 8);
        other.group = g;
        s.insert(other, now);
        assert!(matches!(s.dispatch(now), Dispatch::Wait { .. }));
        assert_eq!(s.queued(), 1);
    }

    #[test]
    fn unlimited_groups_pass_untouched() {
        let t = GroupTree::default();
        let mut s = IoThrottle::new(noop(), &t);
        s.insert(Request::read(1, 1, 0, 8), Instant::ZERO);
        assert!(matches!(s.dispatch(Instant::ZERO), Dispatch::Request(_)));
    }
}
