use super::*;
use elevator_core::IoPrio;

use crate::harness::{Case, Layout, Options, Phase, Run, TaskScript, REGION};

fn read(id: u64, task: u32, sector: Sector, prio: IoPrio) -> Request {
    Request {
        prio,
        ..Request::read(id, task, sector, 8)
    }
}

fn build(ty: &SchedulerType, limits: &QueueLimits) -> Cfq2632 {
    let t = ty.tunables(std::iter::empty()).expect("defaults");
    Cfq2632::from_tunables(&t, limits, ty.name)
}

/// Four queues become busy at once, the lowest BE level first.
fn order_after_arrivals(ty: &SchedulerType) -> Vec<(u32, char, u8)> {
    let mut s = build(ty, &QueueLimits::default());
    let arrivals = [
        (1, IoPrio::be(7)),
        (2, IoPrio::idle()),
        (3, IoPrio::be(0)),
        (4, IoPrio::rt(7)),
    ];
    for (k, &(task, prio)) in arrivals.iter().enumerate() {
        s.insert(
            read(k as u64, task, 1_000_000 * k as u64, prio),
            Instant::ZERO,
        );
    }
    s.tree_order()
}

#[test]
fn the_class_only_sort_and_brunelles_sort_order_the_same_queues_differently() {
    // 2.6.32: RT first, IDLE last, BE by key. BE7 arrived first with
    // key now; BE0's offset is (busy − 1) × (180 − 180) ms = 0, so it
    // sorts after BE7 on the tie.
    let released = order_after_arrivals(&TYPE);
    assert_eq!(
        released,
        vec![(4, 'r', 7), (1, 'b', 7), (3, 'b', 0), (2, 'i', 7)]
    );
    // Brunelle: class, then level, then key.
    let patched = order_after_arrivals(&TYPE_BRUNELLE);
    assert_eq!(
        patched,
        vec![(4, 'r', 7), (3, 'b', 0), (1, 'b', 7), (2, 'i', 7)]
    );
}

/// A reader keeping 40 requests in the system, 1000 sectors apart, on
/// a driver that holds up to `depth` of them and completes one a
/// millisecond (the harness's serial device), until all its 240
/// requests completed (at 240 ms: the driver never runs dry before).
/// The run stops right after that last completion.
fn hw_tag_after(depth: u32, rotational: bool) -> Run<Cfq2632> {
    let limits = QueueLimits {
        queue_depth: depth,
        rotational,
        ..QueueLimits::default()
    };
    let reads = Phase::reads(240, 8, Layout::Strided { stride: 1_000 });
    let reader = TaskScript {
        outstanding: 40,
        ..TaskScript::new(1, REGION, vec![reads])
    };
    let case = Case::serial(vec![reader], limits, Duration::from_millis(1));
    let mut run = Run::new(Box::new(Cfq2632::new(&limits)), &case, &Options::default());
    let last = Instant(240 * 1_000_000);
    run.run_until(last).unwrap_or_else(|v| panic!("{v}"));
    assert_eq!(run.stats(TaskId(1)).requests(), 240);
    assert_eq!(run.now(), last);
    run
}

#[test]
fn hw_tag_follows_the_depth_the_driver_reaches() {
    let tagged = hw_tag_after(31, true).policy().hw_tag();
    assert!(tagged, "NCQ 31: the driver holds up to 16 (4 × quantum)");
    let tagged = hw_tag_after(1, true).policy().hw_tag();
    assert!(!tagged, "no queueing: the depth seen is 1");
}

#[test]
fn hw_tag_decides_idling_on_a_non_rotational_device() {
    // On flash with queueing CFQ never idles; at depth 1 (PATA, MMC)
    // hw_tag goes off and it idles as on a disk. Right after the
    // reader's last request completed alone, another task's read comes.
    for (depth, idles) in [(31, false), (1, true)] {
        let mut run = hw_tag_after(depth, false);
        let t = run.now();
        let s = run.policy_mut();
        s.insert(read(10_000, 2, 900_000_000, IoPrio::be(4)), t);
        let waited = matches!(s.dispatch(t), Dispatch::Wait { until } if until != Instant::NEVER);
        assert_eq!(waited, idles, "depth {depth}");
    }
}

#[test]
fn a_direct_write_idles_and_an_fsync_write_does_not() {
    for (write, idles) in [
        (Request::write_direct(1, 1, 1000, 8), true),
        (Request::write_sync(1, 1, 1000, 8), false),
    ] {
        let mut s = Cfq2632::new(&QueueLimits::default());
        s.insert(write, Instant::ZERO);
        let Dispatch::Request(w) = s.dispatch(Instant::ZERO) else {
            panic!("the write goes out")
        };
        s.insert(read(2, 2, 900_000, IoPrio::be(4)), Instant(1_000_000));
        s.complete(&w, Instant(5_000_000));
        let d = s.dispatch(Instant(5_000_000));
        assert_eq!(
            matches!(d, Dispatch::Wait { .. }),
            idles,
            "noidle {}: {d:?}",
            w.noidle
        );
    }
}

#[test]
fn must_queue_is_answered_once_per_slice_for_the_idling_queue() {
    let mut s = Cfq2632::new(&QueueLimits::default());
    let r = |id| read(id, 1, 1000 + id * 8, IoPrio::be(4));
    s.insert(r(1), Instant::ZERO);
    let Dispatch::Request(d) = s.dispatch(Instant::ZERO) else {
        panic!("dispatched")
    };
    let other = read(9, 2, 900_000, IoPrio::be(4));
    assert_eq!(
        s.may_queue(&r(2), Instant::ZERO),
        MayQueue::May,
        "not idling yet"
    );
    s.complete(&d, Instant(1_000_000));
    assert!(matches!(
        s.dispatch(Instant(1_000_000)),
        Dispatch::Empty | Dispatch::Wait { .. }
    ));
    assert_eq!(
        s.may_queue(&other, Instant(1_000_000)),
        MayQueue::May,
        "not its queue"
    );
    assert_eq!(
        s.may_queue(&r(2), Instant(1_000_000)),
        MayQueue::Must,
        "idling on it"
    );
    assert_eq!(
        s.may_queue(&r(2), Instant(1_000_000)),
        MayQueue::May,
        "once per slice"
    );
}

/// Task 1 reads `n` requests back to back, each completing 1 ms after
/// its dispatch, its next coming at once; sectors from `sector(i)`.
/// Returns the time after the last completion.
fn serve(
    s: &mut Cfq2632,
    n: u64,
    prio: IoPrio,
    sector: impl Fn(u64) -> Sector,
    start: Instant,
) -> Instant {
    let mut now = start;
    for i in 0..n {
        s.insert(read(i, 1, sector(i), prio), now);
        let Dispatch::Request(d) = s.dispatch(now) else {
            panic!("task 1's read {i} goes out")
        };
        now += Duration::from_millis(1);
        s.complete(&d, now);
    }
    now
}

#[test]
fn wait_request_lasts_the_slice_so_must_queue_comes_after_the_awaited_request() {
    // 2.6.32 sets wait_request when the queue idles and clears it only
    // when the slice ends: the awaited request coming does not end it,
    // and the once-per-slice `Must` is still there for a later request.
    let mut s = Cfq2632::new(&QueueLimits::default());
    let now = serve(&mut s, 3, IoPrio::be(4), |i| 1000 + 8 * i, Instant::ZERO);
    // Idling on task 1 now; its next read comes and goes out.
    let next = read(10, 1, 1024, IoPrio::be(4));
    s.insert(next, now);
    assert!(matches!(s.dispatch(now), Dispatch::Request(_)));
    assert_eq!(
        s.may_queue(&read(11, 1, 1032, IoPrio::be(4)), now),
        MayQueue::Must
    );
}

#[test]
fn a_seeky_tasks_whole_mean_seek_distance_counts_as_close() {
    // Task 1 alternates between sectors 2M apart: its mean seek distance
    // is about 2M sectors. While CFQ idles on it, task 2's request 100k
    // sectors (50 MB) from where task 1 left the head is "close" by
    // 2.6.32's cfq_rq_close (the mean, uncapped) and preempts; capped
    // at 4 MiB (8192 sectors), as this model had it, it is not.
    let mut s = Cfq2632::new(&QueueLimits::default());
    let start = Instant::ZERO;
    let now = serve(
        &mut s,
        12,
        IoPrio::be(4),
        |i| (i % 2) * 2_000_000 + 1000,
        start,
    );
    let mean = s.tasks[&TaskId(1)].seek_mean;
    assert!(mean > 1_000_000, "task 1's mean seek {mean}");
    let near = s.last_position + 100_000;
    s.insert(read(100, 2, near, IoPrio::be(4)), now);
    let Dispatch::Request(d) = s.dispatch(now) else {
        panic!("task 2 preempted the idle wait")
    };
    assert_eq!(d.task, TaskId(2));
    // A request past the mean is not close: task 3 waits its turn.
    let mut s = Cfq2632::new(&QueueLimits::default());
    let now = serve(
        &mut s,
        12,
        IoPrio::be(4),
        |i| (i % 2) * 2_000_000 + 1000,
        start,
    );
    let far = s.last_position + 50_000_000;
    s.insert(read(100, 3, far, IoPrio::be(4)), now);
    assert!(
        matches!(s.dispatch(now), Dispatch::Wait { .. }),
        "CFQ keeps idling on task 1"
    );
}

#[test]
fn a_request_for_the_waiting_queue_is_dispatched_though_the_slice_ran_out() {
    // BE7 gets 40 ms from its first completion (at 1 ms). Task 2 queues
    // at 20 ms; task 1 idles after its read completing at 40 ms; its
    // next read comes at 41.5 ms, past the slice's end, while the idle
    // timer still runs: `must_dispatch` lets it go out before the
    // slice expires (2.6.32 cfq_select_queue).
    let prio = IoPrio::be(7);
    let mut s = Cfq2632::new(&QueueLimits::default());
    let now = serve(&mut s, 20, prio, |i| 1000 + 8 * i, Instant::ZERO);
    s.insert(read(200, 2, 900_000_000, prio), now);
    let now = serve(&mut s, 20, prio, |i| 2000 + 8 * i, now);
    assert_eq!(now, Instant(40_000_000));
    let late = Instant(41_500_000);
    s.insert(read(300, 1, 3000, prio), late);
    let Dispatch::Request(d) = s.dispatch(late) else {
        panic!("a request goes out")
    };
    assert_eq!(d.task, TaskId(1), "task 1's awaited read, not task 2's");
}

/// Two BE4 readers at depth 1 on a disk serving each request in 1
/// ms, each thinking 0.1 ms between a completion and its next request:
/// task 1 reads at random in a 512 MiB span, task 2 sequentially from
/// `seq_base`; run until `until_ms`.
fn seeky_and_sequential(seq_base: Sector, until_ms: u64) -> Run<Cfq2632> {
    let limits = QueueLimits::default();
    let span = 1 << 20;
    let think = |p: Phase| Phase {
        min_think: Duration::from_micros(100),
        max_think: Duration::from_micros(100),
        ..p
    };
    let random = TaskScript {
        base: Some(REGION),
        ..TaskScript::new(
            1,
            REGION,
            vec![think(Phase::reads(100_000, 8, Layout::Random { span }))],
        )
    };
    let seq = TaskScript {
        base: Some(seq_base),
        ..TaskScript::new(
            2,
            seq_base,
            vec![think(Phase::reads(100_000, 256, Layout::Sequential))],
        )
    };
    let case = Case::serial(vec![random, seq], limits, Duration::from_millis(1));
    let mut run = Run::new(Box::new(Cfq2632::new(&limits)), &case, &Options::default());
    run.run_until(Instant(until_ms * 1_000_000))
        .unwrap_or_else(|v| panic!("{v}"));
    run
}

/// Requests per task served in `[from, to)` ms.
fn served(run: &Run<Cfq2632>, task: u32, from: u64, to: u64) -> usize {
    run.stats(TaskId(task))
        .served
        .iter()
        .filter(|s| (from * 1_000_000..to * 1_000_000).contains(&s.dispatched.nanos()))
        .count()
}

#[test]
fn a_seeky_reader_hands_the_disk_to_a_queue_within_its_seek_distance() {
    // The sequential reader starts inside the random reader's span, so
    // its next request is always within the random task's mean seek
    // distance (a third of the span): 2.6.32 takes it as a close
    // cooperator whenever the random queue runs dry, unless it made a
    // cooperative jump since it was last chosen from the tree. The
    // random reader then gets a whole slice only every other round.
    let near = seeky_and_sequential(REGION + (1 << 19), 3_000);
    // Far away (about 48 GiB off), nothing is close: plain round
    // robin, a 100 ms slice each.
    let far = seeky_and_sequential(REGION + 100_000_000, 3_000);
    let (rn, sn) = (
        served(&near, 1, 1_000, 3_000),
        served(&near, 2, 1_000, 3_000),
    );
    let (rf, sf) = (served(&far, 1, 1_000, 3_000), served(&far, 2, 1_000, 3_000));
    println!("near: random {rn} sequential {sn}; far: random {rf} sequential {sf}");
    // The serial disk serves each request in about a millisecond, so
    // the random reader's share is its share of the requests.
    let share = |r: usize, s: usize| r as f64 / (r + s) as f64;
    assert!((0.45..=0.55).contains(&share(rf, sf)), "far: {rf} vs {sf}");
    assert!(share(rn, sn) < 0.4, "near: {rn} vs {sn}");
}

#[test]
fn the_close_test_uses_the_whole_mean_seek_distance() {
    // 2.6.32's cfq_rq_close: within the active task's seek_mean, not
    // capped at CIC_SEEK_THR once the mean has samples.
    let mut s = Cfq2632::new(&QueueLimits::default());
    s.active_task = Some(TaskId(1));
    let mut t = TaskState::new(Instant::ZERO);
    for k in 0..20u64 {
        let sector = 8 + (k % 2) * 1_000_000;
        t.add_seek(sector);
        t.last_request_pos = sector;
    }
    assert!(t.seek_valid() && t.seek_mean > 500_000, "{}", t.seek_mean);
    s.tasks.insert(TaskId(1), t);
    s.last_position = 0;
    assert!(s.close_to_head(400_000), "within the mean");
    assert!(!s.close_to_head(2_000_000), "beyond it");
    s.tasks.get_mut(&TaskId(1)).unwrap().seek_samples = 0;
    assert!(!s.close_to_head(400_000), "too few samples: 4 MiB");
    assert!(s.close_to_head(CLOSE_THR));
}

#[test]
fn slices_follow_the_2632_table() {
    let s = Cfq2632::new(&QueueLimits::default());
    let ms = |sync, level| s.prio_slice(sync, level).nanos() / 1_000_000;
    assert_eq!((ms(true, 0), ms(true, 4), ms(true, 7)), (180, 100, 40));
    assert_eq!((ms(false, 0), ms(false, 4), ms(false, 7)), (72, 40, 16));
}
