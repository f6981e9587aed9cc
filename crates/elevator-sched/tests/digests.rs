//! Conformance digests: what each registered policy, alone and behind the
//! group layers, dispatches on the conformance suite's first generated
//! cases, folded into one number per policy and kept in
//! `testdata/digests/conformance.txt`.
//!
//! The checker's `CheckReport::digest` hashes every dispatch (time, ids,
//! extent), so two builds agree on a line exactly when the policy made the
//! same decisions at the same times. A refactor that must not change
//! behaviour keeps this file as it is; a change meant to move a policy
//! regenerates it with `UPDATE_EXPECT=1` and says which lines moved and why.

use elevator_core::{Duration, GroupId, GroupTree, IoMax, QueueLimits};
use elevator_sched::group::iocost::IoCost;
use elevator_sched::group::latency::LatencyLimiter;
use elevator_sched::group::throttle::Throttle;
use elevator_sched::group::wbt::{Wbt, WbtParams};
use elevator_sched::harness::{run, strategy, Case, Options};
use elevator_sched::{registry, Scheduler, SchedulerType};
use proptest::strategy::{Strategy, ValueTree};
use std::fmt::Write as _;

/// Cases per policy and stack: enough that every policy merges, expires and
/// idles somewhere in them, few enough to run in seconds.
const CASES: usize = 24;

const EXPECTED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/testdata/digests/conformance.txt"
);

/// Groups 1-3 of the generated cases: a limited group, its limited child and
/// a group with a latency target (as `group_conformance.rs`).
fn tree() -> GroupTree {
    let mut t = GroupTree::default();
    let a = t.add(
        "a",
        GroupId::ROOT,
        100,
        "rbps=2m wbps=1m riops=200".parse::<IoMax>().unwrap(),
    );
    t.add("b", a, 100, "rbps=1m wiops=100".parse::<IoMax>().unwrap());
    let c = t.add("c", GroupId::ROOT, 300, IoMax::default());
    t.set_latency_target(c, Some(Duration::from_millis(5)));
    t
}

/// The stacks each policy is digested in.
const STACKS: [&str; 4] = ["alone", "throttle+latency", "iocost", "wbt"];

fn stacked(stack: &str, ty: &SchedulerType, limits: &QueueLimits) -> Box<dyn Scheduler> {
    let mut inner = ty.build_default(limits);
    inner.set_groups(&tree());
    match stack {
        "alone" => inner,
        "throttle+latency" => Box::new(Throttle::new(
            Box::new(LatencyLimiter::new(inner, tree(), limits)),
            tree(),
        )),
        "iocost" => Box::new(IoCost::new(inner, &tree(), limits, None, None)),
        "wbt" => Box::new(Wbt::new(inner, limits, WbtParams::default_for(limits))),
        other => unreachable!("no stack {other}"),
    }
}

fn cases() -> Vec<Case> {
    let mut runner = strategy::runner(CASES as u32);
    let strategy = strategy::case();
    (0..CASES)
        .map(|_| strategy.new_tree(&mut runner).expect("a case").current())
        .collect()
}

fn digests() -> String {
    let cases = cases();
    let options = Options {
        liveness_limit: Some(Duration::from_secs(3600)),
        check_starvation: false,
        ..Options::default()
    };
    let lines: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = registry()
            .iter()
            .map(|ty| {
                let cases = &cases;
                s.spawn(move || {
                    let mut line = format!("{:<20}", ty.name);
                    for stack in STACKS {
                        let mut folded: u64 = 0xcbf2_9ce4_8422_2325;
                        for case in cases {
                            let policy = stacked(stack, ty, &case.device.limits);
                            let report = run(policy, case, &options).unwrap_or_else(|v| {
                                panic!("{} ({stack}) fails a generated case: {v}", ty.name)
                            });
                            folded = (folded ^ report.digest).wrapping_mul(0x0100_0000_01b3);
                        }
                        let _ = write!(line, " {stack}={folded:016x}");
                    }
                    line
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("digest thread"))
            .collect()
    });
    let mut out = format!(
        "# policy, then per stack the fold of CheckReport::digest over the first {CASES} \
         generated cases\n"
    );
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

#[test]
fn every_policy_dispatches_as_recorded() {
    let got = digests();
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(EXPECTED, &got).expect("writing testdata/digests/conformance.txt");
        return;
    }
    let want = std::fs::read_to_string(EXPECTED)
        .expect("testdata/digests/conformance.txt (regenerate with UPDATE_EXPECT=1)");
    assert_eq!(
        got, want,
        "conformance digests moved: a policy or layer now dispatches differently \
         (UPDATE_EXPECT=1 rewrites testdata/digests/conformance.txt if that is meant)"
    );
}
