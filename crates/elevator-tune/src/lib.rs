//! Probe, tune, verify: which scheduler and which settings for this device
//! and this workload?
//!
//! * [`probe`]: short microbenchmarks as a [`elevator_core::Workload`], so
//!   the same plan runs on a real device (through `elevator-uring`, the
//!   one crate with a real clock) and on a simulated one;
//!   [`fit`] turns what it measured into a device profile.
//! * [`objective`]: what "best" means (`minimize p99(reader)`,
//!   `maximize mb_s subject to p99(app) < 50ms`, `weights shares within
//!   10%`), evaluated on a run's per-job figures.
//! * [`space`]: the settings searched: the policies that honour what the
//!   workload uses, their tunables (around the kernel's defaults, in the
//!   registry's units) and the block settings the model has.
//! * [`search`]: exhaustive when the space is small, else the `tpe`
//!   crate's Tree-structured Parzen Estimator; evaluations in parallel
//!   (rayon) with early stopping; fixed seeds, so the same call gives the
//!   same ranking.
//! * [`eval`]: one setting on one workload in the simulator; the one
//!   function through which every setting is built and run.
//! * [`apply`]: the best setting as the shell lines and the udev rule that
//!   apply it to a Linux block device, and the kernel's default for the
//!   device type.
//! * [`verify`]: Kendall's tau between predicted and measured rankings.
//!
//! This crate belongs to the deterministic world: it never reads a clock
//! and never depends on the runtime or the CLI.

pub mod apply;
pub mod eval;
pub mod fit;
pub mod objective;
pub mod probe;
pub mod search;
pub mod space;
pub mod verify;

use elevator_sched::stack::{Origin, StackBuilder};
use elevator_sim::{Engine, EngineConfig};

/// Run `plan` on a simulated device (a built-in name or profile text via
/// [`elevator_device::parse`]) under `noop`, as the real probe runs on a
/// real one: the port is the same.
pub fn simulate_probe(
    plan: &probe::ProbePlan,
    mut device: Box<dyn elevator_device::Device>,
) -> Vec<probe::PhaseResult> {
    device.reseed(plan.seed);
    let noop = StackBuilder::new("noop", Origin::command_line()).expect("noop is registered");
    let config = EngineConfig {
        // Slots are not what the probe measures: enough for every depth.
        nr_requests: [plan.max_depth() as usize * 2, plan.max_depth() as usize * 2],
        ..EngineConfig::linux_26()
    };
    let (mut engine, _) = Engine::build(noop, device, config);
    let mut workload = probe::ProbeWorkload::new(plan.clone());
    engine.run(&mut workload);
    workload.into_results()
}
