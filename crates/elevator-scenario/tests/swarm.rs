//! A short swarm in CI: random scenarios (policy with random tunables,
//! device, jobs, host processes, groups, faults, iocost, wbt), each run under the
//! invariant checker. `elevator swarm --seed S --runs N` runs a longer one;
//! `scripts/long-swarm.sh` the long one.

use elevator_scenario::swarm;

/// Runs in CI: about a minute on one core of the 2-core CI machine.
const RUNS: u64 = 60;

#[test]
fn random_scenarios_pass_the_checker() {
    let mut failures = Vec::new();
    let mut policies = std::collections::BTreeSet::new();
    let mut iocost = 0;
    let mut wbt = 0;
    let (mut requests, mut errors) = (0, 0);
    for seed in 1..=RUNS {
        let outcome = swarm::run_one(seed);
        policies.insert(outcome.generated.policy.clone());
        iocost += usize::from(outcome.generated.text.contains("[iocost]"));
        wbt += usize::from(outcome.generated.text.contains("[wbt]"));
        requests += outcome.requests;
        errors += outcome.errors;
        if let Some(f) = outcome.failure {
            failures.push(format!(
                "seed {seed} ({} on {}): {f}\n{}",
                outcome.generated.policy, outcome.generated.device, outcome.generated.text
            ));
        }
    }
    eprintln!(
        "{RUNS} runs, {} policies, {requests} requests, {errors} injected errors",
        policies.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        policies.len() >= 5,
        "the swarm reaches most policies: {policies:?}"
    );
    assert!(errors > 0, "faults were injected");
    assert!(iocost > 0, "some runs put iocost in front of the policy");
    assert!(wbt > 0, "some runs put wbt in front of the policy");
    assert!(requests > 10_000, "the runs did work: {requests} requests");
}

#[test]
fn a_seed_generates_the_same_scenario() {
    assert_eq!(swarm::generate(42).text, swarm::generate(42).text);
    assert_ne!(swarm::generate(42).text, swarm::generate(43).text);
}

/// Device profiles added to the registry after the seeds below were found.
const ADDED_SINCE: &[&str] = &["hdd-2009-laptop"];
/// Policies registered since those seeds failed.
const POLICIES_ADDED_SINCE: &[&str] = &["cfq-v10"];

/// Seeds that once failed, with the policy and device they drew. The unit
/// tests at the faulty component hold each bug; these replay the scenarios
/// that found them, and say so when the generator no longer draws them.
#[test]
fn seeds_that_once_failed_pass_the_checker() {
    for (seed, policy, device, bug) in [
        (
            852,
            "cfq-2003",
            "hdd-2009-ncq",
            "Faulty freed a timed-out command's slot early",
        ),
        (
            2843,
            "kyber",
            "hdd-2009-ncq",
            "a write into the read-ahead's segment",
        ),
        (
            2992,
            "bfq",
            "hdd-2009-ncq",
            "a write into the read-ahead's segment",
        ),
    ] {
        // The device list as it was when these seeds failed: profiles added
        // since would shift the draw.
        let then: Vec<&str> = elevator_device::builtin_profiles()
            .iter()
            .map(|(name, _)| *name)
            .filter(|name| !ADDED_SINCE.contains(name))
            .collect();
        let outcome = swarm::run_generated(swarm::generate_from(seed, &then, POLICIES_ADDED_SINCE));
        let drawn = (
            outcome.generated.policy.as_str(),
            outcome.generated.device.as_str(),
        );
        assert_eq!(
            drawn,
            (policy, device),
            "seed {seed} draws another scenario now"
        );
        if let Some(f) = outcome.failure {
            panic!("seed {seed} ({bug}): {f}\n{}", outcome.generated.text);
        }
    }
}
