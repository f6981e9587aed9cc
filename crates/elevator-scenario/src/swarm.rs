//! Swarm testing: random scenarios, every run through the invariant checker.
//!
//! After TigerBeetle's VOPR and Groce et al.'s swarm testing (ISSTA 2012):
//! each run draws, from one seed, a policy with random tunables, a device
//! profile, a mix of direct jobs (reads, writes, random and sequential,
//! deep and shallow, with priorities and think times) and host processes
//! (`cat`, `dd`), control groups with weights, `io.max`
//! limits and latency targets, and device faults, each feature switched on
//! or off per run so that rare combinations come up. The run is a scenario
//! file like any other ([`generate`] returns its text), parsed and run with
//! the checker on, so a failure replays with `elevator run FILE --check`.
//!
//! A run is bounded in simulated time (`time_limit`), never by the wall
//! clock, so the same seed gives the same runs everywhere.

use crate::{run_policy, Scenario};
use elevator_core::Prng;
use std::fmt::Write;

/// Device profiles the swarm draws from (every built-in one).
fn devices() -> Vec<&'static str> {
    elevator_device::builtin_profiles()
        .iter()
        .map(|(name, _)| *name)
        .collect()
}

/// One generated scenario: its text and what it was drawn from.
#[derive(Clone, Debug)]
pub struct Generated {
    pub seed: u64,
    pub policy: String,
    pub device: String,
    pub text: String,
}

/// What one run of the swarm did.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub generated: Generated,
    /// Requests the jobs and processes completed (each part of a merged
    /// request counts).
    pub requests: u64,
    /// Errors the device injected that reached a job.
    pub errors: u64,
    /// The panic or error message, if the run failed.
    pub failure: Option<String>,
}

fn pick<'a, T>(prng: &mut Prng, items: &'a [T]) -> &'a T {
    &items[prng.below(items.len() as u64) as usize]
}

fn chance(prng: &mut Prng, p: f64) -> bool {
    prng.unit() < p
}

/// The scenario text of run `seed` (deterministic).
pub fn generate(seed: u64) -> Generated {
    generate_from(seed, &devices(), &[])
}

/// [`generate`] drawing the device from `devices` and the policy from the
/// registry without `policies_added_since`: a seed found when the registries
/// held fewer profiles or policies replays with the lists they had then.
pub fn generate_from(seed: u64, devices: &[&str], policies_added_since: &[&str]) -> Generated {
    let mut prng = Prng::derive(seed, "swarm");
    let registry: Vec<_> = elevator_sched::registry()
        .iter()
        .filter(|ty| !policies_added_since.contains(&ty.name))
        .collect();
    let ty = *pick(&mut prng, &registry);
    let device = pick(&mut prng, devices).to_string();
    let mut t = String::new();
    let _ = writeln!(t, "name = \"swarm-{seed}\"");
    let _ = writeln!(
        t,
        "description = \"swarm run {seed}: {} on {device}\"",
        ty.name
    );
    let _ = writeln!(t, "device = \"{device}\"");
    let _ = writeln!(t, "schedulers = [\"{}\"]", ty.name);
    let _ = writeln!(t, "seed = {seed}");
    let _ = writeln!(t, "time_limit = \"{}s\"", 5 + prng.below(40));
    t.push_str("\n[result]\nname = \"aggregate\"\nunit = \"MB/s\"\nmetric = \"aggregate_mb_s\"\n");

    // Tunables: each scaled by a random factor where the policy accepts it.
    let mut tunables = Vec::new();
    for tunable in ty.tunables {
        if !chance(&mut prng, 0.3) {
            continue;
        }
        let factor = *pick(&mut prng, &[0.0, 0.25, 0.5, 2.0, 4.0]);
        let value = (tunable.default as f64 * factor) as i64;
        if ty.tunables([(tunable.name, value)]).is_ok() {
            tunables.push((tunable.name, value));
        }
    }
    if !tunables.is_empty() {
        let _ = writeln!(t, "\n[sched.\"{}\"]", ty.name);
        for (name, value) in &tunables {
            let _ = writeln!(t, "{name} = {value}");
        }
    }
    if chance(&mut prng, 0.3) {
        let _ = writeln!(t, "\n[block]\nnr_requests = {}", 1 + prng.below(256));
    }
    if chance(&mut prng, 0.5) {
        let _ = writeln!(
            t,
            "\n[faults]\neio_rate = {}\ntimeout_rate = {}\nstall_rate = {}\ntimeout = \"{}ms\"\nstall = \"{}ms\"\neio_at = [\"{}ms\"]",
            prng.below(50) as f64 / 1000.0,
            prng.below(5) as f64 / 1000.0,
            prng.below(50) as f64 / 1000.0,
            100 + prng.below(3000),
            1 + prng.below(500),
            prng.below(3000),
        );
    }

    // Groups.
    let groups = if chance(&mut prng, 0.4) {
        1 + prng.below(3)
    } else {
        0
    };
    for g in 0..groups {
        let _ = writeln!(
            t,
            "\n[[group]]\nname = \"g{g}\"\nweight = {}",
            10 + prng.below(990)
        );
        if chance(&mut prng, 0.3) {
            let _ = writeln!(
                t,
                "io_max = \"rbps={} wiops={}\"",
                1_000_000 + prng.below(50_000_000),
                10 + prng.below(2000)
            );
        }
        if chance(&mut prng, 0.2) {
            let _ = writeln!(t, "latency_target = \"{}ms\"", 1 + prng.below(50));
        }
    }
    let group_of = |prng: &mut Prng| -> Option<String> {
        (groups > 0 && chance(prng, 0.7)).then(|| format!("g{}", prng.below(groups)))
    };

    // Direct jobs.
    let jobs = prng.below(5) + usize::from(groups > 0) as u64;
    for j in 0..jobs {
        let rw = *pick(
            &mut prng,
            &["read", "write", "randread", "randwrite", "randrw"],
        );
        let bs = pick(&mut prng, &["4k", "16k", "64k", "128k", "1m"]);
        let _ = writeln!(
            t,
            "\n[[job]]\nname = \"j{j}\"\nrw = \"{rw}\"\nbs = \"{bs}\"\nregion = \"{}m\"\noffset = \"{}m\"\niodepth = {}\nruntime = \"{}s\"",
            // Regions and offsets fit the smallest profile (a 4 GB SD card)
            // with four instances side by side.
            1 + prng.below(512),
            prng.below(1024),
            1 + prng.below(32),
            1 + prng.below(20),
        );
        if chance(&mut prng, 0.3) {
            let _ = writeln!(t, "count = {}", 1 + prng.below(4));
        }
        if rw.contains("write") {
            let _ = writeln!(t, "sync = {}", chance(&mut prng, 0.5));
        }
        if chance(&mut prng, 0.3) {
            let prio = pick(&mut prng, &["rt/0", "rt/4", "be/0", "be/7", "idle"]);
            let _ = writeln!(t, "prio = \"{prio}\"");
        }
        if chance(&mut prng, 0.2) {
            let _ = writeln!(t, "think = \"{}ms\"", 1 + prng.below(20));
        }
        if let Some(g) = group_of(&mut prng) {
            let _ = writeln!(t, "group = \"{g}\"");
        }
    }

    // Host processes.
    if jobs == 0 || chance(&mut prng, 0.4) {
        t.push_str("\n[host]\npreset = \"linux-2.6\"\n");
        let processes = 1 + prng.below(3);
        for p in 0..processes {
            let size = 1 + prng.below(64);
            let _ = writeln!(
                t,
                "\n[[files]]\nname = \"f{p}\"\nkind = \"file\"\nsize = \"{size}m\""
            );
            let kind = *pick(&mut prng, &["cat", "dd"]);
            let _ = writeln!(
                t,
                "\n[[process]]\nname = \"p{p}\"\nkind = \"{kind}\"\nfiles = \"f{p}\""
            );
            if kind != "cat" {
                let _ = writeln!(t, "bs = \"{}k\"\nsize = \"{size}m\"", 4 << prng.below(8));
            }
            if let Some(g) = group_of(&mut prng) {
                let _ = writeln!(t, "group = \"{g}\"");
            }
        }
    }
    // iocost in front of the policy, from its own stream so that adding it
    // left every other draw of a seed as it was.
    let mut iocost = Prng::derive(seed, "swarm-iocost");
    if groups > 0 && chance(&mut iocost, 0.3) {
        let min = 1 + iocost.below(100);
        let _ = writeln!(
            t,
            "\n[iocost]\nqos = \"enable=1 rpct={} rlat={} wpct={} wlat={} min={min} max={}\"",
            iocost.below(100),
            100 + iocost.below(100_000),
            iocost.below(100),
            100 + iocost.below(100_000),
            min + iocost.below(1000),
        );
        if chance(&mut iocost, 0.5) {
            let _ = writeln!(
                t,
                "model = \"ctrl=user model=linear rbps={} rrandiops={} wrandiops={}\"",
                1_000_000 + iocost.below(4_000_000_000),
                1 + iocost.below(500_000),
                1 + iocost.below(500_000),
            );
        }
    }
    // Writeback throttling in front of the policy (off under bfq and cfq,
    // or with iocost on), from its own stream likewise.
    let mut wbt = Prng::derive(seed, "swarm-wbt");
    if chance(&mut wbt, 0.3) {
        let lat = match wbt.below(3) {
            0 => "\"default\"".to_string(),
            _ => (100 + wbt.below(100_000)).to_string(),
        };
        let cache = if chance(&mut wbt, 0.5) {
            "write back"
        } else {
            "write through"
        };
        let _ = writeln!(t, "\n[wbt]\nlat_usec = {lat}\nwrite_cache = \"{cache}\"");
    }
    Generated {
        seed,
        policy: ty.name.to_string(),
        device,
        text: t,
    }
}

/// Generate and run scenario `seed` under the checker, catching a panic.
/// A scenario the parser rejects counts as a failure too: the generator
/// must only write valid files.
pub fn run_one(seed: u64) -> Outcome {
    run_generated(generate(seed))
}

/// Run a generated scenario under the checker, as [`run_one`] does.
pub fn run_generated(generated: Generated) -> Outcome {
    let seed = generated.seed;
    let file = format!("swarm-{seed}.toml");
    let result = std::panic::catch_unwind(|| -> Result<(u64, u64), String> {
        let scenario = Scenario::parse(&file, &generated.text).map_err(|e| e.to_string())?;
        let report = run_policy(
            &scenario,
            &generated.policy,
            &generated.device,
            seed,
            &[],
            true,
        )
        .map_err(|e| e.to_string())?;
        let requests = report.jobs.iter().map(|j| j.ios + j.errors).sum();
        let errors = report.jobs.iter().map(|j| j.errors).sum();
        Ok((requests, errors))
    });
    let (requests, errors, failure) = match result {
        Ok(Ok((r, e))) => (r, e, None),
        Ok(Err(message)) => (0, 0, Some(message)),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic without a message".into());
            (0, 0, Some(message))
        }
    };
    Outcome {
        generated,
        requests,
        errors,
        failure,
    }
}
