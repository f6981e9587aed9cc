//! blk-throttle properties: limits hold over every window, held requests
//! are never lost, children never exceed their parents.

use elevator_core::{Duration, GroupId, GroupTree, Instant, IoMax, Op, QueueLimits, Request};
use elevator_sched::group::throttle::{Throttle, THROTL_SLICE};
use elevator_sched::{Dispatch, Scheduler};
use proptest::prelude::*;
use std::collections::BTreeSet;

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
        let inner = elevator_sched::find(policy).unwrap().build_default(&QueueLimits::default());
        let mut s = Throttle::new(inner, tree(rbps, wbps, riops));
        let mut inserted = BTreeSet::new();
        // (time, group, read, bytes) of every dispatched part.
        let mut passed: Vec<(Instant, usize, bool, u64)> = Vec::new();
        let mut group_of = std::collections::BTreeMap::new();
        let mut next = 0;
        let mut now = Instant::ZERO;
        let horizon = Instant::ZERO + Duration::from_secs(3600);
        loop {
            while next < reqs.len() && Instant::ZERO + Duration::from_millis(reqs[next].at_ms) <= now {
                let a = &reqs[next];
                let id = next as u64;
                // Spread sectors so merges are rare but possible.
                let sector = id * 4096;
                let mut r = if a.read { Request::read(id, 1 + a.group as u32, sector, a.sectors) } else { Request::write(id, 1 + a.group as u32, sector, a.sectors) };
                r.group = GroupId(a.group as u32);
                group_of.insert(r.id, a.group);
                inserted.insert(r.id);
                s.insert(r, now);
                next += 1;
            }
            let arrival = reqs.get(next).map(|a| Instant::ZERO + Duration::from_millis(a.at_ms));
            match s.dispatch(now) {
                Dispatch::Request(r) => {
                    for id in r.ids() {
                        prop_assert!(inserted.remove(&id), "{id:?} dispatched twice or invented");
                    }
                    let g = group_of[&r.id];
                    passed.push((now, g, r.op == Op::Read, r.bytes()));
                    s.complete(&r, now);
                }
                Dispatch::Wait { until } => {
                    prop_assert!(until > now);
                    now = arrival.map_or(until, |a| a.min(until));
                }
                Dispatch::Empty => match arrival {
                    Some(a) => now = a,
                    None => break,
                },
            }
            prop_assert!(now < horizon, "no progress");
        }
        prop_assert!(inserted.is_empty(), "lost: {inserted:?}");
        prop_assert_eq!(s.queued(), 0);

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
