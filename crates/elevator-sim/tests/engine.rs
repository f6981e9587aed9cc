//! The engine on a fixed-service-time device: conservation, slots, waits.

use elevator_core::{BlockIo, Completion, Io, Workload};
use elevator_core::{
    Duration, GroupId, Instant, IoPrio, Op, QueueLimits, Request, RequestId, TaskId,
};
use elevator_device::{Device, DeviceStats};
use elevator_sched::{Dispatch, Scheduler};
use elevator_sim::{Engine, EngineConfig};
use std::collections::{BTreeSet, VecDeque};

/// Serves one request at a time, each for `service`.
#[derive(Debug)]
struct FixedDisk {
    service: Duration,
    depth: u32,
    queue: VecDeque<(RequestId, Instant)>,
    busy_until: Instant,
    stats: DeviceStats,
}

impl FixedDisk {
    fn new(service_ms: u64, depth: u32) -> Self {
        FixedDisk {
            service: Duration::from_millis(service_ms),
            depth,
            queue: VecDeque::new(),
            busy_until: Instant::ZERO,
            stats: DeviceStats::default(),
        }
    }
}

impl Device for FixedDisk {
    fn name(&self) -> &str {
        "fixed"
    }
    fn limits(&self) -> QueueLimits {
        QueueLimits {
            queue_depth: self.depth,
            ..QueueLimits::default()
        }
    }
    fn submit(&mut self, request: &Request, now: Instant) {
        let start = self.busy_until.max(now);
        self.busy_until = start + self.service;
        self.queue.push_back((request.id, self.busy_until));
        self.stats.requests += 1;
        self.stats.busy_ns += self.service.nanos();
    }
    fn next_completion(&self) -> Option<Instant> {
        self.queue.front().map(|&(_, t)| t)
    }
    fn complete(&mut self, now: Instant) -> Option<RequestId> {
        match self.queue.front() {
            Some(&(id, t)) if t <= now => {
                self.queue.pop_front();
                Some(id)
            }
            _ => None,
        }
    }
    fn in_flight(&self) -> usize {
        self.queue.len()
    }
    fn stats(&self) -> DeviceStats {
        self.stats
    }
}

/// Submits `n` writes at time zero, then one read at 1 ms, and waits for all.
#[derive(Default)]
struct Burst {
    n: u64,
    submitted: BTreeSet<RequestId>,
    done: BTreeSet<RequestId>,
    read: Option<RequestId>,
    read_latency: Option<Duration>,
}

fn io(op: Op, sector: u64, task: u32) -> BlockIo {
    BlockIo {
        op,
        sync: op == Op::Read,
        sector,
        sectors: 8,
        task: TaskId(task),
        prio: IoPrio::default(),
        group: GroupId::ROOT,
        meta: false,
        noidle: false,
    }
}

impl Workload for Burst {
    fn start(&mut self, io_: &mut Io<'_>) {
        for i in 0..self.n {
            // Spread out so nothing merges.
            self.submitted
                .insert(io_.submit(io(Op::Write, i * 1000, 1)));
        }
        io_.wake_at(Instant::ZERO + Duration::from_millis(1), 7);
    }
    fn wake(&mut self, token: u64, io_: &mut Io<'_>) {
        assert_eq!(token, 7);
        let id = io_.submit(io(Op::Read, 5, 2));
        self.read = Some(id);
        self.submitted.insert(id);
    }
    fn completed(&mut self, done: &Completion, _io: &mut Io<'_>) {
        assert!(self.done.insert(done.id), "completed twice");
        if Some(done.id) == self.read {
            self.read_latency = Some(done.completed.since(done.submitted));
        }
    }
    fn finished(&self) -> bool {
        !self.submitted.is_empty() && self.done == self.submitted
    }
}

fn noop() -> Box<dyn Scheduler> {
    elevator_sched::find("noop")
        .unwrap()
        .build_default(&QueueLimits::default())
}

#[test]
fn every_request_completes_once_and_time_adds_up() {
    let mut w = Burst {
        n: 50,
        ..Burst::default()
    };
    let mut e = Engine::new(
        noop(),
        Box::new(FixedDisk::new(2, 1)),
        EngineConfig::default(),
    );
    let s = e.run(&mut w);
    assert_eq!(s.completed, 51);
    assert_eq!(s.end, Instant::ZERO + Duration::from_millis(2 * 51));
    assert!(!s.timed_out);
}

#[test]
fn request_slots_make_a_reader_wait_behind_a_writer_only_within_its_direction() {
    // 300 writes exceed the 128 write slots; the read has its own slots, so
    // under noop it waits only for the writes already admitted.
    let mut w = Burst {
        n: 300,
        ..Burst::default()
    };
    let mut e = Engine::new(
        noop(),
        Box::new(FixedDisk::new(1, 1)),
        EngineConfig::default(),
    );
    e.run(&mut w);
    let waited = w.read_latency.unwrap();
    println!("read waited {waited} behind 300 writes with 128 write slots");
    assert!(waited <= Duration::from_millis(130), "{waited}");
    assert!(waited >= Duration::from_millis(120), "{waited}");

    // With one shared slot pool big enough for all, it waits behind all 300.
    let mut w = Burst {
        n: 300,
        ..Burst::default()
    };
    let config = EngineConfig {
        nr_requests: [usize::MAX, usize::MAX],
        ..EngineConfig::default()
    };
    let mut e = Engine::new(noop(), Box::new(FixedDisk::new(1, 1)), config);
    e.run(&mut w);
    assert!(w.read_latency.unwrap() >= Duration::from_millis(295));
}

/// Always waits 5 ms before dispatching anything.
#[derive(Debug, Default)]
struct Lazy {
    queue: VecDeque<Request>,
    ready_at: Option<Instant>,
}

impl Scheduler for Lazy {
    fn name(&self) -> &'static str {
        "lazy"
    }
    fn insert(&mut self, request: Request, now: Instant) {
        self.ready_at.get_or_insert(now + Duration::from_millis(5));
        self.queue.push_back(request);
    }
    fn dispatch(&mut self, now: Instant) -> Dispatch {
        match self.ready_at {
            None => Dispatch::Empty,
            Some(t) if t > now => Dispatch::Wait { until: t },
            Some(_) => match self.queue.pop_front() {
                Some(r) => Dispatch::Request(r),
                None => {
                    self.ready_at = None;
                    Dispatch::Empty
                }
            },
        }
    }
    fn complete(&mut self, _: &Request, _: Instant) {}
    fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[test]
fn a_wait_arms_a_wake_up() {
    let mut w = Burst {
        n: 1,
        ..Burst::default()
    };
    let mut e = Engine::new(
        Box::new(Lazy::default()),
        Box::new(FixedDisk::new(1, 1)),
        EngineConfig::default(),
    );
    let s = e.run(&mut w);
    // Nothing moves before 5 ms; then two 1 ms requests.
    assert_eq!(s.end, Instant::ZERO + Duration::from_millis(7));
}

#[test]
fn the_time_limit_stops_a_run() {
    let mut w = Burst {
        n: 100,
        ..Burst::default()
    };
    let config = EngineConfig {
        time_limit: Instant::ZERO + Duration::from_millis(10),
        ..EngineConfig::default()
    };
    let mut e = Engine::new(noop(), Box::new(FixedDisk::new(1, 1)), config);
    let s = e.run(&mut w);
    assert!(s.timed_out);
    assert_eq!(s.end, Instant::ZERO + Duration::from_millis(10));
}

/// Dispatches the newest request first, so the order shows what was
/// queued when the device asked for the next one.
#[derive(Debug, Default)]
struct Lifo(Vec<Request>);

impl Scheduler for Lifo {
    fn name(&self) -> &'static str {
        "lifo"
    }
    fn insert(&mut self, request: Request, _now: Instant) {
        self.0.push(request);
    }
    fn dispatch(&mut self, _now: Instant) -> Dispatch {
        self.0.pop().map_or(Dispatch::Empty, Dispatch::Request)
    }
    fn complete(&mut self, _request: &Request, _now: Instant) {}
    fn queued(&self) -> usize {
        self.0.len()
    }
}

/// Submits two reads at once and a third when the first of them
/// completes; records the completion order by sector.
#[derive(Default)]
struct Chain {
    order: Vec<u64>,
}

impl Workload for Chain {
    fn start(&mut self, io_: &mut Io<'_>) {
        io_.submit(io(Op::Read, 0, 1));
        io_.submit(io(Op::Read, 1000, 2));
    }
    fn wake(&mut self, _token: u64, _io: &mut Io<'_>) {}
    fn completed(&mut self, done: &Completion, io_: &mut Io<'_>) {
        self.order.push(done.sector);
        if self.order.len() == 1 {
            io_.submit(io(Op::Read, 1008, 2));
        }
    }
    fn finished(&self) -> bool {
        self.order.len() == 3
    }
}

#[test]
fn the_2_4_driver_starts_the_next_request_before_the_woken_process_runs() {
    let run = |restart: bool| {
        let config = EngineConfig {
            restart_before_wakeup: restart,
            ..EngineConfig::default()
        };
        let mut w = Chain::default();
        let mut e = Engine::new(
            Box::new(Lifo::default()),
            Box::new(FixedDisk::new(1, 1)),
            config,
        );
        e.run(&mut w);
        w.order
    };
    // Both first reads are queued before the first dispatch: the LIFO
    // serves 1000 first, and its completion submits 1008.
    let woken_first = run(false);
    let restarted = run(true);
    println!("completion order: wake-up first {woken_first:?}, restart first {restarted:?}");
    // Without the flag, 1008 is queued before the next dispatch and the
    // LIFO takes it at once.
    assert_eq!(woken_first, vec![1000, 1008, 0]);
    // With it, the driver has already started the read at 0.
    assert_eq!(restarted, vec![1000, 0, 1008]);
}

/// Submits `n` contiguous one-block writes at time zero.
#[derive(Default)]
struct Blocks {
    n: u64,
    done: u64,
    last_admitted: Option<Instant>,
}

impl Workload for Blocks {
    fn start(&mut self, io_: &mut Io<'_>) {
        for i in 0..self.n {
            io_.submit(io(Op::Write, 10_000 + i * 8, 1));
        }
    }
    fn wake(&mut self, _token: u64, _io: &mut Io<'_>) {}
    fn completed(&mut self, done: &Completion, _io: &mut Io<'_>) {
        self.done += 1;
        self.last_admitted = Some(
            self.last_admitted
                .map_or(done.dispatched, |t| t.max(done.dispatched)),
        );
    }
    fn finished(&self) -> bool {
        self.done == self.n
    }
}

#[test]
fn buffers_that_merge_need_no_request_slot_on_the_2_4_block_layer() {
    let run = |steal: bool| {
        let config = EngineConfig {
            nr_requests: [1, 1],
            steal,
            ..EngineConfig::default()
        };
        let sched = elevator_sched::find("linus24")
            .unwrap()
            .build_default(&QueueLimits::default());
        let mut w = Blocks {
            n: 16,
            ..Blocks::default()
        };
        let mut e = Engine::new(sched, Box::new(FixedDisk::new(1, 1)), config);
        let s = e.run(&mut w);
        (s.device.requests, s.end)
    };
    // One slot: the first block takes it; on 2.4 the other fifteen merge
    // into that request without one ("merge before get_request").
    let (merged, t24) = run(true);
    // Without stealing (2.6 here) each waits for the slot and goes alone.
    let (alone, t26) = run(false);
    println!("16 contiguous blocks, one slot: 2.4 {merged} requests in {t24:?}, otherwise {alone} in {t26:?}");
    assert_eq!(merged, 1);
    assert!(alone > 1);
}

/// A FIFO that answers `may_queue` with `Must` for one task.
#[derive(Debug, Default)]
struct Recorder {
    queue: VecDeque<Request>,
    must_for: Option<u32>,
}

impl Scheduler for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn insert(&mut self, request: Request, _now: Instant) {
        self.queue.push_back(request);
    }
    fn dispatch(&mut self, _now: Instant) -> Dispatch {
        self.queue
            .pop_front()
            .map_or(Dispatch::Empty, Dispatch::Request)
    }
    fn complete(&mut self, _request: &Request, _now: Instant) {}
    fn queued(&self) -> usize {
        self.queue.len()
    }
    fn may_queue(&mut self, request: &Request, _now: Instant) -> elevator_sched::MayQueue {
        if Some(request.task.0) == self.must_for {
            elevator_sched::MayQueue::Must
        } else {
            elevator_sched::MayQueue::May
        }
    }
}

/// At time zero: task 1 submits `n` async writes, then task 2 one, then
/// task 3 one.
struct Crowd {
    n: u64,
    left: u64,
}

impl Workload for Crowd {
    fn start(&mut self, io_: &mut Io<'_>) {
        for i in 0..self.n {
            io_.submit(io(Op::Write, i * 1000, 1));
        }
        io_.submit(io(Op::Write, 500_000, 2));
        io_.submit(io(Op::Write, 600_000, 3));
        self.left = self.n + 2;
    }
    fn wake(&mut self, _token: u64, _io: &mut Io<'_>) {}
    fn completed(&mut self, _done: &Completion, _io: &mut Io<'_>) {
        self.left -= 1;
    }
    fn finished(&self) -> bool {
        self.left == 0
    }
}

/// When each task's first request got into the policy, ms, and how many
/// of task 1's got in at time zero.
fn first_insert(config: EngineConfig, n: u64, must_for: Option<u32>) -> ([u64; 3], usize) {
    let (tx, rx) = std::sync::mpsc::channel();
    #[derive(Debug)]
    struct Reporting(Recorder, std::sync::mpsc::Sender<(u32, Instant)>);
    impl Scheduler for Reporting {
        fn name(&self) -> &'static str {
            "reporting"
        }
        fn insert(&mut self, request: Request, now: Instant) {
            let _ = self.1.send((request.task.0, now));
            self.0.insert(request, now);
        }
        fn dispatch(&mut self, now: Instant) -> Dispatch {
            self.0.dispatch(now)
        }
        fn complete(&mut self, request: &Request, now: Instant) {
            self.0.complete(request, now);
        }
        fn queued(&self) -> usize {
            self.0.queued()
        }
        fn may_queue(&mut self, request: &Request, now: Instant) -> elevator_sched::MayQueue {
            self.0.may_queue(request, now)
        }
    }
    let policy = Reporting(
        Recorder {
            must_for,
            ..Recorder::default()
        },
        tx,
    );
    let mut e = Engine::new(Box::new(policy), Box::new(FixedDisk::new(1, 1)), config);
    e.run(&mut Crowd { n, left: 0 });
    let mut first = [u64::MAX; 3];
    let mut task1_at_zero = 0;
    for (task, at) in rx.try_iter() {
        let t = &mut first[task as usize - 1];
        *t = (*t).min(at.nanos() / 1_000_000);
        task1_at_zero += usize::from(task == 1 && at == Instant::ZERO);
    }
    (first, task1_at_zero)
}

#[test]
fn linux_2632_a_batcher_gets_its_extra_requests_while_a_non_batcher_waits() {
    // Eight slots per list. Task 1 fills the async list, which makes it a
    // batcher (`get_request`): its 11 writes all go in at once, past
    // nr_requests. Task 2 arrives at a full list and is no batcher: it
    // waits until completions bring the list below 8 (11 -> 7 after 4 ms).
    let config = EngineConfig {
        nr_requests: [8, 8],
        ..EngineConfig::linux_2632()
    };
    let ([t1, t2, _], at_zero) = first_insert(config, 11, None);
    assert_eq!((t1, t2, at_zero), (0, 4, 11));
    // The 2.6 preset has no batching: task 1 itself stops at 8.
    let config26 = EngineConfig {
        nr_requests: [8, 8],
        ..EngineConfig::linux_26()
    };
    let (_, at_zero_26) = first_insert(config26, 11, None);
    assert_eq!(at_zero_26, 8);
}

#[test]
fn linux_2632_must_queue_admits_a_request_past_a_full_list() {
    let config = EngineConfig {
        nr_requests: [8, 8],
        ..EngineConfig::linux_2632()
    };
    // Task 3 comes after task 2 at the full list; the policy says it must
    // queue (CFQ idling on its queue), so it goes in at once.
    // Task 2 then waits for five completions (12 -> 7).
    let ([_, t2, t3], _) = first_insert(config, 11, Some(3));
    assert_eq!((t2, t3), (5, 0));
    // Without the answer it waits behind task 2.
    let ([_, _, t3_may], _) = first_insert(config, 11, None);
    assert!(t3_may >= 4, "{t3_may}");
    // Nothing passes the hard cap of 3/2 x 8 = 12: with 12 from task 1
    // even the must-queue request waits.
    let ([_, _, t3_cap], _) = first_insert(config, 12, Some(3));
    assert!(t3_cap > 0, "{t3_cap}");
}

/// A policy that breaks a promise inside the simulator stops the run with
/// the violation, the policy, the simulated time, the seed and the command
/// that replays it.
#[test]
fn a_broken_policy_stops_the_run_with_a_replayable_seed() {
    use elevator_sched::harness::toys::{Fifo, Flaw};
    for (flaw, expected) in [
        (Flaw::Duplicates, "queued() = 82 but only 81"),
        (Flaw::Loses, "undispatched"),
        (Flaw::WaitsInThePast, "not in the future"),
        (Flaw::CorruptsItself, "check_invariants"),
    ] {
        let config = EngineConfig {
            check: true,
            ..EngineConfig::default()
        };
        let mut e = Engine::new(
            Box::new(Fifo::new(flaw)),
            Box::new(FixedDisk::new(1, 1)),
            config,
        );
        e.set_context(
            "scenario burst, policy toy, device fixed, seed 42\n\
             replay: elevator run burst.toml --sched toy --seed 42 --check"
                .into(),
        );
        let mut w = Burst {
            n: 100,
            ..Burst::default()
        };
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.run(&mut w)))
            .expect_err("the checker stops the run");
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        for part in [
            expected,
            "policy toy-",
            " at t=",
            "seed 42",
            "replay: elevator run",
        ] {
            assert!(
                message.contains(part),
                "{flaw:?}: {part:?} missing in {message}"
            );
        }
    }
}

/// Submits `n` async writes at time zero (asking to unplug if `unplug`)
/// and records when each completes.
#[derive(Default)]
struct Writes {
    n: u64,
    unplug: bool,
    left: u64,
    completions: Vec<Instant>,
}

impl Workload for Writes {
    fn start(&mut self, io_: &mut Io<'_>) {
        for i in 0..self.n {
            io_.submit(io(Op::Write, i * 1000, 1));
        }
        if self.unplug {
            io_.unplug();
        }
        self.left = self.n;
    }
    fn wake(&mut self, _token: u64, _io: &mut Io<'_>) {}
    fn completed(&mut self, done: &Completion, _io: &mut Io<'_>) {
        self.completions.push(done.completed);
        self.left -= 1;
    }
    fn finished(&self) -> bool {
        self.n > 0 && self.left == 0
    }
}

fn first_completion_ms(config: EngineConfig, n: u64, unplug: bool) -> f64 {
    let mut w = Writes {
        n,
        unplug,
        ..Writes::default()
    };
    let mut e = Engine::new(noop(), Box::new(FixedDisk::new(2, 1)), config);
    e.run(&mut w);
    w.completions[0].since(Instant::ZERO).as_secs_f64() * 1e3
}

#[test]
fn linux_2632_plugging_holds_a_lone_request_for_unplug_delay() {
    // One write into an empty queue plugs it: it reaches the 2 ms disk
    // only when the 3 ms unplug timer fires.
    let plugged = EngineConfig::linux_2632();
    assert_eq!(first_completion_ms(plugged, 1, false), 5.0);
    // Three are still under unplug_thresh (4)...
    assert_eq!(first_completion_ms(plugged, 3, false), 5.0);
    // ...the fourth unplugs the queue at once (`elv_insert`).
    assert_eq!(first_completion_ms(plugged, 4, false), 2.0);
    // A submitter that waits unplugs (`sync_page`, REQ_UNPLUG).
    assert_eq!(first_completion_ms(plugged, 1, true), 2.0);
    // Without plugging (the 2.6 preset here) the disk starts at once.
    let unplugged = EngineConfig {
        plugging: None,
        ..EngineConfig::linux_2632()
    };
    assert_eq!(first_completion_ms(unplugged, 1, false), 2.0);
    assert_eq!(first_completion_ms(EngineConfig::linux_26(), 1, false), 2.0);
}

/// Reads that a plugged queue holds: the second read arrives while the
/// first is on the disk; its completion runs the queue.
#[test]
fn linux_2632_a_completion_runs_a_plugged_queue() {
    struct Two {
        done: Vec<Instant>,
    }
    impl Workload for Two {
        fn start(&mut self, io_: &mut Io<'_>) {
            io_.submit(io(Op::Write, 0, 1));
            io_.unplug();
            io_.wake_at(Instant::ZERO + Duration::from_micros(500), 1);
        }
        fn wake(&mut self, _token: u64, io_: &mut Io<'_>) {
            // The policy is empty (the first write is on the disk): this
            // plugs the queue until 3.5 ms, but the first completion at
            // 2 ms runs the queue.
            io_.submit(io(Op::Write, 5000, 1));
        }
        fn completed(&mut self, done: &Completion, _io: &mut Io<'_>) {
            self.done.push(done.completed);
        }
        fn finished(&self) -> bool {
            self.done.len() == 2
        }
    }
    let mut w = Two { done: Vec::new() };
    let mut e = Engine::new(
        noop(),
        Box::new(FixedDisk::new(2, 1)),
        EngineConfig::linux_2632(),
    );
    e.run(&mut w);
    let ms: Vec<f64> = w
        .done
        .iter()
        .map(|t| t.since(Instant::ZERO).as_secs_f64() * 1e3)
        .collect();
    assert_eq!(ms, [2.0, 4.0]);
}

/// Records what `Io::write_congested` says at each call.
#[derive(Default)]
struct CongestionProbe {
    n: u64,
    left: u64,
    /// (async requests submitted so far, the bit) during start.
    at_start: Vec<(u64, Option<bool>)>,
    /// The bit as each completion is delivered.
    at_completion: Vec<Option<bool>>,
}

impl Workload for CongestionProbe {
    fn start(&mut self, io_: &mut Io<'_>) {
        for i in 0..self.n {
            io_.submit(io(Op::Write, i * 1000, 1));
            self.at_start.push((i + 1, io_.write_congested()));
        }
        self.left = self.n;
    }
    fn wake(&mut self, _token: u64, _io: &mut Io<'_>) {}
    fn completed(&mut self, _done: &Completion, io_: &mut Io<'_>) {
        self.at_completion.push(io_.write_congested());
        self.left -= 1;
    }
    fn finished(&self) -> bool {
        self.n > 0 && self.left == 0
    }
}

#[test]
fn linux_2632_the_async_list_congests_at_on_and_clears_below_off() {
    // nr_requests 16: congested from 16 - 2 + 1 = 15 requests, cleared
    // below 16 - 2 - 1 - 1 = 12 (`blk_queue_congestion_threshold`).
    assert_eq!(
        (
            elevator_sim::congestion_on(16),
            elevator_sim::congestion_off(16)
        ),
        (15, 12)
    );
    assert_eq!(
        (
            elevator_sim::congestion_on(128),
            elevator_sim::congestion_off(128)
        ),
        (113, 103)
    );
    let config = EngineConfig {
        nr_requests: [16, 16],
        ..EngineConfig::linux_2632()
    };
    let mut w = CongestionProbe {
        n: 16,
        ..CongestionProbe::default()
    };
    let mut e = Engine::new(noop(), Box::new(FixedDisk::new(1, 1)), config);
    e.run(&mut w);
    // The 15th write sets the bit.
    let first = w.at_start.iter().find(|(_, c)| *c == Some(true));
    assert_eq!(first.map(|(n, _)| *n), Some(15));
    // 16 allocated: the bit stays through the completions that leave 15,
    // 14, 13 and 12, and clears at 11.
    let set: Vec<bool> = w.at_completion.iter().map(|c| c.unwrap()).collect();
    assert_eq!(&set[..6], [true, true, true, true, false, false]);
    // The 2.6 preset leaves congestion to the workload.
    let mut w26 = CongestionProbe {
        n: 4,
        ..CongestionProbe::default()
    };
    let mut e = Engine::new(
        noop(),
        Box::new(FixedDisk::new(1, 1)),
        EngineConfig::linux_26(),
    );
    e.run(&mut w26);
    assert!(w26.at_start.iter().all(|(_, c)| c.is_none()));
}

/// Submits `n` contiguous async writes at time zero (writeback of one
/// file), and waits for all.
#[derive(Default)]
struct Writeback {
    n: u64,
    submitted: BTreeSet<RequestId>,
    done: BTreeSet<RequestId>,
}

impl Workload for Writeback {
    fn start(&mut self, io_: &mut Io<'_>) {
        for i in 0..self.n {
            self.submitted.insert(io_.submit(io(Op::Write, i * 8, 1)));
        }
    }
    fn wake(&mut self, _: u64, _: &mut Io<'_>) {}
    fn completed(&mut self, done: &Completion, _io: &mut Io<'_>) {
        assert!(self.done.insert(done.id), "completed twice");
    }
    fn finished(&self) -> bool {
        !self.submitted.is_empty() && self.done == self.submitted
    }
}

/// Writeback throttling holds writes that took slots; when it lets them
/// out in `dispatch` they merge in noop, and the engine frees their slots
/// (`Scheduler::take_freed_slot`): none is left allocated at the end.
#[test]
fn slots_of_writes_a_layer_lets_out_and_the_policy_merges_are_freed() {
    use elevator_sched::group::wbt::{Wbt, WbtParams};
    let limits = FixedDisk::new(1, 4).limits();
    let params = WbtParams {
        lat_usec: 2000,
        write_cache: true,
    };
    let wbt = Wbt::new(noop(), &limits, params);
    let config = EngineConfig {
        nr_requests: [16, 16],
        time_limit: Instant::ZERO + Duration::from_secs(60),
        ..EngineConfig::default()
    };
    let mut w = Writeback {
        n: 2000,
        ..Writeback::default()
    };
    let mut e = Engine::new(Box::new(wbt), Box::new(FixedDisk::new(1, 4)), config);
    let s = e.run(&mut w);
    assert!(!s.timed_out, "writes starved for slots");
    assert_eq!((s.completed, w.done.len()), (2000, 2000));
    assert_eq!(e.slots_allocated(), [0, 0], "slots leaked");
    // Merges happened (or the test proves nothing).
    assert!(s.device.requests < 2000, "{} requests", s.device.requests);
}

/// Submits `n` contiguous async writes per stream at time zero, the
/// streams' requests interleaved (writeback of one file per group), and
/// waits for all.
#[derive(Default)]
struct GroupWriteback {
    /// (task, group, first sector) of each stream.
    streams: Vec<(u32, GroupId, u64)>,
    n: u64,
    submitted: BTreeSet<RequestId>,
    done: BTreeSet<RequestId>,
}

impl Workload for GroupWriteback {
    fn start(&mut self, io_: &mut Io<'_>) {
        for i in 0..self.n {
            for &(task, group, base) in &self.streams {
                let write = BlockIo {
                    group,
                    ..io(Op::Write, base + i * 8, task)
                };
                self.submitted.insert(io_.submit(write));
            }
        }
    }
    fn wake(&mut self, _: u64, _: &mut Io<'_>) {}
    fn completed(&mut self, done: &Completion, _io: &mut Io<'_>) {
        assert!(self.done.insert(done.id), "completed twice");
    }
    fn finished(&self) -> bool {
        !self.submitted.is_empty() && self.done == self.submitted
    }
}

/// Runs `layer` (around noop) with 16 slots per direction on a disk of
/// depth 1 serving each request in `service_ms`, under two streams of
/// 1000 contiguous writes, one in each of `groups`: every write completes,
/// no slot is left allocated, and noop merged some of them.
fn layer_frees_the_slots_of_late_merges(
    name: &str,
    layer: Box<dyn Scheduler>,
    groups: [GroupId; 2],
    service_ms: u64,
) {
    let config = EngineConfig {
        nr_requests: [16, 16],
        time_limit: Instant::ZERO + Duration::from_secs(600),
        ..EngineConfig::default()
    };
    let mut w = GroupWriteback {
        streams: vec![(1, groups[0], 0), (2, groups[1], 1 << 24)],
        n: 1000,
        ..GroupWriteback::default()
    };
    let mut e = Engine::new(layer, Box::new(FixedDisk::new(service_ms, 1)), config);
    let s = e.run(&mut w);
    assert!(!s.timed_out, "{name}: writes starved for slots");
    assert_eq!((s.completed, w.done.len()), (2000, 2000), "{name}");
    assert_eq!(e.slots_allocated(), [0, 0], "{name}: slots leaked");
    // Merges happened (or the test proves nothing).
    assert!(
        s.device.requests < 2000,
        "{name}: {} requests",
        s.device.requests
    );
}

/// Two groups of weights 100 and 300 under iocost on a rotational disk
/// (its built-in profile): each group's writes wait for vtime and are let
/// out in `dispatch`, where noop merges them.
#[test]
fn slots_of_writes_iocost_lets_out_and_the_policy_merges_are_freed() {
    use elevator_core::{GroupTree, IoMax};
    use elevator_sched::group::iocost::IoCost;
    let mut tree = GroupTree::default();
    let a = tree.add("a", GroupId::ROOT, 100, IoMax::default());
    let b = tree.add("b", GroupId::ROOT, 300, IoMax::default());
    let limits = FixedDisk::new(1, 1).limits();
    let layer = IoCost::new(noop(), &tree, &limits, None, None);
    layer_frees_the_slots_of_late_merges("iocost", Box::new(layer), [a, b], 1);
}

/// A group limited by `io.max` to 1000 writes/s beside an unlimited one:
/// the limited group's writes are held and let out in `dispatch`, faster
/// than a 5 ms disk serves them, so noop merges them.
#[test]
fn slots_of_writes_io_max_lets_out_and_the_policy_merges_are_freed() {
    use elevator_core::{GroupTree, IoMax};
    use elevator_sched::group::throttle::Throttle;
    let mut tree = GroupTree::default();
    let max = IoMax {
        wiops: Some(1000),
        ..IoMax::default()
    };
    let a = tree.add("a", GroupId::ROOT, 100, max);
    let b = tree.add("b", GroupId::ROOT, 100, IoMax::default());
    let layer = Throttle::new(noop(), tree);
    layer_frees_the_slots_of_late_merges("io.max", Box::new(layer), [a, b], 5);
}

/// A group with an `io.latency` target of 1 ms that misses it behind its
/// sibling's writes: the sibling's depth is scaled down, its writes are
/// held and let out at completions and in `dispatch`, where noop merges
/// them.
#[test]
fn slots_of_writes_io_latency_lets_out_and_the_policy_merges_are_freed() {
    use elevator_core::{GroupTree, IoMax};
    use elevator_sched::group::latency::LatencyLimiter;
    let mut tree = GroupTree::default();
    let a = tree.add("a", GroupId::ROOT, 100, IoMax::default());
    let b = tree.add("b", GroupId::ROOT, 100, IoMax::default());
    tree.set_latency_target(a, Some(Duration::from_millis(1)));
    let limits = FixedDisk::new(1, 1).limits();
    let layer = LatencyLimiter::new(noop(), tree, &limits);
    layer_frees_the_slots_of_late_merges("io.latency", Box::new(layer), [a, b], 5);
}
