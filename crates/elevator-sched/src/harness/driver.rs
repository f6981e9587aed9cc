//! The driver: runs one policy through one case in virtual time, inside
//! the invariant checker ([`crate::check::Checked`]), the same checker the
//! simulator runs every policy through.
//!
//! Each step at time `now`: the device completes what is due (in a random
//! order when several are, on the uniform device), tasks issue what is
//! due, then the driver asks the policy for requests while the device has
//! a free slot. Time then moves to the earliest of the next completion,
//! the next arrival and the end of the policy's wait, and the driver asks
//! again. Time strictly increases from step to step. After each step the
//! driver stops at the checker's first violation.
//!
//! [`run`] goes on until nothing more is to come and checks the end (the
//! conformance suite). A [`Run`] is the same loop held open: a unit test
//! runs it up to a time ([`Run::run_until`]), looks at the policy
//! ([`Run::policy`], the concrete type it was built with) and at what each
//! task got ([`Run::stats`]), and goes on. Stopping and going on never
//! changes what happens: a run taken to `t2` in one call and in two (to
//! `t1`, then `t2`) makes the same calls at the same times (tested).

use crate::check::{CheckOptions, CheckReport, Checked, OnViolation, Violation};
use crate::harness::workload::{Case, Client, ClientStep, Recent, Service};
use crate::{Dispatch, Scheduler};
use elevator_core::{Duration, Instant, Prng, Request, Sector, TaskId};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// How strict the driver is: the checker's options.
pub type Options = CheckOptions;

/// What a passing run looked like: the checker's report.
pub type RunReport = CheckReport;

/// The fake device's in-flight requests: (completion time, (dispatch time,
/// order), request), in completion order on the serial device.
#[derive(Debug)]
struct Device {
    depth: usize,
    service: Service,
    prng: Prng,
    in_flight: VecDeque<(Instant, (Instant, u64), Request)>,
    /// Requests started so far.
    started: u64,
    /// Serial device: when the request last started is done, and where it
    /// ended.
    busy_until: Instant,
    head: Sector,
}

impl Device {
    fn start(&mut self, request: Request, now: Instant) {
        let done = match self.service {
            Service::Uniform { min, max } => {
                let spread = max.nanos() - min.nanos();
                now + min + Duration(self.prng.below(spread + 1))
            }
            Service::Serial {
                fixed,
                per_sector,
                seek,
            } => {
                let seek = if request.sector == self.head {
                    Duration::ZERO
                } else {
                    seek
                };
                let transfer = per_sector.mul(u64::from(request.sectors));
                self.busy_until = self.busy_until.max(now) + fixed + seek + transfer;
                self.head = request.end();
                self.busy_until
            }
        };
        self.in_flight
            .push_back((done, (now, self.started), request));
        self.started += 1;
    }

    /// The requests due by `now` with their dispatch times: in a random
    /// order on the uniform device, in service order on the serial one.
    fn take_due(&mut self, now: Instant) -> Vec<((Instant, u64), Request)> {
        let mut due = Vec::new();
        if let Service::Serial { .. } = self.service {
            while self.in_flight.front().is_some_and(|(t, _, _)| *t <= now) {
                due.extend(self.in_flight.pop_front().map(|(_, d, r)| (d, r)));
            }
            return due;
        }
        let mut i = 0;
        while i < self.in_flight.len() {
            if self.in_flight[i].0 <= now {
                due.extend(self.in_flight.swap_remove_back(i).map(|(_, d, r)| (d, r)));
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
        self.in_flight.iter().map(|(t, _, _)| *t).min()
    }
}

/// One request of a task, as it went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    pub sectors: u32,
    /// Inserted into the policy.
    pub issued: Instant,
    /// Sent to the device (with the request it was merged into).
    pub dispatched: Instant,
    /// Sent as the device's `order`-th request, from 0 (orders requests
    /// dispatched at one instant).
    pub order: u64,
    pub completed: Instant,
}

impl Served {
    /// From issue to completion: what the task waited.
    pub fn latency(&self) -> Duration {
        self.completed.since(self.issued)
    }
}

/// What one task got: its completed requests in completion order.
#[derive(Clone, Debug, Default)]
pub struct TaskStats {
    pub served: Vec<Served>,
}

impl TaskStats {
    pub fn requests(&self) -> u64 {
        self.served.len() as u64
    }

    pub fn sectors(&self) -> u64 {
        self.served.iter().map(|s| u64::from(s.sectors)).sum()
    }

    /// The mean issue-to-completion latency (zero with nothing served).
    pub fn mean_latency(&self) -> Duration {
        let total: u64 = self.served.iter().map(|s| s.latency().nanos()).sum();
        Duration(total / self.requests().max(1))
    }
}

/// Issues due: (time, sequence, client index), earliest first.
type Issues = BinaryHeap<Reverse<(Instant, u64, usize)>>;

/// A run held open: a policy inside the checker, the fake device, the
/// tasks and the clock.
#[derive(Debug)]
pub struct Run<S: Scheduler + ?Sized = dyn Scheduler> {
    policy: Checked<S>,
    device: Device,
    max_service: Duration,
    limits: elevator_core::QueueLimits,
    clients: Vec<Client>,
    stats: Vec<TaskStats>,
    issues: Issues,
    sequence: u64,
    exits: Vec<TaskId>,
    now: Instant,
    /// The step at `now` has been taken; `wait_until` is what the policy
    /// last asked to wait for.
    stepped: bool,
    wait_until: Option<Instant>,
    next_id: u64,
    recent: Recent,
}

/// Drive `policy` through `case` inside the checker until nothing more is
/// to come, then check the end. The policy must be fresh and built with
/// `case.device.limits`.
pub fn run(
    policy: Box<dyn Scheduler>,
    case: &Case,
    options: &Options,
) -> Result<RunReport, Violation> {
    let mut run = Run::new(policy, case, options);
    run.run_to_end()?;
    run.finish()
}

impl<S: Scheduler + ?Sized> Run<S> {
    /// `policy`, fresh and built with `case.device.limits`, at time zero
    /// with nothing issued yet.
    pub fn new(policy: Box<S>, case: &Case, options: &Options) -> Self {
        let limits = case.device.limits;
        assert!(limits.queue_depth >= 1, "device needs a queue depth");
        match case.device.service {
            Service::Uniform { min, max } => {
                assert!(min <= max);
                assert!(min > Duration::ZERO, "service takes time");
            }
            Service::Serial {
                fixed, per_sector, ..
            } => assert!(
                fixed > Duration::ZERO || per_sector > Duration::ZERO,
                "service takes time"
            ),
        }
        let policy = Checked::new(policy, &limits, *options, OnViolation::Record);
        let device = Device {
            depth: limits.queue_depth as usize,
            service: case.device.service,
            prng: Prng::new(case.device.seed),
            in_flight: VecDeque::new(),
            started: 0,
            busy_until: Instant::ZERO,
            head: 0,
        };
        let clients: Vec<Client> = case
            .workload
            .tasks
            .iter()
            .map(|t| Client::new(t.clone(), limits.capacity))
            .collect();
        let mut run = Run {
            policy,
            device,
            max_service: case.device.max_service(),
            limits,
            stats: vec![TaskStats::default(); clients.len()],
            clients,
            issues: BinaryHeap::new(),
            sequence: 0,
            exits: Vec::new(),
            now: Instant::ZERO,
            stepped: false,
            wait_until: None,
            next_id: 1,
            recent: Recent::default(),
        };
        for i in 0..run.clients.len() {
            let step = run.clients[i].start();
            run.follow(step, i);
        }
        run
    }

    /// The policy as built.
    pub fn policy(&self) -> &S {
        self.policy.inner()
    }

    /// The policy, to change by hand between steps (unchecked; the next
    /// checked call checks its structure).
    pub fn policy_mut(&mut self) -> &mut S {
        self.policy.inner_mut()
    }

    /// The time of the last step taken.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// What `task` got so far.
    pub fn stats(&self, task: TaskId) -> &TaskStats {
        &self.stats[self.client_of(task)]
    }

    fn client_of(&self, task: TaskId) -> usize {
        self.clients
            .iter()
            .position(|c| c.task() == task)
            .unwrap_or_else(|| panic!("no task {task:?} in the case"))
    }

    fn follow(&mut self, step: ClientStep, index: usize) {
        if let Some(at) = step.issue_at {
            self.sequence += 1;
            self.issues.push(Reverse((at, self.sequence, index)));
        }
        if step.exit {
            self.exits.push(self.clients[index].task());
        }
    }

    /// Take every step up to and including `end`; stop at the first
    /// violation.
    pub fn run_until(&mut self, end: Instant) -> Result<(), Violation> {
        self.go(Some(end))
    }

    /// Take every step until nothing more is to come.
    pub fn run_to_end(&mut self) -> Result<(), Violation> {
        self.go(None)
    }

    fn go(&mut self, end: Option<Instant>) -> Result<(), Violation> {
        loop {
            if !self.stepped {
                self.step();
                self.stepped = true;
                if let Some(v) = self.policy.violation() {
                    return Err(v.clone());
                }
            }
            let Some(next) = self.next_event() else {
                return Ok(());
            };
            if end.is_some_and(|end| next > end) {
                return Ok(());
            }
            assert!(next > self.now, "harness bug: time must advance");
            self.now = next;
            self.stepped = false;
        }
    }

    fn next_event(&self) -> Option<Instant> {
        [
            self.device.next_completion(),
            self.issues.peek().map(|r| r.0 .0),
            self.wait_until,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// One step at `now`.
    fn step(&mut self) {
        let now = self.now;
        // 1. Completions due.
        for ((dispatched, order), request) in self.device.take_due(now) {
            let parts: Vec<(TaskId, u32, Instant)> = request
                .ids()
                .map(|id| {
                    let part = self.policy.inserted_as(id).unwrap_or(&request);
                    (part.task, part.sectors, part.arrival)
                })
                .collect();
            self.policy.complete(&request, now);
            for (task, sectors, issued) in parts {
                let index = self.client_of(task);
                self.stats[index].served.push(Served {
                    sectors,
                    issued,
                    dispatched,
                    order,
                    completed: now,
                });
                let step = self.clients[index].completed(now);
                self.follow(step, index);
            }
        }
        // 2. Arrivals due (an issue may schedule another one at `now`).
        while let Some(&Reverse((at, _, index))) = self.issues.peek() {
            if at > now {
                break;
            }
            self.issues.pop();
            let (requests, step) =
                self.clients[index].issue(now, &mut self.next_id, &mut self.recent, &self.limits);
            for request in requests {
                self.policy.insert(request, now);
            }
            self.follow(step, index);
        }
        for task in std::mem::take(&mut self.exits) {
            self.policy.task_exited(task, now);
        }
        // 3. Fill the device.
        self.wait_until = None;
        while self.device.in_flight.len() < self.device.depth {
            match self.policy.dispatch(now) {
                Dispatch::Request(request) => self.device.start(request, now),
                Dispatch::Wait { until } => {
                    self.wait_until = Some(until);
                    break;
                }
                Dispatch::Empty => break,
            }
        }
        // The fake device has no request slots; the checker counts those
        // a policy frees (`Scheduler::take_freed_slot`) as the engine's
        // block layer would and keeps them until taken.
        while self.policy.take_freed_slot().is_some() {}
    }

    /// Check the end and return the checker's report. With nothing more
    /// to come (the run went to its end): nothing queued, in flight or
    /// lost, and `dispatch` answers `Empty`; stopped early: every wait so
    /// far within the policy's starvation bound.
    pub fn finish(&mut self) -> Result<RunReport, Violation> {
        let drained = self.next_event().is_none();
        let now = self.now;
        if drained {
            match self.policy.dispatch(now) {
                Dispatch::Empty => {}
                other => {
                    if self.policy.violation().is_none() {
                        return Err(Violation {
                            policy: self.policy.name(),
                            at: now,
                            message: format!(
                                "after all completions dispatch returned {other:?}, not Empty"
                            ),
                        });
                    }
                }
            }
        }
        self.policy.finish(self.max_service, now, drained)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::workload::{DeviceSpec, Layout, Phase, TaskScript, Workload, REGION};
    use elevator_core::QueueLimits;

    /// Two greedy readers and one that thinks, under `policy`, on `service`.
    fn case(service: Service) -> Case {
        let seq = Phase::reads(400, 64, Layout::Sequential);
        let slow = Phase::reads(100, 8, Layout::Random { span: 1 << 20 }).think(Duration(700_000));
        Case {
            workload: Workload {
                tasks: vec![
                    TaskScript::new(1, REGION, vec![seq.clone()]),
                    TaskScript::new(2, 2 * REGION, vec![seq]),
                    TaskScript::new(3, 3 * REGION, vec![slow]),
                ],
            },
            device: DeviceSpec {
                limits: QueueLimits {
                    queue_depth: 4,
                    ..QueueLimits::default()
                },
                service,
                seed: 9,
            },
        }
    }

    fn digest_and_sectors(run: &mut Run) -> (u64, Vec<u64>) {
        let sectors = (1..=3).map(|t| run.stats(TaskId(t)).sectors()).collect();
        let report = run.finish().expect("bfq and cfq pass the checker");
        (report.digest, sectors)
    }

    #[test]
    fn stopping_and_going_on_changes_nothing() {
        let uniform = Service::Uniform {
            min: Duration(100_000),
            max: Duration(3_000_000),
        };
        let serial = Service::Serial {
            fixed: Duration(50_000),
            per_sector: Duration(2_000),
            seek: Duration(4_000_000),
        };
        for name in ["bfq", "cfq"] {
            for service in [uniform, serial] {
                let case = case(service);
                let build = || {
                    crate::find(name)
                        .unwrap()
                        .build_default(&case.device.limits)
                };
                let options = Options::default();
                let mut whole = Run::new(build(), &case, &options);
                whole.run_to_end().unwrap();
                let mut pieces = Run::new(build(), &case, &options);
                // Stop at times with and without events on them.
                for ms in [0, 1, 7, 50, 51, 300, 1000] {
                    pieces.run_until(Instant(ms * 1_000_000)).unwrap();
                    assert!(pieces.now() <= Instant(ms * 1_000_000));
                }
                pieces.run_to_end().unwrap();
                let (d1, s1) = digest_and_sectors(&mut whole);
                let (d2, s2) = digest_and_sectors(&mut pieces);
                assert_eq!((d1, &s1), (d2, &s2), "{name} on {service:?}");
                // Every request was served, and the work was not trivial.
                assert_eq!(s1, vec![400 * 64, 400 * 64, 100 * 8], "{name}");
                assert!(whole.policy().queued() == 0);
            }
        }
    }

    #[test]
    fn the_serial_device_serves_in_order_and_charges_seeks() {
        // One reader, 8 sequential reads of 16 sectors, then 8 random
        // ones: 1 + 16 x 2 us each, one seek for the first sequential
        // read and one per random read.
        let phases = vec![
            Phase::reads(8, 16, Layout::Sequential),
            Phase::reads(8, 16, Layout::Random { span: 1 << 20 }),
        ];
        let case = Case {
            workload: Workload {
                tasks: vec![TaskScript::new(1, REGION, phases)],
            },
            device: DeviceSpec {
                limits: QueueLimits::default(),
                service: Service::Serial {
                    fixed: Duration(1_000),
                    per_sector: Duration(2_000),
                    seek: Duration(1_000_000),
                },
                seed: 0,
            },
        };
        let noop = crate::find("noop")
            .unwrap()
            .build_default(&case.device.limits);
        let mut run = Run::new(noop, &case, &Options::default());
        run.run_to_end().unwrap();
        let served = &run.stats(TaskId(1)).served;
        assert_eq!(served.len(), 16);
        let each = Duration(1_000 + 16 * 2_000);
        let device: Vec<Duration> = served
            .iter()
            .map(|s| s.completed.since(s.dispatched))
            .collect();
        let seek = Duration(1_000_000);
        assert_eq!(device[0], each + seek);
        assert!(device[1..8].iter().all(|d| *d == each), "{device:?}");
        assert!(device[8..].iter().all(|d| *d == each + seek), "{device:?}");
        // Closed loop, no think time: each issue at the last completion.
        assert!(served.windows(2).all(|w| w[1].issued == w[0].completed));
        assert_eq!(run.now(), served[15].completed);
        run.finish().unwrap();
    }
}
