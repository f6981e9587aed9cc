//! blk-throttle properties: limits hold over every window, held requests
//! are never lost, children never exceed their parents. Arrivals are open
//! loop at generated times, run on the shared harness (inside the checker).

use elevator_core::{Duration, GroupId, GroupTree, Instant, IoMax, QueueLimits, TaskId};
use elevator_sched::group::throttle::{Throttle, THROTL_SLICE};
use elevator_sched::harness::{
    Case, DeviceSpec, Layout, OpKind, OpMix, Options, Phase, Run, Service, TaskScript, Workload,
    REGION,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Arrival {
    at_ms: u64,
    group: usize,
    read: bool,
    sectors: u32,
}

fn arrivals() -> impl Strategy<Value = Vec<Arrival>> {
    prop::collection::vec(
        (
            0u64..3000,
            0usize..4,
            any::<bool>(),
            prop::sample::select(vec![8u32, 64, 256, 2048]),
        )
            .prop_map(|(at_ms, group, read, sectors)| Arrival {
                at_ms,
                group,
                read,
                sectors,
            }),
        1..300,
    )
}

/// Groups: 1 = limited (bps and iops), 2 = child of 1 with looser limits,
/// 3 = unlimited. Limits are drawn by the test.
fn tree(rbps: u64, wbps: u64, riops: u64) -> GroupTree {
    let mut t = GroupTree::default();
    let a = t.add(
        "a",
        GroupId::ROOT,
        100,
        IoMax {
            rbps: Some(rbps),
            wbps: Some(wbps),
            riops: Some(riops),
            wiops: None,
        },
    );
    t.add(
        "b",
        a,
        100,
        IoMax {
            rbps: Some(rbps * 4),
            ..IoMax::default()
        },
    );
    t.add("c", GroupId::ROOT, 100, IoMax::default());
    t
}

/// Each arrival as a task of its own that issues one request at its time
/// (open loop), 4096 sectors from the previous one; a device that takes
/// every request at once and serves it in a nanosecond, so a request passes
/// the moment the layer lets it.
fn case(reqs: &[Arrival]) -> Case {
    let tasks = reqs
        .iter()
        .zip(1..)
        .map(|(a, task)| {
            let op = if a.read {
                OpKind::Read
            } else {
                OpKind::AsyncWrite
            };
            let one = Phase {
                ops: OpMix::Only(op),
                ..Phase::reads(1, a.sectors, Layout::Sequential)
            };
            TaskScript {
                group: GroupId(a.group as u32),
                start: Duration::from_millis(a.at_ms),
                ..TaskScript::new(task, REGION + u64::from(task) * 4096, vec![one])
            }
        })
        .collect();
    let nanosecond = Duration(1);
    Case {
        workload: Workload { tasks },
        device: DeviceSpec {
            limits: QueueLimits {
                queue_depth: 1024,
                max_sectors: 2048,
                ..QueueLimits::default()
            },
            service: Service::Uniform {
                min: nanosecond,
                max: nanosecond,
            },
            seed: 0,
        },
    }
}

fn options() -> Options {
    Options {
        // A throttled group may wait as long as its limit says.
        liveness_limit: None,
        check_starvation: false,
        ..Options::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn limits_hold_over_every_window_and_nothing_is_lost(
        mut reqs in arrivals(),
        rbps in 100_000u64..20_000_000,
        wbps in 100_000u64..20_000_000,
        riops in 5u64..500,
        policy in prop::sample::select(vec!["noop", "deadline"]),
    ) {
        reqs.sort_by_key(|a| a.at_ms);
        let case = case(&reqs);
        let inner = elevator_sched::find(policy).unwrap().build_default(&case.device.limits);
        let s = Throttle::new(inner, tree(rbps, wbps, riops));
        // The checker: nothing held is lost, duplicated or invented, and
        // every request passes in the end.
        let mut run = Run::new(Box::new(s), &case, &options());
        let checked = run.run_to_end().and_then(|()| run.finish());
        prop_assert!(checked.is_ok(), "{:?}", checked);
        // (time, group, read, bytes) of every dispatched part, in the order
        // the layer let them pass.
        let mut passed: Vec<(u64, (Instant, usize, bool, u64))> = reqs
            .iter()
            .zip(1..)
            .flat_map(|(a, task)| {
                let served = &run.stats(TaskId(task)).served;
                served.iter().map(|s| {
                    let bytes = u64::from(s.sectors) * 512;
                    (s.order, (s.dispatched, a.group, a.read, bytes))
                })
            })
            .collect();
        prop_assert_eq!(passed.len(), reqs.len());
        passed.sort_by_key(|p| p.0);
        let passed: Vec<_> = passed.into_iter().map(|p| p.1).collect();

        // Group a's subtree (a and its child b) against a's limits, over
        // every window that starts at a pass and spans at least one slice.
        let slice = THROTL_SLICE.as_secs_f64();
        for (read, bps) in [(true, rbps), (false, wbps)] {
            let sub: Vec<(f64, u64)> = passed.iter()
                .filter(|p| (p.1 == 1 || p.1 == 2) && p.2 == read)
                .map(|p| (p.0.as_secs_f64(), p.3))
                .collect();
            // Bytes passed in (t_i, t_j]: request i was paid for before t_i.
            for i in 0..sub.len() {
                let mut bytes = 0u64;
                for j in i + 1..sub.len() {
                    bytes += sub[j].1;
                    let w = (sub[j].0 - sub[i].0).max(slice);
                    // The limit, plus the one slice of credit a fresh slice starts with.
                    let limit = bps as f64 * (w + slice);
                    prop_assert!(bytes as f64 <= limit + 1.0,
                        "{} bytes in {w:.3}s > {limit:.0} (limit {bps} B/s)", bytes);
                }
            }
        }
        // Read IOPS of group a's subtree.
        let ios: Vec<f64> = passed.iter().filter(|p| (p.1 == 1 || p.1 == 2) && p.2).map(|p| p.0.as_secs_f64()).collect();
        for i in 0..ios.len() {
            for j in i + 1..ios.len() {
                let w = (ios[j] - ios[i]).max(slice);
                let n = (j - i) as f64;
                prop_assert!(n <= riops as f64 * (w + slice) + 1e-6, "{n} ios in {w:.3}s (limit {riops}/s)");
            }
        }
    }
}
