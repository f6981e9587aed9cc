//! The cost of one request through each registered policy, in steady
//! state: dispatch one, complete it, and insert a new request for the same
//! task, so every active task keeps the same number of requests queued.
//!
//! For 1, 64 and 1024 active tasks with `QUEUED_PER_TASK` requests each.
//! Each task reads and writes in its own region, leaving a gap after every
//! request, so nothing merges and every request pays for the full insert.
//! Virtual time moves by `TICK` per request (a fast device); a policy that
//! answers `Wait` gets time moved to its `until`.
//!
//! This is the one driver outside the shared harness
//! (`elevator_sched::harness`), on purpose: the harness runs every call
//! inside the invariant checker and keeps per-request records, which would
//! be most of what a benchmark of a few hundred nanoseconds timed. The
//! harness's runs check what a policy does; this loop only times it.
//!
//! `cargo bench -p elevator-sched --bench policies`; a policy added to the
//! registry is benchmarked with no edit here. The group layers are
//! benchmarked around `noop` (the layer's own cost) and `mq-deadline`:
//! `layer/iocost+noop` spreads the tasks over four groups of weights 100,
//! 200, 300 and 400; `layer/wbt+noop` runs wbt at the kernel's defaults
//! for the device (its one write in four tracked).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use elevator_core::{Duration, GroupId, GroupTree, Instant, IoMax, QueueLimits, Request, Sector};
use elevator_sched::group::iocost::IoCost;
use elevator_sched::group::wbt::{Wbt, WbtParams};
use elevator_sched::{registry, Dispatch, Scheduler, SchedulerType};
use std::hint::black_box;

const TASKS: [u32; 3] = [1, 64, 1024];
/// Requests each active task keeps queued (CFQ's default quantum).
const QUEUED_PER_TASK: u32 = 4;
/// Request size in sectors (4 KiB); the next request of a task starts one
/// request further on, so it is never adjacent to the previous one.
const SECTORS: u32 = 8;
/// Virtual time per request: about a fast SSD's 4 KiB read.
const TICK: Duration = Duration::from_micros(100);

/// A policy with `tasks` active tasks, each with its requests queued.
struct Steady {
    policy: Box<dyn Scheduler>,
    now: Instant,
    next_id: u64,
    region: Sector,
    /// Where each task's next request goes, relative to its region.
    cursors: Vec<Sector>,
    /// Groups the tasks are spread over (task `t` in `1 + t % groups`);
    /// 0: every task in the root group.
    groups: u32,
}

impl Steady {
    fn new(ty: &SchedulerType, tasks: u32) -> Self {
        let limits = QueueLimits::default();
        Self::with(ty.build_default(&limits), tasks, 0)
    }

    /// `ty` behind iocost with its default (auto) parameters, the tasks in
    /// four groups.
    fn iocost(ty: &SchedulerType, tasks: u32) -> Self {
        let limits = QueueLimits::default();
        let mut tree = GroupTree::default();
        for (i, w) in [100, 200, 300, 400].into_iter().enumerate() {
            tree.add(&format!("g{i}"), GroupId::ROOT, w, IoMax::default());
        }
        let layer = IoCost::new(ty.build_default(&limits), &tree, &limits, None, None);
        Self::with(Box::new(layer), tasks, 4)
    }

    /// `ty` behind wbt at the kernel's defaults for the device.
    fn wbt(ty: &SchedulerType, tasks: u32) -> Self {
        let limits = QueueLimits::default();
        let params = WbtParams::default_for(&limits);
        let layer = Wbt::new(ty.build_default(&limits), &limits, params);
        Self::with(Box::new(layer), tasks, 0)
    }

    fn with(policy: Box<dyn Scheduler>, tasks: u32, groups: u32) -> Self {
        let limits = QueueLimits::default();
        let mut s = Steady {
            policy,
            now: Instant::ZERO,
            next_id: 0,
            region: limits.capacity / u64::from(tasks) / 8 * 8,
            cursors: vec![0; tasks as usize],
            groups,
        };
        for _ in 0..QUEUED_PER_TASK {
            for task in 0..tasks {
                let r = s.request(task);
                s.policy.insert(r, s.now);
            }
        }
        s
    }

    /// The task's next request: one read in four is a write, so deadline's
    /// two directions both work.
    fn request(&mut self, task: u32) -> Request {
        self.next_id += 1;
        let cursor = &mut self.cursors[task as usize];
        let sector = u64::from(task) * self.region + *cursor;
        *cursor = (*cursor + 2 * u64::from(SECTORS)) % (self.region - u64::from(SECTORS));
        let mut r = if self.next_id % 4 == 3 {
            Request::write(self.next_id, task, sector, SECTORS)
        } else {
            Request::read(self.next_id, task, sector, SECTORS)
        };
        if self.groups > 0 {
            r.group = GroupId(1 + task % self.groups);
        }
        r.arrival = self.now;
        r
    }

    /// One request through the policy.
    fn step(&mut self) {
        self.now += TICK;
        let r = loop {
            match self.policy.dispatch(self.now) {
                Dispatch::Request(r) => break r,
                Dispatch::Wait { until } => self.now = until,
                Dispatch::Empty => panic!("{} has nothing queued", self.policy.name()),
            }
        };
        self.policy.complete(black_box(&r), self.now);
        let next = self.request(r.task.0);
        self.policy.insert(next, self.now);
    }
}

fn policies(c: &mut Criterion) {
    for ty in registry() {
        bench(c, &format!("policy/{}", ty.name), |tasks| {
            Steady::new(ty, tasks)
        });
    }
}

fn layers(c: &mut Criterion) {
    for inner in ["noop", "mq-deadline"] {
        let ty = elevator_sched::find(inner).expect("registered");
        bench(c, &format!("layer/iocost+{inner}"), |tasks| {
            Steady::iocost(ty, tasks)
        });
        bench(c, &format!("layer/wbt+{inner}"), |tasks| {
            Steady::wbt(ty, tasks)
        });
    }
}

fn bench(c: &mut Criterion, name: &str, build: impl Fn(u32) -> Steady) {
    {
        let mut group = c.benchmark_group(name);
        group.throughput(Throughput::Elements(1));
        for tasks in TASKS {
            let mut steady = build(tasks);
            // Settle: every queued request has been replaced once.
            for _ in 0..tasks * QUEUED_PER_TASK {
                steady.step();
            }
            group.bench_function(BenchmarkId::new("tasks", tasks), |b| {
                b.iter(|| steady.step())
            });
            let queued = steady.policy.queued();
            assert_eq!(
                queued,
                (tasks * QUEUED_PER_TASK) as usize,
                "no merges, no loss"
            );
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = policies, layers
}
criterion_main!(benches);
