//! Unit tests of BFQ's state machine, driven by a small closed-loop model:
//! readers that keep one sync read outstanding (after an optional think
//! time) on a toy disk that serves requests in submission order, with a
//! seek cost between non-contiguous requests and a transfer cost per
//! sector.

use super::*;
use elevator_core::Op;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn at(d: Duration) -> Instant {
    Instant::ZERO + d
}

/// A toy disk: FIFO service, `depth` requests in flight.
#[derive(Debug)]
struct Disk {
    limits: QueueLimits,
    seek: Duration,
    per_sector: Duration,
    head: Sector,
    busy_until: Instant,
    in_flight: VecDeque<(Instant, Request)>,
}

impl Disk {
    /// A rotational disk without NCQ: ~100 MB/s, 8 ms per seek.
    fn hdd() -> Self {
        Disk {
            limits: QueueLimits {
                rotational: true,
                queue_depth: 1,
                max_sectors: 256,
                capacity: 1 << 30,
            },
            seek: ms(8),
            per_sector: Duration(5_000),
            head: 0,
            busy_until: Instant::ZERO,
            in_flight: VecDeque::new(),
        }
    }

    /// NCQ flash: no seek cost, 32 commands.
    fn ssd() -> Self {
        Disk {
            limits: QueueLimits {
                rotational: false,
                queue_depth: 32,
                max_sectors: 256,
                capacity: 1 << 30,
            },
            seek: Duration(20_000),
            per_sector: Duration(2_000),
            ..Disk::hdd()
        }
    }

    fn submit(&mut self, r: Request, now: Instant) {
        let start = self.busy_until.max(now);
        let seek = if r.sector == self.head {
            Duration::ZERO
        } else {
            self.seek
        };
        self.busy_until = start + seek + self.per_sector.mul(u64::from(r.sectors));
        self.head = r.end();
        self.in_flight.push_back((self.busy_until, r));
    }
}

/// A task reading `size` sectors at a time, one request outstanding.
#[derive(Debug, Clone)]
struct Reader {
    task: u32,
    prio: IoPrio,
    group: GroupId,
    next: Sector,
    sequential: bool,
    size: u32,
    think: Duration,
    /// Reads per burst and idle time between bursts (interactive tasks).
    burst: Option<(u32, Duration)>,
    start: Instant,
    // Progress.
    in_burst: u32,
    wake: Option<Instant>,
    issued: Option<Instant>,
    sectors: u64,
    latencies: Vec<Duration>,
    rng: u64,
}

impl Reader {
    fn seq(task: u32, base: Sector) -> Self {
        Reader {
            task,
            prio: IoPrio::be(4),
            group: GroupId::ROOT,
            next: base,
            sequential: true,
            size: 256,
            think: Duration::ZERO,
            burst: None,
            start: Instant::ZERO,
            in_burst: 0,
            wake: None,
            issued: None,
            sectors: 0,
            latencies: Vec::new(),
            rng: u64::from(task).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        }
    }

    fn random(task: u32) -> Self {
        Reader {
            sequential: false,
            size: 8,
            ..Reader::seq(task, 0)
        }
    }

    fn next_request(&mut self, id: u64) -> Request {
        if !self.sequential {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            self.next = (self.rng % (1 << 28)) & !7;
        }
        let mut r = Request::read(id, self.task, self.next, self.size);
        r.prio = self.prio;
        r.group = self.group;
        self.next += u64::from(self.size);
        r
    }
}

/// Run `readers` on `disk` under `bfq` from time zero until `end`.
fn run(bfq: &mut Bfq, disk: &mut Disk, readers: &mut [Reader], end: Instant) {
    let mut world = World::new(std::mem::replace(disk, Disk::hdd()));
    world.run(bfq, readers, end);
    *disk = world.disk;
}

/// The toy disk, the clock and the request ids of a run that can be
/// continued.
#[derive(Debug)]
struct World {
    disk: Disk,
    now: Instant,
    id: u64,
    started: bool,
}

impl World {
    fn new(disk: Disk) -> Self {
        World {
            disk,
            now: Instant::ZERO,
            id: 0,
            started: false,
        }
    }

    /// Go on until `end`.
    fn run(&mut self, bfq: &mut Bfq, readers: &mut [Reader], end: Instant) {
        let disk = &mut self.disk;
        let mut now = self.now;
        if !self.started {
            self.started = true;
            for r in readers.iter_mut() {
                r.wake = Some(r.start);
            }
        }
        loop {
            // Completions due.
            while disk.in_flight.front().is_some_and(|(t, _)| *t <= now) {
                let (_, rq) = disk.in_flight.pop_front().expect("due");
                bfq.complete(&rq, now);
                let r = readers
                    .iter_mut()
                    .find(|r| r.task == rq.task.0)
                    .expect("reader");
                r.sectors += u64::from(rq.sectors);
                r.latencies
                    .push(now.since(r.issued.take().expect("issued")));
                let mut pause = r.think;
                if let Some((n, idle)) = r.burst {
                    r.in_burst += 1;
                    if r.in_burst == n {
                        r.in_burst = 0;
                        pause = idle;
                    }
                }
                r.wake = Some(now + pause);
            }
            // Arrivals due.
            for r in readers.iter_mut() {
                if r.wake.is_some_and(|t| t <= now) {
                    r.wake = None;
                    self.id += 1;
                    let rq = r.next_request(self.id);
                    r.issued = Some(now);
                    bfq.insert(rq, now);
                }
            }
            // Dispatch.
            let mut wait = None;
            while disk.in_flight.len() < disk.limits.queue_depth as usize {
                match bfq.dispatch(now) {
                    Dispatch::Request(rq) => {
                        assert_eq!(rq.op, Op::Read);
                        disk.submit(rq, now);
                    }
                    Dispatch::Wait { until } => {
                        assert!(until > now, "wait into the past");
                        wait = Some(until);
                        break;
                    }
                    Dispatch::Empty => break,
                }
            }
            let next = [
                disk.in_flight.front().map(|(t, _)| *t),
                readers.iter().filter_map(|r| r.wake).min(),
                wait,
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) if t <= end => now = t,
                _ => break,
            }
        }
        self.now = end;
        bfq.wf.debug_check();
    }
}

fn mean(d: &[Duration]) -> Duration {
    Duration(d.iter().map(|d| d.nanos()).sum::<u64>() / d.len().max(1) as u64)
}

#[test]
fn ioprio_levels_map_to_weights_as_the_kernel_does() {
    let w: Vec<u32> = (0..8).map(ioprio_to_weight).collect();
    assert_eq!(w, vec![80, 70, 60, 50, 40, 30, 20, 10]);
}

#[test]
fn weights_share_bandwidth_on_a_disk_without_ncq() {
    // Levels 7 and 5: weights 10 and 30.
    let mut bfq = Bfq::new(&Disk::hdd().limits);
    let mut a = Reader::seq(1, 0);
    a.prio = IoPrio::be(7);
    let mut b = Reader::seq(2, 1 << 24);
    b.prio = IoPrio::be(5);
    let mut readers = [a, b];
    run(
        &mut bfq,
        &mut Disk::hdd(),
        &mut readers,
        at(Duration::from_secs(20)),
    );
    let ratio = readers[1].sectors as f64 / readers[0].sectors as f64;
    println!(
        "weights 10:30 -> {} : {} sectors, ratio {ratio:.3}",
        readers[0].sectors, readers[1].sectors
    );
    assert!((ratio / 3.0 - 1.0).abs() < 0.05, "ratio {ratio}");
}

#[test]
fn budgets_follow_the_expiry_reason() {
    // Without raising, which pins budgets to twice the minimum.
    let t = TYPE.tunables([("low_latency", 0)]).unwrap();
    let mut bfq = Bfq::from_tunables(&t, &Disk::hdd().limits);
    let mut readers = [Reader::seq(1, 0), Reader::seq(2, 1 << 24)];
    run(&mut bfq, &mut Disk::hdd(), &mut readers, at(ms(2_000)));
    // Two greedy sequential readers exhaust their budgets: they grow to
    // the maximum budget.
    let max = bfq.max_budget();
    for task in [1, 2] {
        let q = bfq.sync_of[&TaskId(task)];
        println!("task {task}: max_budget {} of {max}", bfq.q(q).max_budget);
        assert_eq!(bfq.q(q).max_budget, max);
    }

    // Direct feedback on one queue.
    let q = bfq.sync_of[&TaskId(1)];
    let min = bfq.min_budget();
    let set = |bfq: &mut Bfq, b: u64| bfq.qm(q).max_budget = b;
    set(&mut bfq, 4 * min);
    bfq.recalc_budget(q, Expiration::BudgetExhausted);
    assert_eq!(bfq.q(q).max_budget, 16 * min);
    bfq.recalc_budget(q, Expiration::BudgetTimeout);
    assert_eq!(bfq.q(q).max_budget, 32 * min.min(max / 32));
    set(&mut bfq, 10 * min);
    let dispatched = bfq.q(q).dispatched;
    bfq.qm(q).dispatched = 0;
    bfq.recalc_budget(q, Expiration::TooIdle);
    assert_eq!(bfq.q(q).max_budget, 6 * min);
    set(&mut bfq, 3 * min);
    bfq.recalc_budget(q, Expiration::TooIdle);
    assert_eq!(bfq.q(q).max_budget, min);
    let e = bfq.q(q).entity;
    bfq.wf.es[e as usize].service = 7 * min;
    bfq.recalc_budget(q, Expiration::NoMoreRequests);
    assert_eq!(bfq.q(q).max_budget, 7 * min);
    bfq.wf.es[e as usize].service = 1;
    bfq.recalc_budget(q, Expiration::NoMoreRequests);
    assert_eq!(bfq.q(q).max_budget, min);
    bfq.qm(q).dispatched = dispatched;
}

#[test]
fn max_budget_is_tuned_from_the_peak_rate() {
    let mut bfq = Bfq::new(&Disk::hdd().limits);
    let mut readers = [Reader::seq(1, 0)];
    run(
        &mut bfq,
        &mut Disk::hdd(),
        &mut readers,
        at(Duration::from_secs(10)),
    );
    // 256 sectors per 1.28 ms: 200000 sectors/s, 25000 sectors per 125 ms.
    let rate = bfq.peak_rate();
    println!(
        "peak rate {rate:.0} sectors/s, max_budget {}",
        bfq.max_budget()
    );
    assert!((rate / 200_000.0 - 1.0).abs() < 0.1, "{rate}");
    let expect = rate * 0.125;
    assert!((bfq.max_budget() as f64 / expect - 1.0).abs() < 0.05);
    let d = bfq.wr_duration();
    assert!(d >= WR_DURATION_MIN && d <= WR_DURATION_MAX, "{d}");
}

#[test]
fn seeky_queues_are_charged_time_and_cannot_drag_throughput_down() {
    // A random reader and a sequential one at equal weight on a disk
    // without NCQ: each is charged what it would have transferred at the
    // peak rate in the time it held the disk, so they share time, and the
    // sequential reader keeps most of the bandwidth.
    let mut bfq = Bfq::new(&Disk::hdd().limits);
    let mut readers = [Reader::seq(1, 0), Reader::random(2)];
    run(
        &mut bfq,
        &mut Disk::hdd(),
        &mut readers,
        at(Duration::from_secs(20)),
    );
    let (seq, rnd) = (readers[0].sectors, readers[1].sectors);
    println!("sequential {seq} sectors, random {rnd} sectors");
    assert!(seq > 20 * rnd, "seq {seq} rnd {rnd}");
}

#[test]
fn idling_on_a_rotational_disk_but_not_for_seeky_queues_on_ncq_flash() {
    // Sequential reader on an HDD without NCQ: after its request completes
    // BFQ waits for the next one instead of switching. (Without raising:
    // raised queues idle only to protect themselves from others.)
    let limits = Disk::hdd().limits;
    let t = TYPE.tunables([("low_latency", 0)]).unwrap();
    let mut bfq = Bfq::from_tunables(&t, &limits);
    bfq.insert(Request::read(1, 1, 0, 8), at(ms(1)));
    bfq.insert(Request::read(2, 2, 1 << 20, 8), at(ms(1)));
    let Dispatch::Request(r) = bfq.dispatch(at(ms(1))) else {
        panic!()
    };
    let first = r.task;
    bfq.complete(&r, at(ms(2)));
    match bfq.dispatch(at(ms(2))) {
        Dispatch::Wait { until } => assert_eq!(until, at(ms(10))),
        other => panic!("expected idling, got {other:?}"),
    }
    // Nothing came: the queue expires and the other one is served.
    let Dispatch::Request(r) = bfq.dispatch(at(ms(10))) else {
        panic!()
    };
    assert_ne!(r.task, first);

    // Seeky equal-weight queues on NCQ flash: no idling once NCQ is seen.
    let mut bfq = Bfq::new(&Disk::ssd().limits);
    let mut readers: Vec<Reader> = (1..=8).map(Reader::random).collect();
    run(
        &mut bfq,
        &mut Disk::ssd(),
        &mut readers,
        at(Duration::from_secs(2)),
    );
    assert_eq!(bfq.hw_tag(), Some(true));
    let q = bfq.sync_of[&TaskId(1)];
    assert!(bfq.q(q).seeky());
    assert!(!bfq.better_to_idle(q));
}

#[test]
fn a_new_queue_is_raised_and_loses_it_after_enough_service() {
    let limits = Disk::hdd().limits;
    let mut bfq = Bfq::new(&limits);
    let mut readers = [Reader::seq(1, 0)];
    let mut w = World::new(Disk::hdd());
    w.run(&mut bfq, &mut readers, at(ms(50)));
    // Raised as interactive at creation; a greedy reader that empties its
    // queue between reads also passes for soft real-time (x3000) for
    // 300 ms periods inside the interactive one, as in the kernel.
    let q = bfq.sync_of[&TaskId(1)];
    let coeff = bfq.q(q).wr_coeff;
    assert!(
        coeff == WR_COEFF || coeff == WR_COEFF * SOFTRT_WEIGHT_FACTOR,
        "{coeff}"
    );
    let raised_at = bfq.q(q).last_wr_start_finish;
    assert_eq!(
        bfq.wf.es[bfq.q(q).entity as usize].weight,
        40 * u64::from(coeff)
    );
    // Reading on greedily, it ends raising after 120000 sectors.
    w.run(&mut bfq, &mut readers, at(Duration::from_secs(3)));
    println!(
        "served {} sectors; raised since {raised_at:?}",
        readers[0].sectors
    );
    assert!(readers[0].sectors > MAX_SERVICE_FROM_WR);
    assert_eq!(bfq.wr_coeff(TaskId(1)), 1);
    assert_eq!(bfq.wf.es[bfq.q(q).entity as usize].weight, 40);
}

#[test]
fn raising_expires_with_its_duration_and_restarts_after_long_idleness() {
    let limits = Disk::hdd().limits;
    let mut bfq = Bfq::new(&limits);
    // One small read every 100 ms: too slow to use up 120000 sectors.
    let mut r = Reader::seq(1, 0);
    r.size = 8;
    r.think = ms(100);
    let mut readers = [r];
    let mut w = World::new(Disk::hdd());
    w.run(&mut bfq, &mut readers, at(ms(500)));
    assert!(bfq.wr_coeff(TaskId(1)) > 1);
    let dur = bfq.wr_duration();
    // Long after the duration the queue is no longer (interactively) raised;
    // arrivals 100 ms apart at 8 sectors qualify it as soft real-time.
    w.run(&mut bfq, &mut readers, at(dur + Duration::from_secs(1)));
    let q = bfq.sync_of[&TaskId(1)];
    println!(
        "after {dur}: wr_coeff {} soft_rt {}",
        bfq.q(q).wr_coeff,
        bfq.q(q).is_soft_rt()
    );
    assert_eq!(bfq.q(q).wr_coeff, WR_COEFF * SOFTRT_WEIGHT_FACTOR);
    assert!(bfq.q(q).is_soft_rt());

    // A greedy reader is not soft real-time: after its raising ends it
    // stays at weight 1x, and raising restarts after 2 s of idleness.
    let mut bfq = Bfq::new(&limits);
    let mut g = Reader::seq(7, 0);
    g.burst = Some((3000, Duration::from_secs(3)));
    let mut readers = [g];
    let mut w = World::new(Disk::hdd());
    w.run(&mut bfq, &mut readers, at(ms(3500)));
    assert_eq!(bfq.wr_coeff(TaskId(7)), 1, "greedy reader lost raising");
    // The burst of 3000 reads ends near 3.9 s, the task idles 3 s, then
    // reads again: raised anew.
    w.run(&mut bfq, &mut readers, at(Duration::from_secs(5)));
    let t_end = readers[0].latencies.len();
    assert_eq!(t_end, 3000);
    w.run(&mut bfq, &mut readers, at(ms(7_000)));
    assert!(readers[0].latencies.len() > t_end);
    println!("after idling: wr_coeff {}", bfq.wr_coeff(TaskId(7)));
    assert_eq!(bfq.wr_coeff(TaskId(7)), WR_COEFF);
}

#[test]
fn a_large_burst_of_new_queues_is_not_raised() {
    let limits = Disk::hdd().limits;
    let mut bfq = Bfq::new(&limits);
    let mut readers: Vec<Reader> = (1..=10)
        .map(|t| Reader::seq(t, u64::from(t) << 22))
        .collect();
    for (i, r) in readers.iter_mut().enumerate() {
        r.start = at(ms(10 * i as u64));
    }
    run(&mut bfq, &mut Disk::hdd(), &mut readers, at(ms(300)));
    let raised: Vec<u32> = (1..=10).map(|t| bfq.wr_coeff(TaskId(t))).collect();
    println!("wr_coeff per reader: {raised:?}");
    // The 8th queue makes the burst large: from then on none is raised.
    assert!(raised.iter().all(|&c| c == 1), "{raised:?}");
    assert!((1..=10).all(|t| bfq.q(bfq.sync_of[&TaskId(t)]).in_large_burst));
}

#[test]
fn an_interactive_task_gets_low_latency_against_sequential_readers() {
    let limits = Disk::hdd().limits;
    let run_with = |low_latency: i64| {
        let t = TYPE.tunables([("low_latency", low_latency)]).unwrap();
        let mut bfq = Bfq::from_tunables(&t, &limits);
        let mut readers: Vec<Reader> = (1..=10)
            .map(|t| Reader::seq(t, u64::from(t) << 24))
            .collect();
        let mut app = Reader::random(99);
        app.start = Instant::ZERO + Duration::from_secs(3);
        app.burst = Some((20, Duration::from_secs(3)));
        readers.push(app);
        run(
            &mut bfq,
            &mut Disk::hdd(),
            &mut readers,
            at(Duration::from_secs(15)),
        );
        let app = readers.last().expect("app");
        mean(&app.latencies)
    };
    let raised = run_with(1);
    let plain = run_with(0);
    println!("interactive read latency: low_latency=1 {raised}, low_latency=0 {plain}");
    assert!(raised.mul(5) < plain, "{raised} vs {plain}");
    assert!(raised < ms(40), "{raised}");
}

#[test]
fn close_interleaved_readers_share_a_queue_and_split_when_seeky() {
    let limits = Disk::hdd().limits;
    let mut bfq = Bfq::new(&limits);
    // Two tasks reading alternate 64-sector chunks of one file.
    let mut now = at(ms(1));
    let mut id = 0;
    let mut pos = [0u64, 64];
    let mut merged_seen = false;
    // Each task keeps two reads queued (its read-ahead), so both queues
    // are backlogged together, as the kernel's merge search requires.
    let drain = |bfq: &mut Bfq, now: &mut Instant| loop {
        match bfq.dispatch(*now) {
            Dispatch::Request(r) => {
                *now += Duration::from_micros(300);
                bfq.complete(&r, *now);
            }
            Dispatch::Wait { until } => *now = until,
            Dispatch::Empty => break,
        }
    };
    for _ in 0..20 {
        for _ in 0..2 {
            for (i, task) in [1u32, 2].into_iter().enumerate() {
                id += 1;
                bfq.insert(Request::read(id, task, pos[i], 64), now);
                pos[i] += 128;
            }
        }
        drain(&mut bfq, &mut now);
        merged_seen |= bfq.is_merged(TaskId(1)) && bfq.is_merged(TaskId(2));
        now += Duration::from_micros(100);
    }
    assert!(merged_seen, "interleaved readers were not merged");
    assert_eq!(bfq.sync_of[&TaskId(1)], bfq.sync_of[&TaskId(2)]);
    // Now both jump around: the shared queue turns seeky and splits.
    let mut x = 12345u64;
    for _ in 0..80 {
        for task in [1u32, 2] {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            id += 1;
            bfq.insert(Request::read(id, task, (x >> 20) % (1 << 28), 8), now);
        }
        drain(&mut bfq, &mut now);
    }
    assert_ne!(
        bfq.sync_of[&TaskId(1)],
        bfq.sync_of[&TaskId(2)],
        "not split"
    );
    bfq.wf.debug_check();
}

#[test]
fn groups_share_by_weight() {
    let limits = Disk::hdd().limits;
    let mut bfq = Bfq::new(&limits);
    bfq.set_group(GroupId(1), GroupId::ROOT, 100);
    bfq.set_group(GroupId(2), GroupId::ROOT, 300);
    // Two readers in group 1, one in group 2: the lone reader gets 3/4.
    let mut readers: Vec<Reader> = (1..=3)
        .map(|t| Reader::seq(t, u64::from(t) << 24))
        .collect();
    readers[0].group = GroupId(1);
    readers[1].group = GroupId(1);
    readers[2].group = GroupId(2);
    run(
        &mut bfq,
        &mut Disk::hdd(),
        &mut readers,
        at(Duration::from_secs(20)),
    );
    let total: u64 = readers.iter().map(|r| r.sectors).sum();
    let share = readers[2].sectors as f64 / total as f64;
    println!("group weights 100:300 -> share of group 2 {share:.3}");
    assert!((share - 0.75).abs() < 0.03, "{share}");
    assert_eq!(bfq.group_weight(GroupId(2)), 300);
}

#[test]
fn the_idle_class_is_served_only_after_its_timeout() {
    let limits = Disk::hdd().limits;
    let mut bfq = Bfq::new(&limits);
    let be = Reader::seq(1, 0);
    let mut idle = Reader::seq(2, 1 << 24);
    idle.prio = IoPrio::idle();
    let mut readers = [be, idle];
    run(
        &mut bfq,
        &mut Disk::hdd(),
        &mut readers,
        at(Duration::from_secs(5)),
    );
    let (b, i) = (readers[0].sectors, readers[1].sectors);
    println!("best-effort {b} sectors, idle class {i} sectors");
    assert!(i > 0, "the idle class starved");
    assert!(b > 50 * i, "be {b} idle {i}");
}

#[test]
fn strict_guarantees_keeps_one_request_in_the_device() {
    let limits = Disk::ssd().limits;
    let t = TYPE
        .tunables([("strict_guarantees", 1), ("slice_idle", 0)])
        .unwrap();
    let mut bfq = Bfq::from_tunables(&t, &limits);
    assert_eq!(bfq.slice_idle, STRICT_MIN_SLICE_IDLE);
    for i in 0..4 {
        bfq.insert(Request::read(i + 1, 1, i * 1000, 8), at(ms(1)));
    }
    assert!(matches!(bfq.dispatch(at(ms(1))), Dispatch::Request(_)));
    assert!(matches!(bfq.dispatch(at(ms(1))), Dispatch::Wait { .. }));
}

#[test]
fn weights_share_bandwidth_on_ncq_flash() {
    let mut bfq = Bfq::new(&Disk::ssd().limits);
    let mut a = Reader::seq(1, 0);
    a.prio = IoPrio::be(7);
    let mut b = Reader::seq(2, 1 << 24);
    b.prio = IoPrio::be(5);
    let mut readers = [a, b];
    run(
        &mut bfq,
        &mut Disk::ssd(),
        &mut readers,
        at(Duration::from_secs(10)),
    );
    let ratio = readers[1].sectors as f64 / readers[0].sectors as f64;
    println!(
        "ssd weights 10:30 -> {} : {} sectors, ratio {ratio:.3}, hw_tag {:?}",
        readers[0].sectors,
        readers[1].sectors,
        bfq.hw_tag()
    );
    assert!((ratio / 3.0 - 1.0).abs() < 0.05, "ratio {ratio}");
}

#[test]
fn a_group_tree_configures_the_hierarchy() {
    let mut tree = GroupTree::default();
    let a = tree.add("a", GroupId::ROOT, 300, Default::default());
    let b = tree.add("b", a, 50, Default::default());
    let t = TYPE.tunables([("low_latency", 0)]).unwrap();
    let mut bfq = Bfq::from_tunables(&t, &Disk::hdd().limits);
    bfq.set_groups(&tree);
    assert_eq!(bfq.group_weight(a), 300);
    assert_eq!(bfq.group_weight(b), 50);
    let (sa, sb) = (bfq.group_of[&a], bfq.group_of[&b]);
    let eb = bfq.wf.sds[sb as usize].entity;
    assert_eq!(bfq.wf.es[eb as usize].parent, sa);
    // A reader in the nested group is scheduled through both levels.
    let mut r = Reader::seq(1, 0);
    r.group = b;
    let mut readers = [r, Reader::seq(2, 1 << 24)];
    run(
        &mut bfq,
        &mut Disk::hdd(),
        &mut readers,
        at(Duration::from_secs(5)),
    );
    let share = readers[0].sectors as f64 / (readers[0].sectors + readers[1].sectors) as f64;
    println!("group a (300) vs root queue (40): share {share:.3}");
    assert!((share / (300.0 / 340.0) - 1.0).abs() < 0.03, "{share}");
}

/// 4.16's `bfq_limit_depth`: with nothing raised, async writes may hold
/// half of blk-mq's `nr_requests` (2 × min(depth, 128) = 256 on a
/// 1023-deep NVMe queue), so the device gets 128 of them and no more.
#[test]
fn limit_depth_caps_async_writes_in_the_device() {
    let limits = QueueLimits {
        rotational: false,
        queue_depth: 1023,
        max_sectors: 256,
        capacity: 1 << 30,
    };
    let in_device = |limit_depth: i64| {
        let t = TYPE.tunables([("limit_depth", limit_depth)]).unwrap();
        let mut bfq = Bfq::from_tunables(&t, &limits);
        for i in 0..300u64 {
            // Gaps between them: nothing merges.
            bfq.insert(Request::write(i + 1, 1, i * 64, 8), Instant::ZERO);
        }
        let mut sent = 0;
        while let Dispatch::Request(_) = bfq.dispatch(Instant::ZERO) {
            sent += 1;
        }
        sent
    };
    assert_eq!(in_device(1), 128);
    assert!(in_device(0) > 128, "{}", in_device(0));
}

/// The same shares on a SATA drive with NCQ 31 (libata's usable tags):
/// `nr_requests` is 2 × 31 = 62, so with nothing raised async I/O gets 31
/// tags, every slot the drive has, and sync writes 46. The share cannot
/// keep a device full of writes from standing between a sync read and its
/// service (issue 17: `modern-random-read-vs-buffered-write` once the
/// reader's raising has ended).
#[test]
fn on_ncq_31_the_async_share_is_the_whole_device_queue() {
    let limits = QueueLimits {
        rotational: false,
        queue_depth: 31,
        max_sectors: 256,
        capacity: 1 << 30,
    };
    let t = TYPE.tunables([("limit_depth", 1)]).unwrap();
    let mut bfq = Bfq::from_tunables(&t, &limits);
    for i in 0..100u64 {
        // Gaps between them: nothing merges.
        bfq.insert(Request::write(i + 1, 1, i * 64, 8), Instant::ZERO);
    }
    let mut sent = 0;
    while let Dispatch::Request(_) = bfq.dispatch(Instant::ZERO) {
        sent += 1;
    }
    assert_eq!(sent, limits.queue_depth);
}

/// Insert `rq` at `now` and dispatch until it goes to the device, waiting
/// out any idling; returns the time it was dispatched.
fn serve(bfq: &mut Bfq, rq: Request, mut now: Instant) -> (Request, Instant) {
    let id = rq.id;
    bfq.insert(rq, now);
    loop {
        match bfq.dispatch(now) {
            Dispatch::Request(r) if r.id == id => return (r, now),
            Dispatch::Request(r) => panic!("unexpected {:?}", r.id),
            Dispatch::Wait { until } => now = until,
            Dispatch::Empty => panic!("request {id:?} not dispatched"),
        }
    }
}

fn flash_limits() -> QueueLimits {
    Disk::ssd().limits
}

/// Task 1 reads; task 2, which thinks for 20 ms between its reads, reads
/// `gap` after each of task 1's completions, `rounds` times. Returns the
/// waker found for task 2's queue, if any.
fn waker_after(t: &Tunables, gap: Duration, rounds: u64) -> Option<TaskId> {
    let mut bfq = Bfq::from_tunables(t, &flash_limits());
    let mut now = Instant::ZERO;
    let mut id = 0;
    for i in 0..rounds {
        id += 1;
        let (a, sent) = serve(&mut bfq, Request::read(id, 1, i * 4096, 8), now);
        let done = sent + Duration(100_000);
        bfq.complete(&a, done);
        id += 1;
        let (b, sent) = serve(
            &mut bfq,
            Request::read(id, 2, (1 << 24) + i * 4096, 8),
            done + gap,
        );
        bfq.complete(&b, sent + Duration(100_000));
        now = sent + ms(20);
    }
    let q = bfq.sync_of[&TaskId(2)];
    let w = bfq.q(q).waker?;
    bfq.sync_of.iter().find(|(_, &x)| x == w).map(|(&t, _)| t)
}

/// Waker detection (5.4; `bfq_check_waker` in its 5.14 form): a queue
/// with a long think time that three times in a row gets its first
/// request less than 4 ms after another queue's completion has found its
/// waker; 5 ms after is no wake-up, and bfq without the preset never looks.
#[test]
fn a_queue_woken_three_times_within_4_ms_has_found_its_waker() {
    // Stable merging would put two tasks starting together in one queue.
    let v61 = TYPE_61.tunables([("stable_merge", 0)]).unwrap();
    assert_eq!(waker_after(&v61, ms(1), 8), Some(TaskId(1)));
    assert_eq!(waker_after(&v61, ms(5), 8), None);
    let v412 = TYPE.tunables(std::iter::empty()).unwrap();
    assert_eq!(waker_after(&v412, ms(1), 8), None);
}

/// Stable merging (5.13): on NCQ flash a sync queue created within
/// 180 ms of the last one created in its group is merged with it at once;
/// one created later is not. On a disk without NCQ the merge waits 600 ms
/// and then happens only if idling would not boost the queue's throughput
/// (seeky readers: merged).
#[test]
fn queues_created_close_together_are_stably_merged() {
    let v61 = TYPE_61.tunables(std::iter::empty()).unwrap();
    let mut bfq = Bfq::from_tunables(&v61, &flash_limits());
    let mut id = 0;
    let mut read = |bfq: &mut Bfq, task: u32, t: Duration| {
        id += 1;
        let (r, sent) = serve(
            bfq,
            Request::read(id, task, u64::from(task) << 22, 8),
            at(t),
        );
        bfq.complete(&r, sent + Duration(100_000));
    };
    read(&mut bfq, 1, ms(0));
    read(&mut bfq, 2, ms(50));
    read(&mut bfq, 3, ms(300));
    assert_eq!(bfq.sync_of[&TaskId(1)], bfq.sync_of[&TaskId(2)]);
    assert!(bfq.q(bfq.sync_of[&TaskId(1)]).stably_merged);
    assert_ne!(bfq.sync_of[&TaskId(3)], bfq.sync_of[&TaskId(1)]);

    // bfq without the preset keeps them apart.
    let v412 = TYPE.tunables(std::iter::empty()).unwrap();
    let mut bfq = Bfq::from_tunables(&v412, &flash_limits());
    read(&mut bfq, 1, ms(0));
    read(&mut bfq, 2, ms(50));
    assert_ne!(bfq.sync_of[&TaskId(1)], bfq.sync_of[&TaskId(2)]);

    // Without NCQ: scheduled, then done on a request 600 ms on.
    let mut bfq = Bfq::from_tunables(&v61, &Disk::hdd().limits);
    let mut t = ms(0);
    for _ in 0..80 {
        // Seeky readers: far apart each time.
        read(&mut bfq, 1, t);
        read(&mut bfq, 2, t + ms(1));
        t += ms(10);
    }
    assert!(t > ms(LATE_STABLE_MERGING.nanos() / 1_000_000));
    assert_eq!(bfq.sync_of[&TaskId(1)], bfq.sync_of[&TaskId(2)]);
}

/// The inject limit (5.2, `bfq_update_inject_limit`): the first total
/// service time measured with the device empty is the baseline and lets
/// injection start (limit 1); a later one measured after injection rises
/// the limit while under 3/2 of the baseline and lowers it at or above.
#[test]
fn the_inject_limit_follows_the_inflation_of_total_service_times() {
    let v61 = TYPE_61.tunables(std::iter::empty()).unwrap();
    let mut bfq = Bfq::from_tunables(&v61, &flash_limits());
    let (r, sent) = serve(&mut bfq, Request::read(1, 1, 0, 8), Instant::ZERO);
    let q = bfq.sync_of[&TaskId(1)];
    bfq.max_rq_in_driver = 8;
    // Baseline: 100 us with nothing else in the device.
    bfq.last_empty_occupied = sent;
    bfq.update_inject_limit(q, sent + Duration(100_000));
    assert_eq!(bfq.q(q).last_serv_time, Duration(100_000));
    assert_eq!(bfq.q(q).inject_limit, 1);
    // After injection: 140 us < 150 us raises the limit...
    let measure = |bfq: &mut Bfq, took: u64| {
        bfq.rqs_injected = true;
        bfq.rq_in_driver = 2;
        bfq.last_empty_occupied = sent;
        bfq.update_inject_limit(q, sent + Duration(took));
        bfq.rq_in_driver = 1;
        bfq.q(q).inject_limit
    };
    assert_eq!(measure(&mut bfq, 140_000), 2);
    assert_eq!(measure(&mut bfq, 140_000), 3);
    // ... 150 us and more lowers it, and remembers when.
    assert_eq!(measure(&mut bfq, 150_000), 2);
    assert_eq!(bfq.q(q).decrease_time, sent + Duration(150_000));
    // A faster sample becomes the new baseline.
    measure(&mut bfq, 80_000);
    assert_eq!(bfq.q(q).last_serv_time, Duration(80_000));
    bfq.complete(&r, sent + Duration(200_000));
}
