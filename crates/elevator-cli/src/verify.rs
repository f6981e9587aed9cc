//! `tune --verify TARGET`: the kernel's default and the top settings, run
//! on the real target through the io_uring runtime (our policies in front
//! of it, the target's own kernel scheduler below), each several times;
//! predicted beside measured (median of the runs) and Kendall's tau
//! between the two rankings. fio job files only: they run unchanged on
//! either engine. Block settings are the simulator's (the runtime has no
//! request slots); the runtime runs the policy and its tunables.

use crate::tune::{measured_value, predicted, TuneOptions};
use anyhow::{anyhow, bail, Result};
use elevator_core::QueueLimits;
use elevator_tune::eval::{fio_figures, TuneWorkload};
use elevator_tune::objective::Objective;
use elevator_tune::search::SearchResult;
use elevator_tune::space::Setting;
use elevator_tune::verify::{kendall_tau, median};
use std::io::Write;
use std::path::Path;

/// Largest merged request on the runtime (`BLK_DEF_MAX_SECTORS`).
const MAX_SECTORS: u32 = 2560;

pub fn verify(
    o: &TuneOptions,
    workload: &TuneWorkload,
    objective: &Objective,
    r: &SearchResult,
    kernel_default: &Setting,
    target: &Path,
    out: &mut Vec<u8>,
) -> Result<()> {
    let TuneWorkload::Fio(file) = workload else {
        bail!("--verify runs fio job files (a scenario or trace has no real-device form yet)");
    };
    // The default first, then the best distinct settings.
    let mut settings = vec![kernel_default.clone()];
    for t in &r.ranked {
        if settings.len() >= o.verify_settings {
            break;
        }
        if t.score.is_ok() && !settings.contains(&t.setting) {
            settings.push(t.setting.clone());
        }
    }
    let depth: usize = file
        .jobs
        .iter()
        .map(|j| j.depth as usize * j.o.numjobs as usize)
        .sum::<usize>()
        .max(1);
    let mut measured: Vec<Vec<f64>> = vec![Vec::new(); settings.len()];
    for run in 0..o.verify_runs {
        for (i, s) in settings.iter().enumerate() {
            eprint!(
                "\rverify: run {}/{} setting {}/{} {}\x1b[K",
                run + 1,
                o.verify_runs,
                i + 1,
                settings.len(),
                s
            );
            let t = elevator_uring::probe::open_target(target, file.writes(), o.allow_write)?;
            let bytes = t.bytes;
            let (mut w, groups) = file.on_target(bytes, o.seed).map_err(|e| anyhow!("{e}"))?;
            let policy = elevator_sched::find(&s.policy)
                .ok_or_else(|| anyhow!("unknown scheduler {:?}", s.policy))?;
            let tunables = policy
                .tunables(s.tunables.iter().map(|(k, v)| (k.as_str(), *v)))
                .map_err(|e| anyhow!("{e}"))?;
            let limits = QueueLimits {
                rotational: elevator_uring::probe::sysfs(target)
                    .rotational
                    .unwrap_or(false),
                queue_depth: depth as u32,
                max_sectors: MAX_SECTORS,
                capacity: bytes / 512,
            };
            let mut sched = (policy.build)(&tunables, &limits);
            if groups.len() > 1 {
                sched.set_groups(&groups);
            }
            let end = elevator_uring::probe::run(t, sched, depth, &mut w)?;
            let figures = fio_figures(file, &w, &groups, end);
            measured[i].push(measured_value(objective, &figures)?);
        }
    }
    eprintln!();
    let goal = &objective.goals[0].metric;
    writeln!(
        out,
        "verify on {}: {} settings, {} runs each through io_uring (median), {} {}",
        target.display(),
        settings.len(),
        o.verify_runs,
        goal,
        goal.name.unit()
    )?;
    writeln!(
        out,
        "  {:<52} {:>12} {:>12} {:>16}",
        "setting", "predicted", "measured", "runs"
    )?;
    let mut pred = Vec::new();
    let mut meas = Vec::new();
    for (s, m) in settings.iter().zip(&measured) {
        let p = predicted(r, s).unwrap_or(f64::NAN);
        let med = median(m).unwrap_or(f64::NAN);
        let runs: Vec<String> = m.iter().map(|v| format!("{v:.3}")).collect();
        let mut label = s.to_string();
        if s == kernel_default {
            label = format!("{label} (default)");
        }
        let label: String = label.chars().take(52).collect();
        let runs: String = runs.join(" ").chars().take(16).collect();
        writeln!(out, "  {label:<52} {p:>12.3} {med:>12.3} {runs:>16}")?;
        if p.is_finite() && med.is_finite() {
            pred.push(p);
            meas.push(med);
        }
    }
    match kendall_tau(&pred, &meas) {
        Some(tau) => writeln!(
            out,
            "Kendall's tau between predicted and measured: {tau:.2} ({} settings)",
            pred.len()
        )?,
        None => writeln!(
            out,
            "Kendall's tau: undefined (ties or fewer than two settings)"
        )?,
    }
    Ok(())
}
