//! iocost (`io.cost`) as a group layer: it conforms around every
//! registered policy, within its own starvation bound, and its QoS control
//! lowers vrate to the device's rate when the cost model overestimates it.
//! (That it then holds `rlat` on a device with a finite queue is shown
//! through the simulator on the NVMe profile, in elevator-scenario's
//! `tests/iocost.rs`.)

use elevator_core::{Duration, GroupId, GroupTree, Instant, IoMax, QueueLimits, TaskId};
use elevator_sched::group::iocost::IoCost;
use elevator_sched::group::iocost_params::{ModelSpec, QosSpec};
use elevator_sched::harness::strategy;
use elevator_sched::harness::{
    run, Case, DeviceSpec, Layout, Options, Phase, Run, Service, TaskScript, Workload, REGION,
};
use elevator_sched::registry;
use proptest::test_runner::TestCaseError;

const CASES: u32 = 96;

/// Groups 1-3 (the generator uses groups 0-3): `a` (100) with a child `b`
/// (300), so `a`'s own I/O passes uncharged while `b` is active as the
/// kernel's leaf-only rule says, and `c` (1000) beside `a`.
fn tree() -> GroupTree {
    let mut t = GroupTree::default();
    let a = t.add("a", GroupId::ROOT, 100, IoMax::default());
    t.add("b", a, 300, IoMax::default());
    t.add("c", GroupId::ROOT, 1000, IoMax::default());
    t
}

#[test]
fn iocost_conforms_around_every_policy_within_its_starvation_bound() {
    let qos: QosSpec = "enable=1 rpct=90 rlat=2000 wpct=90 wlat=5000"
        .parse()
        .unwrap();
    for (label, qos) in [("auto", None), ("rpct=90 rlat=2ms", Some(&qos))] {
        for ty in registry() {
            let mut runner = strategy::runner(CASES);
            let bounded = std::cell::Cell::new(0u32);
            let result = runner.run(&strategy::case(), |case| {
                let limits = case.device.limits;
                let inner = ty.build_default(&limits);
                let layered = IoCost::new(inner, &tree(), &limits, None, qos);
                let report = run(Box::new(layered), &case, &Options::default())
                    .map_err(|v| TestCaseError::fail(v.to_string()))?;
                bounded.set(bounded.get() + u32::from(report.starvation_bound.is_some()));
                Ok(())
            });
            assert!(
                result.is_ok(),
                "{} behind iocost ({label}): {result:?}",
                ty.name
            );
            // The bound is the inner policy's plus iocost's: policies that
            // promise one keep promising it behind the layer.
            let inner_bounded = ty
                .build_default(&QueueLimits::default())
                .starvation_bound(Duration::from_millis(1), 8)
                .is_some();
            assert_eq!(bounded.get() > 0, inner_bounded, "{} ({label})", ty.name);
        }
    }
}

/// A device that serves one request at a time, `SERVICE` each, in arrival
/// order, with room for every request: completion latency grows with the
/// number in flight, as a deep queue's does.
const SERVICE: Duration = Duration::from_micros(100);

struct Outcome {
    vrate_pct: f64,
    /// Read latency (dispatch to completion) p95 over the second half.
    p95: Duration,
    completed: u64,
    /// Share of those reads slower than [`RLAT`], in percent.
    over_pct: f64,
}

/// The read latency target of the QoS test.
const RLAT: Duration = Duration::from_millis(5);

/// A deep flash queue (1024 tags) on the default 80 GB.
fn deep_queue() -> QueueLimits {
    QueueLimits {
        rotational: false,
        queue_depth: 1024,
        ..QueueLimits::default()
    }
}

/// Task `task` of `group` issuing random 4 KiB reads over the whole
/// device, `outstanding` at a time, each `think` after it may.
fn random_reader(task: u32, group: GroupId, outstanding: u32, think: Duration) -> TaskScript {
    let span = deep_queue().capacity - 3 * REGION;
    let reads = Phase::reads(u32::MAX, 8, Layout::Random { span }).think(think);
    TaskScript {
        group,
        outstanding,
        ..TaskScript::new(task, REGION, vec![reads])
    }
}

/// `tasks` under `c` on a device serving as `service` for `secs` seconds,
/// on the harness (inside the checker, within iocost's starvation bound).
fn run_iocost(c: IoCost, tasks: Vec<TaskScript>, service: Service, secs: u64) -> Run<IoCost> {
    let case = Case {
        workload: Workload { tasks },
        device: DeviceSpec {
            limits: deep_queue(),
            service,
            seed: 7,
        },
    };
    let mut run = Run::new(Box::new(c), &case, &Options::default());
    let end = Instant::ZERO + Duration::from_secs(secs);
    let checked = run.run_until(end).and_then(|()| run.finish());
    checked.unwrap_or_else(|v| panic!("{v}"));
    run
}

/// Two groups (100 and 300) each keep `depth` random 4 KiB reads
/// outstanding for `secs` seconds, under iocost with `model` and `qos`.
fn closed_loop(model: &str, qos: Option<&QosSpec>, depth: u32, secs: u64) -> Outcome {
    let mut tree = GroupTree::default();
    let groups = [
        tree.add("light", GroupId::ROOT, 100, IoMax::default()),
        tree.add("heavy", GroupId::ROOT, 300, IoMax::default()),
    ];
    let limits = deep_queue();
    let model: ModelSpec = model.parse().unwrap();
    let noop = elevator_sched::find("noop").unwrap().build_default(&limits);
    let c = IoCost::new(noop, &tree, &limits, Some(&model), qos);
    let tasks = (1..)
        .zip(groups)
        .map(|(task, g)| random_reader(task, g, depth, Duration::ZERO))
        .collect();
    let serial = Service::Serial {
        fixed: SERVICE,
        per_sector: Duration::ZERO,
        seek: Duration::ZERO,
    };
    let run = run_iocost(c, tasks, serial, secs);
    let half = Instant::ZERO + Duration::from_secs(secs / 2);
    let served = || (1..=2).flat_map(|t| &run.stats(TaskId(t)).served);
    let mut late: Vec<Duration> = served()
        .filter(|s| s.completed >= half)
        .map(|s| s.completed.since(s.dispatched))
        .collect();
    late.sort();
    let over = late.iter().filter(|l| **l > RLAT).count();
    Outcome {
        vrate_pct: run.policy().vrate_pct(),
        p95: late[late.len() * 95 / 100],
        completed: served().count() as u64,
        over_pct: over as f64 * 100.0 / late.len() as f64,
    }
}

#[test]
fn qos_lowers_vrate_to_the_device_rate_and_cuts_read_latency() {
    // The model believes the device does 20000 random reads a second; it
    // does 10000. Without latency targets (and vrate capped at 100 %)
    // iocost admits twice what the device serves, so all 128 reads sit in
    // the device, 12.8 ms deep.
    const MODEL: &str = "ctrl=user model=linear rbps=4000000000 rseqiops=20000 rrandiops=20000";
    let free: QosSpec = "enable=1 max=100".parse().unwrap();
    let free = closed_loop(MODEL, Some(&free), 64, 8);
    // rpct=95 rlat=5ms: busy periods (over 5 % of reads slower than 5 ms)
    // push vrate down by vrate_adj_pct's steps, met ones with groups short
    // of vtime push it up.
    let qos: QosSpec = "enable=1 ctrl=user rpct=95 rlat=5000 wpct=95 wlat=5000 min=25 max=100"
        .parse()
        .unwrap();
    let held = closed_loop(MODEL, Some(&qos), 64, 8);
    println!(
        "max=100: vrate {:.0} %, p95 {}, {:.0} % over rlat, {} reads",
        free.vrate_pct, free.p95, free.over_pct, free.completed
    );
    println!(
        "rpct=95 rlat=5ms: vrate {:.0} %, p95 {}, {:.0} % over rlat, {} reads",
        held.vrate_pct, held.p95, held.over_pct, held.completed
    );
    assert!((free.vrate_pct - 100.0).abs() < 1.0, "{}", free.vrate_pct);
    assert!(free.over_pct > 99.0, "{}", free.over_pct);
    // vrate settles near the device's real rate, half the model's.
    assert!((35.0..65.0).contains(&held.vrate_pct), "{}", held.vrate_pct);
    // The device's queue, and so read latency, is cut, but rlat is not
    // held: on this FIFO every read meets the same queue, so a period's
    // missed share is 0 or 100 % and the kernel's controller runs a limit
    // cycle. busy_level counts consecutive periods on one side, vrate moves
    // only from |busy_level| 4 on, by 1 % (2 % from 20), and the queue
    // integrates vrate's error: vrate swings between about 41 and 57 %
    // (the device's rate is 50 %) in cycles of about 50 periods, the queue
    // filling to all 128 reads and draining in turn. The NVMe test in
    // elevator-scenario, with a finite queue and reads spread over it,
    // holds the target.
    assert!(
        held.p95.mul(10) < free.p95.mul(8),
        "{} vs {}",
        held.p95,
        free.p95
    );
    assert!(held.over_pct < 60.0, "{}", held.over_pct);
    // The device still does almost all of its work.
    assert!(held.completed * 10 > free.completed * 9);
}

/// Group `light` issues one random read every `light_every` (open loop:
/// it never waits for its reads), group `heavy` keeps 32 outstanding, on a
/// device that serves each in 10 µs; vrate is pinned at 100 % of a model
/// of 1000 random reads a second. Returns both groups' completed reads per
/// second over `secs` seconds.
fn light_and_heavy(light_every: Duration, secs: u64) -> (f64, f64) {
    let mut tree = GroupTree::default();
    let light = tree.add("light", GroupId::ROOT, 100, IoMax::default());
    let heavy = tree.add("heavy", GroupId::ROOT, 100, IoMax::default());
    let limits = deep_queue();
    let model: ModelSpec = "ctrl=user rbps=40000000000 rseqiops=1000 rrandiops=1000"
        .parse()
        .unwrap();
    let qos: QosSpec = "enable=1 min=100 max=100".parse().unwrap();
    let noop = elevator_sched::find("noop").unwrap().build_default(&limits);
    let c = IoCost::new(noop, &tree, &limits, Some(&model), Some(&qos));
    let tasks = vec![
        random_reader(1, light, u32::MAX, light_every),
        random_reader(2, heavy, 32, Duration::ZERO),
    ];
    let ten_us = Duration::from_micros(10);
    let parallel = Service::Uniform {
        min: ten_us,
        max: ten_us,
    };
    let run = run_iocost(c, tasks, parallel, secs);
    let s = secs as f64;
    let rate = |task| run.stats(TaskId(task)).requests() as f64 / s;
    (rate(1), rate(2))
}

#[test]
fn a_light_group_donates_its_unused_share_to_a_busy_one() {
    // Equal weights: each group's share is 500 reads a second. The light
    // group uses 100 of its 500; the heavy one gets most of the rest
    // (light's hweight_inuse falls to about usage × 1.25 + 2 %) instead of
    // being held at 500.
    let (light, heavy) = light_and_heavy(Duration::from_millis(10), 10);
    println!("light {light:.0} reads/s, heavy {heavy:.0} reads/s");
    assert!((95.0..=105.0).contains(&light), "light got {light}");
    assert!(heavy > 750.0, "heavy got {heavy}: no donation");
    // Never more than the device's vtime allows in all.
    assert!(light + heavy <= 1000.0 * 1.06, "{light} + {heavy}");
    // When both want everything, each gets its share.
    let (light, heavy) = light_and_heavy(Duration::from_micros(100), 10);
    println!("both busy: light {light:.0} reads/s, heavy {heavy:.0} reads/s");
    assert!((heavy / light - 1.0).abs() < 0.1, "{light} vs {heavy}");
}
