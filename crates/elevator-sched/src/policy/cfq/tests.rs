use super::*;
use elevator_core::IoPrio;

const MS: u64 = 1_000_000;

fn at(ms: u64) -> Instant {
    Instant(ms * MS)
}

fn read(id: u64, task: u32, sector: Sector, prio: IoPrio) -> Request {
    Request {
        prio,
        ..Request::read(id, task, sector, 64)
    }
}

fn take(d: Dispatch) -> Request {
    match d {
        Dispatch::Request(r) => r,
        other => panic!("expected a request, got {other:?}"),
    }
}

#[test]
fn slices_follow_the_kernel_table() {
    let s = Cfq::new(&QueueLimits::default());
    let sync: Vec<u64> = (0..8).map(|l| s.prio_slice(true, l).nanos() / MS).collect();
    let asy: Vec<u64> = (0..8)
        .map(|l| s.prio_slice(false, l).nanos() / MS)
        .collect();
    assert_eq!(sync, vec![180, 160, 140, 120, 100, 80, 60, 40]);
    assert_eq!(asy, vec![72, 64, 56, 48, 40, 32, 24, 16]);
}

#[test]
fn choose_req_prefers_forward_then_short_back_seeks() {
    let mut s = Cfq::new(&QueueLimits::default());
    for (id, sector) in [(1, 10_000), (2, 9_000), (3, 100_000)] {
        s.insert(read(id, 1, sector, IoPrio::be(4)), Instant::ZERO);
    }
    let q = s.sync_queues[&TaskId(1)];
    let pick = |s: &Cfq, a, b, last| {
        let (a, b) = (Some(RequestId(a)), Some(RequestId(b)));
        cfq_common::choose_req(&s.q(q).sorted, &s.conf.back_seek, a, b, last)
    };
    // Head at 9_500: 10_000 is 500 ahead, 9_000 is 500 behind (×2).
    assert_eq!(pick(&s, 1, 2, 9_500), Some(RequestId(1)));
    // Head at 9_200: 800 ahead vs 200 behind ×2 = 400.
    assert_eq!(pick(&s, 1, 2, 9_200), Some(RequestId(2)));
    // Head far beyond both: more than back_seek_max (32768 sectors)
    // behind, both wrap; the lower sector goes first.
    assert_eq!(pick(&s, 1, 2, 200_000), Some(RequestId(2)));
    // One wrapped, one ahead: ahead wins however far.
    assert_eq!(pick(&s, 2, 3, 60_000), Some(RequestId(3)));
}

#[test]
fn rt_before_be_before_idle() {
    let mut s = Cfq::new(&QueueLimits::default());
    s.insert(read(1, 1, 1_000, IoPrio::idle()), Instant::ZERO);
    s.insert(read(2, 2, 2_000, IoPrio::be(0)), Instant::ZERO);
    s.insert(read(3, 3, 3_000, IoPrio::rt(7)), Instant::ZERO);
    let mut t = at(300);
    let mut order = Vec::new();
    for _ in 0..3 {
        // Let idling and the idle-class grace run out between requests.
        let r = loop {
            match s.dispatch(t) {
                Dispatch::Request(r) => break r,
                Dispatch::Wait { until } => t = until.min(t + Duration::from_secs(1)),
                Dispatch::Empty => panic!("requests are queued"),
            }
        };
        order.push(r.id.0);
        t += Duration::from_millis(5);
        s.complete(&r, t);
    }
    assert_eq!(order, vec![3, 2, 1]);
}

#[test]
fn idle_class_waits_for_the_grace_period() {
    let mut s = Cfq::new(&QueueLimits::default());
    s.insert(read(1, 1, 1_000, IoPrio::be(4)), at(1_000));
    let r = take(s.dispatch(at(1_000)));
    s.complete(&r, at(1_010));
    s.task_exited(TaskId(1), at(1_010));
    s.insert(read(2, 2, 5_000, IoPrio::idle()), at(1_020));
    assert_eq!(s.dispatch(at(1_020)), Dispatch::Wait { until: at(1_210) });
    assert!(matches!(s.dispatch(at(1_210)), Dispatch::Request(r) if r.id.0 == 2));
}

#[test]
fn idles_on_a_sync_queue_and_resumes_on_its_next_request() {
    let mut s = Cfq::new(&QueueLimits::default());
    s.insert(read(1, 1, 1_000, IoPrio::be(4)), Instant::ZERO);
    let r = take(s.dispatch(Instant::ZERO));
    s.complete(&r, at(5));
    // Another task's far-away request must wait for the idle window.
    s.insert(read(2, 2, 900_000, IoPrio::be(4)), at(6));
    assert_eq!(s.dispatch(at(6)), Dispatch::Wait { until: at(13) });
    // The idling task comes back within the window: served at once.
    s.insert(read(3, 1, 1_064, IoPrio::be(4)), at(7));
    assert_eq!(take(s.dispatch(at(7))).id.0, 3);
}

#[test]
fn the_idle_window_runs_out_and_the_next_queue_is_served() {
    let mut s = Cfq::new(&QueueLimits::default());
    s.insert(read(1, 1, 1_000, IoPrio::be(4)), Instant::ZERO);
    let r = take(s.dispatch(Instant::ZERO));
    s.complete(&r, at(5));
    s.insert(read(2, 2, 900_000, IoPrio::be(4)), at(6));
    assert_eq!(s.dispatch(at(6)), Dispatch::Wait { until: at(13) });
    assert_eq!(take(s.dispatch(at(13))).id.0, 2);
}

#[test]
fn rt_preempts_an_idling_be_queue() {
    let mut s = Cfq::new(&QueueLimits::default());
    s.insert(read(1, 1, 1_000, IoPrio::be(0)), Instant::ZERO);
    let r = take(s.dispatch(Instant::ZERO));
    s.complete(&r, at(5));
    s.insert(read(2, 2, 900_000, IoPrio::rt(7)), at(6));
    assert_eq!(take(s.dispatch(at(6))).id.0, 2);
}

#[test]
fn sync_waits_for_async_in_the_driver_to_drain() {
    let mut s = Cfq::new(&QueueLimits::default());
    s.insert(Request::write(1, 1, 50_000, 64), Instant::ZERO);
    let w = take(s.dispatch(Instant::ZERO));
    // A read preempts the async queue but does not join a write in the
    // driver.
    s.insert(read(2, 2, 1_000, IoPrio::be(4)), at(1));
    assert_eq!(
        s.dispatch(at(1)),
        Dispatch::Wait {
            until: Instant::NEVER
        }
    );
    s.complete(&w, at(3));
    assert_eq!(take(s.dispatch(at(3))).id.0, 2);
}

#[test]
fn async_waits_while_sync_is_in_the_driver() {
    let mut s = Cfq::new(&QueueLimits::default());
    s.insert(read(1, 1, 1_000, IoPrio::be(4)), Instant::ZERO);
    s.insert(Request::write(2, 2, 50_000, 64), Instant::ZERO);
    let r = take(s.dispatch(Instant::ZERO));
    assert_eq!(r.id.0, 1);
    // The reader's queue idles with its read in flight; the write waits.
    assert_eq!(
        s.dispatch(at(1)),
        Dispatch::Wait {
            until: Instant::NEVER
        }
    );
    s.complete(&r, at(4));
    assert!(matches!(s.dispatch(at(4)), Dispatch::Wait { .. }));
    // After the idle window the write goes.
    assert_eq!(take(s.dispatch(at(12))).id.0, 2);
}

#[test]
fn an_expired_request_is_served_first_in_a_new_slice() {
    // Task 1's queue: an old request far out, a newer one near the head.
    let mut s = Cfq::new(&QueueLimits::default());
    s.insert(read(1, 1, 500_000, IoPrio::be(4)), Instant::ZERO);
    s.insert(read(2, 1, 1_000, IoPrio::be(4)), at(1));
    assert_eq!(take(s.dispatch(at(200))).id.0, 1);
    let mut s = Cfq::new(&QueueLimits::default());
    s.insert(read(1, 1, 500_000, IoPrio::be(4)), Instant::ZERO);
    s.insert(read(2, 1, 1_000, IoPrio::be(4)), at(1));
    assert_eq!(take(s.dispatch(at(2))).id.0, 2);
}

#[test]
fn merges_stay_within_a_queue() {
    let mut s = Cfq::new(&QueueLimits::default());
    s.insert(read(1, 1, 0, IoPrio::be(4)), Instant::ZERO);
    s.insert(read(2, 2, 64, IoPrio::be(4)), Instant::ZERO);
    assert_eq!(s.queued(), 2);
    s.insert(read(3, 1, 64 + 64 + 1000, IoPrio::be(4)), Instant::ZERO);
    s.insert(read(4, 1, 64, IoPrio::be(4)), Instant::ZERO);
    // 4 joins 1 (same task), not 2; async writes of two tasks in the
    // same class share a queue and merge.
    assert_eq!(s.queued(), 3);
    s.insert(Request::write(5, 3, 9_000, 8), Instant::ZERO);
    s.insert(Request::write(6, 4, 9_008, 8), Instant::ZERO);
    assert_eq!(s.queued(), 4);
}

#[test]
fn detects_command_queueing_from_the_depth_it_sees() {
    use crate::harness::{Case, Layout, Options, Phase, Run, TaskScript, REGION};
    // A reader keeping 10 requests in the system, 1000 sectors apart,
    // on a 32-deep driver completing one a millisecond: CFQ sees a
    // depth of 10, never the 32 the limits allow.
    let limits = QueueLimits {
        queue_depth: 32,
        ..QueueLimits::default()
    };
    let reads = Phase::reads(100, 64, Layout::Strided { stride: 1_000 });
    let reader = TaskScript {
        outstanding: 10,
        ..TaskScript::new(1, REGION, vec![reads])
    };
    let case = Case::serial(vec![reader], limits, Duration::from_millis(1));
    let mut run = Run::new(Box::new(Cfq::new(&limits)), &case, &Options::default());
    // Undecided while the first requests go out.
    run.run_until(Instant::ZERO).unwrap();
    assert_eq!(run.policy().hw_tag(), -1);
    run.run_until(at(60)).unwrap();
    assert_eq!(run.policy().hw_tag(), 1);
    run.run_to_end().unwrap();
    run.finish().unwrap();
}

/// Closed-loop sequential readers of 64 sectors (think time zero, one
/// request each) on the harness's serial device, depth 1, every request
/// served in `service`, from time zero to `end`: requests each task got.
fn run_readers(prios: &[IoPrio], service: Duration, end: Instant) -> Vec<u64> {
    let groups = vec![GroupId::ROOT; prios.len()];
    run_grouped_readers(
        Cfq::new(&QueueLimits::default()),
        prios,
        &groups,
        service,
        end,
    )
}

/// The same with task `i` in `groups[i]`, under `s`. Task ids count
/// from 0; every wait stays within CFQ's starvation bound (checked).
fn run_grouped_readers(
    s: Cfq,
    prios: &[IoPrio],
    groups: &[GroupId],
    service: Duration,
    end: Instant,
) -> Vec<u64> {
    use crate::harness::{Case, Layout, Options, Phase, Run, TaskScript, REGION};
    let tasks = (0..prios.len() as u32)
        .map(|i| {
            // 8 M sectors apart: 17 readers fit the default 80 GB.
            let base = REGION + u64::from(i) * 8_000_000;
            let reads = Phase::reads(u32::MAX, 64, Layout::Sequential);
            TaskScript {
                prio: prios[i as usize],
                group: groups[i as usize],
                ..TaskScript::new(i, base, vec![reads])
            }
        })
        .collect();
    let case = Case::serial(tasks, QueueLimits::default(), service);
    let mut run = Run::new(Box::new(s), &case, &Options::default());
    let checked = run.run_until(end).and_then(|()| run.finish());
    checked.unwrap_or_else(|v| panic!("{v}"));
    (0..prios.len() as u32)
        .map(|i| run.stats(TaskId(i)).requests())
        .collect()
}

#[test]
fn be_levels_share_time_in_the_ratio_of_their_slices() {
    let done = run_readers(
        &[IoPrio::be(0), IoPrio::be(7)],
        Duration::from_millis(2),
        at(20_000),
    );
    let ratio = done[0] as f64 / done[1] as f64;
    println!(
        "be/0 {} requests, be/7 {} requests, ratio {ratio:.2} (slices 180:40 = 4.5)",
        done[0], done[1]
    );
    assert!((4.0..5.0).contains(&ratio), "{ratio}");
}

#[test]
fn rt_takes_the_disk_with_shares_falling_by_level() {
    let mut prios: Vec<IoPrio> = (0..8).map(IoPrio::rt).collect();
    prios.extend((0..8).map(IoPrio::be));
    prios.push(IoPrio::idle());
    let done = run_readers(&prios, Duration::from_millis(2), at(30_000));
    println!("requests served per task (rt0..7, be0..7, idle): {done:?}");
    let rt = &done[..8];
    assert!(rt.iter().all(|&n| n > 0), "an RT level got nothing: {rt:?}");
    assert!(
        rt.windows(2).all(|w| w[0] > w[1]),
        "RT shares do not fall: {rt:?}"
    );
    assert!(
        done[8..].iter().all(|&n| n == 0),
        "BE/IDLE got disk time: {done:?}"
    );
}

#[test]
fn groups_share_the_disk_by_weight() {
    let mut tree = GroupTree::default();
    let heavy = tree.add("heavy", GroupId::ROOT, 200, Default::default());
    let light = tree.add("light", GroupId::ROOT, 100, Default::default());
    let mut s = Cfq::new(&QueueLimits::default());
    s.set_group_tree(&tree);
    let prios = [IoPrio::be(4), IoPrio::be(4)];
    let done = run_grouped_readers(
        s,
        &prios,
        &[heavy, light],
        Duration::from_millis(2),
        at(20_000),
    );
    let ratio = done[0] as f64 / done[1] as f64;
    println!(
        "weight 200 group: {} requests, weight 100 group: {} requests, ratio {ratio:.2}",
        done[0], done[1]
    );
    assert!((1.7..2.3).contains(&ratio), "{ratio}");
    // Same weights: even shares.
    let mut tree = GroupTree::default();
    let a = tree.add("a", GroupId::ROOT, 100, Default::default());
    let b = tree.add("b", GroupId::ROOT, 100, Default::default());
    let mut s = Cfq::new(&QueueLimits::default());
    s.set_group_tree(&tree);
    let done = run_grouped_readers(s, &prios, &[a, b], Duration::from_millis(2), at(20_000));
    let ratio = done[0] as f64 / done[1] as f64;
    assert!((0.9..1.1).contains(&ratio), "{ratio}");
}
