//! One setting on one workload, in the simulator: the one place where
//! `tune` builds and runs a setting.
//!
//! Every setting's stack (policy, tunables, block settings, groups and
//! their layers) is built by the one policy-stack builder,
//! `elevator_sched::stack::StackBuilder`: fio job files here, directly, as
//! `elevator run JOB.fio --engine sim` builds them; scenarios through
//! `elevator_scenario::run_policy`, which builds from the scenario and the
//! setting's tunables and block settings as `--set` overrides; traces
//! through `elevator_scenario::replay`, which builds the same way.
//! `read_ahead_kb` and `wbt_lat_usec` are not the stack's: they are
//! written into the scenario's host and `[wbt]` before it runs.

use crate::objective::{Figures, GroupShare, JobFigures};
use crate::space::{Axis, Setting, Uses};
use elevator_core::{GroupId, GroupTree, IoClass};
use elevator_metrics::JobReport;
use elevator_scenario::replay::{ReplayConfig, Variant};
use elevator_scenario::Scenario;
use elevator_sched::stack::{self, Origin, StackBuilder};
use elevator_workload::fio::{FioRun, JobFile};

/// What `tune` tunes for.
#[derive(Clone, Debug)]
pub enum TuneWorkload {
    Scenario(Box<Scenario>),
    Fio(JobFile),
    Trace(ReplayConfig),
}

/// How every evaluation runs.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// Device profile name or path (`None`: the scenario's own).
    pub device: Option<String>,
    pub seed: u64,
    /// Charge each policy's CPU cost per request (`elevator_sched::cost`).
    pub cpu_cost: bool,
}

impl TuneWorkload {
    pub fn name(&self) -> String {
        match self {
            TuneWorkload::Scenario(s) => s.name.clone(),
            TuneWorkload::Fio(f) => f.path.display().to_string(),
            TuneWorkload::Trace(t) => t.trace.clone(),
        }
    }

    /// The device a run uses.
    pub fn device(&self, o: &EvalOptions) -> Result<String, String> {
        match (&o.device, self) {
            (Some(d), _) => Ok(d.clone()),
            (None, TuneWorkload::Scenario(s)) => Ok(s.device.clone()),
            (None, TuneWorkload::Trace(t)) => Ok(t.device.clone()),
            (None, TuneWorkload::Fio(_)) => Err("a fio job file needs --device".into()),
        }
    }

    /// What the workload uses that a policy must honour.
    pub fn uses(&self) -> Uses {
        let weighted = |g: &GroupTree| {
            let w: Vec<u32> = g.iter().skip(1).map(|g| g.weight).collect();
            w.len() >= 2 && w.iter().any(|x| *x != w[0])
        };
        let classed = |c: IoClass| matches!(c, IoClass::RealTime | IoClass::Idle);
        match self {
            TuneWorkload::Scenario(s) => Uses {
                weights: weighted(&s.groups),
                prio_classes: s.jobs.iter().any(|j| classed(j.prio.class())),
            },
            TuneWorkload::Fio(f) => Uses {
                weights: {
                    let w: Vec<u32> = f.jobs.iter().filter_map(|j| j.o.cgroup_weight).collect();
                    w.len() >= 2 && w.iter().any(|x| *x != w[0])
                },
                prio_classes: f.jobs.iter().any(|j| {
                    matches!(j.o.prioclass, Some(1 | 3))
                        || j.o.cmdprio_percentage.iter().any(|p| *p > 0)
                        || j.o.cmdprio_bssplit.is_some()
                }),
            },
            TuneWorkload::Trace(_) => Uses::default(),
        }
    }

    /// The block settings the model has for this workload.
    pub fn block_axes(&self, rotational: bool) -> Vec<Axis> {
        let nr = Axis {
            name: "nr_requests".into(),
            values: vec![32, 64, 128, 256],
            default: elevator_sim::EngineConfig::linux_26().nr_requests[0] as i64,
        };
        match self {
            TuneWorkload::Trace(_) => Vec::new(),
            TuneWorkload::Fio(_) => vec![nr],
            TuneWorkload::Scenario(s) => {
                let mut axes = vec![nr];
                if let Some(h) = &s.host {
                    let kb = (h.params.readahead_max / 1024) as i64;
                    let mut values = vec![32, 128, 512, 2048, kb];
                    values.sort_unstable();
                    values.dedup();
                    axes.push(Axis {
                        name: "read_ahead_kb".into(),
                        values,
                        default: kb,
                    });
                }
                if let Some(w) = s.wbt {
                    let default = w.lat_usec.map_or_else(
                        || elevator_sched::group::wbt::default_lat_usec(rotational) as i64,
                        |v| v as i64,
                    );
                    let mut values = vec![0, default / 4, default, default * 4];
                    values.sort_unstable();
                    values.dedup();
                    axes.push(Axis {
                        name: "wbt_lat_usec".into(),
                        values,
                        default,
                    });
                }
                axes
            }
        }
    }
}

fn figures_of(job: &JobReport) -> JobFigures {
    JobFigures {
        name: job.name.clone(),
        p50_ms: job.lat_p50_ms,
        p99_ms: job.lat_p99_ms,
        p999_ms: job.lat_p999_ms,
        mean_ms: job.lat_mean_ms,
        max_ms: job.lat_max_ms,
        mb_s: job.mb_s,
        iops: job.iops,
    }
}

/// Run `setting` on `workload` and collect what objectives read.
pub fn evaluate(
    workload: &TuneWorkload,
    setting: &Setting,
    o: &EvalOptions,
) -> Result<Figures, String> {
    let device = workload.device(o)?;
    let policy =
        stack::policy(&setting.policy, Origin::flag("--sched")).map_err(|e| e.to_string())?;
    let cpu_ns = if o.cpu_cost {
        elevator_sched::cost::per_request(policy.name).nanos() as i64
    } else {
        0
    };
    match workload {
        TuneWorkload::Scenario(s) => {
            let mut s = (**s).clone();
            let mut overrides: Vec<(String, String, i64)> = setting
                .tunables
                .iter()
                .map(|(k, v)| (policy.name.to_string(), k.clone(), *v))
                .collect();
            for (k, v) in &setting.block {
                match k.as_str() {
                    "read_ahead_kb" => {
                        if let Some(h) = &mut s.host {
                            h.params.readahead_max = (*v as u64) * 1024;
                            for p in h.params_by_policy.values_mut() {
                                p.readahead_max = (*v as u64) * 1024;
                            }
                        }
                    }
                    "wbt_lat_usec" => {
                        if let Some(w) = &mut s.wbt {
                            w.lat_usec = Some(*v as u64);
                        }
                    }
                    _ => overrides.push(("block".into(), k.clone(), *v)),
                }
            }
            if cpu_ns > 0 {
                overrides.push(("block".into(), "cpu_cost".into(), cpu_ns));
            }
            let run =
                elevator_scenario::run_policy(&s, policy.name, &device, o.seed, &overrides, false)
                    .map_err(|e| e.to_string())?;
            let span = run.simulated_s;
            let ios: u64 = run.jobs.iter().map(|j| j.ios).sum();
            Ok(Figures {
                jobs: run.jobs.iter().map(figures_of).collect(),
                total_mb_s: run.aggregate_mb_s,
                total_iops: if span > 0.0 { ios as f64 / span } else { 0.0 },
                groups: run
                    .groups
                    .iter()
                    .filter(|g| g.tasks > 0 && g.name != "root")
                    .map(|g| GroupShare {
                        name: g.name.clone(),
                        weight: g.weight,
                        share: g.disk_share,
                    })
                    .collect(),
            })
        }
        TuneWorkload::Fio(file) => {
            let dev = elevator_device::open(&device).map_err(|e| e.to_string())?;
            let limits = dev.limits();
            let sim = elevator_scenario::fio_sim::setup(file, &limits, &device, o.seed)?;
            let (mut run, groups) = (sim.run, sim.groups);
            let mut builder = StackBuilder::new(policy.name, Origin::flag("--sched"))
                .map_err(|e| e.to_string())?;
            for (k, v) in &setting.tunables {
                builder = builder
                    .tunable(k, *v, Origin::flag("tune"))
                    .map_err(|e| e.to_string())?;
            }
            let mut block: Vec<stack::Override> = setting
                .block
                .iter()
                .map(|(k, v)| ("block".to_string(), k.clone(), *v))
                .collect();
            if cpu_ns > 0 {
                block.push(("block".into(), "cpu_cost".into(), cpu_ns));
            }
            let builder = builder
                .overrides(&block)
                .map_err(|e| e.to_string())?
                .groups(&groups);
            let (mut engine, _) =
                elevator_sim::Engine::build(builder, dev, elevator_sim::EngineConfig::linux_26());
            let summary = engine.run(&mut run);
            Ok(fio_figures(file, &run, &groups, summary.end))
        }
        TuneWorkload::Trace(config) => {
            if !setting.block.is_empty() {
                return Err("a trace replay has no block settings to set".into());
            }
            let mut config = config.clone();
            config.device = device;
            let out = elevator_scenario::replay::replay(
                &config,
                &Variant {
                    policy: policy.name.to_string(),
                    tunables: setting.tunables.clone(),
                },
            )
            .map_err(|e| e.to_string())?;
            Ok(Figures {
                jobs: out.processes.iter().map(figures_of).collect(),
                total_mb_s: out.throughput_mb_s(),
                total_iops: out.total.iops,
                groups: Vec::new(),
            })
        }
    }
}

/// A fio run's figures: per job (fio's threads: a job's clones each), the
/// run's totals and the groups' shares of device time.
pub fn fio_figures(
    file: &JobFile,
    run: &FioRun,
    groups: &GroupTree,
    end: elevator_core::Instant,
) -> Figures {
    let stats = run.stats(end);
    let disk = run.disk_times();
    let span = end.as_secs_f64();
    let mut bytes = 0u64;
    let mut ios = 0u64;
    let jobs: Vec<JobFigures> = stats
        .iter()
        .map(|s| {
            let mut lat = s.dirs[0].clat.clone();
            lat.merge(&s.dirs[1].clat);
            let b = s.dirs[0].io_bytes + s.dirs[1].io_bytes;
            let n = s.dirs[0].total_ios + s.dirs[1].total_ios;
            bytes += b;
            ios += n;
            let rt = s.dirs[0].runtime_ms.max(s.dirs[1].runtime_ms) as f64 / 1000.0;
            let ms = |ns: u64| ns as f64 / 1e6;
            JobFigures {
                name: s.name.clone(),
                p50_ms: ms(lat.percentile(50.0)),
                p99_ms: ms(lat.percentile(99.0)),
                p999_ms: ms(lat.percentile(99.9)),
                mean_ms: lat.stat.mean() / 1e6,
                max_ms: ms(lat.stat.max),
                mb_s: if rt > 0.0 { b as f64 / 1e6 / rt } else { 0.0 },
                iops: if rt > 0.0 { n as f64 / rt } else { 0.0 },
            }
        })
        .collect();
    // Threads come in job order, numjobs each.
    let mut of_group: Vec<GroupId> = Vec::new();
    for j in &file.jobs {
        let g =
            j.o.cgroup
                .as_ref()
                .and_then(|c| groups.find(c))
                .unwrap_or(GroupId::ROOT);
        of_group.extend(std::iter::repeat_n(g, j.o.numjobs as usize));
    }
    let total_disk: f64 = disk.iter().map(|d| d.as_secs_f64()).sum();
    let shares = groups
        .iter()
        .filter(|g| g.id != GroupId::ROOT)
        .map(|g| {
            let d: f64 = disk
                .iter()
                .zip(&of_group)
                .filter(|(_, id)| **id == g.id)
                .map(|(d, _)| d.as_secs_f64())
                .sum();
            GroupShare {
                name: g.name.clone(),
                weight: g.weight,
                share: if total_disk > 0.0 {
                    d / total_disk
                } else {
                    0.0
                },
            }
        })
        .collect();
    Figures {
        jobs,
        total_mb_s: if span > 0.0 {
            bytes as f64 / 1e6 / span
        } else {
            0.0
        },
        total_iops: if span > 0.0 { ios as f64 / span } else { 0.0 },
        groups: shares,
    }
}
