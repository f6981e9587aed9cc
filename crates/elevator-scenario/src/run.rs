//! Running a scenario under one or more policies.

use crate::{Scenario, ScenarioError, Sweep};
use elevator_core::{GroupId, Instant, QueueLimits, SECTOR_SIZE};
use elevator_metrics::{
    DeviceReport, GroupReport, JobChart, JobStats, LatencyStats, Report, ResultValue, RunReport,
    Throughput,
};
use elevator_sched::group::iocost::IoCost;
use elevator_sched::group::latency::LatencyLimiter;
use elevator_sched::group::throttle::Throttle;
use elevator_sched::group::wbt::{Wbt, WbtParams};
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
    let cli = |msg: String| ScenarioError::new("<command line>", None, None, msg);
    let schedulers = options
        .schedulers
        .clone()
        .unwrap_or_else(|| scenario.schedulers.clone());
    if schedulers.is_empty() {
        return Err(cli("no scheduler to run".into()));
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
/// `fsync-tester.prio=rt/4`, `inflight_limit=256k`), in order.
pub(crate) fn variants_labels(sweep: &Sweep) -> Vec<String> {
    match sweep {
        Sweep::Count { job, counts } => counts.iter().map(|c| format!("{job}={c}")).collect(),
        Sweep::Prio { target, prios } => prios
            .iter()
            .map(|(text, _)| format!("{target}.prio={text}"))
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
    let cli = |msg: String| ScenarioError::new("<command line>", None, None, msg);
    let sched_type = elevator_sched::find(policy).ok_or_else(|| {
        let known: Vec<&str> = elevator_sched::registry().iter().map(|t| t.name).collect();
        cli(format!(
            "unknown scheduler {policy:?} (known: {})",
            known.join(", ")
        ))
    })?;
    let mut dev =
        elevator_device::open(device).map_err(|e| cli(format!("device {device:?}: {e}")))?;
    if !scenario.faults.is_empty() {
        dev = Box::new(elevator_device::Faulty::new(
            dev,
            scenario.faults.clone(),
            seed,
        ));
    }
    let mut config = *scenario
        .block_by_policy
        .get(sched_type.name)
        .unwrap_or(&scenario.block);
    config.time_limit = Instant::ZERO + scenario.time_limit;
    config.check |= check;
    for (p, k, v) in overrides.iter().filter(|(p, _, _)| p == "block") {
        apply_block(&mut config, k, *v).map_err(|m| cli(format!("--set {p}.{k}={v}: {m}")))?;
    }
    // The block layer's request-size limit, where below the device's (2.4's
    // IDE driver), holds for the policy's merges and the host's requests.
    let mut limits = dev.limits();
    if let Some(m) = config.max_sectors {
        limits.max_sectors = limits.max_sectors.min(m.max(1));
    }

    let mut values: Vec<(&str, i64)> = scenario
        .tunables
        .get(sched_type.name)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    for (p, k, v) in overrides.iter().filter(|(p, _, _)| p != "block") {
        if elevator_sched::find(p).is_some_and(|t| t.name == sched_type.name) {
            values.push((k.as_str(), *v));
        }
    }
    let tunables = sched_type
        .tunables(values)
        .map_err(|e| cli(e.to_string()))?;
    // blk-throttle sits above the rq-qos layers (io.latency, io.cost), which
    // sit above the elevator.
    let mut sched = (sched_type.build)(&tunables, &limits);
    sched.set_groups(&scenario.groups);
    // wbt is the queue's first rq-qos policy, so the others run before it.
    let wbt = wbt_setting(scenario, sched_type.name, &limits);
    if let Some(Ok(params)) = wbt {
        sched = Box::new(Wbt::new(sched, &limits, params));
    }
    if scenario.groups.has_latency_targets() {
        sched = Box::new(LatencyLimiter::new(sched, scenario.groups.clone(), &limits));
    }
    if let Some(ic) = &scenario.iocost {
        sched = Box::new(IoCost::new(
            sched,
            &scenario.groups,
            &limits,
            Some(&ic.model),
            Some(&ic.qos),
        ));
    }
    if scenario.groups.has_limits() {
        sched = Box::new(Throttle::new(sched, scenario.groups.clone()));
    }

    let (mut mix, measured, job_groups) = build_workload(
        scenario,
        sched_type.name,
        &limits,
        seed,
        config.nr_requests[1],
    )?;
    let mut engine = Engine::new(sched, dev, config);
    engine.set_context(replay_context(
        scenario,
        sched_type.name,
        device,
        seed,
        overrides,
    ));
    if record.trace {
        engine.enable_trace();
    }
    if record.charts {
        mix.record_series();
    }
    if let Some(clock) = record.clock {
        engine.publish_time(clock);
    }
    let summary = engine.run(&mut mix);
    let trace = engine.take_trace();

    let stats = mix.stats();
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
    let total_bytes: u64 = jobs.iter().map(|j| j.bytes).sum();
    Ok(RunReport {
        scheduler: sched_type.name.to_string(),
        variant: None,
        groups,
        tunables: tunables
            .iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<BTreeMap<_, _>>(),
        block: {
            let mut block = block_settings(&config);
            if let Some(w) = wbt {
                block.insert("wbt".to_string(), wbt_shown(w));
            }
            block
        },
        result: ResultValue {
            name: scenario.result.name.clone(),
            unit: scenario.result.unit.clone(),
            value,
            cut,
        },
        published: scenario.published.get(sched_type.name).cloned(),
        simulated_s: end_s,
        aggregate_mb_s: if end_s > 0.0 {
            total_bytes as f64 / 1e6 / end_s
        } else {
            0.0
        },
        device: DeviceReport {
            busy_s,
            utilization: if end_s > 0.0 {
                (busy_s / end_s).min(1.0)
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

/// What `[wbt]` gives `policy` on a device with `limits`: wbt's settings,
/// or why the kernel runs it without (`None` without the section).
pub fn wbt_setting(
    scenario: &Scenario,
    policy: &str,
    limits: &QueueLimits,
) -> Option<Result<WbtParams, &'static str>> {
    let spec = scenario.wbt?;
    let lat_usec = spec
        .lat_usec
        .unwrap_or_else(|| elevator_sched::group::wbt::default_lat_usec(limits.rotational));
    Some(if lat_usec == 0 {
        Err("wbt_lat_usec=0")
    } else if let Some(why) = elevator_sched::group::wbt::disabled_by(policy) {
        Err(why)
    } else if scenario.iocost.as_ref().is_some_and(|ic| ic.qos.enable) {
        // ioc_qos_write: enabling io.cost calls wbt_disable_default.
        Err("iocost")
    } else {
        Ok(WbtParams {
            lat_usec,
            write_cache: spec.write_cache,
        })
    })
}

/// The `wbt` entry of a run's settings: `2000us`, or `off(bfq)`.
fn wbt_shown(setting: Result<WbtParams, &'static str>) -> String {
    match setting {
        Ok(p) if p.write_cache => format!("{}us", p.lat_usec),
        Ok(p) => format!("{}us(write-through)", p.lat_usec),
        Err(why) => format!("off({why})"),
    }
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

/// A `--set block.NAME=VALUE` override (sizes in bytes; 0 lifts a limit).
pub fn apply_block(config: &mut EngineConfig, name: &str, value: i64) -> Result<(), String> {
    let n = usize::try_from(value).map_err(|_| "must not be negative".to_string())?;
    match name {
        "nr_requests" if n > 0 => config.nr_requests = [n, n],
        "batch_requests" if n > 0 => config.batch_requests = n,
        "steal" => config.steal = n != 0,
        "inflight_limit" => {
            config.inflight_limit = (n > 0).then_some((n as u64).div_ceil(SECTOR_SIZE));
        }
        "max_sectors" => {
            let sectors = (n as u64).div_ceil(SECTOR_SIZE);
            config.max_sectors = match u32::try_from(sectors) {
                Ok(0) => None,
                Ok(s) => Some(s),
                Err(_) => return Err("over 2 TiB".into()),
            };
        }
        "restart_before_wakeup" => config.restart_before_wakeup = n != 0,
        // ns of policy CPU per request (elevator_sched::cost); 0: off.
        "cpu_cost" => config.cpu_cost = elevator_core::Duration(n as u64),
        // 1: the linux-2.6.32 allocation (sync/async lists, batching,
        // may_queue); 0: the linux-2.6 one.
        "sync_lists" => config.sync_lists = n != 0,
        // 1: the lists' congestion bits reach the host's writeback
        // (linux-2.6.32); 0: the host judges congestion itself.
        "congestion" => config.congestion = n != 0,
        // 1: 2.6.32's plugging (unplug_thresh 4, unplug_delay 3 ms); 0: none.
        "plugging" => config.plugging = (n != 0).then_some(elevator_sim::Plugging::LINUX_2632),
        "nr_requests" | "batch_requests" => return Err("must be at least 1".into()),
        other => {
            return Err(format!(
                "no block setting {other:?} (nr_requests, batch_requests, steal, inflight_limit, \
                 max_sectors, restart_before_wakeup, sync_lists, congestion, plugging, cpu_cost)"
            ))
        }
    }
    Ok(())
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
