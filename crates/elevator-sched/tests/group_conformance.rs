//! The group layers (blk-throttle's io.max, io.latency, io.cost, blk-wbt,
//! io-throttle) wrapped around every registered policy pass the same
//! conformance checks: nothing
//! held is ever lost, duplicated or invented, and held requests are
//! eventually let through. Starvation bounds are the inner policy's
//! business and limits make waits as long as the limit says, so those
//! checks are off for throttle, io.latency and io-throttle; wbt promises a
//! bound of its own (the inner policy's, once per write ahead), checked.

use elevator_core::{Duration, GroupId, GroupTree, IoMax, IoThrottleLimits, QueueLimits};
use elevator_sched::group::iocost_params::IocostSpec;
use elevator_sched::group::iothrottle::IoThrottle;
use elevator_sched::group::latency::LatencyLimiter;
use elevator_sched::group::registry::GROUP_LAYERS;
use elevator_sched::group::throttle::Throttle;
use elevator_sched::group::wbt::WbtSpec;
use elevator_sched::group::wbt::{Wbt, WbtParams};
use elevator_sched::group::{GroupLayerType, LayerContext, LayerSettings};
use elevator_sched::harness::strategy;
use elevator_sched::harness::toys;
use elevator_sched::harness::{run, Options};
use elevator_sched::registry;
use elevator_sched::stack::{Origin, StackBuilder};
use proptest::test_runner::TestCaseError;

const CASES: u32 = 96;

/// Groups 1-3 (the generator uses groups 0-3): a limited group, its limited
/// child (with an io-throttle rule too), and a group with a latency target.
fn tree() -> GroupTree {
    let mut t = GroupTree::default();
    let a = t.add(
        "a",
        GroupId::ROOT,
        100,
        "rbps=2m wbps=1m riops=200".parse::<IoMax>().unwrap(),
    );
    let b = t.add("b", a, 100, "rbps=1m wiops=100".parse::<IoMax>().unwrap());
    t.set_io_throttle(b, "bandwidth-max=1m:1".parse::<IoThrottleLimits>().unwrap());
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

/// What the shared layer check runs each layer with: the tree above (limits,
/// a latency target, weights), io.cost with its defaults and wbt at the
/// kernel's defaults, so every registered layer is on.
fn everything() -> LayerSettings {
    LayerSettings {
        iocost: Some(IocostSpec::default()),
        wbt: Some(WbtSpec {
            lat_usec: None,
            write_cache: true,
        }),
    }
}

/// The shared check of one layer: around every registered policy, on
/// generated cases, built as the stack builder builds it (`layer.build`
/// with the run's groups and settings), through the checker; starvation
/// within the layer's bound where it promises one.
fn check_layer(layer: &GroupLayerType, cases: u32) -> Result<(), String> {
    let settings = everything();
    for ty in registry() {
        let mut runner = strategy::runner(cases);
        let result = runner.run(&strategy::case(), |case| {
            let limits = case.device.limits;
            let mut inner = ty.build_default(&limits);
            let groups = tree();
            inner.set_groups(&groups);
            let cx = LayerContext {
                policy: ty,
                groups: &groups,
                limits: &limits,
                settings: &settings,
            };
            let layered = (layer.build)(inner, &cx);
            run(layered.scheduler, &case, &options_with_starvation())
                .map_err(|v| TestCaseError::fail(v.to_string()))?;
            Ok(())
        });
        result.map_err(|e| format!("{} around {}: {e}", layer.name, ty.name))?;
    }
    Ok(())
}

fn options_with_starvation() -> Options {
    Options {
        check_starvation: true,
        ..options()
    }
}

/// Every layer in the registry passes the shared check: a layer added to
/// `GROUP_LAYERS` is covered here with no edit.
#[test]
fn every_registered_layer_conforms_around_every_policy() {
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = GROUP_LAYERS
            .iter()
            .map(|layer| s.spawn(move || check_layer(layer, 24)))
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().expect("layer thread").err())
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The shared check can fail: a toy layer that loses what it holds fails
/// it, and the same toy without the flaw passes.
#[test]
fn the_shared_layer_check_fails_a_layer_that_loses_requests() {
    let lost = check_layer(&toys::LOSING_LAYER, 24).expect_err("a losing layer must fail");
    // The checker names a lost request at the end of a run ("never
    // dispatched (lost)") or, sooner, when the policy reports nothing
    // queued while inserted ids wait ("queued() = 0 with N ids
    // undispatched"); proptest's shrinking may end on either.
    assert!(
        lost.contains("lost") || lost.contains("never") || lost.contains("undispatched"),
        "{lost}"
    );
    check_layer(&toys::PASS_LAYER, 24).expect("the toy without its flaw conforms");
}

/// One registry line is all a layer needs: the builder stacks a toy layer
/// from a registry that lists it, in registry order, and shows it.
#[test]
fn the_builder_stacks_whatever_layer_the_registry_lists() {
    static WITH_TOY: [&GroupLayerType; 2] = [&toys::PASS_LAYER, &elevator_sched::group::wbt::TYPE];
    let limits = QueueLimits::default();
    let stack = StackBuilder::new("deadline", Origin::command_line())
        .unwrap()
        .groups(&tree())
        .layer_settings(everything())
        .layer_registry(&WITH_TOY)
        .build(&limits);
    let shown: Vec<&str> = stack.info.shown.iter().map(|(n, _)| *n).collect();
    assert_eq!(shown, ["toy-hold-one", "wbt"]);
    let alone = StackBuilder::new("deadline", Origin::command_line())
        .unwrap()
        .layer_registry(&WITH_TOY)
        .build(&limits);
    assert!(alone.info.shown.is_empty(), "no groups, no [wbt]: no layer");
}
