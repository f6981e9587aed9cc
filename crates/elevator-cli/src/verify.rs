//! `tune --verify TARGET`: the kernel's default and the top settings, run
//! on the real target through the io_uring runtime (our policies in front
//! of it, the target's own kernel scheduler below), each several times;
//! predicted beside measured (median of the runs) and Kendall's tau
//! between the two rankings. fio job files only: they run unchanged on
//! either engine. Block settings are the simulator's (the runtime has no
//! request slots); the runtime runs the policy and its tunables. With
//! `--kernel` each setting goes to the kernel's own block layer through
//! sysfs ([`crate::kernel::SysfsGuard`], restored on exit, error and
//! Ctrl-C) and fio runs the job file on the target.

use crate::kernel::{fio_json_figures, SysfsGuard};
use crate::tune::{measured_value, predicted, TuneOptions};
use anyhow::{anyhow, bail, Result};
use elevator_core::QueueLimits;
use elevator_sched::stack::{Origin, StackBuilder};
use elevator_tune::apply::kernel_name;
use elevator_tune::eval::{fio_figures, TuneWorkload};
use elevator_tune::objective::Objective;
use elevator_tune::search::SearchResult;
use elevator_tune::space::Setting;
use elevator_tune::verify::{kendall_tau, median};
use std::io::Write;
use std::path::Path;
use std::process::Command;

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
    // The default first, then the best distinct settings (with --kernel,
    // those a current kernel has).
    let mut settings = vec![kernel_default.clone()];
    for t in &r.ranked {
        if settings.len() >= o.verify_settings {
            break;
        }
        let in_kernel = !o.kernel || kernel_name(&t.setting.policy).is_some();
        if t.score.is_ok() && in_kernel && !settings.contains(&t.setting) {
            settings.push(t.setting.clone());
        }
    }
    let mut guard = if o.kernel {
        if file.writes() && !o.allow_write {
            bail!("the job writes: --verify --kernel needs --allow-write");
        }
        let queue = elevator_uring::probe::sysfs(target)
            .queue_dir()
            .ok_or_else(|| {
                anyhow!(
                    "--kernel needs a whole block device (a loop device or a disk): {} has no \
                 /sys/block/NAME/queue",
                    target.display()
                )
            })?;
        elevator_uring::interrupt::catch_sigint()?;
        Some(SysfsGuard::new(&queue)?)
    } else {
        None
    };
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
            if let Some(g) = guard.as_mut() {
                g.apply(s)?;
                let json = run_fio(&o.workload, target)?;
                let figures = fio_json_figures(&json)
                    .map_err(|e| anyhow!("fio on {}: {e}", target.display()))?;
                measured[i].push(measured_value(objective, &figures)?);
                continue;
            }
            let t = elevator_uring::probe::open_target(target, file.writes(), o.allow_write)?;
            let bytes = t.bytes;
            let (mut w, groups) = file.on_target(bytes, o.seed).map_err(|e| anyhow!("{e}"))?;
            let mut builder = StackBuilder::new(&s.policy, Origin::flag("--verify"))?;
            for (k, v) in &s.tunables {
                builder = builder.tunable(k, *v, Origin::flag("--verify"))?;
            }
            let limits = QueueLimits {
                rotational: elevator_uring::probe::sysfs(target)
                    .rotational
                    .unwrap_or(false),
                queue_depth: depth as u32,
                max_sectors: MAX_SECTORS,
                capacity: bytes / 512,
            };
            let builder = builder.groups(&groups);
            let end = elevator_uring::probe::run(t, builder, &limits, depth, &mut w)?;
            let figures = fio_figures(file, &w, &groups, end);
            measured[i].push(measured_value(objective, &figures)?);
        }
    }
    eprintln!();
    if let Some(mut g) = guard.take() {
        g.restore().map_err(|errors| {
            let all: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            anyhow!("restoring sysfs: {}", all.join("; "))
        })?;
        writeln!(
            out,
            "sysfs restored: scheduler {}, its tunables, nr_requests, read_ahead_kb",
            g.original_scheduler()
        )?;
    }
    let goal = &objective.goals[0].metric;
    writeln!(
        out,
        "verify on {}: {} settings, {} runs each {} (median), {} {}",
        target.display(),
        settings.len(),
        o.verify_runs,
        if o.kernel {
            "under the kernel's schedulers with fio"
        } else {
            "through io_uring"
        },
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

/// Run fio on `job` against `target` and return its JSON. The job file's
/// `${RUNTIME}` and `${SIZE}` get the simulated run's defaults unless the
/// environment sets them. Ctrl-C (fio stops too) is an error here, so the
/// caller's sysfs guard restores as it unwinds.
fn run_fio(job: &str, target: &Path) -> Result<String> {
    let mut cmd = Command::new("fio");
    cmd.arg(format!("--filename={}", target.display()))
        .arg("--output-format=json")
        .arg(job);
    for var in ["RUNTIME", "SIZE"] {
        if let Some(v) = crate::tune::fio_env(var) {
            cmd.env(var, v);
        }
    }
    let output = cmd
        .output()
        .map_err(|e| anyhow!("running fio (apt-get install fio): {e}"))?;
    if elevator_uring::interrupt::interrupted() {
        bail!("interrupted; sysfs restored");
    }
    if !output.status.success() {
        bail!(
            "fio {job} on {}: {}: {}",
            target.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    String::from_utf8(output.stdout).map_err(|e| anyhow!("fio's output: {e}"))
}
