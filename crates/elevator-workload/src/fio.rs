//! fio job files as workloads, for either engine.
//!
//! The subset of fio 3.42's job-file syntax in
//! ../shared/reference/userspace-peers.md §7: a `[global]` section and job
//! sections of `key=value` lines (or a bare `key` for booleans), `;` and `#`
//! comments, `${VAR}` from the environment, `include FILE` (relative to the
//! including file). Sizes use `kb_base=1024` (`4k` = 4096) and may be a `%`
//! of the target for `size` and `offset`; times are seconds unless suffixed
//! (`us`, `ms`, `s`, `m`, `h`, `d`), except `thinktime`, in microseconds.
//! Each job section becomes `numjobs` [`DirectJob`]s, run together in a
//! [`FioRun`] that records what fio reports per job and direction.
//!
//! Invariants: every option is either understood or an error naming the
//! file, line and option (never silently ignored); options are checked
//! before anything runs.

use crate::{DirectJob, Mix, Pattern};
use elevator_core::{
    Completion, Duration, GroupId, GroupTree, Instant, Io, IoMax, IoPrio, Op, Workload, SECTOR_SIZE,
};
use elevator_core::{IoClass, MAX_WEIGHT};
use elevator_metrics::fio::{FioDirection, FioJob};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A job file error: where, which option, what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FioError {
    pub file: PathBuf,
    pub line: usize,
    pub option: String,
    pub message: String,
}

impl fmt::Display for FioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.file.display(),
            self.line,
            self.option,
            self.message
        )
    }
}

impl std::error::Error for FioError {}

/// One `key[=value]` line, with where it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Opt {
    key: String,
    value: Option<String>,
    file: PathBuf,
    line: usize,
}

impl Opt {
    fn error(&self, message: impl Into<String>) -> FioError {
        FioError {
            file: self.file.clone(),
            line: self.line,
            option: self.key.clone(),
            message: message.into(),
        }
    }

    fn value(&self) -> Result<&str, FioError> {
        self.value
            .as_deref()
            .ok_or_else(|| self.error("needs a value (key=value)"))
    }
}

#[derive(Clone, Debug)]
struct Section {
    name: String,
    file: PathBuf,
    line: usize,
    opts: Vec<Opt>,
}

/// `rw=`: what a job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rw {
    pub random: bool,
    /// Percentage of reads (`rwmixread` for mixed jobs).
    pub read_percent: u8,
}

/// A size or offset: bytes, or a percentage of the target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Amount {
    Bytes(u64),
    Percent(f64),
}

impl Amount {
    fn bytes(self, target: u64) -> u64 {
        match self {
            Amount::Bytes(b) => b,
            Amount::Percent(p) => ((target as f64 * p / 100.0) as u64) / 4096 * 4096,
        }
    }
}

/// One job section with `[global]` applied, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    pub name: String,
    pub rw: Rw,
    /// Bytes per I/O.
    pub bs: u32,
    pub size: Option<Amount>,
    pub offset: Amount,
    pub filename: Option<String>,
    pub numjobs: u32,
    pub iodepth: u32,
    pub direct: bool,
    pub runtime: Option<Duration>,
    pub time_based: bool,
    pub ramp_time: Duration,
    pub startdelay: Duration,
    pub thinktime: Duration,
    /// fio's prioclass (1 RT, 2 BE, 3 IDLE) and prio level.
    pub prio: Option<(u8, u8)>,
    pub cgroup: Option<String>,
    pub cgroup_weight: Option<u32>,
    pub randseed: Option<u64>,
    /// The options as written, for the JSON's "job options".
    pub options: BTreeMap<String, String>,
}

/// A parsed job file.
#[derive(Clone, Debug)]
pub struct JobFile {
    pub path: PathBuf,
    pub global: BTreeMap<String, String>,
    pub jobs: Vec<JobSpec>,
}

/// ioengine names we accept: fio's real ones run on our io_uring runtime
/// (or on the simulator, given `--engine sim`), `elevator-sim` names the
/// simulator.
const ENGINES: &[&str] = &[
    "io_uring",
    "libaio",
    "psync",
    "sync",
    "pvsync",
    "pvsync2",
    "elevator-sim",
];

/// Options in the reference's subset that we do not implement yet: an
/// error, never a silent change of what the job means.
const NOT_YET: &[&str] = &[
    "rate",
    "rate_iops",
    "rate_min",
    "rate_iops_min",
    "rate_process",
    "stonewall",
    "new_group",
    "group_reporting",
    "loops",
    "bsrange",
    "bssplit",
    "thinktime_blocks",
    "thinktime_spin",
    "thinktime_iotime",
    "cmdprio_percentage",
    "cmdprio_class",
    "cmdprio",
    "cmdprio_bssplit",
    "priohint",
    "norandommap",
    "random_distribution",
    "cgroup_nodelete",
    "rwmixwrite",
];

/// Parse the job file at `path`, expanding `${VAR}` from the environment.
pub fn parse_file(path: &Path) -> Result<JobFile, FioError> {
    let env = |name: &str| std::env::var(name).ok();
    parse_file_with(path, &env)
}

/// Most bytes read for one job file, its includes counted (1 MiB; fio's
/// own examples are a few hundred bytes). A file that includes itself many
/// times per line would otherwise expand to thousands of copies within the
/// nesting limit, and `/dev/zero` as a job file would never end. Each read
/// is paid for by an `include` line already read, so a job file reads at
/// most this many bytes and this / 9 files.
pub const MAX_JOB_FILE_BYTES: usize = 1 << 20;

/// As [`parse_file`], with variables from `env`.
pub fn parse_file_with(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<JobFile, FioError> {
    let mut read =
        |p: &Path| elevator_core::read_input(p, MAX_JOB_FILE_BYTES).map_err(|e| e.to_string());
    parse_with_reader(path, env, &mut read)
}

/// As [`parse_file_with`], reading the job file and every file it includes
/// through `read` (the fuzz target serves them from memory). At most
/// [`MAX_JOB_FILE_BYTES`] are read in all.
pub fn parse_with_reader(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    read: &mut dyn FnMut(&Path) -> Result<String, String>,
) -> Result<JobFile, FioError> {
    let mut sections = vec![Section {
        name: "global".into(),
        file: path.to_path_buf(),
        line: 0,
        opts: Vec::new(),
    }];
    let mut input = Input {
        env,
        read,
        budget: MAX_JOB_FILE_BYTES,
    };
    read_lines(path, &mut input, &mut sections, 0, None)?;
    let global_opts = sections.remove(0).opts;
    let mut merged_global: Vec<Opt> = global_opts;
    // `[global]` sections may appear more than once; later ones add.
    let mut jobs_sections = Vec::new();
    for s in sections {
        if s.name == "global" {
            merged_global.extend(s.opts);
        } else {
            jobs_sections.push(s);
        }
    }
    if jobs_sections.is_empty() {
        return Err(FioError {
            file: path.to_path_buf(),
            line: 0,
            option: "[job]".into(),
            message: "no job section".into(),
        });
    }
    let mut jobs = Vec::new();
    for s in &jobs_sections {
        let mut opts: Vec<&Opt> = merged_global.iter().collect();
        opts.extend(s.opts.iter());
        jobs.push(job_spec(s, &opts)?);
    }
    Ok(JobFile {
        path: path.to_path_buf(),
        global: merged_global
            .iter()
            .map(|o| (o.key.clone(), o.value.clone().unwrap_or_default()))
            .collect(),
        jobs,
    })
}

/// Where a job file's text and variables come from, and how many bytes
/// may still be read.
struct Input<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    read: &'a mut dyn FnMut(&Path) -> Result<String, String>,
    budget: usize,
}

fn read_lines(
    path: &Path,
    input: &mut Input<'_>,
    sections: &mut Vec<Section>,
    depth: usize,
    from: Option<&Opt>,
) -> Result<(), FioError> {
    let fail = |message: String| match from {
        Some(o) => o.error(format!("cannot read {}: {message}", path.display())),
        None => FioError {
            file: path.to_path_buf(),
            line: 0,
            option: "file".into(),
            message,
        },
    };
    let text = (input.read)(path).map_err(fail)?;
    input.budget = input.budget.checked_sub(text.len()).ok_or_else(|| {
        fail(format!(
            "the job file and its includes exceed {MAX_JOB_FILE_BYTES} bytes"
        ))
    })?;
    let env = input.env;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let here = |key: &str| Opt {
            key: key.to_string(),
            value: None,
            file: path.to_path_buf(),
            line,
        };
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with(';') || trimmed.starts_with('#') {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('[') {
            let Some(name) = rest.strip_suffix(']') else {
                return Err(here(trimmed).error("a section header ends with ']'"));
            };
            sections.push(Section {
                name: name.trim().to_string(),
                file: path.to_path_buf(),
                line,
                opts: Vec::new(),
            });
            continue;
        }
        let expanded = expand(trimmed, env).map_err(|var| {
            here(trimmed.split('=').next().unwrap_or(trimmed).trim())
                .error(format!("${{{var}}} is not set"))
        })?;
        if let Some(file) = expanded.strip_prefix("include ") {
            let opt = here("include");
            if depth >= 8 {
                return Err(opt.error("includes nested more than 8 deep"));
            }
            let target = path.parent().unwrap_or(Path::new(".")).join(file.trim());
            read_lines(&target, input, sections, depth + 1, Some(&opt))?;
            continue;
        }
        let (key, value) = match expanded.split_once('=') {
            Some((k, v)) => (k.trim().to_string(), Some(v.trim().to_string())),
            None => (expanded.trim().to_string(), None),
        };
        sections
            .last_mut()
            .expect("the implicit global section")
            .opts
            .push(Opt {
                key,
                value,
                file: path.to_path_buf(),
                line,
            });
    }
    Ok(())
}

/// `${VAR}` from `env`; the name of the first unset variable on failure.
fn expand(s: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(after.to_string());
        };
        let name = &after[..end];
        out.push_str(&env(name).ok_or_else(|| name.to_string())?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn job_spec(section: &Section, opts: &[&Opt]) -> Result<JobSpec, FioError> {
    let mut spec = JobSpec {
        name: section.name.clone(),
        rw: Rw {
            random: false,
            read_percent: 100,
        },
        bs: 4096,
        size: None,
        offset: Amount::Bytes(0),
        filename: None,
        numjobs: 1,
        iodepth: 1,
        direct: false,
        runtime: None,
        time_based: false,
        ramp_time: Duration::ZERO,
        startdelay: Duration::ZERO,
        thinktime: Duration::ZERO,
        prio: None,
        cgroup: None,
        cgroup_weight: None,
        randseed: None,
        options: BTreeMap::new(),
    };
    let mut rw: Option<(&Opt, &str)> = None;
    let mut rwmixread = 50u8;
    let mut prio_level: Option<u8> = None;
    let mut prio_class: Option<u8> = None;
    for o in opts {
        spec.options
            .insert(o.key.clone(), o.value.clone().unwrap_or_default());
        match o.key.as_str() {
            "name" => spec.name = o.value()?.to_string(),
            "description" => {}
            "rw" | "readwrite" => rw = Some((o, o.value()?)),
            "rwmixread" => rwmixread = number(o, 0, 100)? as u8,
            "bs" | "blocksize" => spec.bs = block_size(o)?,
            "size" => spec.size = Some(amount(o)?),
            "offset" => spec.offset = amount(o)?,
            "filename" => {
                let v = o.value()?;
                if v.contains(':') {
                    return Err(o.error("several files (a:b) are not supported"));
                }
                spec.filename = Some(v.to_string());
            }
            "numjobs" => spec.numjobs = number(o, 1, 4096)? as u32,
            "iodepth" => spec.iodepth = number(o, 1, 65536)? as u32,
            "direct" => spec.direct = boolean(o)?,
            "buffered" => spec.direct = !boolean(o)?,
            "runtime" => spec.runtime = Some(time(o, 1_000_000_000)?),
            "time_based" => spec.time_based = boolean(o)?,
            "ramp_time" => spec.ramp_time = time(o, 1_000_000_000)?,
            "startdelay" => spec.startdelay = time(o, 1_000_000_000)?,
            "thinktime" => spec.thinktime = time(o, 1_000)?,
            "prio" => prio_level = Some(number(o, 0, 7)? as u8),
            "prioclass" => prio_class = Some(number(o, 1, 3)? as u8),
            "cgroup" => spec.cgroup = Some(o.value()?.to_string()),
            "cgroup_weight" => spec.cgroup_weight = Some(number(o, 1, MAX_WEIGHT.into())? as u32),
            "randseed" => spec.randseed = Some(number(o, 0, u64::MAX)?),
            "ioengine" => {
                let v = o.value()?;
                if !ENGINES.contains(&v) {
                    return Err(o.error(format!(
                        "engine {v:?} is not supported (we run: {})",
                        ENGINES.join(", ")
                    )));
                }
            }
            k if NOT_YET.contains(&k) => {
                return Err(o.error("not supported by elevator yet"));
            }
            _ => return Err(o.error("unknown or unsupported option")),
        }
    }
    if let Some((o, v)) = rw {
        let (random, read_percent) = match v {
            "read" => (false, 100),
            "write" => (false, 0),
            "randread" => (true, 100),
            "randwrite" => (true, 0),
            "rw" | "readwrite" => (false, rwmixread),
            "randrw" => (true, rwmixread),
            other => return Err(o.error(format!("rw={other} is not supported"))),
        };
        spec.rw = Rw {
            random,
            read_percent,
        };
    }
    spec.prio = match (prio_class, prio_level) {
        (None, None) => None,
        (class, level) => Some((class.unwrap_or(2), level.unwrap_or(0))),
    };
    if spec.cgroup_weight.is_some() && spec.cgroup.is_none() {
        let o = opts
            .iter()
            .rev()
            .find(|o| o.key == "cgroup_weight")
            .unwrap();
        return Err(o.error("needs cgroup= to name the group"));
    }
    if spec.time_based && spec.runtime.is_none() {
        let o = opts.iter().rev().find(|o| o.key == "time_based").unwrap();
        return Err(o.error("needs runtime="));
    }
    let _ = (&section.file, section.line);
    Ok(spec)
}

fn number(o: &Opt, min: u64, max: u64) -> Result<u64, FioError> {
    let v = o.value()?;
    let n: u64 = v
        .parse()
        .map_err(|_| o.error(format!("{v:?} is not a whole number")))?;
    if n < min || n > max {
        return Err(o.error(format!("{n} is outside {min}..={max}")));
    }
    Ok(n)
}

fn boolean(o: &Opt) -> Result<bool, FioError> {
    match o.value.as_deref() {
        None | Some("1") | Some("true") => Ok(true),
        Some("0") | Some("false") => Ok(false),
        Some(v) => Err(o.error(format!("{v:?} is not 0 or 1"))),
    }
}

/// `4k`, `1M`, `512`, `2g`, `4KiB` (kb_base=1024).
fn size_bytes(o: &Opt, v: &str) -> Result<u64, FioError> {
    let lower = v.to_ascii_lowercase();
    let digits = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (n, unit) = lower.split_at(digits);
    let n: u64 = n
        .parse()
        .map_err(|_| o.error(format!("{v:?} is not a size")))?;
    let unit = unit.trim_end_matches("ib").trim_end_matches('b');
    let k: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(o.error(format!("{v:?}: unknown size unit"))),
    };
    n.checked_mul(k)
        .ok_or_else(|| o.error(format!("{v:?} is too large")))
}

fn amount(o: &Opt) -> Result<Amount, FioError> {
    let v = o.value()?;
    if let Some(p) = v.strip_suffix('%') {
        let p: f64 = p
            .parse()
            .map_err(|_| o.error(format!("{v:?} is not a percentage")))?;
        if !(0.0..=100.0).contains(&p) {
            return Err(o.error(format!("{v:?} is outside 0..100%")));
        }
        return Ok(Amount::Percent(p));
    }
    Ok(Amount::Bytes(size_bytes(o, v)?))
}

fn block_size(o: &Opt) -> Result<u32, FioError> {
    let v = o.value()?;
    let mut parts = v.split(',').filter(|p| !p.is_empty());
    let first = parts.next().ok_or_else(|| o.error("needs a size"))?;
    let bs = size_bytes(o, first)?;
    for other in parts {
        if size_bytes(o, other)? != bs {
            return Err(o.error("different read and write sizes are not supported"));
        }
    }
    if bs == 0 || bs % SECTOR_SIZE != 0 || bs > u64::from(u32::MAX) {
        return Err(o.error(format!("{v:?} must be a non-zero multiple of 512")));
    }
    Ok(bs as u32)
}

/// A time; `unit_ns` is what a bare number means (1 s, or 1 µs for thinktime).
fn time(o: &Opt, unit_ns: u64) -> Result<Duration, FioError> {
    let v = o.value()?.to_ascii_lowercase();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (n, unit) = v.split_at(digits);
    let n: u64 = n
        .parse()
        .map_err(|_| o.error(format!("{v:?} is not a time")))?;
    let k = match unit {
        "" => unit_ns,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return Err(o.error(format!("{v:?}: unknown time unit"))),
    };
    Ok(Duration::from_nanos(n.saturating_mul(k)))
}

impl JobFile {
    /// Bytes the jobs need on a target of `target_bytes` (the furthest
    /// region end).
    pub fn bytes_needed(&self, target_bytes: u64) -> u64 {
        self.jobs
            .iter()
            .map(|j| {
                let offset = j.offset.bytes(target_bytes);
                offset
                    + j.size.map_or(target_bytes.saturating_sub(offset), |s| {
                        s.bytes(target_bytes)
                    })
            })
            .max()
            .unwrap_or(0)
    }

    /// Whether any job writes.
    pub fn writes(&self) -> bool {
        self.jobs.iter().any(|j| j.rw.read_percent < 100)
    }

    /// The first `filename=` of the jobs, if any.
    pub fn filename(&self) -> Option<&str> {
        self.jobs.iter().find_map(|j| j.filename.as_deref())
    }

    /// The workload on a target of `target_bytes`, and the control groups
    /// the jobs' `cgroup`/`cgroup_weight` make (for `Scheduler::set_groups`).
    pub fn build(&self, target_bytes: u64, seed: u64) -> Result<(FioRun, GroupTree), FioError> {
        let mut groups = GroupTree::default();
        let mut mix = Mix::new();
        let mut clones = Vec::new();
        let mut task = 1u32;
        for (index, j) in self.jobs.iter().enumerate() {
            let offset = j.offset.bytes(target_bytes);
            let size = j.size.map_or(target_bytes.saturating_sub(offset), |s| {
                s.bytes(target_bytes)
            });
            if size < u64::from(j.bs) || offset + size > target_bytes {
                return Err(FioError {
                    file: self.path.clone(),
                    line: 0,
                    option: format!("[{}] size", j.name),
                    message: format!(
                        "region {offset}+{size} bytes does not fit the {target_bytes}-byte target \
                         or holds no block of {} bytes",
                        j.bs
                    ),
                });
            }
            let group = match &j.cgroup {
                None => GroupId::ROOT,
                Some(name) => match groups.find(name) {
                    Some(id) => id,
                    None => groups.add(
                        name,
                        GroupId::ROOT,
                        j.cgroup_weight.unwrap_or(elevator_core::DEFAULT_WEIGHT),
                        IoMax::default(),
                    ),
                },
            };
            let prio = match j.prio {
                None => IoPrio::default(),
                Some((class, level)) => IoPrio::new(
                    match class {
                        1 => IoClass::RealTime,
                        3 => IoClass::Idle,
                        _ => IoClass::BestEffort,
                    },
                    level,
                ),
            };
            for k in 0..j.numjobs {
                let label = format!("{}#{index}.{k}", j.name);
                let mut d = DirectJob::new(&label, task, j.randseed.unwrap_or(seed));
                d.name = j.name.clone();
                d.prio = prio;
                d.group = group;
                d.pattern = if j.rw.random {
                    Pattern::Random
                } else {
                    Pattern::Sequential
                };
                d.read_percent = j.rw.read_percent;
                d.bs = j.bs / SECTOR_SIZE as u32;
                d.region_start = offset / SECTOR_SIZE;
                d.region_sectors = size / SECTOR_SIZE;
                d.size = if j.time_based { None } else { Some(size) };
                d.runtime = j.runtime;
                d.start = j.startdelay;
                d.iodepth = j.iodepth;
                d.think = j.thinktime;
                clones.push(Instance {
                    task,
                    measured_from: j.startdelay + j.ramp_time,
                    report: FioJob {
                        jobname: j.name.clone(),
                        groupid: 0,
                        options: j.options.clone(),
                        prio: j.prio,
                        ..FioJob::default()
                    },
                    first: None,
                    last: Instant::ZERO,
                });
                mix.push(Box::new(d));
                task += 1;
            }
        }
        Ok((
            FioRun {
                mix,
                clones,
                start: Instant::ZERO,
            },
            groups,
        ))
    }
}

/// What the run records for one clone.
#[derive(Debug)]
struct Instance {
    task: u32,
    measured_from: Duration,
    report: FioJob,
    first: Option<Instant>,
    last: Instant,
}

/// The jobs of a file running together, recording fio's figures as
/// completions pass (engine-neutral: it sees only the port).
#[derive(Debug)]
pub struct FioRun {
    mix: Mix,
    clones: Vec<Instance>,
    start: Instant,
}

impl FioRun {
    /// fio's per-job report, the run having ended at `end`.
    pub fn report(&self, end: Instant) -> Vec<FioJob> {
        self.clones
            .iter()
            .map(|c| {
                let mut r = c.report.clone();
                let runtime = c.first.map_or(Duration::ZERO, |f| c.last.since(f));
                r.read.runtime = runtime;
                r.write.runtime = runtime;
                r.elapsed_ms = end.since(self.start).nanos() / 1_000_000;
                r
            })
            .collect()
    }

    /// The underlying jobs' own statistics.
    pub fn stats(&self) -> Vec<elevator_metrics::JobStats> {
        self.mix.stats()
    }
}

impl Workload for FioRun {
    fn start(&mut self, io: &mut Io<'_>) {
        self.start = io.now();
        self.mix.start(io);
    }

    fn wake(&mut self, token: u64, io: &mut Io<'_>) {
        self.mix.wake(token, io);
    }

    fn completed(&mut self, done: &Completion, io: &mut Io<'_>) {
        let start = self.start;
        if let Some(c) = self.clones.iter_mut().find(|c| c.task == done.task.0) {
            if done.error.is_some() {
                c.report.errors += 1;
            } else if done.submitted >= start + c.measured_from {
                let dir: &mut FioDirection = if done.op == Op::Read {
                    &mut c.report.read
                } else {
                    &mut c.report.write
                };
                dir.io_bytes += u64::from(done.sectors) * SECTOR_SIZE;
                dir.total_ios += 1;
                dir.clat.record(done.completed.since(done.submitted));
                c.first = Some(c.first.map_or(done.submitted, |f| f.min(done.submitted)));
                c.last = c.last.max(done.completed);
            }
        }
        self.mix.completed(done, io);
    }

    fn request_done(&mut self, io: &mut Io<'_>) {
        self.mix.request_done(io);
    }

    fn finished(&self) -> bool {
        self.mix.finished()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("elevator-fio-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_subset_parses_with_globals_variables_and_includes() {
        let d = tmp("ok");
        write(&d, "common.fio", "direct=1\nioengine=io_uring\n");
        let p = write(
            &d,
            "job.fio",
            "; a comment\n[global]\ninclude common.fio\nbs=${BS}\nsize=50%\nruntime=2s\n\
             time_based\n\n[hi]\nrw=randread\niodepth=32\nprioclass=1\nprio=4\n\
             cgroup=a\ncgroup_weight=300\n\n[lo]\nrw=randrw\nrwmixread=70\nnumjobs=2\n\
             thinktime=250\nstartdelay=10ms\n",
        );
        let env = |v: &str| (v == "BS").then(|| "4k".to_string());
        let f = parse_file_with(&p, &env).unwrap();
        assert_eq!(f.jobs.len(), 2);
        let hi = &f.jobs[0];
        assert_eq!(hi.bs, 4096);
        assert!(hi.direct && hi.time_based && hi.rw.random);
        assert_eq!(hi.rw.read_percent, 100);
        assert_eq!(hi.iodepth, 32);
        assert_eq!(hi.prio, Some((1, 4)));
        assert_eq!(hi.cgroup_weight, Some(300));
        assert_eq!(hi.runtime, Some(Duration::from_secs(2)));
        assert_eq!(hi.size, Some(Amount::Percent(50.0)));
        let lo = &f.jobs[1];
        assert_eq!(lo.rw.read_percent, 70);
        assert_eq!(lo.numjobs, 2);
        assert_eq!(lo.thinktime, Duration::from_micros(250));
        assert_eq!(lo.startdelay, Duration::from_millis(10));
        let (run, groups) = f.build(64 << 20, 1).unwrap();
        assert_eq!(run.clones.len(), 3);
        assert_eq!(groups.get(groups.find("a").unwrap()).weight, 300);
    }

    #[test]
    fn includes_share_one_byte_budget_and_devices_are_refused() {
        // Files x, xx, ... each include the next 16 times, seven levels
        // deep (within the nesting limit): 16^7 reads without the budget.
        let env = |_: &str| None;
        let mut reads = 0usize;
        let mut read = |path: &Path| {
            reads += 1;
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            Ok(if name.len() < 8 {
                format!(
                    "[j{name}]\nrw=read\n{}",
                    format!("include {name}x\n").repeat(16)
                )
            } else {
                String::new()
            })
        };
        let e = parse_with_reader(Path::new("x"), &env, &mut read).unwrap_err();
        assert_eq!(e.option, "include", "{e}");
        assert!(e.to_string().contains("exceed 1048576 bytes"), "{e}");
        // Every read is paid for by an include line of a file already read.
        assert!(
            reads <= MAX_JOB_FILE_BYTES / "include x".len(),
            "{reads} reads"
        );
        let e = parse_file(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn errors_name_file_line_and_option() {
        let d = tmp("err");
        let cases = [
            (
                "[j]\nrw=read\nrate_iops=100\n",
                3,
                "rate_iops",
                "not supported",
            ),
            ("[j]\nfrobnicate=1\n", 2, "frobnicate", "unknown"),
            ("[j]\nbs=4q\n", 2, "bs", "unit"),
            ("[j]\nrw=trim\n", 2, "rw", "not supported"),
            ("[j]\nioengine=mmap\n", 2, "ioengine", "not supported"),
            ("[j]\nprio=9\n", 2, "prio", "outside"),
            ("[j]\nbs=${NOPE}\n", 2, "bs", "not set"),
            ("[j]\ncgroup_weight=100\n", 2, "cgroup_weight", "cgroup="),
            ("[j]\ninclude missing.fio\n", 2, "include", "cannot read"),
            ("[j\n", 1, "[j", "]"),
        ];
        for (i, (text, line, option, words)) in cases.iter().enumerate() {
            let p = write(&d, &format!("bad{i}.fio"), text);
            let e = parse_file_with(&p, &|_| None).unwrap_err();
            assert_eq!(e.line, *line, "{e}");
            assert_eq!(e.option, *option, "{e}");
            assert!(e.to_string().contains(words), "{e}");
            assert!(e.to_string().starts_with(&p.display().to_string()), "{e}");
        }
    }
}
