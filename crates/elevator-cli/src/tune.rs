//! `elevator tune WORKLOAD --device D --objective EXPR`: search policies,
//! tunables and block settings in the simulator (crates/elevator-tune),
//! print the ranking, the Pareto front, the shell lines and udev rule of
//! the best, its gain over the kernel's default; with `--verify TARGET`,
//! run the default and the top settings on the real target through
//! io_uring and compare the rankings (Kendall's tau).

use anyhow::{anyhow, bail, Result};
use elevator_metrics::text::WIDTH;
use elevator_tune::eval::{evaluate, EvalOptions, TuneWorkload};
use elevator_tune::objective::{Figures, Objective};
use elevator_tune::search::{search, SearchOptions, SearchResult};
use elevator_tune::space::{Setting, Space};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

#[derive(Debug)]
pub struct TuneOptions {
    pub workload: String,
    pub device: Option<String>,
    pub objective: String,
    pub sched: Vec<String>,
    pub budget: usize,
    pub seed: u64,
    pub threads: usize,
    pub cpu_cost: bool,
    pub dev: String,
    pub top: usize,
    pub verify: Option<PathBuf>,
    pub verify_settings: usize,
    pub verify_runs: usize,
    pub allow_write: bool,
    /// `--verify --kernel`: the kernel's schedulers through sysfs, fio.
    pub kernel: bool,
}

/// Defaults for the `${VAR}`s of the job files in `fio/` when the
/// environment does not set them: a short simulated run.
pub fn fio_env(name: &str) -> Option<String> {
    std::env::var(name).ok().or_else(|| match name {
        "RUNTIME" => Some("1s".into()),
        "SIZE" => Some("256m".into()),
        _ => None,
    })
}

fn load(o: &TuneOptions) -> Result<TuneWorkload> {
    let w = &o.workload;
    if crate::fio::is_job_file(w) {
        let read = elevator_workload::fio::ReadOptions {
            env: &fio_env,
            keywords: elevator_scenario::fio_sim::keywords(),
            runner: elevator_workload::fio::Runner::Sim,
            overrides: Default::default(),
        };
        let f = elevator_workload::fio::parse_file(std::path::Path::new(w), &read)
            .map_err(|e| anyhow!("{e}"))?;
        return Ok(TuneWorkload::Fio(f));
    }
    if elevator_scenario::builtin(w).is_some() || w.ends_with(".toml") {
        return Ok(TuneWorkload::Scenario(Box::new(crate::load(w)?)));
    }
    if std::path::Path::new(w).is_file() {
        let device = o
            .device
            .clone()
            .ok_or_else(|| anyhow!("a trace needs --device"))?;
        return Ok(TuneWorkload::Trace(
            elevator_scenario::replay::ReplayConfig {
                trace: w.clone(),
                format: None,
                device,
                mode: elevator_workload::trace::ReplayMode::Open { time_scale: 1.0 },
            },
        ));
    }
    Ok(TuneWorkload::Scenario(Box::new(crate::load(w)?)))
}

fn fmt_value(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('~');
        t
    }
}

/// What a tune run found, for `--verify` (`verify.rs`) to check on the
/// real target.
#[derive(Debug)]
pub struct Tuned {
    pub workload: TuneWorkload,
    pub objective: Objective,
    pub result: SearchResult,
    pub kernel_default: Setting,
}

pub fn tune(o: &TuneOptions, out: &mut Vec<u8>) -> Result<Tuned> {
    let objective = Objective::parse(&o.objective)?;
    let workload = load(o)?;
    let eval_options = EvalOptions {
        device: o.device.clone(),
        seed: o.seed,
        cpu_cost: o.cpu_cost,
    };
    let device = workload.device(&eval_options).map_err(|e| anyhow!(e))?;
    let limits = elevator_device::open(&device)
        .map_err(|e| anyhow!("--device: {e}"))?
        .limits();
    let space = Space::new(
        &o.sched,
        workload.uses(),
        workload.block_axes(limits.rotational),
    )
    .map_err(|e| anyhow!("--sched: {e}"))?;
    let kernel_default = Setting::defaults(elevator_tune::apply::kernel_default(&limits));
    let mut baselines = vec![kernel_default.clone()];
    baselines.extend(space.policies.iter().map(|p| Setting::defaults(&p.policy)));
    let search_options = SearchOptions {
        budget: o.budget,
        exhaustive_limit: o.budget as u64,
        seed: o.seed,
        threads: o.threads,
        ..SearchOptions::default()
    };
    let interactive = std::io::stderr().is_terminal();
    // Wall-clock time is printed beside the results, never in them.
    #[allow(clippy::disallowed_methods)]
    let started = std::time::Instant::now();
    let eval = |s: &Setting| evaluate(&workload, s, &eval_options);
    let result = search(
        &space,
        &objective,
        &eval,
        &baselines,
        &search_options,
        &|n, total| {
            if interactive {
                eprint!("\rtune: {n}/{total} evaluations\x1b[K");
            }
        },
    );
    if interactive {
        eprintln!();
    }
    let wall = started.elapsed().as_secs_f64();
    report(
        o,
        &objective,
        &workload,
        &device,
        &space,
        &result,
        &kernel_default,
        wall,
        out,
    )?;
    Ok(Tuned {
        workload,
        objective,
        result,
        kernel_default,
    })
}

#[allow(clippy::too_many_arguments)]
fn report(
    o: &TuneOptions,
    objective: &Objective,
    workload: &TuneWorkload,
    device: &str,
    space: &Space,
    r: &SearchResult,
    kernel_default: &Setting,
    wall: f64,
    out: &mut Vec<u8>,
) -> Result<()> {
    let policies: Vec<&str> = space.policies.iter().map(|p| p.policy.as_str()).collect();
    writeln!(
        out,
        "{}",
        elevator_metrics::text::wrap(
            &format!(
                "tune {} on {device}: {}; {} settings in the space ({}; block {}), {} \
                 evaluations ({}{}), seed {}, CPU cost per request {}; {:.1} s wall",
                workload.name(),
                objective.text,
                r.space_size,
                policies.join(", "),
                if space.block.is_empty() {
                    "-".to_string()
                } else {
                    space
                        .block
                        .iter()
                        .map(|a| a.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                },
                r.evaluations,
                if r.exhaustive { "exhaustive" } else { "TPE" },
                if r.stopped_early {
                    ", stopped early"
                } else {
                    ""
                },
                o.seed,
                if o.cpu_cost { "on" } else { "off" },
                wall
            ),
            WIDTH,
            "  "
        )
    )?;
    let goals: Vec<String> = objective
        .goals
        .iter()
        .map(|g| format!("{} {}", g.metric, g.metric.name.unit()))
        .collect();
    let setting_w = 58usize.saturating_sub(14 * (goals.len() - 1));
    write!(out, "{:>4}  {:<setting_w$}", "rank", "setting")?;
    for g in &goals {
        write!(out, " {:>14}", shorten(g, 14))?;
    }
    writeln!(out, " {:>6}", "ok")?;
    for (i, t) in r.ranked.iter().take(o.top).enumerate() {
        write!(
            out,
            "{:>4}  {:<setting_w$}",
            i + 1,
            shorten(&t.setting.to_string(), setting_w)
        )?;
        match &t.score {
            Ok(s) => {
                for v in &s.values {
                    write!(out, " {:>14}", fmt_value(*v))?;
                }
                writeln!(out, " {:>6}", if s.feasible() { "yes" } else { "no" })?;
            }
            Err(e) => writeln!(out, " {}", shorten(e, 40))?,
        }
    }
    if objective.goals.len() == 2 {
        writeln!(out, "Pareto front ({} and {}):", goals[0], goals[1])?;
        for t in r.pareto() {
            if let Ok(s) = &t.score {
                writeln!(
                    out,
                    "  {:<60} {:>14} {:>14}",
                    shorten(&t.setting.to_string(), 60),
                    fmt_value(s.values[0]),
                    fmt_value(s.values[1])
                )?;
            }
        }
    }
    let Some(best) = r.best() else {
        bail!("no setting was evaluated")
    };
    let base = r.find(kernel_default);
    let kname = elevator_tune::apply::kernel_name(&kernel_default.policy).unwrap_or("?");
    match (base.map(|b| &b.score), &best.score) {
        (Some(Ok(b)), Ok(s)) => {
            let (bv, sv) = (b.values[0], s.values[0]);
            let gain = if bv != 0.0 {
                let better = match objective.goals[0].direction {
                    elevator_tune::objective::Direction::Minimize => (bv - sv) / bv,
                    elevator_tune::objective::Direction::Maximize => (sv - bv) / bv,
                };
                format!("{:+.1} %", 100.0 * better)
            } else {
                "-".into()
            };
            let beats = r.strictly_better_than(kernel_default);
            writeln!(
                out,
                "kernel default for this device ({kname}): {} {}{}; best: {} {}; predicted gain {gain}; \
                 {beats} setting(s) beat it",
                goals[0],
                fmt_value(bv),
                if b.feasible() { "" } else { " (infeasible)" },
                goals[0],
                fmt_value(sv),
            )?;
        }
        _ => writeln!(out, "kernel default ({kname}) could not be evaluated")?,
    }
    writeln!(out, "apply the best (root; DEV = {}):", o.dev)?;
    for l in elevator_tune::apply::shell_lines(&best.setting, &o.dev) {
        writeln!(out, "  {l}")?;
    }
    writeln!(
        out,
        "{}",
        elevator_tune::apply::udev_rule(&best.setting, &o.dev)
    )?;
    Ok(())
}

/// The predicted objective value of a trial (first goal).
pub fn predicted(r: &SearchResult, s: &Setting) -> Option<f64> {
    r.find(s)
        .and_then(|t| t.score.as_ref().ok())
        .map(|s| s.values[0])
}

/// First-goal value of measured figures.
pub fn measured_value(objective: &Objective, f: &Figures) -> Result<f64> {
    objective.goals[0]
        .metric
        .value(f)
        .map_err(|e| anyhow!("measured run: {e}"))
}
