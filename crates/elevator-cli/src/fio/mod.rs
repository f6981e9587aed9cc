//! `elevator run JOB.fio`: a fio job file under one of our policies, on the
//! simulator (`--engine sim`: a device model, and the simulated host's
//! page cache for `direct=0`) or on a real file or block device through
//! io_uring (`--engine uring`), printed as a table or as fio's JSON
//! (`--output-format json` or `json+`).
//!
//! The job file runs unchanged: fio's parser, its options and their
//! meaning (elevator-workload's `fio`). Command-line `--runtime`, `--size`,
//! `--filename`, `--ioengine`, `--iodepth`, `--directory` override every
//! job's value, as fio's do; `--section` runs the named sections only.
//! Nothing is created or written without `--allow-write`, and nothing is
//! ever created under `/dev`. Ctrl-C stops the run and prints what
//! completed; runs longer than a few seconds show fio's progress line on
//! stderr.

mod logsink;
mod progress;
mod real;
mod sim;

use anyhow::{anyhow, bail, Result};
use elevator_metrics::fio::{render_json, DiskUtil, FioStats, When};
use elevator_sched::stack::{Origin, StackBuilder};
use elevator_workload::fio::{JobFile, ReadOptions, Runner};
use std::io::Write;
use std::path::PathBuf;

pub use progress::Eta;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    Sim,
    Uring,
}

/// How a job file's results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Table,
    Json,
    /// `json+`: with the latency histograms' bins.
    JsonPlus,
}

#[derive(Debug)]
pub struct FioOptions {
    pub job: PathBuf,
    pub engine: EngineKind,
    /// `--target`/`--filename`: every job's file.
    pub target: Option<PathBuf>,
    pub allow_write: bool,
    pub schedulers: Vec<String>,
    /// `--set POLICY.TUNABLE=V` (and `block.NAME=V` for the simulator).
    pub tunables: Vec<(String, String, i64)>,
    pub device: Option<String>,
    pub seed: u64,
    pub depth: Option<usize>,
    /// Run the policy through the invariant checker (simulator).
    pub check: bool,
    /// Write the decision trace here (simulator).
    pub trace: Option<PathBuf>,
    /// `--report DIR` (refused: job files print fio's formats).
    pub report: Option<PathBuf>,
    pub output: Output,
    /// fio option overrides from the command line (`runtime`, `size`, ...).
    pub overrides: Vec<(String, String)>,
    pub sections: Vec<String>,
    pub eta: Eta,
}

/// Jobs ended with an error (fio exits non-zero then too): the report is
/// printed, the exit status is 1.
#[derive(Debug)]
pub struct JobsFailed(pub Vec<String>);

impl std::fmt::Display for JobsFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "jobs failed: {}", self.0.join(", "))
    }
}

impl std::error::Error for JobsFailed {}

/// Whether `name` is a fio job file (by its extension).
pub fn is_job_file(name: &str) -> bool {
    name.ends_with(".fio") || name.ends_with(".ini") || name.ends_with(".job")
}

/// Give `run` a sink for its logs if a job writes one; after the run,
/// [`finish_logs`] flushes them.
fn attach_logs(run: &mut elevator_workload::fio::FioRun) {
    if run.logs_wanted() {
        run.set_log_sink(Box::<logsink::FileSink>::default());
    }
}

/// Flush the logs of `run`, ended at `end`; a note names them.
fn finish_logs(
    run: &mut elevator_workload::fio::FioRun,
    end: elevator_core::Instant,
    notes: &mut Vec<String>,
) -> Result<()> {
    let Some(mut sink) = run.finish_logs(end) else {
        return Ok(());
    };
    let names = sink
        .finish()
        .map_err(|e| anyhow!("writing a job's log: {e}"))?;
    if !names.is_empty() {
        notes.push(format!("logs: {}", names.join(", ")));
    }
    Ok(())
}

/// One policy's run.
struct Outcome {
    scheduler: String,
    stats: Vec<FioStats>,
    disks: Vec<DiskUtil>,
    settings: String,
    notes: Vec<String>,
    interrupted: bool,
}

/// Read the job file for `engine` with the command line's overrides.
pub fn read_job_file(options: &FioOptions) -> Result<JobFile> {
    let runner = match options.engine {
        EngineKind::Sim => Runner::Sim,
        EngineKind::Uring => Runner::Real,
    };
    let mut overrides = options.overrides.clone();
    if let Some(t) = &options.target {
        overrides.push(("filename".into(), t.display().to_string()));
    }
    let keywords = match options.engine {
        EngineKind::Sim => sim::keywords(),
        EngineKind::Uring => real::keywords(),
    };
    let env = |name: &str| std::env::var(name).ok();
    let read = ReadOptions {
        env: &env,
        keywords,
        runner,
        overrides: elevator_workload::fio::Overrides {
            options: overrides,
            sections: options.sections.clone(),
        },
    };
    elevator_workload::fio::parse_file(&options.job, &read).map_err(|e| anyhow!("{e}"))
}

pub fn run(options: &FioOptions, out: &mut Vec<u8>) -> Result<()> {
    let file = read_job_file(options)?;
    check_flags(options)?;
    if options.output != Output::Table && options.schedulers.len() != 1 {
        bail!("--output-format json prints one fio run: give one --sched");
    }
    for n in &file.notes {
        eprintln!("{n}");
    }
    let mut outcomes = Vec::new();
    for name in &options.schedulers {
        let builder = StackBuilder::new(name, Origin::flag("--sched"))?
            .overrides(&options.tunables)?
            .check(options.check);
        let scheduler = builder.policy().name;
        let outcome = match options.engine {
            EngineKind::Sim => sim::run(&file, options, builder)?,
            EngineKind::Uring => real::run(&file, options, builder)?,
        };
        let interrupted = outcome.interrupted;
        outcomes.push(Outcome {
            scheduler: scheduler.to_string(),
            ..outcome
        });
        if interrupted {
            break;
        }
    }
    for o in &outcomes {
        for n in &o.notes {
            eprintln!("{n}");
        }
        if o.interrupted {
            eprintln!("fio: terminating on signal 2");
        }
    }
    let failed: Vec<String> = outcomes
        .iter()
        .flat_map(|o| {
            o.stats.iter().filter(|s| s.error != 0).map(|s| {
                format!(
                    "{} (error {}: {})",
                    s.name,
                    s.error,
                    std::io::Error::from_raw_os_error(s.error)
                )
            })
        })
        .collect();
    print(options, &file, &outcomes, out)?;
    if failed.is_empty() {
        Ok(())
    } else {
        Err(JobsFailed(failed).into())
    }
}

fn print(
    options: &FioOptions,
    file: &JobFile,
    outcomes: &[Outcome],
    out: &mut Vec<u8>,
) -> Result<()> {
    if options.output != Output::Table {
        let o = &outcomes[0];
        let version = format!(
            "elevator-{} ({} engine, {} policy)",
            env!("CARGO_PKG_VERSION"),
            engine_name(options.engine),
            o.scheduler
        );
        out.extend_from_slice(
            render_json(
                &version,
                &now_when(),
                &file.global,
                &o.stats,
                &o.disks,
                options.output == Output::JsonPlus,
            )
            .as_bytes(),
        );
        return Ok(());
    }
    writeln!(
        out,
        "{}",
        elevator_metrics::text::wrap(
            &options.job.display().to_string(),
            elevator_metrics::text::WIDTH,
            ""
        )
    )?;
    for o in outcomes {
        writeln!(
            out,
            "{}",
            elevator_metrics::text::wrap(
                &o.settings,
                elevator_metrics::text::WIDTH,
                &format!("{}: ", o.scheduler)
            )
        )?;
        table(o, out)?;
    }
    Ok(())
}

/// The flags that mean something for job files, and the ones that do not
/// (an error, never ignored).
fn check_flags(options: &FioOptions) -> Result<()> {
    if options.report.is_some() {
        bail!(
            "--report renders scenario pages; a job file's results are fio's: use \
             --output-format json or json+ (fio's tools read them)"
        );
    }
    let block = options.tunables.iter().any(|(p, _, _)| p == "block");
    match options.engine {
        EngineKind::Sim => {
            if options.allow_write {
                bail!("--allow-write is for --engine uring: the simulator writes nothing");
            }
        }
        EngineKind::Uring => {
            if options.check {
                bail!(
                    "--check runs the simulator's invariant checker; with --engine uring the \
                     kernel completes the requests: run the job file with --engine sim --check"
                );
            }
            if options.trace.is_some() {
                bail!("--trace records the simulator's decisions: run with --engine sim");
            }
            if block {
                bail!(
                    "--set block.*: the block-layer settings are the simulator's (the kernel's \
                     block layer is below the io_uring runtime): run with --engine sim"
                );
            }
            if options.device.is_some() {
                bail!("--device names a simulated device: with --engine uring give --filename");
            }
        }
    }
    Ok(())
}

fn engine_name(e: EngineKind) -> &'static str {
    match e {
        EngineKind::Sim => "sim",
        EngineKind::Uring => "uring",
    }
}

/// The wall-clock time of the report (fio's `timestamp` and `time`).
fn now_when() -> When {
    // The report's timestamp, as fio's; it never reaches a result.
    #[allow(clippy::disallowed_methods)]
    let now = std::time::SystemTime::now();
    let ms = now
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    When {
        timestamp_ms: ms,
        time: ctime(ms / 1000),
    }
}

/// `ctime`'s format ("Thu Jun  5 14:03:22 2025"), in UTC.
fn ctime(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's method).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    let wd = (days + 4).rem_euclid(7) as usize;
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        DAYS[wd],
        MONTHS[(m - 1) as usize],
        d,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        y
    )
}

/// The comparison table: per reported job and direction, fio's headline
/// figures (within 100 columns).
fn table(o: &Outcome, out: &mut Vec<u8>) -> Result<()> {
    writeln!(
        out,
        "  {:<18} {:<5} {:>9} {:>9} {:>9} {:>9} {:>10} {:>6}",
        "job", "dir", "IOPS", "MiB/s", "p50 us", "p99 us", "max us", "err"
    )?;
    for s in &o.stats {
        let name: String = s.name.chars().take(18).collect();
        let mut shown = false;
        for (dir, d) in [("read", &s.dirs[0]), ("write", &s.dirs[1])] {
            if d.total_ios == 0 {
                continue;
            }
            shown = true;
            let us = |ns: u64| ns as f64 / 1000.0;
            writeln!(
                out,
                "  {name:<18} {dir:<5} {:>9.0} {:>9.1} {:>9.1} {:>9.1} {:>10.1} {:>6}",
                d.iops_value(),
                d.bw_bytes() as f64 / 1048576.0,
                us(d.clat.percentile(50.0)),
                us(d.clat.percentile(99.0)),
                us(d.clat.stat.max),
                s.error
            )?;
        }
        if s.sync_ios > 0 {
            writeln!(
                out,
                "  {name:<18} {:<5} {:>9} {:>9} {:>9.1} {:>9.1} {:>10.1} {:>6}",
                "sync",
                s.sync_ios,
                "",
                s.sync_lat.percentile(50.0) as f64 / 1000.0,
                s.sync_lat.percentile(99.0) as f64 / 1000.0,
                s.sync_lat.stat.max as f64 / 1000.0,
                ""
            )?;
        }
        if !shown && s.sync_ios == 0 {
            writeln!(out, "  {name:<18} (no I/O) {:>60}", s.error)?;
        }
    }
    for d in &o.disks {
        writeln!(
            out,
            "  disk {}: {} reads, {} writes, {} merges, util {:.1} %",
            d.name,
            d.read_ios,
            d.write_ios,
            d.read_merges + d.write_merges,
            d.util
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn ctime_formats_as_c_does() {
        assert_eq!(super::ctime(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(super::ctime(1_700_000_000), "Tue Nov 14 22:13:20 2023");
    }
}
