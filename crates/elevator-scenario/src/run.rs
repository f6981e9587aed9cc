//! Running a scenario under one or more policies.

use crate::{Scenario, ScenarioError, Sweep};
use elevator_core::{GroupId, Instant, Prng, QueueLimits, SECTOR_SIZE};
use elevator_metrics::{
    DeviceReport, GroupReport, JobChart, JobStats, LatencyStats, Report, ResultValue, RunReport,
    Throughput,
};
use elevator_sched::group::LayerSettings;
use elevator_sched::stack::{ConfigError, Origin, StackBuilder};
use elevator_sim::{Engine, EngineConfig};
use elevator_workload::{DirectJob, Mix, Part};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Command-line choices that override the scenario's own.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub schedulers: Option<Vec<String>>,
    pub device: Option<String>,
    pub seed: Option<u64>,
    /// `(policy, tunable, value)` overrides on top of the scenario's.
    pub tunables: Vec<(String, String, i64)>,
    /// Record each run's decision trace (`RunReport::trace`).
    pub trace: bool,
    /// Keep per job the latency distribution and throughput timeline the
    /// HTML report draws (`RunReport::charts`); off, runs keep no series.
    pub charts: bool,
    /// Where each run publishes its simulated time (nanoseconds) as it
    /// goes, for a progress bar on another thread; results never depend
    /// on it.
    pub clock: Option<Arc<AtomicU64>>,
    /// Run every policy through the invariant checker (always on in builds
    /// with debug assertions).
    pub check: bool,
}

/// Run `scenario` under every chosen policy, calling `progress` after each.
pub fn run(
    scenario: &Scenario,
    options: &RunOptions,
    progress: &mut dyn FnMut(&RunReport),
) -> Result<Report, ScenarioError> {
    let schedulers = options
        .schedulers
        .clone()
        .unwrap_or_else(|| scenario.schedulers.clone());
    if schedulers.is_empty() {
        return Err(ConfigError::NoPolicy {
            origin: Origin::flag("--sched"),
        }
        .into());
    }
    let device = options
        .device
        .clone()
        .unwrap_or_else(|| scenario.device.clone());
    let seed = options.seed.unwrap_or(scenario.seed);
    let variants = variants(scenario);
    let mut runs = Vec::new();
    for (variant, scenario) in &variants {
        for name in &schedulers {
            let mut run = run_policy_traced(
                scenario,
                name,
                &device,
                seed,
                &options.tunables,
                options.check,
                Recording {
                    trace: options.trace,
                    charts: options.charts,
                    clock: options.clock.clone(),
                },
            )?;
            run.variant = variant.clone();
            progress(&run);
            runs.push(run);
        }
    }
    Ok(Report {
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        device,
        seed,
        runs,
        per_job_kib: scenario.per_job_kib,
        per_group_wide: scenario.per_group_wide,
    })
}

/// The labels of a sweep's points, as runs carry them (`rand=4`,
/// `fsync-tester=rt/4`, `inflight_limit=256k`), in order.
pub(crate) fn variants_labels(sweep: &Sweep) -> Vec<String> {
    match sweep {
        Sweep::Count { job, counts } => counts.iter().map(|c| format!("{job}={c}")).collect(),
        Sweep::Prio { target, prios } => prios
            .iter()
            .map(|(text, _)| format!("{target}={text}"))
            .collect(),
        Sweep::InflightLimit(limits) => limits
            .iter()
            .map(|limit| match limit {
                None => "inflight_limit=max".to_string(),
                Some(sectors) => format!("inflight_limit={}k", sectors / 2),
            })
            .collect(),
    }
}

/// One variant of `scenario` per sweep point with its label (or just the
/// scenario itself).
fn variants(scenario: &Scenario) -> Vec<(Option<String>, Scenario)> {
    let Some(sweep) = &scenario.sweep else {
        return vec![(None, scenario.clone())];
    };
    let labels = variants_labels(sweep);
    (0..labels.len())
        .map(|i| {
            let mut s = scenario.clone();
            match sweep {
                Sweep::Count { job, counts } => {
                    for j in s.jobs.iter_mut().filter(|j| &j.name == job) {
                        j.count = counts[i];
                    }
                }
                Sweep::Prio { target, prios } => {
                    let prio = prios[i].1;
                    for j in s.jobs.iter_mut().filter(|j| &j.name == target) {
                        j.prio = prio;
                    }
                    if let Some(h) = &mut s.host {
                        for p in h.processes.iter_mut().filter(|p| &p.name == target) {
                            p.prio = prio;
                        }
                    }
                }
                Sweep::InflightLimit(limits) => s.block.inflight_limit = limits[i],
            }
            (Some(labels[i].clone()), s)
        })
        .collect()
}

/// Run `scenario` once under policy `policy` on `device` with `seed`.
pub fn run_one(
    scenario: &Scenario,
    policy: &str,
    device: &str,
    seed: u64,
    overrides: &[(String, String, i64)],
) -> Result<RunReport, ScenarioError> {
    run_policy(scenario, policy, device, seed, overrides, false)
}

/// [`run_one`], with the invariant checker on if `check` (it is on anyway
/// where debug assertions are).
pub fn run_policy(
    scenario: &Scenario,
    policy: &str,
    device: &str,
    seed: u64,
    overrides: &[(String, String, i64)],
    check: bool,
) -> Result<RunReport, ScenarioError> {
    run_policy_traced(
        scenario,
        policy,
        device,
        seed,
        overrides,
        check,
        Recording::default(),
    )
}

/// What a run records beyond its report.
#[derive(Clone, Debug, Default)]
struct Recording {
    /// The engine's decision trace.
    trace: bool,
    /// Per job latency distributions and throughput timelines.
    charts: bool,
    /// The simulated time, published as the run goes.
    clock: Option<Arc<AtomicU64>>,
}

/// [`run_policy`], recording what `record` asks for.
fn run_policy_traced(
    scenario: &Scenario,
    policy: &str,
    device: &str,
    seed: u64,
    overrides: &[(String, String, i64)],
    check: bool,
    record: Recording,
) -> Result<RunReport, ScenarioError> {
    let builder = StackBuilder::new(policy, Origin::flag("--sched"))?;
    let name = builder.policy().name;
    let builder = builder
        .scenario_tunables(
            &scenario.file,
            scenario.tunables.get(name).into_iter().flatten(),
        )?
        .overrides(overrides)?
        .groups(&scenario.groups)
        .layer_settings(LayerSettings {
            iocost: scenario.iocost.clone(),
            wbt: scenario.wbt,
        })
        .check(check);
    let open_device = |seed: u64| -> Result<Box<dyn elevator_device::Device>, ScenarioError> {
        let mut dev = elevator_device::open(device)
            .map_err(|e| ScenarioError::command_line(None, format!("device {device:?}: {e}")))?;
        dev.reseed(seed);
        Ok(if scenario.faults.is_empty() {
            dev
        } else {
            Box::new(elevator_device::Faulty::new(
                dev,
                scenario.faults.clone(),
                seed,
            ))
        })
    };
    let mut config = *scenario
        .block_by_policy
        .get(name)
        .unwrap_or(&scenario.block);
    config.time_limit = Instant::ZERO + scenario.time_limit;
    // Disk 0 runs with the run's seed; the others (`disks`) with seeds
    // derived from it, each a whole simulation of its own. Each job's
    // statistics are summed over the disks.
    let mut merged: Option<(Vec<JobStats>, Vec<bool>, Vec<GroupId>)> = None;
    let mut summaries = Vec::new();
    let mut trace = None;
    let mut stack = None;
    for disk in 0..scenario.disks {
        let disk_seed = if disk == 0 {
            seed
        } else {
            Prng::derive(seed, &format!("disk {disk}")).next_u64()
        };
        let (mut engine, info) = Engine::build(builder.clone(), open_device(disk_seed)?, config);
        let limits = info.limits;
        let (mut mix, measured, job_groups) = build_workload(
            scenario,
            name,
            &limits,
            disk_seed,
            engine.config().nr_requests[1],
        )?;
        engine.set_context(replay_context(scenario, name, device, seed, overrides));
        // The trace and the published clock follow the first disk.
        if record.trace && disk == 0 {
            engine.enable_trace();
        }
        if record.charts {
            mix.record_series();
        }
        if let (Some(clock), 0) = (&record.clock, disk) {
            engine.publish_time(clock.clone());
        }
        summaries.push(engine.run(&mut mix));
        if disk == 0 {
            trace = engine.take_trace();
            stack = Some((info, *engine.config()));
        }
        let stats = mix.stats();
        merged = Some(match merged.take() {
            None => (stats, measured, job_groups),
            Some((mut sum, measured, job_groups)) => {
                for (s, d) in sum.iter_mut().zip(&stats) {
                    add_job_stats(s, d);
                }
                (sum, measured, job_groups)
            }
        });
    }
    let (stats, measured, job_groups) = merged.expect("at least one disk");
    let (stack, config) = stack.expect("at least one disk");
    let summary = sum_summaries(&summaries);
    let mut jobs: Vec<_> = stats.iter().map(|s| s.report(summary.end)).collect();
    let groups = if scenario.groups.len() > 1 {
        for (j, g) in jobs.iter_mut().zip(&job_groups) {
            j.group = Some(scenario.groups.get(*g).name.clone());
        }
        group_reports(scenario, &stats, &job_groups, summary.end)
    } else {
        Vec::new()
    };
    let value = scenario
        .result
        .evaluate(&jobs, &measured, &groups, summary.end);
    let cut = scenario.result.cut(&jobs, &measured);
    for (j, m) in jobs.iter_mut().zip(&measured) {
        j.cut = *m && j.completion_s.is_none();
    }
    let end_s = summary.end.as_secs_f64();
    let busy_s = summary.device.busy_ns as f64 / 1e9;
    let disk_s = end_s * f64::from(scenario.disks);
    let total_bytes: u64 = jobs.iter().map(|j| j.bytes).sum();
    Ok(RunReport {
        scheduler: name.to_string(),
        variant: None,
        groups,
        tunables: stack
            .tunables
            .iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<BTreeMap<_, _>>(),
        block: {
            let mut block = block_settings(&config);
            for (layer, shown) in &stack.shown {
                block.insert((*layer).to_string(), shown.clone());
            }
            block
        },
        result: ResultValue {
            name: scenario.result.name.clone(),
            unit: scenario.result.unit.clone(),
            value,
            cut,
        },
        published: scenario.published.get(name).cloned(),
        simulated_s: end_s,
        aggregate_mb_s: if end_s > 0.0 {
            total_bytes as f64 / 1e6 / end_s
        } else {
            0.0
        },
        device: DeviceReport {
            busy_s,
            utilization: if disk_s > 0.0 {
                (busy_s / disk_s).min(1.0)
            } else {
                0.0
            },
            requests: summary.device.requests,
            seeks: summary.device.seeks,
            seek_distance_sectors: summary.device.seek_distance,
        },
        jobs,
        trace,
        charts: if record.charts {
            job_charts(&stats)
        } else {
            Vec::new()
        },
    })
}

/// Add one disk's statistics of a job to its sum over the disks: bytes,
/// I/Os, errors, device time and latencies add; the job ran from the
/// earliest start to the latest finish.
fn add_job_stats(sum: &mut JobStats, disk: &JobStats) {
    debug_assert_eq!(sum.name, disk.name, "every disk runs the same jobs");
    sum.read_bytes += disk.read_bytes;
    sum.write_bytes += disk.write_bytes;
    sum.ios += disk.ios;
    sum.errors += disk.errors;
    sum.disk_time += disk.disk_time;
    sum.latency.merge(&disk.latency);
    sum.started = match (sum.started, disk.started) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    sum.finished = match (sum.finished, disk.finished) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ => None,
    };
    for (k, v) in &disk.extra {
        *sum.extra.entry(k.clone()).or_insert(0.0) += v;
    }
    if let (Some(s), Some(d)) = (&mut sum.series, &disk.series) {
        s.merge(d);
    }
}

/// The disks' runs as one: the last to end, and the devices' counts added.
fn sum_summaries(summaries: &[elevator_sim::RunSummary]) -> elevator_sim::RunSummary {
    let mut sum = summaries[0].clone();
    for s in &summaries[1..] {
        sum.end = sum.end.max(s.end);
        sum.timed_out |= s.timed_out;
        sum.completed += s.completed;
        sum.errors += s.errors;
        sum.events += s.events;
        sum.device.requests += s.device.requests;
        sum.device.seeks += s.device.seeks;
        sum.device.seek_distance += s.device.seek_distance;
        sum.device.busy_ns += s.device.busy_ns;
    }
    sum
}

/// Points per latency CDF: enough for a smooth curve, few enough that a
/// page of 24 scenarios stays small.
const CDF_POINTS: usize = 120;

/// Per job its latency distribution and throughput timeline; identical
/// jobs (`random.0`, `random.1`, ... of one `count = N` job) summed into
/// one, as a reader compares kinds of job, not instances.
fn job_charts(stats: &[JobStats]) -> Vec<JobChart> {
    let base = |name: &str| -> String {
        match name.rsplit_once('.') {
            Some((b, n)) if !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) => b.to_string(),
            _ => name.to_string(),
        }
    };
    let mut kinds: Vec<(String, Vec<&JobStats>)> = Vec::new();
    for s in stats {
        let b = base(&s.name);
        match kinds.iter_mut().find(|(k, _)| *k == b) {
            Some((_, v)) => v.push(s),
            None => kinds.push((b, vec![s])),
        }
    }
    kinds
        .into_iter()
        .map(|(name, members)| {
            let mut latency = LatencyStats::new();
            let mut throughput = Throughput::new();
            for m in &members {
                latency.merge(&m.latency);
                throughput.merge(m.series.as_ref().expect("series recorded for charts"));
            }
            JobChart {
                name: if members.len() == 1 {
                    members[0].name.clone()
                } else {
                    name
                },
                jobs: members.len(),
                cdf: latency
                    .cdf(CDF_POINTS)
                    .into_iter()
                    .map(|(d, f)| (d.as_millis_f64(), f))
                    .collect(),
                throughput,
            }
        })
        .collect()
}

/// The block layer's settings as `--set block.NAME=VALUE` names them, and
/// the time limit.
fn block_settings(config: &EngineConfig) -> BTreeMap<String, String> {
    let size = |sectors: Option<u64>| match sectors {
        None => "max".to_string(),
        Some(s) => format!("{}k", s * SECTOR_SIZE / 1024),
    };
    let [reads, writes] = config.nr_requests;
    let slots = |n: usize| {
        if n == usize::MAX {
            "max".to_string()
        } else {
            n.to_string()
        }
    };
    let nr_requests = if reads == writes {
        slots(reads)
    } else {
        format!("{}/{}", slots(reads), slots(writes))
    };
    let mut settings = BTreeMap::from([
        ("nr_requests".to_string(), nr_requests),
        ("batch_requests".into(), config.batch_requests.to_string()),
        ("steal".into(), u8::from(config.steal).to_string()),
        ("inflight_limit".into(), size(config.inflight_limit)),
        (
            "max_sectors".into(),
            size(config.max_sectors.map(u64::from)),
        ),
        (
            "restart_before_wakeup".into(),
            u8::from(config.restart_before_wakeup).to_string(),
        ),
        (
            "time_limit".into(),
            format!("{}s", config.time_limit.as_secs_f64()),
        ),
    ]);
    // The 2.6.32 mechanisms, named only where on (the older presets'
    // settings lines stay as they were).
    if config.cpu_cost > elevator_core::Duration::ZERO {
        settings.insert("cpu_cost".into(), format!("{}ns", config.cpu_cost.nanos()));
    }
    for (name, on) in [
        ("sync_lists", config.sync_lists),
        ("congestion", config.congestion),
        ("plugging", config.plugging.is_some()),
    ] {
        if on {
            settings.insert(name.to_string(), "1".to_string());
        }
    }
    settings
}

/// What a failed check prints after the violation: the run, and the
/// command that replays it.
fn replay_context(
    scenario: &Scenario,
    policy: &str,
    device: &str,
    seed: u64,
    overrides: &[(String, String, i64)],
) -> String {
    let source = scenario
        .file
        .strip_prefix("<built-in ")
        .and_then(|s| s.strip_suffix('>'))
        .unwrap_or(&scenario.file);
    let sets: String = overrides
        .iter()
        .map(|(p, k, v)| format!(" --set {p}.{k}={v}"))
        .collect();
    format!(
        "scenario {}, policy {policy}, device {device}, seed {seed}\n\
         replay: elevator run {source} --sched {policy} --device {device} --seed {seed}{sets} --check",
        scenario.name
    )
}

/// Per group: its jobs' bytes, rates, latency and share of device time.
fn group_reports(
    scenario: &Scenario,
    stats: &[JobStats],
    job_groups: &[GroupId],
    end: Instant,
) -> Vec<GroupReport> {
    let total_disk: f64 = stats.iter().map(|s| s.disk_time.as_secs_f64()).sum();
    scenario
        .groups
        .iter()
        .filter(|g| g.id != GroupId::ROOT || job_groups.contains(&GroupId::ROOT))
        .map(|g| {
            let mine: Vec<&JobStats> = stats
                .iter()
                .zip(job_groups)
                // A group's report covers its subtree; the root's, only
                // the jobs placed in the root itself.
                .filter(|(_, jg)| {
                    if g.id == GroupId::ROOT {
                        **jg == GroupId::ROOT
                    } else {
                        scenario.groups.path(**jg).any(|a| a == g.id)
                    }
                })
                .map(|(s, _)| s)
                .collect();
            let mut latency = LatencyStats::new();
            for s in &mine {
                latency.merge(&s.latency);
            }
            let bytes: u64 = mine.iter().map(|s| s.bytes()).sum();
            let ios: u64 = mine.iter().map(|s| s.ios).sum();
            let disk: f64 = mine.iter().map(|s| s.disk_time.as_secs_f64()).sum();
            // Rates over the group's active span: first start to last end.
            let from = mine
                .iter()
                .filter_map(|s| s.started)
                .min()
                .unwrap_or(Instant::ZERO);
            let to = mine
                .iter()
                .map(|s| s.finished.unwrap_or(end))
                .max()
                .unwrap_or(end);
            let span = to.since(from).as_secs_f64();
            let per_s = |x: f64| if span > 0.0 { x / span } else { 0.0 };
            GroupReport {
                name: g.name.clone(),
                weight: g.weight,
                io_max: g.max.to_string(),
                tasks: mine.len(),
                bytes,
                mb_s: per_s(bytes as f64 / 1e6),
                iops: per_s(ios as f64),
                lat_mean_ms: latency.mean().as_millis_f64(),
                lat_max_ms: latency.max().as_millis_f64(),
                disk_time_s: disk,
                disk_share: if total_disk > 0.0 {
                    disk / total_disk
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// The jobs of `scenario` as one workload, which report rows are measured,
/// and each row's group.
fn build_workload(
    scenario: &Scenario,
    policy: &str,
    limits: &QueueLimits,
    seed: u64,
    write_slots: usize,
) -> Result<(Mix, Vec<bool>, Vec<GroupId>), ScenarioError> {
    let mut mix = Mix::new();
    let mut measured = Vec::new();
    let mut groups = Vec::new();
    let mut task = 1u32;
    for t in &scenario.jobs {
        let region = t.region.or(t.size).expect("validated: size or region");
        let step = t.offset_increment.unwrap_or(region);
        for i in 0..t.count {
            let name = if t.count > 1 {
                format!("{}.{i}", t.name)
            } else {
                t.name.clone()
            };
            let offset = t.offset + u64::from(i) * step;
            let end = offset + region;
            if end.div_ceil(SECTOR_SIZE) > limits.capacity {
                return Err(ScenarioError::new(
                    &scenario.file,
                    Some(t.line),
                    Some("job.region"),
                    format!(
                        "job {name} reaches byte {end}, past the end of the device ({} bytes)",
                        limits.capacity * SECTOR_SIZE
                    ),
                ));
            }
            let mut job = DirectJob::new(&name, task, seed);
            job.pattern = t.pattern;
            job.read_percent = t.read_percent;
            job.sync_writes = t.sync_writes;
            job.bs = (t.bs / SECTOR_SIZE) as u32;
            job.max_request = limits.max_sectors;
            job.region_start = offset / SECTOR_SIZE;
            job.region_sectors = region / SECTOR_SIZE;
            job.size = t.size;
            job.runtime = t.runtime;
            job.start = t.start;
            job.iodepth = t.iodepth;
            job.think = t.think;
            job.prio = t.prio;
            job.looping = t.background;
            job.group = t.group;
            job.period = t.period;
            measured.push(job.measured());
            groups.push(t.group);
            mix.push(Box::new(job));
            task += 1;
        }
    }
    let startups =
        crate::startup::build(&scenario.file, &scenario.startups, limits, seed, &mut task)?;
    for replay in startups {
        measured.push(true);
        groups.push(GroupId::ROOT);
        mix.push(Box::new(replay));
    }
    if let Some(spec) = &scenario.host {
        let mut spec = spec.clone();
        // The file sets lie as the scenario's own host placed them, also
        // for a policy that runs on another kernel's host (`[presets]`):
        // the disk was the same for every kernel measured.
        let files_allocator = spec.params.fs.allocator;
        if let Some(params) = spec.params_by_policy.get(policy) {
            spec.params = params.clone();
        }
        let host = crate::host::build_host(
            &spec,
            limits,
            Some(write_slots),
            seed,
            task,
            &scenario.file,
            files_allocator,
        )?;
        measured.extend(host.measured());
        groups.extend(host.row_groups());
        mix.push(Box::new(host));
    }
    Ok((mix, measured, groups))
}
