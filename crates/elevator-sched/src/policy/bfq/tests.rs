//! Unit tests of BFQ's state machine. The ones that need a workload run on
//! the shared harness (`crate::harness`): closed-loop readers (one sync
//! read outstanding, after an optional think time) on its serial device,
//! which serves requests in dispatch order with a seek cost between
//! non-contiguous requests and a transfer cost per sector, inside the
//! invariant checker. The rest call the policy step by step (`serve`):
//! each is about one exact sequence of calls and times (a read arriving
//! 1 ms after another task's completion, a measurement fed by hand), which
//! a closed-loop workload does not express; they are scripts, as the
//! trace tests are.

use super::*;
use crate::harness::{
    Case, DeviceSpec, Layout, Options, Phase, Run, Service, TaskScript, Workload, REGION,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn at(d: Duration) -> Instant {
    Instant::ZERO + d
}

/// A rotational disk without NCQ: ~100 MB/s (5 us a sector), 8 ms per
/// seek.
fn hdd() -> DeviceSpec {
    DeviceSpec {
        limits: QueueLimits {
            rotational: true,
            queue_depth: 1,
            max_sectors: 256,
            capacity: 1 << 30,
        },
        service: Service::Serial {
            fixed: Duration::ZERO,
            per_sector: Duration(5_000),
            seek: ms(8),
        },
        seed: 1,
    }
}

/// NCQ flash: 32 commands, served one after another, 2 us a sector and
/// 20 us to move elsewhere.
fn ssd() -> DeviceSpec {
    DeviceSpec {
        limits: QueueLimits {
            rotational: false,
            queue_depth: 32,
            max_sectors: 256,
            capacity: 1 << 30,
        },
        service: Service::Serial {
            fixed: Duration::ZERO,
            per_sector: Duration(2_000),
            seek: Duration(20_000),
        },
        seed: 1,
    }
}

/// A greedy sequential reader of 256-sector reads from `offset` sectors
/// into the disk's usable area.
fn seq(task: u32, offset: Sector) -> TaskScript {
    let phase = Phase::reads(u32::MAX, 256, Layout::Sequential);
    TaskScript::new(task, REGION + offset, vec![phase])
}

/// A greedy reader of 8-sector reads anywhere in the first 2^28 sectors.
fn random(task: u32) -> TaskScript {
    let phase = Phase::reads(u32::MAX, 8, Layout::Random { span: 1 << 28 });
    TaskScript::new(task, REGION, vec![phase])
}

/// `tasks` on `device` under `bfq`, from time zero, held open.
fn start(bfq: Bfq, device: DeviceSpec, tasks: Vec<TaskScript>) -> Run<Bfq> {
    let case = Case {
        workload: Workload { tasks },
        device,
    };
    Run::new(Box::new(bfq), &case, &Options::default())
}

/// `tasks` on `device` under `bfq` from time zero until `end`; every wait
/// within BFQ's starvation bound.
fn run(bfq: Bfq, device: DeviceSpec, tasks: Vec<TaskScript>, end: Instant) -> Run<Bfq> {
    let mut run = start(bfq, device, tasks);
    go(&mut run, end);
    run
}

/// Go on until `end`, checked.
fn go(run: &mut Run<Bfq>, end: Instant) {
    run.run_until(end).unwrap_or_else(|v| panic!("{v}"));
    run.finish().unwrap_or_else(|v| panic!("{v}"));
}

fn sectors(run: &Run<Bfq>, task: u32) -> u64 {
    run.stats(TaskId(task)).sectors()
}

#[test]
fn ioprio_levels_map_to_weights_as_the_kernel_does() {
    let w: Vec<u32> = (0..8).map(ioprio_to_weight).collect();
    assert_eq!(w, vec![80, 70, 60, 50, 40, 30, 20, 10]);
}

#[test]
fn weights_share_bandwidth_on_a_disk_without_ncq() {
    // Levels 7 and 5: weights 10 and 30.
    let mut a = seq(1, 0);
    a.prio = IoPrio::be(7);
    let mut b = seq(2, 1 << 24);
    b.prio = IoPrio::be(5);
    let bfq = Bfq::new(&hdd().limits);
    let run = run(bfq, hdd(), vec![a, b], at(Duration::from_secs(20)));
    let (a, b) = (sectors(&run, 1), sectors(&run, 2));
    let ratio = b as f64 / a as f64;
    println!("weights 10:30 -> {a} : {b} sectors, ratio {ratio:.3}");
    assert!((ratio / 3.0 - 1.0).abs() < 0.05, "ratio {ratio}");
}

#[test]
fn budgets_follow_the_expiry_reason() {
    // Without raising, which pins budgets to twice the minimum.
    let t = TYPE.tunables([("low_latency", 0)]).unwrap();
    let bfq = Bfq::from_tunables(&t, &hdd().limits);
    let mut run = run(bfq, hdd(), vec![seq(1, 0), seq(2, 1 << 24)], at(ms(2_000)));
    let bfq = run.policy_mut();
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
    set(bfq, 4 * min);
    bfq.recalc_budget(q, Expiration::BudgetExhausted);
    assert_eq!(bfq.q(q).max_budget, 16 * min);
    bfq.recalc_budget(q, Expiration::BudgetTimeout);
    assert_eq!(bfq.q(q).max_budget, 32 * min.min(max / 32));
    set(bfq, 10 * min);
    let dispatched = bfq.q(q).dispatched;
    bfq.qm(q).dispatched = 0;
    bfq.recalc_budget(q, Expiration::TooIdle);
    assert_eq!(bfq.q(q).max_budget, 6 * min);
    set(bfq, 3 * min);
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
    let bfq = Bfq::new(&hdd().limits);
    let run = run(bfq, hdd(), vec![seq(1, 0)], at(Duration::from_secs(10)));
    let bfq = run.policy();
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
    let bfq = Bfq::new(&hdd().limits);
    let run = run(
        bfq,
        hdd(),
        vec![seq(1, 0), random(2)],
        at(Duration::from_secs(20)),
    );
    let (seq, rnd) = (sectors(&run, 1), sectors(&run, 2));
    println!("sequential {seq} sectors, random {rnd} sectors");
    assert!(seq > 20 * rnd, "seq {seq} rnd {rnd}");
}

#[test]
fn idling_on_a_rotational_disk_but_not_for_seeky_queues_on_ncq_flash() {
    // Sequential reader on an HDD without NCQ: after its request completes
    // BFQ waits for the next one instead of switching. (Without raising:
    // raised queues idle only to protect themselves from others.)
    let limits = hdd().limits;
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
    let bfq = Bfq::new(&ssd().limits);
    let readers: Vec<TaskScript> = (1..=8).map(random).collect();
    let run = run(bfq, ssd(), readers, at(Duration::from_secs(2)));
    let bfq = run.policy();
    assert_eq!(bfq.hw_tag(), Some(true));
    let q = bfq.sync_of[&TaskId(1)];
    assert!(bfq.q(q).seeky());
    assert!(!bfq.better_to_idle(q));
}

#[test]
fn a_new_queue_is_raised_and_loses_it_after_enough_service() {
    let mut run = run(Bfq::new(&hdd().limits), hdd(), vec![seq(1, 0)], at(ms(50)));
    // Raised as interactive at creation; a greedy reader that empties its
    // queue between reads also passes for soft real-time (x3000) for
    // 300 ms periods inside the interactive one, as in the kernel.
    let bfq = run.policy();
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
    go(&mut run, at(Duration::from_secs(3)));
    let served = sectors(&run, 1);
    println!("served {served} sectors; raised since {raised_at:?}");
    assert!(served > MAX_SERVICE_FROM_WR);
    let bfq = run.policy();
    assert_eq!(bfq.wr_coeff(TaskId(1)), 1);
    assert_eq!(bfq.wf.es[bfq.q(q).entity as usize].weight, 40);
}

#[test]
fn raising_expires_with_its_duration_and_restarts_after_long_idleness() {
    let limits = hdd().limits;
    // One small read every 100 ms: too slow to use up 120000 sectors.
    let phase = Phase::reads(u32::MAX, 8, Layout::Sequential).think(ms(100));
    let reader = TaskScript::new(1, REGION, vec![phase]);
    let mut run = run(Bfq::new(&limits), hdd(), vec![reader], at(ms(500)));
    assert!(run.policy().wr_coeff(TaskId(1)) > 1);
    let dur = run.policy().wr_duration();
    // Long after the duration the queue is no longer (interactively) raised;
    // arrivals 100 ms apart at 8 sectors qualify it as soft real-time.
    go(&mut run, at(dur + Duration::from_secs(1)));
    let bfq = run.policy();
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
    let phases = vec![
        Phase::reads(3000, 256, Layout::Sequential),
        Phase::reads(u32::MAX, 256, Layout::Sequential).pause(Duration::from_secs(3)),
    ];
    let greedy = TaskScript::new(7, REGION, phases);
    let mut run = start(Bfq::new(&limits), hdd(), vec![greedy]);
    go(&mut run, at(ms(3500)));
    let raised = |run: &Run<Bfq>| run.policy().wr_coeff(TaskId(7));
    assert_eq!(raised(&run), 1, "greedy reader lost raising");
    // The burst of 3000 reads ends near 3.9 s, the task idles 3 s, then
    // reads again: raised anew.
    go(&mut run, at(Duration::from_secs(5)));
    let t_end = run.stats(TaskId(7)).requests();
    assert_eq!(t_end, 3000);
    go(&mut run, at(ms(7_000)));
    assert!(run.stats(TaskId(7)).requests() > t_end);
    println!("after idling: wr_coeff {}", raised(&run));
    assert_eq!(raised(&run), WR_COEFF);
}

#[test]
fn a_large_burst_of_new_queues_is_not_raised() {
    let readers: Vec<TaskScript> = (1..=10)
        .map(|t| TaskScript {
            start: ms(10 * u64::from(t - 1)),
            ..seq(t, u64::from(t) << 22)
        })
        .collect();
    let run = run(Bfq::new(&hdd().limits), hdd(), readers, at(ms(300)));
    let bfq = run.policy();
    let raised: Vec<u32> = (1..=10).map(|t| bfq.wr_coeff(TaskId(t))).collect();
    println!("wr_coeff per reader: {raised:?}");
    // The 8th queue makes the burst large: from then on none is raised.
    assert!(raised.iter().all(|&c| c == 1), "{raised:?}");
    assert!((1..=10).all(|t| bfq.q(bfq.sync_of[&TaskId(t)]).in_large_burst));
}

#[test]
fn an_interactive_task_gets_low_latency_against_sequential_readers() {
    let limits = hdd().limits;
    // From 3 s on, bursts of 20 random reads 3 s apart (an application
    // starting, then used now and then).
    let burst = |pause| Phase::reads(20, 8, Layout::Random { span: 1 << 28 }).pause(pause);
    let mut phases = vec![burst(Duration::ZERO)];
    phases.extend((0..8).map(|_| burst(Duration::from_secs(3))));
    let app = TaskScript {
        start: Duration::from_secs(3),
        ..TaskScript::new(99, REGION, phases)
    };
    let run_with = |low_latency: i64| {
        let t = TYPE.tunables([("low_latency", low_latency)]).unwrap();
        let bfq = Bfq::from_tunables(&t, &limits);
        let mut tasks: Vec<TaskScript> = (1..=10).map(|t| seq(t, u64::from(t) << 24)).collect();
        tasks.push(app.clone());
        let run = run(bfq, hdd(), tasks, at(Duration::from_secs(15)));
        run.stats(TaskId(99)).mean_latency()
    };
    let raised = run_with(1);
    let plain = run_with(0);
    println!("interactive read latency: low_latency=1 {raised}, low_latency=0 {plain}");
    assert!(raised.mul(5) < plain, "{raised} vs {plain}");
    assert!(raised < ms(40), "{raised}");
}

#[test]
fn close_interleaved_readers_share_a_queue_and_split_when_seeky() {
    // Two tasks reading alternate 64-sector chunks of one file, then both
    // jumping around with 8-sector reads. Each keeps two reads queued (its
    // read-ahead), so both queues are backlogged together, as the kernel's
    // merge search requires. The disk serves any request in 300 us.
    let interleaved = Phase::reads(40, 64, Layout::Strided { stride: 128 });
    let seeky = Phase::reads(80, 8, Layout::Random { span: 1 << 28 }).pause(ms(1));
    let reader = |task: u32, base: Sector| TaskScript {
        outstanding: 2,
        ..TaskScript::new(task, base, vec![interleaved.clone(), seeky.clone()])
    };
    let device = DeviceSpec {
        service: Service::Serial {
            fixed: Duration::from_micros(300),
            per_sector: Duration::ZERO,
            seek: Duration::ZERO,
        },
        ..hdd()
    };
    let tasks = vec![reader(1, REGION), reader(2, REGION + 64)];
    let mut run = start(Bfq::new(&hdd().limits), device, tasks);
    let mut merged_seen = false;
    let done = |run: &Run<Bfq>, task: u32| run.stats(TaskId(task)).requests();
    let mut t = Instant::ZERO;
    while done(&run, 1) < 120 || done(&run, 2) < 120 {
        assert!(t < at(Duration::from_secs(10)), "readers stuck");
        t += Duration::from_micros(100);
        run.run_until(t).unwrap_or_else(|v| panic!("{v}"));
        let bfq = run.policy();
        if bfq.is_merged(TaskId(1)) && bfq.is_merged(TaskId(2)) {
            assert_eq!(bfq.sync_of[&TaskId(1)], bfq.sync_of[&TaskId(2)]);
            merged_seen = true;
        }
    }
    assert!(merged_seen, "interleaved readers were not merged");
    // The shared queue turned seeky and split.
    let bfq = run.policy();
    assert_ne!(
        bfq.sync_of[&TaskId(1)],
        bfq.sync_of[&TaskId(2)],
        "not split"
    );
    run.run_to_end().unwrap_or_else(|v| panic!("{v}"));
    run.finish().unwrap_or_else(|v| panic!("{v}"));
}

#[test]
fn groups_share_by_weight() {
    let mut bfq = Bfq::new(&hdd().limits);
    bfq.set_group(GroupId(1), GroupId::ROOT, 100);
    bfq.set_group(GroupId(2), GroupId::ROOT, 300);
    // Two readers in group 1, one in group 2: the lone reader gets 3/4.
    let readers: Vec<TaskScript> = [1, 1, 2]
        .into_iter()
        .zip(1..)
        .map(|(group, t)| TaskScript {
            group: GroupId(group),
            ..seq(t, u64::from(t) << 24)
        })
        .collect();
    let run = run(bfq, hdd(), readers, at(Duration::from_secs(20)));
    let total: u64 = (1..=3).map(|t| sectors(&run, t)).sum();
    let share = sectors(&run, 3) as f64 / total as f64;
    println!("group weights 100:300 -> share of group 2 {share:.3}");
    assert!((share - 0.75).abs() < 0.03, "{share}");
    assert_eq!(run.policy().group_weight(GroupId(2)), 300);
}

#[test]
fn the_idle_class_is_served_only_after_its_timeout() {
    let idle = TaskScript {
        prio: IoPrio::idle(),
        ..seq(2, 1 << 24)
    };
    let bfq = Bfq::new(&hdd().limits);
    let run = run(
        bfq,
        hdd(),
        vec![seq(1, 0), idle],
        at(Duration::from_secs(5)),
    );
    let (b, i) = (sectors(&run, 1), sectors(&run, 2));
    println!("best-effort {b} sectors, idle class {i} sectors");
    assert!(i > 0, "the idle class starved");
    assert!(b > 50 * i, "be {b} idle {i}");
}

#[test]
fn strict_guarantees_keeps_one_request_in_the_device() {
    let limits = ssd().limits;
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
    let mut a = seq(1, 0);
    a.prio = IoPrio::be(7);
    let mut b = seq(2, 1 << 24);
    b.prio = IoPrio::be(5);
    let bfq = Bfq::new(&ssd().limits);
    let run = run(bfq, ssd(), vec![a, b], at(Duration::from_secs(10)));
    let (a, b) = (sectors(&run, 1), sectors(&run, 2));
    let ratio = b as f64 / a as f64;
    println!(
        "ssd weights 10:30 -> {a} : {b} sectors, ratio {ratio:.3}, hw_tag {:?}",
        run.policy().hw_tag()
    );
    assert!((ratio / 3.0 - 1.0).abs() < 0.05, "ratio {ratio}");
}

#[test]
fn a_group_tree_configures_the_hierarchy() {
    let mut tree = GroupTree::default();
    let a = tree.add("a", GroupId::ROOT, 300, Default::default());
    let b = tree.add("b", a, 50, Default::default());
    let t = TYPE.tunables([("low_latency", 0)]).unwrap();
    let mut bfq = Bfq::from_tunables(&t, &hdd().limits);
    bfq.set_groups(&tree);
    assert_eq!(bfq.group_weight(a), 300);
    assert_eq!(bfq.group_weight(b), 50);
    let (sa, sb) = (bfq.group_of[&a], bfq.group_of[&b]);
    let eb = bfq.wf.sds[sb as usize].entity;
    assert_eq!(bfq.wf.es[eb as usize].parent, sa);
    // A reader in the nested group is scheduled through both levels.
    let nested = TaskScript {
        group: b,
        ..seq(1, 0)
    };
    let run = run(
        bfq,
        hdd(),
        vec![nested, seq(2, 1 << 24)],
        at(Duration::from_secs(5)),
    );
    let (n, r) = (sectors(&run, 1), sectors(&run, 2));
    let share = n as f64 / (n + r) as f64;
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
    ssd().limits
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
    let mut bfq = Bfq::from_tunables(&v61, &hdd().limits);
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
