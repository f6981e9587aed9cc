//! The scenario file format and its validation.

pub(crate) use crate::block::RawBlock;
pub(crate) use crate::ctx::Ctx;
pub use crate::ctx::MAX_TICKS;
use crate::error::{key_on_line, Lines, ScenarioError};
use crate::result::{Metric, RawResultChecked, Reduce, ResultSpec};
use crate::sweep::Sweep;
use elevator_core::{
    Duration, GroupId, GroupTree, Instant, IoMax, IoPrio, IoThrottleLimits, DEFAULT_WEIGHT,
    MAX_WEIGHT, SECTOR_SIZE,
};
use elevator_device::FaultSpec;
use elevator_sched::group::iocost_params::{IocostSpec, ParamError};
use elevator_sched::group::wbt::WbtSpec;
use elevator_sched::stack::{self, Origin};
use elevator_sim::EngineConfig;
use elevator_workload::Pattern;
use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// Policies run when neither the scenario nor the command line names any.
pub const DEFAULT_SCHEDULERS: &[&str] = &["noop", "deadline"];
/// The device when the scenario names none: the 2003 benchmarks' disk.
pub const DEFAULT_DEVICE: &str = "ide-2003";
/// A run stops after this much simulated time unless the scenario says otherwise.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(3600);

/// The largest scenario file read: a few thousand jobs fit in a few
/// hundred kilobytes, and a cap keeps `/dev/zero` or a log given by mistake
/// from filling memory.
pub const MAX_SCENARIO_BYTES: usize = 4 << 20;

/// The most tasks (job instances, processes and their threads) a scenario
/// may start: the kernel's default `pid_max` (`PID_MAX_DEFAULT`, 0x8000,
/// include/linux/threads.h), so that a mistyped count fails at once
/// instead of filling memory.
pub const MAX_TASKS: u64 = 0x8000;

/// The most disks a scenario may run its setup on (`disks`): a 2009
/// 16-way box with 12 disks is the largest setup the seeds describe, and
/// each disk is a whole simulation.
pub const MAX_DISKS: i64 = 64;

type S<T> = Spanned<T>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    description: String,
    device: Option<S<String>>,
    schedulers: Option<Vec<S<String>>>,
    seed: Option<u64>,
    time_limit: Option<S<String>>,
    disks: Option<S<i64>>,
    per_job: Option<S<String>>,
    per_group: Option<S<String>>,
    result: RawResult,
    #[serde(default)]
    published: BTreeMap<String, String>,
    #[serde(default)]
    table: Vec<S<crate::table::RawTable>>,
    #[serde(default)]
    sched: BTreeMap<String, BTreeMap<String, S<i64>>>,
    #[serde(default)]
    block: RawBlock,
    faults: Option<S<RawFaults>>,
    iocost: Option<S<RawIocost>>,
    wbt: Option<S<RawWbt>>,
    #[serde(default)]
    presets: BTreeMap<String, S<String>>,
    #[serde(default)]
    group: Vec<RawGroup>,
    sweep: Option<RawSweep>,
    #[serde(default)]
    job: Vec<RawJob>,
    host: Option<S<crate::host::RawHost>>,
    #[serde(default)]
    files: Vec<crate::host::RawFiles>,
    #[serde(default)]
    process: Vec<crate::host::RawProcess>,
    #[serde(default)]
    startup: Vec<crate::startup::RawStartup>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    name: S<String>,
    parent: Option<S<String>>,
    weight: Option<S<i64>>,
    io_max: Option<S<String>>,
    io_throttle: Option<S<String>>,
    latency_target: Option<S<String>>,
    reservation: Option<S<i64>>,
    limit: Option<S<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    job: Option<S<String>>,
    count: Option<S<Vec<i64>>>,
    prio: Option<S<Vec<String>>>,
    inflight_limit: Option<S<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResult {
    name: String,
    unit: String,
    metric: S<String>,
    job: Option<S<String>>,
    group: Option<S<String>>,
    reduce: Option<S<String>>,
}

/// `[iocost]`: the io.cost controller in front of every policy, with the
/// kernel's `io.cost.model` and `io.cost.qos` lines (without `MAJ:MIN`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIocost {
    model: Option<S<String>>,
    qos: Option<S<String>>,
}

/// `[wbt]`: writeback throttling in front of every policy the kernel runs
/// it under, with the queue's `wbt_lat_usec` and `write_cache`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWbt {
    /// An integer or `"default"`: any TOML value, checked in [`wbt`].
    lat_usec: Option<S<toml::Value>>,
    write_cache: Option<S<String>>,
}

/// `[faults]`: errors, timeouts and stalls injected by the device.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFaults {
    eio_rate: Option<S<f64>>,
    timeout_rate: Option<S<f64>>,
    stall_rate: Option<S<f64>>,
    timeout: Option<S<String>>,
    stall: Option<S<String>>,
    #[serde(default)]
    eio_at: Vec<S<String>>,
    #[serde(default)]
    stall_at: Vec<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    name: S<String>,
    count: Option<S<i64>>,
    rw: S<String>,
    rwmixread: Option<S<i64>>,
    bs: S<String>,
    size: Option<S<String>>,
    runtime: Option<S<String>>,
    offset: Option<S<String>>,
    region: Option<S<String>>,
    offset_increment: Option<S<String>>,
    iodepth: Option<S<i64>>,
    think: Option<S<String>>,
    prio: Option<S<String>>,
    start: Option<S<String>>,
    sync: Option<bool>,
    background: Option<bool>,
    group: Option<S<String>>,
    period: Option<S<String>>,
}

/// A validated job description; `count` instances become tasks.
#[derive(Clone, Debug, PartialEq)]
pub struct JobTemplate {
    pub name: String,
    pub line: usize,
    pub count: u32,
    pub pattern: Pattern,
    pub read_percent: u8,
    pub bs: u64,
    pub size: Option<u64>,
    pub runtime: Option<Duration>,
    pub offset: u64,
    /// Bytes each instance may touch from its offset (default: `size`).
    pub region: Option<u64>,
    /// Offset step between instances (default: the region).
    pub offset_increment: Option<u64>,
    pub iodepth: u32,
    pub think: Duration,
    pub prio: IoPrio,
    pub start: Duration,
    pub sync_writes: bool,
    pub background: bool,
    pub group: GroupId,
    /// Read one `bs` frame per period (a media player; `frames_missed`).
    pub period: Option<Duration>,
}

/// A validated scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub file: String,
    pub name: String,
    pub description: String,
    pub device: String,
    pub schedulers: Vec<String>,
    pub seed: u64,
    pub time_limit: Duration,
    /// The whole setup runs on this many identical, independent disks
    /// (each its own device, block layer, policy and copy of every job and
    /// process, with a seed derived from the run's for every disk after
    /// the first), and each job's figures are summed over them: a test run
    /// "for each of 12 attached disks" and tabulated per task, as
    /// Brunelle's 2009 tables are. 1 unless the file says `disks = N`.
    pub disks: u32,
    /// The per-job table shows KiB read and written (`per_job = "kib"`,
    /// the layout of Brunelle's 2009 priority tables) instead of times,
    /// rates and latencies (`"default"`).
    pub per_job_kib: bool,
    /// The per-group table has one row per run and two columns (MB/s,
    /// IOPS) per group (`per_group = "wide"`, the layout of the 2009 group
    /// controller tables: both groups' figures per nr on one line) instead
    /// of one row per group (`"default"`).
    pub per_group_wide: bool,
    pub result: ResultSpec,
    pub published: BTreeMap<String, String>,
    /// `[[table]]`: published tables of any shape, each cell a figure of
    /// one run (`table.rs`).
    pub tables: Vec<crate::table::TableSpec>,
    /// Tunable overrides per policy, already checked against the registry.
    pub tunables: BTreeMap<String, BTreeMap<String, i64>>,
    /// The block layer below the policy (slots, in-flight limit).
    pub block: EngineConfig,
    /// Faults the device injects (`[faults]`); empty: a healthy device.
    pub faults: FaultSpec,
    /// Block layers for policies that run on another kernel's preset.
    pub block_by_policy: BTreeMap<String, EngineConfig>,
    /// The control groups (just the root unless the file declares some).
    pub groups: GroupTree,
    /// `[iocost]`: io.cost in front of the policy, group weights as
    /// `io.weight`; `None` without the section.
    pub iocost: Option<IocostSpec>,
    /// `[wbt]`: blk-wbt in front of the policies the kernel runs it under;
    /// `None` without the section (no writeback throttling).
    pub wbt: Option<WbtSpec>,
    pub sweep: Option<Sweep>,
    pub jobs: Vec<JobTemplate>,
    /// The host, its file sets and its processes, if the scenario has any.
    pub host: Option<crate::host::HostSpec>,
    /// Application start-ups replayed from traces (`[[startup]]`).
    pub startups: Vec<crate::startup::StartupSpec>,
}

impl Scenario {
    /// How many variants a run of this scenario has per policy: one per
    /// sweep point, or one.
    pub fn sweep_points(&self) -> usize {
        match &self.sweep {
            None => 1,
            Some(Sweep::Count { counts, .. }) => counts.len(),
            Some(Sweep::Prio { prios, .. }) => prios.len(),
            Some(Sweep::InflightLimit(limits)) => limits.len(),
        }
    }

    /// Parse and validate scenario `text` read from `file`.
    pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        if text.len() > MAX_SCENARIO_BYTES {
            return Err(ScenarioError::new(
                file,
                None,
                None,
                format!(
                    "{} bytes: a scenario file is at most {MAX_SCENARIO_BYTES} bytes",
                    text.len()
                ),
            ));
        }
        let raw: RawScenario = toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;
        let cx = Ctx {
            file,
            lines: Lines::new(text),
        };

        let device = match &raw.device {
            None => DEFAULT_DEVICE.to_string(),
            Some(d) => {
                // Opened here so that a bad name or profile is blamed on
                // this line, not on the command line at run time.
                elevator_device::open(d.get_ref())
                    .map_err(|e| cx.at(d, "device", e.to_string()))?;
                d.get_ref().clone()
            }
        };
        let schedulers = match &raw.schedulers {
            None => DEFAULT_SCHEDULERS.iter().map(|s| s.to_string()).collect(),
            Some(list) if list.is_empty() => {
                let line = text
                    .lines()
                    .position(|l| l.trim_start().starts_with("schedulers"))
                    .map(|i| i + 1);
                return Err(ScenarioError::new(
                    file,
                    line,
                    Some("schedulers"),
                    "an empty list: name at least one policy, or leave the key out for the defaults",
                ));
            }
            Some(list) => {
                let mut names = Vec::new();
                for s in list {
                    let t = stack::policy(s.get_ref(), cx.origin(s, "schedulers"))?;
                    if names.iter().any(|n| n == t.name) {
                        return Err(cx.at(
                            s,
                            "schedulers",
                            format!("{:?} is listed twice", s.get_ref()),
                        ));
                    }
                    names.push(t.name.to_string());
                }
                names
            }
        };
        let time_limit = match &raw.time_limit {
            Some(t) => cx.duration(t, "time_limit")?,
            None => DEFAULT_TIME_LIMIT,
        };
        let disks = match &raw.disks {
            Some(d) => cx.int(d, "disks", 1, MAX_DISKS)? as u32,
            None => 1,
        };
        let per_job_kib = cx.either(&raw.per_job, "per_job", ["default", "kib"], false)?;
        let per_group_wide = cx.either(&raw.per_group, "per_group", ["default", "wide"], false)?;

        let mut tunables = BTreeMap::new();
        for (policy, values) in &raw.sched {
            let at = values.values().next().map(|v| cx.line(v.span().start));
            let key = format!("sched.{policy}");
            let t = stack::policy(policy, Origin::file(file, at, &key))?;
            let mut resolved = BTreeMap::new();
            for (name, value) in values {
                let key = format!("sched.{policy}.{name}");
                t.tunables([(name.as_str(), *value.get_ref())])
                    .map_err(|e| cx.at(value, &key, e.to_string()))?;
                resolved.insert(name.clone(), *value.get_ref());
            }
            tunables.insert(t.name.to_string(), resolved);
        }

        let block = block_config(&cx, &raw.block, None)?;
        let faults = faults(&cx, &raw.faults)?;
        let iocost = iocost(&cx, &raw.iocost)?;
        let wbt = wbt(&cx, &raw.wbt)?;

        let groups = group_tree(&cx, &raw.group)?;
        let mut jobs = Vec::new();
        for j in &raw.job {
            jobs.push(job(&cx, j, &groups, time_limit)?);
        }
        let startups = crate::startup::validate(&cx, &raw.startup)?;
        let mut host = crate::host::parse_host(
            &cx,
            &raw.host,
            &raw.block,
            &raw.files,
            &raw.process,
            &groups,
        )?;
        let processes: Vec<String> = host.as_ref().map_or(Vec::new(), |h| {
            h.processes.iter().map(|p| p.name.clone()).collect()
        });
        let sweep = match &raw.sweep {
            None => None,
            Some(sw) => Some(sweep(&cx, sw, &jobs, &processes)?),
        };
        // `[presets]`: a policy that runs on another kernel's host and block
        // layer (the 2003 tables' 2.4 column: linus24 on 2.4).
        let mut block_by_policy = BTreeMap::new();
        for (policy, preset) in &raw.presets {
            let key = format!("presets.{policy}");
            let t = stack::policy(policy, cx.origin(preset, &key))?;
            if !["linux-2.6", "linux-2.4", "linux-2.6.32"].contains(&preset.get_ref().as_str()) {
                return Err(cx.at(
                    preset,
                    &key,
                    format!(
                        "unknown preset {:?} (linux-2.6, linux-2.4, linux-2.6.32)",
                        preset.get_ref()
                    ),
                ));
            }
            block_by_policy.insert(
                t.name.to_string(),
                block_config(&cx, &raw.block, Some(preset.get_ref()))?,
            );
            if let Some(h) = &mut host {
                let default = crate::host::RawHost::default();
                let raw_host = raw.host.as_ref().map_or(&default, |h| h.get_ref());
                // linux-2.6.32's host is 2.6's with READ_META
                // (`HostParams::linux_2_6_32`).
                h.params_by_policy.insert(
                    t.name.to_string(),
                    crate::host::host_params(&cx, raw_host, Some(preset.get_ref()))?,
                );
            }
        }
        check_names_and_tasks(&cx, &raw, &jobs, host.as_ref(), &startups, &sweep)?;
        if let Some(h) = &host {
            for p in &h.processes {
                let Some(name) = p.program.period else {
                    continue;
                };
                let (period, key) = (p.args.time(name), format!("process.{name}"));
                let ticks = time_limit.0 / period.0.max(1);
                if period == Duration::ZERO || ticks > MAX_TICKS {
                    return Err(ScenarioError::new(
                        file,
                        Some(p.line),
                        Some(&key),
                        format!(
                            "{} wake-ups within the time limit; a period is positive and \
                             gives at most {MAX_TICKS}",
                            ticks
                        ),
                    ));
                }
            }
        }
        let measured_jobs = jobs.iter().filter(|j| !j.background).count();
        let measured_procs = host
            .as_ref()
            .map_or(0, |h| h.processes.iter().filter(|p| !p.background).count());
        if measured_jobs + measured_procs + startups.len() == 0 {
            return Err(ScenarioError::new(
                file,
                None,
                Some("job"),
                "the scenario needs at least one job or process that is not `background`: the run ends when the measured ones end",
            ));
        }
        let mut names: Vec<String> = jobs.iter().map(|j| j.name.clone()).collect();
        if let Some(h) = &host {
            names.extend(h.processes.iter().map(|p| p.name.clone()));
        }
        names.extend(startups.iter().map(|s| s.name.clone()));
        let result = ResultSpec::parse(&cx_result(&cx, &raw.result, &groups)?, &names)
            .map_err(|m| cx.at(&raw.result.metric, "result", m))?;
        let tables = crate::table::parse_tables(
            &cx,
            &raw.table,
            &crate::table::Known {
                schedulers: &schedulers,
                names: &names,
                groups: &groups,
                sweep: sweep.as_ref(),
            },
        )?;

        Ok(Scenario {
            file: file.to_string(),
            name: raw.name,
            description: raw.description,
            device,
            schedulers,
            seed: raw.seed.unwrap_or(1),
            time_limit,
            disks,
            per_job_kib,
            per_group_wide,
            result,
            published: raw.published,
            tables,
            tunables,
            block,
            faults,
            block_by_policy,
            groups,
            iocost,
            wbt,
            sweep,
            jobs,
            host,
            startups,
        })
    }
}

/// Every job, process and start-up names its own report row, so names are
/// unique across all three; and all of them together start at most
/// [`MAX_TASKS`] tasks.
fn check_names_and_tasks(
    cx: &Ctx<'_>,
    raw: &RawScenario,
    jobs: &[JobTemplate],
    host: Option<&crate::host::HostSpec>,
    startups: &[crate::startup::StartupSpec],
    sweep: &Option<Sweep>,
) -> Result<(), ScenarioError> {
    let mut seen = std::collections::HashSet::new();
    let mut rows: Vec<(&str, usize, &str)> = Vec::new();
    rows.extend(jobs.iter().map(|j| (j.name.as_str(), j.line, "job.name")));
    if let Some(h) = host {
        rows.extend(
            h.processes
                .iter()
                .map(|p| (p.name.as_str(), p.line, "process.name")),
        );
    }
    rows.extend(
        startups
            .iter()
            .map(|s| (s.name.as_str(), s.line, "startup.name")),
    );
    for (name, line, key) in rows {
        if !seen.insert(name) {
            return Err(ScenarioError::new(
                cx.file,
                Some(line),
                Some(key),
                format!("{name:?} names an earlier job, process or start-up too"),
            ));
        }
    }
    let swept = |j: &JobTemplate| match sweep {
        Some(Sweep::Count { job, counts }) if *job == j.name => {
            counts.iter().copied().max().unwrap_or(j.count)
        }
        _ => j.count,
    };
    let mut tasks: u64 = jobs.iter().map(|j| u64::from(swept(j))).sum();
    if let Some(h) = host {
        for p in &h.processes {
            let threads = (p.program.tasks)(&p.args);
            tasks += u64::from(p.count) * threads;
        }
    }
    tasks += startups.len() as u64;
    if tasks > MAX_TASKS {
        let at = raw.job.first().map(|j| cx.line(j.name.span().start));
        return Err(ScenarioError::new(
            cx.file,
            at,
            Some("count"),
            format!(
                "{tasks} tasks in all (job and process instances, threads); at most {MAX_TASKS}"
            ),
        ));
    }
    Ok(())
}

/// A TOML or shape error where TOML puts it, except a missing top-level
/// table or key, which TOML places at the top of the file: that one is
/// blamed on the key alone, with no line to mislead.
fn toml_error(file: &str, text: &str, e: &toml::de::Error) -> ScenarioError {
    let message = e.message().trim().to_string();
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|m| m.strip_suffix('`'))
        .filter(|m| TOP_LEVEL_REQUIRED.contains(m));
    let at = e.span().map(|s| s.start);
    match (missing, at) {
        (Some(key), Some(0) | None) => ScenarioError::new(
            file,
            None,
            Some(key),
            format!("the scenario has no `{key}` (a top-level key or table it needs)"),
        ),
        // One line: TOML's longer messages go on with "expected ...".
        _ => ScenarioError {
            file: file.to_string(),
            line: at.map(|a| Lines::new(text).line(a)),
            // The field a shape error names (a stray or missing key, also
            // inside an inline table, whose line starts `{ label = ...`),
            // else the key assigned on the line.
            key: named_field(&message).or_else(|| at.and_then(|a| key_on_line(text, a))),
            message: message
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; "),
        },
    }
}

/// The field of serde's "unknown field `x`" and "missing field `x`".
fn named_field(message: &str) -> Option<String> {
    ["unknown field `", "missing field `"].iter().find_map(|p| {
        let rest = message.strip_prefix(p)?;
        Some(rest[..rest.find('`')?].to_string())
    })
}

/// The top-level keys and tables every scenario has.
const TOP_LEVEL_REQUIRED: &[&str] = &["name", "description", "result"];

fn cx_result(
    cx: &Ctx<'_>,
    r: &RawResult,
    groups: &GroupTree,
) -> Result<RawResultChecked, ScenarioError> {
    let metric = r
        .metric
        .get_ref()
        .parse::<Metric>()
        .map_err(|m| cx.at(&r.metric, "result.metric", m))?;
    let reduce = match &r.reduce {
        Some(x) => Some(
            x.get_ref()
                .parse::<Reduce>()
                .map_err(|m| cx.at(x, "result.reduce", m))?,
        ),
        None => None,
    };
    if let Some(j) = &r.job {
        if j.get_ref().is_empty() {
            return Err(cx.at(j, "result.job", "empty job name"));
        }
    }
    if let Some(g) = &r.group {
        if r.job.is_some() {
            return Err(cx.at(g, "result.group", "name a job or a group, not both"));
        }
        if groups.find(g.get_ref()).is_none() {
            return Err(cx.at(
                g,
                "result.group",
                format!("no group named {:?}", g.get_ref()),
            ));
        }
    }
    Ok(RawResultChecked {
        name: r.name.clone(),
        unit: r.unit.clone(),
        metric,
        job: r.job.as_ref().map(|j| j.get_ref().clone()),
        group: r.group.as_ref().map(|g| g.get_ref().clone()),
        reduce,
    })
}

/// Bytes as a size, or `max` for none; returned in sectors.
fn limit_sectors(cx: &Ctx<'_>, v: &S<String>, key: &str) -> Result<Option<u64>, ScenarioError> {
    if v.get_ref().trim() == "max" {
        return Ok(None);
    }
    let bytes = cx.size(v, key)?;
    if bytes < SECTOR_SIZE {
        return Err(cx.at(v, key, "at least one sector (512 bytes), or max"));
    }
    Ok(Some(bytes / SECTOR_SIZE))
}

/// `[iocost]`: each line parsed as the kernel parses its file.
fn iocost(cx: &Ctx<'_>, raw: &Option<S<RawIocost>>) -> Result<Option<IocostSpec>, ScenarioError> {
    let Some(raw) = raw else { return Ok(None) };
    let r = raw.get_ref();
    let mut spec = IocostSpec::default();
    if let Some(m) = &r.model {
        spec.model = m
            .get_ref()
            .parse()
            .map_err(|e: ParamError| cx.at(m, "iocost.model", e.to_string()))?;
    }
    if let Some(q) = &r.qos {
        spec.qos = q
            .get_ref()
            .parse()
            .map_err(|e: ParamError| cx.at(q, "iocost.qos", e.to_string()))?;
    }
    Ok(Some(spec))
}

/// The largest `wbt_lat_usec`: the kernel multiplies it by 1000 into a
/// signed 64-bit count of nanoseconds (`queue_wb_lat_store`).
pub const MAX_WBT_LAT_USEC: u64 = i64::MAX as u64 / 1000;

/// `[wbt]`: `lat_usec` as sysfs `wbt_lat_usec` takes it (microseconds; 0
/// off; -1 or "default" the kernel's default for the device), and
/// `write_cache` as sysfs `write_cache` ("write back", "write through").
fn wbt(cx: &Ctx<'_>, raw: &Option<S<RawWbt>>) -> Result<Option<WbtSpec>, ScenarioError> {
    let Some(raw) = raw else { return Ok(None) };
    let r = raw.get_ref();
    let lat_usec = match &r.lat_usec {
        None => None,
        Some(v) => match v.get_ref() {
            toml::Value::String(w) if w == "default" => None,
            toml::Value::Integer(-1) => None,
            toml::Value::Integer(n) if (0..=MAX_WBT_LAT_USEC as i64).contains(n) => Some(*n as u64),
            other => {
                return Err(cx.at(
                    v,
                    "wbt.lat_usec",
                    format!(
                        "{other}: microseconds from 0 (off) to {MAX_WBT_LAT_USEC}, or -1 or \
                         \"default\" for the kernel's default"
                    ),
                ))
            }
        },
    };
    let write_cache = cx.either(
        &r.write_cache,
        "wbt.write_cache",
        ["write through", "write back"],
        true,
    )?;
    Ok(Some(WbtSpec {
        lat_usec,
        write_cache,
    }))
}

/// `[faults]`: each rate a probability per request (0 to 0.5), times as
/// durations from the start of the run.
fn faults(cx: &Ctx<'_>, raw: &Option<S<RawFaults>>) -> Result<FaultSpec, ScenarioError> {
    let mut spec = FaultSpec::default();
    let Some(raw) = raw else { return Ok(spec) };
    let f = raw.get_ref();
    for (rate, key, out) in [
        (&f.eio_rate, "faults.eio_rate", &mut spec.eio_rate),
        (
            &f.timeout_rate,
            "faults.timeout_rate",
            &mut spec.timeout_rate,
        ),
        (&f.stall_rate, "faults.stall_rate", &mut spec.stall_rate),
    ] {
        if let Some(r) = rate {
            let x = *r.get_ref();
            if !(0.0..=0.5).contains(&x) {
                return Err(cx.at(r, key, format!("{x} is not a probability in 0..=0.5")));
            }
            *out = x;
        }
    }
    for (d, key, out) in [
        (&f.timeout, "faults.timeout", &mut spec.timeout),
        (&f.stall, "faults.stall", &mut spec.stall),
    ] {
        if let Some(d) = d {
            let x = cx.duration(d, key)?;
            if x < Duration::from_millis(1) {
                return Err(cx.at(d, key, "must be at least 1ms"));
            }
            *out = x;
        }
    }
    for (times, key, out) in [
        (&f.eio_at, "faults.eio_at", &mut spec.eio_at),
        (&f.stall_at, "faults.stall_at", &mut spec.stall_at),
    ] {
        for t in times {
            out.push(Instant::ZERO + cx.duration(t, key)?);
        }
    }
    if spec.eio_rate + spec.timeout_rate + spec.stall_rate > 0.5 {
        return Err(cx.at(raw, "faults", "the rates must add up to at most 0.5"));
    }
    Ok(spec)
}

/// `[block]`: a preset, then its fields overridden one by one.
fn block_config(
    cx: &Ctx<'_>,
    b: &RawBlock,
    preset: Option<&str>,
) -> Result<EngineConfig, ScenarioError> {
    let mut config = match (preset, &b.preset) {
        (Some("linux-2.4"), _) => EngineConfig::linux_24(),
        (Some("linux-2.6.32"), _) => EngineConfig::linux_2632(),
        (Some(_), _) => EngineConfig::linux_26(),
        (None, None) => EngineConfig::linux_26(),
        (None, Some(p)) => match p.get_ref().as_str() {
            "linux-2.6" => EngineConfig::linux_26(),
            "linux-2.4" => EngineConfig::linux_24(),
            "linux-2.6.32" => EngineConfig::linux_2632(),
            other => {
                return Err(cx.at(
                    p,
                    "block.preset",
                    format!("unknown preset {other:?} (linux-2.6, linux-2.4, linux-2.6.32)"),
                ))
            }
        },
    };
    if let Some(n) = &b.nr_requests {
        let n = cx.int(n, "block.nr_requests", 1, 1 << 20)? as usize;
        config.nr_requests = [n, n];
    }
    if let Some(n) = &b.batch_requests {
        config.batch_requests = cx.int(n, "block.batch_requests", 1, 1 << 20)? as usize;
    }
    if let Some(steal) = b.steal {
        config.steal = steal;
    }
    if let Some(l) = &b.inflight_limit {
        config.inflight_limit = limit_sectors(cx, l, "block.inflight_limit")?;
    }
    if let Some(m) = &b.max_sectors {
        config.max_sectors = match limit_sectors(cx, m, "block.max_sectors")? {
            Some(n) => {
                Some(u32::try_from(n).map_err(|_| cx.at(m, "block.max_sectors", "over 2 TiB"))?)
            }
            None => None,
        };
    }
    if let Some(r) = b.restart_before_wakeup {
        config.restart_before_wakeup = r;
    }
    Ok(config)
}

fn sweep(
    cx: &Ctx<'_>,
    sw: &RawSweep,
    jobs: &[JobTemplate],
    processes: &[String],
) -> Result<Sweep, ScenarioError> {
    if let (Some(target), None, Some(prios), None) =
        (&sw.job, &sw.count, &sw.prio, &sw.inflight_limit)
    {
        let name = target.get_ref();
        if !jobs.iter().any(|j| &j.name == name) && !processes.iter().any(|p| p == name) {
            return Err(cx.at(
                target,
                "sweep.job",
                format!("no job or process named {name:?}"),
            ));
        }
        if prios.get_ref().is_empty() {
            return Err(cx.at(prios, "sweep.prio", "an empty list"));
        }
        let mut out: Vec<(String, IoPrio)> = Vec::new();
        for p in prios.get_ref() {
            let prio = p
                .parse::<IoPrio>()
                .map_err(|e| cx.at(prios, "sweep.prio", e.to_string()))?;
            if out.iter().any(|(t, _)| t == p) {
                return Err(cx.at(prios, "sweep.prio", format!("{p:?} is listed twice")));
            }
            out.push((p.clone(), prio));
        }
        return Ok(Sweep::Prio {
            target: name.clone(),
            prios: out,
        });
    }
    if let Some(p) = &sw.prio {
        return Err(cx.at(p, "sweep.prio", "sweep `job` with `prio`, and nothing else"));
    }
    match (&sw.job, &sw.count, &sw.inflight_limit) {
        (Some(job), Some(count), None) => {
            if !jobs.iter().any(|j| &j.name == job.get_ref()) {
                return Err(cx.at(
                    job,
                    "sweep.job",
                    format!("no job named {:?}", job.get_ref()),
                ));
            }
            let counts = count.get_ref();
            if counts.is_empty() || counts.iter().any(|&c| !(1..=4096).contains(&c)) {
                return Err(cx.at(
                    count,
                    "sweep.count",
                    "a list of instance counts, each 1..=4096",
                ));
            }
            Ok(Sweep::Count {
                job: job.get_ref().clone(),
                counts: counts.iter().map(|&c| c as u32).collect(),
            })
        }
        (None, None, Some(limits)) => {
            if limits.get_ref().is_empty() {
                return Err(cx.at(limits, "sweep.inflight_limit", "an empty list"));
            }
            let mut out = Vec::new();
            for l in limits.get_ref() {
                let spanned = S::new(limits.span(), l.clone());
                out.push(limit_sectors(cx, &spanned, "sweep.inflight_limit")?);
            }
            Ok(Sweep::InflightLimit(out))
        }
        _ => Err(ScenarioError::new(
            cx.file,
            [
                sw.job.as_ref().map(|v| v.span().start),
                sw.count.as_ref().map(|v| v.span().start),
                sw.inflight_limit.as_ref().map(|v| v.span().start),
            ]
            .into_iter()
            .flatten()
            .min()
            .map(|at| cx.line(at)),
            Some("sweep"),
            "sweep either `job` with `count` or `prio`, or `inflight_limit`",
        )),
    }
}

/// The largest mClock reservation or limit accepted, in IOPS: a sanity
/// bound, well above what any of our device profiles can serve.
const MAX_MCLOCK_IOPS: i64 = 10_000_000;

/// The `[[group]]` sections as a tree; parents must come first.
fn group_tree(cx: &Ctx<'_>, raw: &[RawGroup]) -> Result<GroupTree, ScenarioError> {
    let mut tree = GroupTree::default();
    for g in raw {
        let name = g.name.get_ref();
        if name.is_empty() || name.contains(char::is_whitespace) || tree.find(name).is_some() {
            return Err(cx.at(
                &g.name,
                "group.name",
                format!("{name:?}: a group name is one word, unique, and not \"root\""),
            ));
        }
        let parent = match &g.parent {
            None => GroupId::ROOT,
            Some(p) => tree.find(p.get_ref()).ok_or_else(|| {
                cx.at(
                    p,
                    "group.parent",
                    format!("no group {:?} declared above this one", p.get_ref()),
                )
            })?,
        };
        let weight = match &g.weight {
            Some(w) => cx.int(w, "group.weight", 1, i64::from(MAX_WEIGHT))? as u32,
            None => DEFAULT_WEIGHT,
        };
        let max = match &g.io_max {
            Some(m) => m
                .get_ref()
                .parse::<IoMax>()
                .map_err(|e| cx.at(m, "group.io_max", e.to_string()))?,
            None => IoMax::default(),
        };
        let id = tree.add(name, parent, weight, max);
        if let Some(t) = &g.io_throttle {
            let rules = t.get_ref().parse::<IoThrottleLimits>().map_err(|e| {
                cx.at(
                    t,
                    "group.io_throttle",
                    format!("io-throttle rule {:?}: {}", e.field, e.message),
                )
            })?;
            tree.set_io_throttle(id, rules);
        }
        if let Some(t) = &g.latency_target {
            let target = cx.duration(t, "group.latency_target")?;
            if target == Duration::ZERO {
                return Err(cx.at(t, "group.latency_target", "must be positive"));
            }
            tree.set_latency_target(id, Some(target));
        }
        let iops = |v: &Option<S<i64>>, key| {
            v.as_ref()
                .map(|v| cx.int(v, key, 1, MAX_MCLOCK_IOPS).map(|n| n as u32))
                .transpose()
        };
        let reservation = iops(&g.reservation, "group.reservation")?;
        let limit = iops(&g.limit, "group.limit")?;
        if let (Some(r), Some(l), Some(at)) = (reservation, limit, &g.limit) {
            if l < r {
                return Err(cx.at(
                    at,
                    "group.limit",
                    format!("{l} is below the reservation {r}"),
                ));
            }
        }
        tree.set_mclock(id, reservation, limit);
    }
    Ok(tree)
}

fn job(
    cx: &Ctx<'_>,
    j: &RawJob,
    groups: &GroupTree,
    time_limit: Duration,
) -> Result<JobTemplate, ScenarioError> {
    let name = j.name.get_ref().clone();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(cx.at(&j.name, "job.name", "a job name is one word"));
    }
    let (pattern, default_mix) = match j.rw.get_ref().as_str() {
        "read" => (Pattern::Sequential, 100),
        "write" => (Pattern::Sequential, 0),
        "randread" => (Pattern::Random, 100),
        "randwrite" => (Pattern::Random, 0),
        "rw" | "readwrite" => (Pattern::Sequential, 50),
        "randrw" => (Pattern::Random, 50),
        other => {
            return Err(cx.at(
                &j.rw,
                "job.rw",
                format!("unknown rw {other:?} (read, write, randread, randwrite, rw, randrw)"),
            ))
        }
    };
    let read_percent = match &j.rwmixread {
        // As fio, which reads `rwmixread` only for mixed workloads; a
        // reader or writer that names one was most likely meant as a mix.
        Some(m) if default_mix != 50 => {
            return Err(cx.at(
                m,
                "job.rwmixread",
                format!(
                    "applies to mixed workloads (rw, randrw), not rw = {:?}",
                    j.rw.get_ref()
                ),
            ))
        }
        Some(m) => cx.int(m, "job.rwmixread", 0, 100)? as u8,
        None => default_mix,
    };
    let bs = cx.size(&j.bs, "job.bs")?;
    if bs == 0 || bs % SECTOR_SIZE != 0 || bs > 64 << 20 {
        return Err(cx.at(
            &j.bs,
            "job.bs",
            "block size must be a multiple of 512 bytes, at most 64m",
        ));
    }
    let size = j
        .size
        .as_ref()
        .map(|s| cx.sectors(s, "job.size"))
        .transpose()?;
    let runtime = j
        .runtime
        .as_ref()
        .map(|s| cx.duration(s, "job.runtime"))
        .transpose()?;
    let region = j
        .region
        .as_ref()
        .map(|s| cx.sectors(s, "job.region"))
        .transpose()?;
    let background = j.background.unwrap_or(false);
    if size.is_none() && runtime.is_none() && !background {
        return Err(cx.at(
            &j.name,
            "job.size",
            "a measured job needs `size` or `runtime`",
        ));
    }
    if size.or(region).is_none() {
        return Err(cx.at(
            &j.name,
            "job.region",
            "a job needs `size` or `region` to know where it may go",
        ));
    }
    for (v, raw, key) in [
        (size, &j.size, "job.size"),
        (region, &j.region, "job.region"),
    ] {
        if let (Some(0), Some(raw)) = (v, raw) {
            return Err(cx.at(raw, key, "must not be zero"));
        }
    }
    Ok(JobTemplate {
        name,
        line: cx.line(j.name.span().start),
        count: match &j.count {
            Some(c) => cx.int(c, "job.count", 1, 4096)? as u32,
            None => 1,
        },
        pattern,
        read_percent,
        bs,
        size,
        runtime,
        offset: j
            .offset
            .as_ref()
            .map(|s| cx.sectors(s, "job.offset"))
            .transpose()?
            .unwrap_or(0),
        region,
        offset_increment: j
            .offset_increment
            .as_ref()
            .map(|s| cx.sectors(s, "job.offset_increment"))
            .transpose()?,
        iodepth: match &j.iodepth {
            Some(d) => cx.int(d, "job.iodepth", 1, 65536)? as u32,
            None => 1,
        },
        think: j
            .think
            .as_ref()
            .map(|s| cx.duration(s, "job.think"))
            .transpose()?
            .unwrap_or(Duration::ZERO),
        prio: match &j.prio {
            Some(p) => p
                .get_ref()
                .parse::<IoPrio>()
                .map_err(|e| cx.at(p, "job.prio", e.to_string()))?,
            None => IoPrio::default(),
        },
        start: j
            .start
            .as_ref()
            .map(|s| cx.duration(s, "job.start"))
            .transpose()?
            .unwrap_or(Duration::ZERO),
        sync_writes: j.sync.unwrap_or(true),
        background,
        group: match &j.group {
            None => GroupId::ROOT,
            Some(g) => groups.find(g.get_ref()).ok_or_else(|| {
                cx.at(g, "job.group", format!("no group named {:?}", g.get_ref()))
            })?,
        },
        period: match &j.period {
            None => None,
            Some(p) => Some(cx.period(p, "job.period", time_limit)?),
        },
    })
}
