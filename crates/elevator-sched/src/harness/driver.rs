//! The driver: runs one policy through one case in virtual time, inside
//! the invariant checker ([`crate::check::Checked`]), the same checker the
//! simulator runs every policy through.
//!
//! Each step at time `now`: the device completes what is due (in a random
//! order when several are), tasks issue what is due, then the driver asks
//! the policy for requests while the device has a free slot. Time then
//! moves to the earliest of the next completion, the next arrival and the
//! end of the policy's wait, and the driver asks again. Time strictly
//! increases from step to step. After each step the driver stops at the
//! checker's first violation.

use crate::check::{CheckOptions, CheckReport, Checked, OnViolation, Violation};
use crate::harness::workload::{Case, Client, ClientStep, Recent};
use crate::{Dispatch, Scheduler};
use elevator_core::{Duration, Instant, Prng, Request, TaskId};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How strict the driver is: the checker's options.
pub type Options = CheckOptions;

/// What a passing run looked like: the checker's report.
pub type RunReport = CheckReport;

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

/// Drive `policy` through `case` inside the checker. The policy must be
/// fresh and built with `case.device.limits`.
pub fn run(
    policy: Box<dyn Scheduler>,
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
    let mut policy = Checked::new(policy, &limits, *options, OnViolation::Record);
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
    loop {
        // 1. Completions due, in a random order.
        for request in device.take_due(now) {
            let tasks: Vec<TaskId> = request
                .ids()
                .map(|id| policy.inserted_as(id).map_or(request.task, |r| r.task))
                .collect();
            policy.complete(&request, now);
            for task in tasks {
                let index = client_of(task, &clients);
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
                policy.insert(request, now);
            }
            follow(step, index, clients[index].task(), &mut issues, &mut exits);
        }
        for task in exits.drain(..) {
            policy.task_exited(task, now);
        }
        // 3. Fill the device.
        let mut wait_until = None;
        while device.in_flight.len() < device.depth {
            match policy.dispatch(now) {
                Dispatch::Request(request) => device.start(request, now),
                Dispatch::Wait { until } => {
                    wait_until = Some(until);
                    break;
                }
                Dispatch::Empty => break,
            }
        }
        if let Some(v) = policy.violation() {
            return Err(v.clone());
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
        now = next;
    }

    // The end: nothing queued, nothing more to come.
    match policy.dispatch(now) {
        Dispatch::Empty => {}
        other => {
            if policy.violation().is_none() {
                return Err(Violation {
                    policy: policy.name(),
                    at: now,
                    message: format!(
                        "after all completions dispatch returned {other:?}, not Empty"
                    ),
                });
            }
        }
    }
    policy.finish(case.device.max_service, now, true)
}
