//! The conformance suite: every policy in `elevator_sched::registry()`,
//! with its default tunables, against random workloads and random devices.
//! A policy added to the registry is covered here with no edit.
//!
//! The properties are checked by the invariant checker
//! (`elevator_sched::check`, the one the simulator runs) inside the shared
//! harness (`elevator_sched::harness`): each id dispatched exactly once,
//! merges consistent, counts sane, waits in the future, liveness, nothing
//! left at the end, each request's wait within the policy's
//! `starvation_bound`, and the policy's own `check_invariants`. The tests
//! at the bottom run the same checks against broken toy policies and
//! expect them to fail.
//!
//! Runs are deterministic (a fixed proptest seed); `PROPTEST_CASES` and
//! `PROPTEST_RNG_SEED` change the number of cases and the seed. A failure
//! prints the policy, the violated property and the minimal case.

use elevator_core::{Duration, Instant};
use elevator_sched::harness::strategy;
use elevator_sched::harness::toys::{Fifo, Flaw, LateMerger, ReadsFirst};
use elevator_sched::harness::{run, Case, Options, RunReport};
use elevator_sched::{registry, Scheduler, SchedulerType};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{TestCaseError, TestError};

/// Cases per policy: noop and deadline take about a second for these in
/// release builds (CI runs `cargo test --release`) on one core.
const CASES_PER_POLICY: u32 = 512;

fn run_case(ty: &SchedulerType, case: &Case) -> Result<RunReport, TestCaseError> {
    let policy = ty.build_default(&case.device.limits);
    run(policy, case, &Options::default()).map_err(|v| TestCaseError::fail(v.to_string()))
}

fn check_policy(ty: &SchedulerType) -> Result<(), String> {
    let mut runner = strategy::runner(CASES_PER_POLICY);
    runner
        .run(&strategy::case(), |case| run_case(ty, &case).map(drop))
        .map_err(|e| {
            format!(
                "policy {} fails the conformance suite (proptest seed {}):\n{e}",
                ty.name,
                strategy::seed()
            )
        })
}

#[test]
fn every_registered_policy_conforms() {
    // One thread per policy; the suite's time is the slowest policy's.
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = registry()
            .iter()
            .map(|ty| s.spawn(move || check_policy(ty)))
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().expect("checker thread").err())
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The generated cases reach what the properties are about: merges, deep
/// queues, reads kept past `read_expire`, and runs many times longer than
/// `write_expire` (so a starved write would break deadline's bound; the
/// `ReadsFirst` test below shows it does). Without this, a change to the
/// generators could quietly make the suite toothless.
/// The 2003 scenarios run two policies off their defaults: deadline with
/// 2.5.61's batching and AS with the defaults of 2.5.74-2.6.1. Those
/// settings face the same suite.
#[test]
fn the_2003_settings_of_deadline_and_anticipatory_conform() {
    use elevator_sched::policy::{anticipatory, deadline};
    let variants: [(&SchedulerType, Vec<(&str, i64)>); 2] = [
        (&deadline::TYPE, vec![("rules", deadline::RULES_2_5_61)]),
        (&anticipatory::TYPE, anticipatory::DEFAULTS_2003_MS.to_vec()),
    ];
    std::thread::scope(|s| {
        for (ty, set) in &variants {
            s.spawn(move || {
                let t = ty.tunables(set.iter().copied()).expect("valid tunables");
                let mut runner = strategy::runner(CASES_PER_POLICY);
                runner
                    .run(&strategy::case(), |case| {
                        let policy = (ty.build)(&t, &case.device.limits);
                        run(policy, &case, &Options::default())
                            .map(drop)
                            .map_err(|v| TestCaseError::fail(v.to_string()))
                    })
                    .unwrap_or_else(|e| {
                        panic!(
                            "{} with {set:?} fails the conformance suite (proptest seed {}):\n{e}",
                            ty.name,
                            strategy::seed()
                        )
                    });
            });
        }
    });
}

#[test]
fn generated_cases_exercise_merges_queues_and_expiry() {
    const CASES: usize = 48;
    let deadline = elevator_sched::find("deadline").expect("deadline is registered");
    let mut runner = strategy::runner(CASES as u32);
    let strategy = strategy::case();
    let (mut inserted, mut merged, mut max_queued) = (0, 0, 0);
    let (mut longest_read_wait, mut longest_run) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..CASES {
        let case = strategy.new_tree(&mut runner).expect("a case").current();
        let report = run_case(deadline, &case).expect("deadline conforms");
        inserted += report.inserted;
        merged += report.merged_ids;
        max_queued = max_queued.max(report.max_queued);
        longest_read_wait = longest_read_wait.max(report.max_read_wait);
        longest_run = longest_run.max(report.end.since(Instant::ZERO));
    }
    eprintln!(
        "{CASES} cases: {inserted} requests, {merged} merged, max queued {max_queued}, \
         longest read wait {longest_read_wait}, longest run {longest_run}"
    );
    assert!(
        merged * 20 > inserted,
        "too few merges: {merged} of {inserted}"
    );
    assert!(max_queued >= 100, "queues stay short: at most {max_queued}");
    assert!(
        longest_read_wait > Duration::from_millis(500),
        "no read waited past deadline's read_expire: {longest_read_wait}"
    );
    assert!(
        longest_run > Duration::from_secs(30),
        "runs too short to starve a write past write_expire: {longest_run}"
    );
}

/// Run a toy through the generated cases and return the failure message.
fn expect_failure(build: impl Fn(&Case) -> Box<dyn Scheduler>, cases: u32) -> String {
    let mut runner = strategy::finder(cases);
    let result = runner.run(&strategy::case(), |case| {
        run(build(&case), &case, &Options::default())
            .map(drop)
            .map_err(|v| TestCaseError::fail(v.to_string()))
    });
    match result {
        Err(TestError::Fail(reason, _case)) => {
            eprintln!("caught: {reason}");
            reason.to_string()
        }
        Err(other) => panic!("unexpected proptest error: {other}"),
        Ok(()) => panic!("the suite did not catch a broken policy in {cases} cases"),
    }
}

#[test]
fn the_suite_catches_a_policy_that_starves_writes() {
    let message = expect_failure(|case| Box::new(ReadsFirst::new(&case.device.limits)), 256);
    assert!(message.contains("starvation"), "{message}");
    assert!(message.contains(" W"), "a write should starve: {message}");
}

#[test]
fn the_suite_catches_a_policy_that_loses_requests() {
    let message = expect_failure(|_| Box::new(Fifo::new(Flaw::Loses)), 64);
    assert!(message.contains("undispatched"), "{message}");
}

#[test]
fn the_suite_catches_a_policy_that_dispatches_twice() {
    let message = expect_failure(|_| Box::new(Fifo::new(Flaw::Duplicates)), 64);
    assert!(
        message.contains("dispatched twice") || message.contains("queued() ="),
        "{message}"
    );
}

#[test]
fn the_suite_catches_careless_merges() {
    let message = expect_failure(|_| Box::new(Fifo::new(Flaw::MergesCarelessly)), 64);
    assert!(
        message.contains("mixes in") || message.contains("max_sectors"),
        "{message}"
    );
}

#[test]
fn the_suite_catches_a_wait_in_the_past_empty_with_work_a_wrong_count_and_a_broken_structure() {
    for (flaw, expected) in [
        (Flaw::WaitsInThePast, "not in the future"),
        (Flaw::ForgetsToDispatch, "would never be served"),
        (Flaw::MiscountsQueued, "queued() ="),
        (Flaw::CorruptsItself, "check_invariants"),
    ] {
        let message = expect_failure(|_| Box::new(Fifo::new(flaw)), 64);
        assert!(message.contains(expected), "{flaw:?}: {message}");
    }
}

#[test]
fn the_suite_catches_a_policy_that_idles_forever() {
    let message = expect_failure(|_| Box::new(Fifo::new(Flaw::Stalls)), 64);
    assert!(message.contains("liveness"), "{message}");
}

#[test]
fn the_suite_catches_a_layer_that_leaks_the_slots_of_late_merges() {
    let message = expect_failure(
        |case| Box::new(LateMerger::new(&case.device.limits, false)),
        64,
    );
    assert!(message.contains("slots:"), "{message}");
}

#[test]
fn late_merges_that_give_their_slots_back_conform() {
    let mut runner = strategy::runner(64);
    let merged = std::cell::Cell::new(0);
    runner
        .run(&strategy::case(), |case| {
            let toy = Box::new(LateMerger::new(&case.device.limits, true));
            let report = run(toy, &case, &Options::default())
                .map_err(|v| TestCaseError::fail(v.to_string()))?;
            merged.set(merged.get() + report.merged_ids);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    // Late merges happened (or the test proves nothing).
    assert!(merged.get() > 0, "no late merge in 64 cases");
}
