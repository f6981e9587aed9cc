//! The group layers (blk-throttle's io.max, io.latency, blk-wbt,
//! io-throttle) wrapped
//! around every registered policy pass the same conformance checks: nothing
//! held is ever lost, duplicated or invented, and held requests are
//! eventually let through. Starvation bounds are the inner policy's
//! business and limits make waits as long as the limit says, so those
//! checks are off for throttle, io.latency and io-throttle; wbt promises a
//! bound of its own (the inner policy's, once per write ahead), checked.

use elevator_core::{Duration, GroupId, GroupTree, IoMax, IoThrottleLimits, QueueLimits};
use elevator_sched::group::iothrottle::IoThrottle;
use elevator_sched::group::latency::LatencyLimiter;
use elevator_sched::group::throttle::Throttle;
use elevator_sched::group::wbt::{Wbt, WbtParams};
use elevator_sched::harness::strategy;
use elevator_sched::harness::{run, Options};
use elevator_sched::registry;
use proptest::test_runner::TestCaseError;

const CASES: u32 = 96;

/// Groups 1-3 (the generator uses groups 0-3): a limited group, its limited
/// child, and a group with a latency target.
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

fn options() -> Options {
    Options {
        // A throttled group may have to wait a long time for its next pass.
        liveness_limit: Some(Duration::from_secs(3600)),
        check_starvation: false,
        ..Options::default()
    }
}

#[test]
fn throttle_and_latency_layers_conform_around_every_policy() {
    for ty in registry() {
        let mut runner = strategy::runner(CASES);
        let result = runner.run(&strategy::case(), |case| {
            let limits = case.device.limits;
            let inner = ty.build_default(&limits);
            let layered = Throttle::new(
                Box::new(LatencyLimiter::new(inner, tree(), &limits)),
                tree(),
            );
            run(Box::new(layered), &case, &options())
                .map_err(|v| TestCaseError::fail(v.to_string()))?;
            Ok(())
        });
        assert!(
            result.is_ok(),
            "{} behind throttle + io.latency: {result:?}",
            ty.name
        );
    }
}

/// io-throttle's rules on groups 1-3 (the generator uses groups 0-3): a
/// token bucket on bandwidth and a leaky one on I/Os, a leaky bandwidth
/// rule, and a token bucket on I/Os with a small bucket; the root unlimited.
fn io_throttle_tree() -> GroupTree {
    let mut t = GroupTree::default();
    let rules = [
        "bandwidth-max=2m:1 iops-max=200:0",
        "bandwidth-max=1m:0",
        "iops-max=100:1:4",
    ];
    for (k, r) in rules.iter().enumerate() {
        let g = t.add(&format!("g{k}"), GroupId::ROOT, 100, IoMax::default());
        t.set_io_throttle(g, r.parse::<IoThrottleLimits>().unwrap());
    }
    t
}

#[test]
fn io_throttle_conforms_around_every_policy() {
    for ty in registry() {
        let mut runner = strategy::runner(CASES);
        let result = runner.run(&strategy::case(), |case| {
            let limits = case.device.limits;
            let inner = ty.build_default(&limits);
            let layered = IoThrottle::new(inner, &io_throttle_tree());
            run(Box::new(layered), &case, &options())
                .map_err(|v| TestCaseError::fail(v.to_string()))?;
            Ok(())
        });
        assert!(result.is_ok(), "{} behind io-throttle: {result:?}", ty.name);
    }
}

/// wbt at the kernel's defaults for the case's device, with and without a
/// write cache, around every policy: conservation, counts, liveness, its
/// own structure (tokens, limits) and its starvation bound wherever the
/// inner policy promises one.
#[test]
fn wbt_conforms_around_every_policy_within_its_starvation_bound() {
    for write_cache in [true, false] {
        for ty in registry() {
            let mut runner = strategy::runner(CASES);
            let bounded = std::cell::Cell::new(0u32);
            let result = runner.run(&strategy::case(), |case| {
                let limits = case.device.limits;
                let inner = ty.build_default(&limits);
                let params = WbtParams {
                    write_cache,
                    ..WbtParams::default_for(&limits)
                };
                let layered = Wbt::new(inner, &limits, params);
                let report = run(Box::new(layered), &case, &Options::default())
                    .map_err(|v| TestCaseError::fail(v.to_string()))?;
                bounded.set(bounded.get() + u32::from(report.starvation_bound.is_some()));
                Ok(())
            });
            assert!(
                result.is_ok(),
                "{} behind wbt (write_cache {write_cache}): {result:?}",
                ty.name
            );
            let inner_bounded = ty
                .build_default(&QueueLimits::default())
                .starvation_bound(Duration::from_millis(1), 8)
                .is_some();
            assert_eq!(bounded.get() > 0, inner_bounded, "{}", ty.name);
        }
    }
}
