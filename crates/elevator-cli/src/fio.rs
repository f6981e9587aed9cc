//! `elevator run JOB.fio`: a fio job file under one of our policies, on the
//! simulator (`--engine sim`, a device model) or on a real file or block
//! device through io_uring (`--engine uring --target PATH`, or the job's
//! `filename=`), printed as a table or as fio's JSON.

use anyhow::{bail, Context, Result};
use elevator_core::{Instant, QueueLimits};
use elevator_metrics::fio::{render_json, FioDiskUtil, FioJob};
use elevator_sched::stack::{Origin, StackBuilder};
use elevator_workload::fio::JobFile;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The device model a job file runs on under `--engine sim` by default.
const DEFAULT_SIM_DEVICE: &str = "nvme";

/// The largest request the runtime's policies may build by merging, in
/// sectors: the kernel's `BLK_DEF_MAX_SECTORS` (2560 sectors, 1.25 MiB,
/// include/linux/blkdev.h since 6.10).
const RUNTIME_MAX_SECTORS: u32 = 2560;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    Sim,
    Uring,
}

#[derive(Debug)]
pub struct FioOptions {
    pub job: PathBuf,
    pub engine: EngineKind,
    pub target: Option<PathBuf>,
    pub allow_write: bool,
    pub schedulers: Vec<String>,
    pub tunables: Vec<(String, String, i64)>,
    pub device: Option<String>,
    pub seed: u64,
    pub depth: Option<usize>,
    /// Run the policy through the invariant checker (on anyway in builds
    /// with debug assertions).
    pub check: bool,
    pub json: bool,
}

/// Whether `name` is a fio job file (by its extension).
pub fn is_job_file(name: &str) -> bool {
    name.ends_with(".fio") || name.ends_with(".ini")
}

struct Outcome {
    scheduler: String,
    jobs: Vec<FioJob>,
    disk: FioDiskUtil,
    settings: String,
}

pub fn run(options: &FioOptions, out: &mut Vec<u8>) -> Result<()> {
    let file = elevator_workload::fio::parse_file(&options.job)?;
    if options.json && options.schedulers.len() != 1 {
        bail!("--format json prints one fio run: give one --sched");
    }
    let mut outcomes = Vec::new();
    for name in &options.schedulers {
        let builder = StackBuilder::new(name, Origin::flag("--sched"))?
            .overrides(&options.tunables)?
            .check(options.check);
        let scheduler = builder.policy().name.to_string();
        let outcome = match options.engine {
            EngineKind::Sim => run_sim(&file, options, builder)?,
            EngineKind::Uring => run_uring(&file, options, builder)?,
        };
        outcomes.push(Outcome {
            scheduler,
            ..outcome
        });
    }
    if options.json {
        let o = &outcomes[0];
        let engine = format!(
            "{} engine, {} policy",
            engine_name(options.engine),
            o.scheduler
        );
        out.extend_from_slice(
            render_json(
                &engine,
                &file.global,
                &o.jobs,
                std::slice::from_ref(&o.disk),
            )
            .as_bytes(),
        );
        return Ok(());
    }
    writeln!(out, "{}", options.job.display())?;
    for o in &outcomes {
        writeln!(out, "{}: {}", o.scheduler, o.settings)?;
        writeln!(
            out,
            "  {:<16} {:<5} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "job", "dir", "IOPS", "MiB/s", "p50 us", "p99 us", "max us"
        )?;
        for j in &o.jobs {
            for (dir, d) in [("read", &j.read), ("write", &j.write)] {
                if d.total_ios == 0 {
                    continue;
                }
                let secs = d.runtime.as_secs_f64();
                let iops = if secs > 0.0 {
                    d.total_ios as f64 / secs
                } else {
                    0.0
                };
                let mib = if secs > 0.0 {
                    d.io_bytes as f64 / secs / 1048576.0
                } else {
                    0.0
                };
                let us = |ns: u64| ns as f64 / 1000.0;
                let name: String = j.jobname.chars().take(16).collect();
                writeln!(
                    out,
                    "  {name:<16} {dir:<5} {iops:>10.0} {mib:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                    us(d.clat.percentile(50.0)),
                    us(d.clat.percentile(99.0)),
                    us(d.clat.percentile(100.0)),
                )?;
            }
        }
        writeln!(
            out,
            "  device {}: {} reads, {} writes, {} merges, util {:.1} %",
            o.disk.name,
            o.disk.read_ios,
            o.disk.write_ios,
            o.disk.read_merges + o.disk.write_merges,
            o.disk.util
        )?;
    }
    Ok(())
}

fn engine_name(e: EngineKind) -> &'static str {
    match e {
        EngineKind::Sim => "sim",
        EngineKind::Uring => "uring",
    }
}

fn run_sim(file: &JobFile, options: &FioOptions, builder: StackBuilder) -> Result<Outcome> {
    if options.target.is_some() || options.allow_write {
        bail!("--target and --allow-write are for --engine uring");
    }
    if options.depth.is_some() {
        bail!("--depth is for --engine uring: a simulated device queues as its profile says");
    }
    let device_name = options.device.as_deref().unwrap_or(DEFAULT_SIM_DEVICE);
    let device = elevator_device::open(device_name)?;
    let limits = device.limits();
    let (mut workload, groups) = file.build(limits.capacity * 512, options.seed)?;
    let builder = builder.groups(&groups);
    let (mut engine, _) =
        elevator_sim::Engine::build(builder, device, elevator_sim::EngineConfig::default());
    let summary = engine.run(&mut workload);
    if summary.timed_out {
        bail!("the simulation hit its time limit before the jobs finished");
    }
    let stats = summary.device;
    let elapsed = summary.end.since(Instant::ZERO).nanos().max(1);
    let jobs = workload.report(summary.end);
    // The device model counts requests, not directions: the jobs' I/Os by
    // direction stand in (merges are not counted separately).
    let read_ios = jobs.iter().map(|j| j.read.total_ios).sum();
    let write_ios = jobs.iter().map(|j| j.write.total_ios).sum();
    Ok(Outcome {
        scheduler: String::new(),
        jobs,
        disk: FioDiskUtil {
            name: device_name.to_string(),
            read_ios,
            write_ios,
            read_merges: 0,
            write_merges: 0,
            util: (stats.busy_ns as f64 / elapsed as f64 * 100.0).min(100.0),
        },
        settings: format!(
            "engine sim, device {device_name}, queue depth {}, seed {} (simulated time)",
            limits.queue_depth, options.seed
        ),
    })
}

fn run_uring(file: &JobFile, options: &FioOptions, builder: StackBuilder) -> Result<Outcome> {
    use elevator_uring::target::{self, Access};
    let path: PathBuf = match (&options.target, file.filename()) {
        (Some(t), _) => t.clone(),
        (None, Some(f)) => PathBuf::from(f),
        (None, None) => bail!("--engine uring needs --target PATH or a filename= in the job file"),
    };
    let direct = file.jobs.iter().any(|j| j.direct);
    if file.jobs.iter().any(|j| j.direct != direct) {
        bail!(
            "{}: jobs mix direct=1 and direct=0 on one target",
            file.path.display()
        );
    }
    let existing = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let access = Access {
        direct,
        writes: file.writes(),
        allow_write: options.allow_write,
        size: file.bytes_needed(existing),
    };
    let t = target::open(&path, access)?;
    let issued: usize = file
        .jobs
        .iter()
        .map(|j| j.iodepth as usize * j.numjobs as usize)
        .sum();
    let depth = options.depth.unwrap_or(issued).max(1);
    let limits = QueueLimits {
        rotational: t.block_device && rotational(&path),
        queue_depth: depth as u32,
        max_sectors: RUNTIME_MAX_SECTORS,
        capacity: t.bytes / 512,
    };
    let (mut workload, groups) = file.build(t.bytes, options.seed)?;
    let backend = elevator_uring::Uring::new(t.file, (depth * 2 + 16) as u32)
        .with_context(|| format!("{}: setting up io_uring", path.display()))?;
    let (mut rt, _) =
        elevator_uring::Runtime::build(builder.groups(&groups), backend, &limits, depth)?;
    let end = rt.run(&mut workload, None)?;
    let stats = rt.stats();
    let elapsed = end.nanos().max(1);
    Ok(Outcome {
        scheduler: String::new(),
        jobs: workload.report(end),
        disk: FioDiskUtil {
            name: path.display().to_string(),
            read_ios: stats.dispatched_reads,
            write_ios: stats.dispatched - stats.dispatched_reads,
            read_merges: stats.merged[0],
            write_merges: stats.merged[1],
            util: (stats.busy.nanos() as f64 / elapsed as f64 * 100.0).min(100.0),
        },
        settings: format!(
            "engine uring, target {} ({}{} bytes), depth {depth}, seed {}",
            path.display(),
            if direct { "O_DIRECT, " } else { "buffered, " },
            t.bytes,
            options.seed
        ),
    })
}

/// `queue/rotational` of a block device, from sysfs (false if unknown).
fn rotational(path: &Path) -> bool {
    let Some(name) = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
    else {
        return false;
    };
    std::fs::read_to_string(format!("/sys/class/block/{name}/queue/rotational"))
        .is_ok_and(|s| s.trim() == "1")
}
