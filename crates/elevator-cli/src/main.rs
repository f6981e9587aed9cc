//! `elevator`: run I/O-scheduler scenarios on simulated devices.
//!
//! Errors in input (scenario files, flags) print one line naming the file,
//! line and key, and exit with status 2; a closed output pipe is success.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use elevator_scenario::replay::Variant;
use elevator_scenario::{RunOptions, Scenario};
use elevator_sched::stack::{self, Origin, StackBuilder};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

mod fio;
mod kernel;
mod probe;
mod tune;
mod verify;

/// The scenario `elevator run` runs when given none.
const DEFAULT_SCENARIO: &str = "ten-streaming-readers";

#[derive(Parser, Debug)]
#[command(
    name = "elevator",
    version,
    about = "Linux I/O schedulers, rebuilt: run them on simulated disks and compare"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scenario, or a fio job file, under each policy and print one comparison table.
    ///
    /// SCENARIO is a built-in scenario name, a scenario TOML file, or a fio job file
    /// (`*.fio`, `*.ini`, `*.job`; fio's own examples run unchanged). A job file runs on
    /// the simulator (`--engine sim`, the default: a device model, and the simulated host's
    /// page cache for direct=0) or on a real file or block device through io_uring
    /// (`--engine uring`; nothing is created or written without --allow-write). It prints
    /// a table, or fio's JSON with --output-format json or json+.
    #[command(verbatim_doc_comment)]
    Run {
        /// A built-in scenario name, a scenario TOML file, or a fio job file.
        #[arg(default_value = DEFAULT_SCENARIO)]
        scenario: String,
        /// Policies to compare, comma-separated (default: the scenario's; noop for job files).
        #[arg(long, value_delimiter = ',')]
        sched: Option<Vec<String>>,
        /// Device profile name or profile TOML path (default: the scenario's; nvme for job
        /// files under --engine sim).
        #[arg(long)]
        device: Option<String>,
        /// Seed for every random choice (default: the scenario's; 1 for job files).
        #[arg(long)]
        seed: Option<u64>,
        /// Tunable override, POLICY.TUNABLE=VALUE (repeatable); `block.NAME=VALUE`
        /// sets the block layer (nr_requests, batch_requests, steal, inflight_limit and max_sectors in
        /// bytes, restart_before_wakeup; 0/1 for 2.6.32's sync_lists, congestion, plugging).
        #[arg(long = "set", value_name = "POLICY.TUNABLE=VALUE")]
        set: Vec<String>,
        /// Write the decision trace to FILE: one blkparse-like line per insert, merge,
        /// dispatch (with the policy's reason), wait and completion, per policy.
        #[arg(long, value_name = "FILE")]
        trace: Option<std::path::PathBuf>,
        /// Also write DIR/index.html: the settings in force, the results and tables, and per
        /// job a latency CDF and a throughput timeline of every policy (inline SVG, no network).
        #[arg(long, value_name = "DIR")]
        report: Option<std::path::PathBuf>,
        /// table: the comparison for a terminal; json: the stable schema of
        /// docs/report-schema.md (fio's JSON for job files; json+ adds its latency bins);
        /// csv: one row per policy and job. `--output-format` as fio spells it.
        #[arg(long, visible_alias = "output-format", value_enum, default_value_t = Format::Table)]
        format: Format,
        /// For fio job files: the simulator, or the io_uring runtime on real files and devices.
        #[arg(long, value_enum)]
        engine: Option<fio::EngineKind>,
        /// Every job's file or block device (fio's --filename; default: the job file's).
        #[arg(long, visible_alias = "filename")]
        target: Option<std::path::PathBuf>,
        /// Let `--engine uring` create, lay out and write files and devices (never without it).
        #[arg(long)]
        allow_write: bool,
        /// Device queue-depth limit for `--engine uring` (default: what the jobs issue).
        #[arg(long)]
        depth: Option<usize>,
        /// Run every policy through the invariant checker (conservation, merges,
        /// waits, starvation bound, the policy's own structure); a broken promise
        /// stops the run with the seed and a command that replays it.
        #[arg(long)]
        check: bool,
        /// Job files: override every job's runtime (fio's --runtime).
        #[arg(long, value_name = "TIME")]
        runtime: Option<String>,
        /// Job files: override every job's size (fio's --size).
        #[arg(long, value_name = "SIZE")]
        size: Option<String>,
        /// Job files: override every job's ioengine (fio's --ioengine).
        #[arg(long, value_name = "ENGINE")]
        ioengine: Option<String>,
        /// Job files: override every job's iodepth (fio's --iodepth).
        #[arg(long, value_name = "N")]
        iodepth: Option<String>,
        /// Job files: override every job's directory (fio's --directory).
        #[arg(long, value_name = "DIR")]
        directory: Option<String>,
        /// Job files: run only this section (repeatable; fio's --section).
        #[arg(long, value_name = "NAME")]
        section: Vec<String>,
        /// Job files: fio's progress line on stderr (auto: on a terminal, after a few seconds).
        #[arg(long, value_enum, default_value_t = fio::Eta::Auto)]
        eta: fio::Eta,
    },
    /// The 2016 BFQ cover letter's table: start-up times of xterm, LibreOffice
    /// Writer and gnome-terminal against 10 sequential or random readers, and the
    /// readers' throughput, under each policy, with the letter's figures beside ours.
    Letter {
        /// Devices, comma-separated (default: ssd-sata-2016, sata-hdd).
        #[arg(long, value_delimiter = ',')]
        device: Option<Vec<String>>,
        /// Policies, comma-separated (default: bfq, cfq, deadline, noop).
        #[arg(long, value_delimiter = ',')]
        sched: Option<Vec<String>>,
        /// Seed for every random choice (default: the scenarios').
        #[arg(long)]
        seed: Option<u64>,
        /// Factor on the start-up traces' think times (default: the
        /// scenarios' 0.075, fitted to the letter's machine; 1: as recorded).
        #[arg(long)]
        think_scale: Option<f64>,
    },
    /// Replay a block trace (blkparse, fio iolog, MSR, MQSim, DiskSim) on a
    /// device under each policy: per-process and total latency, throughput, drift.
    Replay {
        /// The trace file.
        trace: String,
        #[command(flatten)]
        how: TraceArgs,
        /// Policies, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "noop")]
        sched: Vec<String>,
    },
    /// Replay a trace under every policy (and a grid of tunables) and rank them.
    Whatif {
        trace: String,
        #[command(flatten)]
        how: TraceArgs,
        /// What to rank by: p99-read, mean, throughput, slowdown, fairness.
        #[arg(long, default_value = "p99-read")]
        by: String,
        /// Policies, comma-separated (default: every registered policy).
        #[arg(long, value_delimiter = ',')]
        sched: Option<Vec<String>>,
        /// Tunable values to try, POLICY.TUNABLE=V1,V2,... (repeatable; the grid
        /// is every combination per policy, run beside each policy's defaults).
        #[arg(long = "grid", value_name = "POLICY.TUNABLE=V1,V2")]
        grid: Vec<String>,
        /// Worker threads (default: the machine's cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Also draw the ranking as a bar chart.
        #[arg(long)]
        report: bool,
    },
    /// Search policies, tunables and block settings for a workload (a scenario, a fio
    /// job file or a trace) on a device model, ranked by an objective; print the best
    /// as shell lines and a udev rule, and its gain over the kernel's default.
    Tune {
        /// A built-in scenario, a scenario TOML, a fio job file (*.fio) or a block trace.
        workload: String,
        /// Device profile name or TOML path (e.g. from `elevator device probe`);
        /// default: the scenario's.
        #[arg(long)]
        device: Option<String>,
        /// e.g. "minimize p99(reader)", "maximize mb_s subject to p99(app) < 50ms",
        /// "weights shares within 10%", "minimize p99(reader), maximize mb_s".
        #[arg(long)]
        objective: String,
        /// Policies to search, comma-separated (default: none, mq-deadline, kyber, bfq).
        #[arg(long, value_delimiter = ',')]
        sched: Option<Vec<String>>,
        /// Most evaluations (the whole space when it is no larger).
        #[arg(long, default_value_t = 64)]
        budget: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Worker threads (default: one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Leave out the policies' per-request CPU cost.
        #[arg(long)]
        no_cpu_cost: bool,
        /// The kernel's name of the device in the printed shell lines and udev rule.
        #[arg(long, default_value = "DEV")]
        dev: String,
        /// Rows of the ranking to print.
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// Run the kernel default and the top settings on this file or block device
        /// through io_uring and compare predicted with measured (fio job files).
        #[arg(long)]
        verify: Option<std::path::PathBuf>,
        /// Settings to verify (the default included).
        #[arg(long, default_value_t = 8)]
        verify_settings: usize,
        /// Measured runs per setting (the median is compared).
        #[arg(long, default_value_t = 3)]
        verify_runs: usize,
        /// Let --verify write to the target (a job that writes needs it).
        #[arg(long)]
        allow_write: bool,
        /// With --verify on a block device (root): apply each setting to the
        /// kernel's own scheduler, iosched tunables, nr_requests and
        /// read_ahead_kb through sysfs and measure with fio; every sysfs
        /// value is restored on exit, on error and on Ctrl-C.
        #[arg(long, requires = "verify")]
        kernel: bool,
    },
    /// Replay a DiskSim validation trace on a device model and print DiskSim's
    /// demerit (its `rms`), the mean and the per-request error.
    Validate {
        trace: String,
        /// Device profile name or TOML path.
        #[arg(long)]
        device: String,
    },
    /// Device profiles: probe a real device, or import one from DiskSim.
    Device {
        #[command(subcommand)]
        action: DeviceCommand,
    },
    /// Run every experiment with published figures (the 2003 benchmarks, the
    /// 2016 BFQ letter on both devices, the 2009 threads' tables, any scenario
    /// with a `[published]` or `[[table]]` section) in parallel, and print ours
    /// beside theirs with a verdict per table.
    Reproduce {
        /// Only experiments whose name or thread contains PATTERN (`morton-7`,
        /// `letter`; the 2009 threads: `brunelle`, `zoccolo`, `goyal`, `righi`).
        #[arg(long, value_name = "PATTERN")]
        only: Option<String>,
        /// Threads to run on (default: one per core).
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
        /// Tunable override for every run, POLICY.TUNABLE=VALUE or block.NAME=VALUE
        /// (repeatable); shown under each table.
        #[arg(long = "set", value_name = "POLICY.TUNABLE=VALUE")]
        set: Vec<String>,
        /// Device profile name or TOML path for the scenarios (the letter keeps its own).
        #[arg(long)]
        device: Option<String>,
        /// Fail (exit 1) when a table's verdict is worse than the committed expectations.
        #[arg(long, conflicts_with = "bless")]
        check: bool,
        /// Rewrite the committed expectations with this run's verdicts.
        #[arg(long)]
        bless: bool,
        /// The expectations file (default: scenarios/expected/reproduce.toml of the source tree).
        #[arg(long, value_name = "FILE")]
        expectations: Option<std::path::PathBuf>,
        /// Also write DIR/reproduce.html: per table a bar chart (inline SVG) of ours
        /// beside the published figures, the figures and the verdict, linking to
        /// DIR/SCENARIO.html with each scenario's latency CDFs and throughput timelines.
        #[arg(long, value_name = "DIR")]
        report: Option<std::path::PathBuf>,
        /// table: text for a terminal; json: every table with its verdict; markdown: the
        /// README's tables.
        #[arg(long, value_enum, default_value_t = ReproduceFormat::Table)]
        format: ReproduceFormat,
    },
    /// List policies, group layers, devices, host programs, file systems and built-in scenarios.
    List {
        /// Also print each policy's tunables (kernel name, default, unit, meaning) and
        /// the block layer's settings, as `--set` takes them.
        #[arg(long)]
        tunables: bool,
    },
    /// Show one policy: what it is, what it honours, and its tunables with kernel
    /// name, default, unit and meaning.
    Show {
        /// A policy name or alias (`elevator list`).
        policy: String,
    },
    /// Swarm testing: run random scenarios (policy and tunables, device, direct
    /// jobs, host processes, groups, faults) under the invariant checker and
    /// print each failure's seed and scenario file.
    Swarm {
        /// The first run's seed; run i uses seed + i.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How many runs.
        #[arg(long, default_value_t = 100)]
        runs: u64,
        /// Where to write the scenario file of each failing run.
        #[arg(long, default_value = ".")]
        out: std::path::PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum DeviceCommand {
    /// Measure a file or block device through io_uring (4 KiB random reads at depths
    /// 1-128, sequential reads of 4 KiB-1 MiB, a rotational check; writes only with
    /// --allow-write) and write the fitted device profile (TOML, the measurements in
    /// its comments). Refuses mounted, swap or held devices.
    Probe {
        /// A file or block device (it must exist; the probe addresses all of it).
        target: std::path::PathBuf,
        /// Also measure writes (sequential, random, a 70/30 mix): they overwrite the target.
        #[arg(long)]
        allow_write: bool,
        /// Seconds per phase over all its rounds (19 phases, 28 with writes: at most
        /// about 24 s, 37 s with writes, at the default).
        #[arg(long, default_value_t = 1.5)]
        phase_time: f64,
        /// Rounds: each phase runs this many times, a share of its time each, and
        /// the fit takes the median over them (one stall of a loaded host spoils
        /// one round, not the phase).
        #[arg(long, default_value_t = 5)]
        rounds: u32,
        /// Spindle speed assumed if the target turns out to be a disk.
        #[arg(long, default_value_t = 7200)]
        rpm: u32,
        /// Write the profile here instead of standard output.
        #[arg(long, short)]
        output: Option<std::path::PathBuf>,
    },
    /// Write an HDD profile TOML from a DiskSim drive (FILE.parv and the
    /// .diskspecs, .model and .seek files it names); parameters the model
    /// does not support, and where the profile approximates DiskSim, are
    /// listed on stderr. On an error nothing is printed; but `X > X.toml`
    /// leaves the shell's empty X.toml behind, so prefer `-o X.toml`.
    ImportDisksim {
        parv: String,
        /// Write the profile here instead of standard output, only on
        /// success and whole (a temporary file beside it, then renamed):
        /// an existing FILE is never left empty or half-written.
        #[arg(long, short)]
        output: Option<String>,
    },
}

/// How a trace is read and paced.
#[derive(clap::Args, Debug)]
struct TraceArgs {
    /// Device profile name or TOML path.
    #[arg(long)]
    device: String,
    /// Trace format (default: told from the first line): blkparse, iolog, msr,
    /// mqsim, disksim, disksim-validate.
    #[arg(long)]
    format: Option<String>,
    /// Closed loop: each process waits for its previous request, then its
    /// recorded think time (default: open loop, each request at its time).
    #[arg(long)]
    closed: bool,
    /// Open loop: multiply the trace's timestamps by this (2: half the rate).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Closed loop: multiply the recorded think times by this.
    #[arg(long, default_value_t = 1.0)]
    think_scale: f64,
}

impl TraceArgs {
    fn config(&self, trace: &str) -> Result<elevator_scenario::replay::ReplayConfig> {
        use elevator_workload::trace::{ReplayMode, TraceFormat};
        let format = match &self.format {
            None => None,
            Some(f) => Some(TraceFormat::from_name(f).ok_or_else(|| {
                anyhow!(
                    "--format {f:?}: unknown (known: {})",
                    TraceFormat::ALL.map(TraceFormat::name).join(", ")
                )
            })?),
        };
        for (flag, v) in [
            ("--time-scale", self.time_scale),
            ("--think-scale", self.think_scale),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                bail!("{flag} {v}: want a finite number >= 0");
            }
        }
        elevator_device::open(&self.device).map_err(|e| anyhow!("--device: {e}"))?;
        Ok(elevator_scenario::replay::ReplayConfig {
            trace: trace.to_string(),
            format,
            device: self.device.clone(),
            mode: if self.closed {
                ReplayMode::Closed {
                    think_scale: self.think_scale,
                }
            } else {
                ReplayMode::Open {
                    time_scale: self.time_scale,
                }
            },
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ReproduceFormat {
    Table,
    Json,
    Markdown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    #[value(alias = "normal")]
    Table,
    Json,
    /// fio's `json+` (job files): JSON with the latency histograms' bins.
    #[value(name = "json+")]
    JsonPlus,
    Csv,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let mut out = Vec::new();
    let status = match execute(cli, &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<CheckFailed>() || e.is::<fio::JobsFailed>() => {
            eprintln!("elevator: {e}");
            ExitCode::from(CHECK_FAILED)
        }
        Err(e) => {
            eprintln!("elevator: {e:#}");
            ExitCode::from(2)
        }
    };
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&out).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("elevator: writing output: {e}");
            ExitCode::from(1)
        }
        _ => status,
    }
}

/// Write `text` to `path` whole or not at all: into a temporary file in
/// the same directory, flushed, then renamed over `path` (a rename within
/// one file system replaces the name in one step), so neither a failure
/// nor an interruption leaves `path` empty or half-written.
fn write_atomically(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "profile".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Exit status of a `reproduce --check` that found a table worse than committed.
const CHECK_FAILED: u8 = 1;

/// A failed check: the output is printed, the status says so.
#[derive(Debug)]
struct CheckFailed;

impl std::fmt::Display for CheckFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "reproduce --check: some tables are worse than committed, or missing from the run",
        )
    }
}

impl std::error::Error for CheckFailed {}

fn execute(cli: Cli, out: &mut Vec<u8>) -> Result<()> {
    match cli.command {
        Command::List { tunables } => list(out, tunables),
        Command::Show { policy } => show_policy(out, stack::policy(&policy, Origin::flag("show"))?),
        Command::Reproduce {
            only,
            jobs,
            set,
            device,
            check,
            bless,
            expectations,
            report,
            format,
        } => {
            let options = elevator_scenario::reproduce::ReproduceOptions {
                only,
                jobs: jobs.unwrap_or(0),
                tunables: parse_sets(&set)?,
                device,
                charts: report.is_some(),
            };
            if jobs == Some(0) {
                bail!("--jobs 0: need at least one thread");
            }
            reproduce(&options, check, bless, expectations, report, format, out)
        }
        Command::Swarm {
            seed,
            runs,
            out: dir,
        } => swarm(seed, runs, &dir, out),
        Command::Letter {
            device,
            sched,
            seed,
            think_scale,
        } => {
            let mut options = elevator_scenario::letter::LetterOptions::default();
            if let Some(d) = device {
                options.devices = d;
            }
            if let Some(s) = sched {
                for name in &s {
                    stack::policy(name, Origin::flag("--sched"))?;
                }
                options.schedulers = s;
            }
            options.seed = seed;
            options.think_scale = think_scale;
            let quiet = !std::io::stderr().is_terminal();
            let report = elevator_scenario::letter::run_letter(&options, &mut |line| {
                if !quiet {
                    eprintln!("{line}");
                }
            })?;
            out.extend_from_slice(report.to_table().as_bytes());
            Ok(())
        }
        Command::Replay { trace, how, sched } => {
            let config = how.config(&trace)?;
            let variants: Vec<Variant> = sched.iter().map(|s| Variant::new(s)).collect();
            for v in &variants {
                elevator_scenario::replay::check_variant(v)?;
            }
            for (i, v) in variants.iter().enumerate() {
                let outcome = elevator_scenario::replay::replay(&config, v)?;
                if i > 0 {
                    out.push(b'\n');
                }
                out.extend_from_slice(
                    elevator_scenario::replay::replay_table(&config, &outcome).as_bytes(),
                );
            }
            Ok(())
        }
        Command::Whatif {
            trace,
            how,
            by,
            sched,
            grid,
            threads,
            report,
        } => {
            use elevator_scenario::replay::{whatif, whatif_table, Metric};
            let config = how.config(&trace)?;
            let metric = Metric::from_name(&by).ok_or_else(|| {
                anyhow!(
                    "--by {by:?}: unknown metric (known: {})",
                    Metric::ALL.map(Metric::name).join(", ")
                )
            })?;
            let policies: Vec<String> = sched.unwrap_or_else(|| {
                elevator_sched::registry()
                    .iter()
                    .map(|t| t.name.to_string())
                    .collect()
            });
            let variants = grid_variants(&policies, &grid)?;
            let threads = threads.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
            });
            let quiet = !std::io::stderr().is_terminal();
            let ranked = whatif(&config, &variants, metric, threads, &|o| {
                if !quiet {
                    eprintln!("{} done", o.variant.label());
                }
            })?;
            out.extend_from_slice(whatif_table(&config, &ranked, metric).as_bytes());
            if report {
                out.extend_from_slice(chart(&ranked, metric).as_bytes());
            }
            Ok(())
        }
        Command::Device {
            action:
                DeviceCommand::Probe {
                    target,
                    allow_write,
                    phase_time,
                    rounds,
                    rpm,
                    output,
                },
        } => probe::probe(
            &probe::ProbeOptions {
                target,
                allow_write,
                phase_time,
                rounds,
                rpm,
                output,
            },
            out,
        ),
        Command::Device {
            action: DeviceCommand::ImportDisksim { parv, output },
        } => {
            let imported = elevator_device::disksim::import_disksim(std::path::Path::new(&parv))?;
            // The profile must load: check it before handing it out.
            elevator_device::parse(&parv, &imported.profile)
                .map_err(|e| anyhow!("the imported profile does not load: {e}"))?;
            for w in &imported.warnings {
                eprintln!("warning: {w}");
            }
            match output {
                Some(path) => write_atomically(std::path::Path::new(&path), &imported.profile)
                    .with_context(|| format!("writing {path}"))?,
                None => out.extend_from_slice(imported.profile.as_bytes()),
            }
            Ok(())
        }
        Command::Tune {
            workload,
            device,
            objective,
            sched,
            budget,
            seed,
            threads,
            no_cpu_cost,
            dev,
            top,
            verify,
            verify_settings,
            verify_runs,
            allow_write,
            kernel,
        } => {
            if budget == 0 || verify_runs == 0 || verify_settings < 2 {
                bail!(
                    "--budget and --verify-runs must be at least 1, --verify-settings at least 2"
                );
            }
            let options = tune::TuneOptions {
                workload,
                device,
                objective,
                sched: sched.unwrap_or_default(),
                budget,
                seed,
                threads,
                cpu_cost: !no_cpu_cost,
                dev,
                top,
                verify,
                verify_settings,
                verify_runs,
                allow_write,
                kernel,
            };
            let t = tune::tune(&options, out)?;
            match &options.verify {
                Some(target) => verify::verify(
                    &options,
                    &t.workload,
                    &t.objective,
                    &t.result,
                    &t.kernel_default,
                    target,
                    out,
                ),
                None => Ok(()),
            }
        }
        Command::Validate { trace, device } => {
            let v = elevator_scenario::validate::validate(&trace, &device)?;
            writeln!(
                out,
                "{} on {}: {} requests, one at a time (DiskSim's validate loop)",
                v.trace, v.device, v.requests
            )?;
            writeln!(
                out,
                "mean service time: model {:.3} ms, measured {:.3} ms ({:+.1} %)",
                v.mean_model_ms,
                v.mean_measured_ms,
                100.0 * (v.mean_model_ms - v.mean_measured_ms) / v.mean_measured_ms
            )?;
            writeln!(
                out,
                "demerit (DiskSim's rms, its statdefs bins): {:.3} ms ({:.1} % of the mean)",
                v.demerit_ms,
                100.0 * v.demerit_ms / v.mean_measured_ms
            )?;
            writeln!(
                out,
                "demerit without bins: {:.3} ms; per-request RMS error: {:.3} ms",
                v.demerit_unbinned_ms, v.per_request_rms_ms
            )?;
            Ok(())
        }
        Command::Run {
            scenario,
            sched,
            device,
            seed,
            set,
            trace,
            report,
            format,
            engine,
            target,
            allow_write,
            depth,
            check,
            runtime,
            size,
            ioengine,
            iodepth,
            directory,
            section,
            eta,
        } => {
            let overrides: Vec<(String, String)> = [
                ("runtime", runtime),
                ("size", size),
                ("ioengine", ioengine),
                ("iodepth", iodepth),
                ("directory", directory),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
            .collect();
            if engine.is_some() || fio::is_job_file(&scenario) {
                let options = fio::FioOptions {
                    job: scenario.into(),
                    engine: engine.unwrap_or(fio::EngineKind::Sim),
                    target,
                    allow_write,
                    schedulers: sched.unwrap_or_else(|| vec!["noop".into()]),
                    tunables: parse_sets(&set)?,
                    device,
                    seed: seed.unwrap_or(1),
                    depth,
                    check,
                    trace,
                    report,
                    output: match format {
                        Format::Table => fio::Output::Table,
                        Format::Json => fio::Output::Json,
                        Format::JsonPlus => fio::Output::JsonPlus,
                        Format::Csv => bail!("--format csv is not available for fio job files"),
                    },
                    overrides,
                    sections: section,
                    eta,
                };
                return fio::run(&options, out);
            }
            if target.is_some() || allow_write || depth.is_some() {
                bail!("--target, --allow-write and --depth apply to fio job files (*.fio)");
            }
            if !overrides.is_empty() || !section.is_empty() {
                bail!(
                    "--runtime, --size, --ioengine, --iodepth, --directory and --section apply \
                     to fio job files (*.fio)"
                );
            }
            if format == Format::JsonPlus {
                bail!("--output-format json+ is fio's, for job files (*.fio)");
            }
            let scenario = load(&scenario)?;
            let options = RunOptions {
                schedulers: sched,
                device,
                seed,
                tunables: parse_sets(&set)?,
                trace: trace.is_some(),
                charts: report.is_some(),
                clock: None,
                check,
            };
            let dir = report;
            let report = run_with_progress(&scenario, &options)?;
            if let Some(path) = trace {
                std::fs::write(&path, report.trace_text())
                    .with_context(|| format!("--trace: writing {}", path.display()))?;
            }
            if let Some(dir) = dir {
                let page = dir.join("index.html");
                write_page(&page, &elevator_scenario::html::run_html(&report))?;
                eprintln!("report: wrote {}", page.display());
            }
            let text = match format {
                Format::Table => report.to_table(),
                Format::Json => report.to_json(),
                Format::Csv => report.to_csv(),
                Format::JsonPlus => unreachable!("refused above"),
            };
            out.extend_from_slice(text.as_bytes());
            Ok(())
        }
    }
}

/// Every policy with its defaults, plus each policy's grid combinations.
fn grid_variants(policies: &[String], grid: &[String]) -> Result<Vec<Variant>> {
    let mut axes: Vec<(String, String, Vec<i64>)> = Vec::new();
    for g in grid {
        let bad = || {
            anyhow!(
                "--grid {g:?}: expected POLICY.TUNABLE=V1,V2,..., e.g. deadline.fifo_batch=1,16"
            )
        };
        let (key, values) = g.split_once('=').ok_or_else(bad)?;
        // Policy names may hold dots (cfq-2.6.32), tunable names never do.
        let (policy, tunable) = key.rsplit_once('.').ok_or_else(bad)?;
        let origin = || Origin::flag(format!("--grid {g:?}"));
        let t = stack::policy(policy.trim(), origin())?;
        let values: Vec<i64> = values
            .split(',')
            .map(|v| v.trim().parse().map_err(|_| bad()))
            .collect::<Result<_>>()?;
        for v in &values {
            StackBuilder::new(t.name, origin())?.tunable(tunable.trim(), *v, origin())?;
        }
        axes.push((t.name.to_string(), tunable.trim().to_string(), values));
    }
    let mut variants = Vec::new();
    for p in policies {
        let t = stack::policy(p, Origin::flag("--sched"))?;
        variants.push(Variant::new(t.name));
        let mine: Vec<&(String, String, Vec<i64>)> =
            axes.iter().filter(|(q, _, _)| q == t.name).collect();
        if mine.is_empty() {
            continue;
        }
        let mut combos: Vec<Vec<(String, i64)>> = vec![Vec::new()];
        for (_, tunable, values) in &mine {
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.push((tunable.clone(), *v));
                        c
                    })
                })
                .collect();
        }
        for tunables in combos {
            variants.push(Variant {
                policy: t.name.to_string(),
                tunables,
            });
        }
    }
    if variants.len() > 256 {
        bail!("--grid: {} variants; at most 256 per run", variants.len());
    }
    Ok(variants)
}

/// The ranking as horizontal bars (60 columns for the longest).
fn chart(
    ranked: &[elevator_scenario::replay::Ranked],
    metric: elevator_scenario::replay::Metric,
) -> String {
    let mut out = format!("\n{} by policy:\n", metric.name());
    let max = ranked
        .iter()
        .map(|r| r.value(metric))
        .fold(0.0_f64, f64::max);
    for r in ranked {
        let v = r.value(metric);
        let bars = if max > 0.0 {
            (v / max * 60.0).round() as usize
        } else {
            0
        };
        let mut label = r.outcome.variant.label();
        label.truncate(20);
        out.push_str(&format!("{label:<20} {:<60} {v:.3}\n", "#".repeat(bars)));
    }
    out
}
/// `elevator reproduce`: run, print, then check or bless.
fn reproduce(
    options: &elevator_scenario::reproduce::ReproduceOptions,
    check: bool,
    bless: bool,
    expectations: Option<std::path::PathBuf>,
    report: Option<std::path::PathBuf>,
    format: ReproduceFormat,
    out: &mut Vec<u8>,
) -> Result<()> {
    use elevator_scenario::reproduce::{self, Expectations};
    let path = expectations.unwrap_or_else(|| reproduce::EXPECTATIONS.into());
    let shown = path.display().to_string();
    let read_expectations = || -> Result<Expectations> {
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {shown}"))?;
        Ok(Expectations::parse(&shown, &text)?)
    };
    // Read before the long run, so that a bad file fails at once.
    let committed = if check {
        Some(read_expectations()?)
    } else {
        None
    };

    let interactive = std::io::stderr().is_terminal();
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    if interactive {
        bar.set_draw_target(ProgressDrawTarget::stderr());
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} runs, {elapsed} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    // Wall-clock time is reported beside the results, never in them.
    #[allow(clippy::disallowed_methods)]
    let started = std::time::Instant::now();
    let result = reproduce::reproduce(options, &|done, total, what| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    })?;
    let wall = started.elapsed().as_secs_f64();
    bar.finish_and_clear();

    match format {
        ReproduceFormat::Table => {
            out.extend_from_slice(result.to_text().as_bytes());
            writeln!(out, "wall time {wall:.1} s on {} threads", result.jobs)?;
        }
        ReproduceFormat::Json => out.extend_from_slice(result.to_json().as_bytes()),
        ReproduceFormat::Markdown => out.extend_from_slice(result.to_markdown().as_bytes()),
    }
    if let Some(dir) = report {
        for scenario in &result.reports {
            let page = dir.join(elevator_scenario::html::scenario_page(&scenario.scenario));
            write_page(&page, &elevator_scenario::html::run_html(scenario))?;
        }
        let page = dir.join("reproduce.html");
        write_page(&page, &elevator_scenario::html::reproduction_html(&result))?;
        eprintln!(
            "report: wrote {} and {} scenario pages beside it",
            page.display(),
            result.reports.len()
        );
    }
    if let Some(committed) = committed {
        let mut problems = committed.check(&result);
        if options.only.is_none() {
            problems.extend(committed.missing(&result));
        }
        for p in &problems {
            eprintln!("check: {p}");
        }
        if !problems.is_empty() {
            return Err(CheckFailed.into());
        }
        eprintln!(
            "check: {} tables no worse than {shown}",
            result.tables.len()
        );
    }
    if bless {
        // A partial run (`--only`) keeps the other tables' verdicts.
        let mut all = if path.exists() {
            read_expectations()?
        } else {
            Expectations::default()
        };
        all.update(Expectations::of(&result));
        std::fs::write(&path, all.to_toml()).with_context(|| format!("writing {shown}"))?;
        eprintln!("bless: wrote {} tables to {shown}", result.tables.len());
    }
    Ok(())
}

/// `elevator swarm`: one line per failing run, a summary at the end.
fn swarm(seed: u64, runs: u64, dir: &std::path::Path, out: &mut Vec<u8>) -> Result<()> {
    // The checker's panics are reported here, one line each.
    std::panic::set_hook(Box::new(|_| {}));
    let (mut requests, mut errors, mut failures) = (0u64, 0u64, 0u64);
    let mut per_policy: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for i in 0..runs {
        let outcome = elevator_scenario::swarm::run_one(seed.wrapping_add(i));
        let g = &outcome.generated;
        requests += outcome.requests;
        errors += outcome.errors;
        let entry = per_policy.entry(g.policy.clone()).or_default();
        entry.0 += 1;
        entry.1 += outcome.requests;
        if let Some(failure) = &outcome.failure {
            failures += 1;
            let path = dir.join(format!("swarm-{}.toml", g.seed));
            std::fs::write(&path, &g.text)
                .with_context(|| format!("writing {}", path.display()))?;
            let first = failure.lines().next().unwrap_or("");
            writeln!(
                out,
                "FAIL seed {} ({} on {}): {first}\n  scenario: {}\n  replay: elevator run {} --check",
                g.seed,
                g.policy,
                g.device,
                path.display(),
                path.display()
            )?;
        }
    }
    let _ = std::panic::take_hook();
    writeln!(out, "{:<14} {:>6} {:>12}", "policy", "runs", "requests")?;
    for (policy, (n, r)) in &per_policy {
        writeln!(out, "{policy:<14} {n:>6} {r:>12}")?;
    }
    writeln!(
        out,
        "swarm seeds {seed}..{}: {runs} runs, {requests} requests checked, {errors} failed by \
         injected faults, {failures} runs failed",
        seed.wrapping_add(runs)
    )?;
    if failures > 0 {
        bail!("{failures} of {runs} swarm runs failed");
    }
    Ok(())
}

/// A built-in scenario, or a file.
fn load(name: &str) -> Result<Scenario> {
    if let Some(s) = elevator_scenario::builtin(name) {
        return Ok(s?);
    }
    let path = std::path::Path::new(name);
    if std::fs::metadata(path).is_err() {
        let known: Vec<&str> = elevator_scenario::builtins()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        bail!(
            "no scenario {name:?}: not a built-in ({}) and no such file",
            known.join(", ")
        );
    }
    let text = elevator_device::read_input(path, elevator_scenario::MAX_SCENARIO_BYTES)
        .with_context(|| format!("reading {name}"))?;
    Ok(Scenario::parse(name, &text)?)
}

/// Each `--set POLICY.TUNABLE=VALUE` or `block.NAME=VALUE`, checked.
fn parse_sets(sets: &[String]) -> Result<Vec<stack::Override>> {
    Ok(sets
        .iter()
        .map(|s| stack::parse_override(s))
        .collect::<Result<_, _>>()?)
}

/// Write one `--report` page, creating its directory.
fn write_page(page: &std::path::Path, html: &str) -> Result<()> {
    if let Some(dir) = page.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--report: creating {}", dir.display()))?;
    }
    std::fs::write(page, html).with_context(|| format!("--report: writing {}", page.display()))
}

/// Run, with a progress bar on a terminal once the run has taken a second:
/// per policy, moving within each run as its simulated time advances
/// (the engine publishes it, a ticker thread reads it five times a second),
/// so a policy that simulates for minutes does not look frozen.
fn run_with_progress(
    scenario: &Scenario,
    options: &RunOptions,
) -> Result<elevator_metrics::Report> {
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    /// Bar units per policy: the fraction of one run's time limit done.
    const STEPS: u64 = 1000;
    let policies: Vec<String> = options
        .schedulers
        .clone()
        .unwrap_or_else(|| scenario.schedulers.clone());
    let runs = policies.len() * scenario.sweep_points();
    let bar =
        ProgressBar::with_draw_target(Some(runs as u64 * STEPS), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {elapsed}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(scenario.name.clone());
    // Wall-clock time only decides whether to show the bar; it never reaches a result.
    #[allow(clippy::disallowed_methods)]
    let started = std::time::Instant::now();
    let interactive = std::io::stderr().is_terminal();
    let show = |bar: &ProgressBar| {
        if interactive && bar.is_hidden() && started.elapsed().as_secs_f64() > 1.0 {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    };
    let clock = std::sync::Arc::new(AtomicU64::new(0));
    let done = AtomicUsize::new(0);
    let finished = AtomicBool::new(false);
    let limit = scenario.time_limit.nanos().max(1);
    let options = RunOptions {
        clock: interactive.then(|| clock.clone()),
        ..options.clone()
    };
    let report = std::thread::scope(|scope| {
        if interactive {
            scope.spawn(|| {
                while !finished.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(200));
                    let i = done.load(Ordering::Relaxed);
                    let now = clock.load(Ordering::Relaxed);
                    let within = (now.min(limit) as f64 / limit as f64 * STEPS as f64) as u64;
                    bar.set_position(i as u64 * STEPS + within.min(STEPS - 1));
                    bar.set_message(format!(
                        "{}: {} at {:.1} s simulated ({}/{runs})",
                        scenario.name,
                        policies[i % policies.len().max(1)],
                        now as f64 / 1e9,
                        (i + 1).min(runs)
                    ));
                    show(&bar);
                }
            });
        }
        let report = elevator_scenario::run(scenario, &options, &mut |_| {
            clock.store(0, Ordering::Relaxed);
            done.fetch_add(1, Ordering::Relaxed);
        });
        finished.store(true, Ordering::Relaxed);
        report
    })?;
    bar.finish_and_clear();
    Ok(report)
}

/// A policy's name, aliases, what it honours, and a table of its tunables.
fn show_policy(out: &mut Vec<u8>, t: &elevator_sched::SchedulerType) -> Result<()> {
    use elevator_metrics::text::{columns, wrap, WIDTH};
    let aliases = if t.aliases.is_empty() {
        String::new()
    } else {
        format!(" (also {})", t.aliases.join(", "))
    };
    writeln!(
        out,
        "{}",
        wrap(&format!("{}{aliases}: {}", t.name, t.about), WIDTH, "")
    )?;
    if !t.honours.is_empty() {
        writeln!(out, "  honours {}", t.honours.join(", "))?;
    }
    if t.tunables.is_empty() {
        writeln!(out, "  no tunables")?;
        return Ok(());
    }
    let mut rows = vec![["tunable", "default", "unit", "meaning"]
        .map(String::from)
        .to_vec()];
    for k in t.tunables {
        rows.push(vec![
            k.name.to_string(),
            k.default.to_string(),
            k.unit.to_string(),
            k.about.to_string(),
        ]);
    }
    let mut text = String::new();
    columns(&mut text, &rows);
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

/// The block layer's settings `--set block.NAME=VALUE` takes, with the
/// 2.6 preset's defaults.
fn show_block(out: &mut Vec<u8>) -> Result<()> {
    use elevator_metrics::text::columns;
    let d = elevator_sim::EngineConfig::linux_26();
    let rows: Vec<Vec<String>> = [
        ["setting", "default", "unit", "meaning"].map(String::from),
        [
            "nr_requests".into(),
            d.nr_requests[0].to_string(),
            "requests".into(),
            "request slots per direction before submitters sleep (BLKDEV_MAX_RQ)".into(),
        ],
        [
            "batch_requests".into(),
            d.batch_requests.to_string(),
            "requests".into(),
            "free slots needed before sleepers are woken (2.4: 32)".into(),
        ],
        [
            "steal".into(),
            u8::from(d.steal).to_string(),
            "0/1".into(),
            "new submitters may take a free slot while others sleep (2.4)".into(),
        ],
        [
            "inflight_limit".into(),
            "0".into(),
            "bytes".into(),
            "elevator-lowlatency: bytes queued and in flight before submitters wait; 0: none"
                .into(),
        ],
        [
            "max_sectors".into(),
            "0".into(),
            "bytes".into(),
            "largest request below the device's own; 0: the device's (2.4 IDE: 64 KiB)".into(),
        ],
        [
            "restart_before_wakeup".into(),
            u8::from(d.restart_before_wakeup).to_string(),
            "0/1".into(),
            "a completion starts the next request before it wakes the submitter (2.4 IDE)".into(),
        ],
        [
            "sync_lists".into(),
            u8::from(d.sync_lists).to_string(),
            "0/1".into(),
            "2.6.30+ allocation: sync/async lists, ioc batching, may_queue (linux-2.6.32)".into(),
        ],
        [
            "congestion".into(),
            u8::from(d.congestion).to_string(),
            "0/1".into(),
            "the lists' congestion bits (113/103 of 128) stop writeback (linux-2.6.32)".into(),
        ],
        [
            "plugging".into(),
            u8::from(d.plugging.is_some()).to_string(),
            "0/1".into(),
            "plug an empty queue; unplug at 4 queued or after 3 ms (linux-2.6.32)".into(),
        ],
    ]
    .into_iter()
    .map(|r| r.to_vec())
    .collect();
    writeln!(
        out,
        "block layer (--set block.NAME=VALUE; [block] in a scenario)"
    )?;
    let mut text = String::new();
    columns(&mut text, &rows);
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

fn list(out: &mut Vec<u8>, tunables: bool) -> Result<()> {
    if tunables {
        for t in elevator_sched::registry() {
            show_policy(out, t)?;
            writeln!(out)?;
        }
        return show_block(out);
    }
    // One block per kind, each in columns of its own width, the description
    // wrapped under itself so that no line passes 100 columns.
    let mut text = String::new();
    let policies: Vec<Vec<String>> = elevator_sched::registry()
        .iter()
        .map(|t| {
            let honours = if t.honours.is_empty() {
                "-".to_string()
            } else {
                t.honours.join(",")
            };
            vec![t.name.into(), honours, t.about.into()]
        })
        .collect();
    text.push_str(
        "Policies (--sched NAME; tunables: elevator list --tunables), what each honours:\n",
    );
    elevator_metrics::text::columns(&mut text, &policies);
    // The group layers sit in front of the policy, so they work with all;
    // listed outermost first.
    let layers: Vec<Vec<String>> = elevator_sched::group::registry::GROUP_LAYERS
        .iter()
        .rev()
        .map(|t| vec![t.name.into(), t.honours.into(), t.about.into()])
        .collect();
    text.push_str(
        "\nGroup layers ([groups.NAME], [iocost], [wbt] in a scenario), in front of any policy:\n",
    );
    elevator_metrics::text::columns(&mut text, &layers);
    let devices: Vec<Vec<String>> = elevator_device::builtin_profiles()
        .iter()
        .map(|(name, about)| vec![(*name).into(), (*about).into()])
        .collect();
    text.push_str("\nDevices (--device NAME, or a profile file):\n");
    elevator_metrics::text::columns(&mut text, &devices);
    let file_systems: Vec<Vec<String>> = elevator_host::fs::registry::FILE_SYSTEMS
        .iter()
        .map(|t| {
            let keys = if t.keys.is_empty() {
                "-".to_string()
            } else {
                t.keys.join(" ")
            };
            vec![t.name.into(), keys, t.about.into()]
        })
        .collect();
    text.push_str("\nFile systems ([host] fs = NAME, mount = \"OPTS\"; first value: default):\n");
    elevator_metrics::text::columns(&mut text, &file_systems);
    let programs: Vec<Vec<String>> = elevator_host::process::PROGRAMS
        .iter()
        .map(|t| {
            let keys: Vec<String> = t.keys.iter().map(|k| k.describe()).collect();
            vec![
                t.name.into(),
                format!("{}; keys {}", t.about, keys.join(" ")),
            ]
        })
        .collect();
    text.push_str("\nHost programs ([[process]] kind = NAME; key! required, key=default):\n");
    elevator_metrics::text::columns(&mut text, &programs);
    let scenarios: Vec<Vec<String>> = elevator_scenario::builtins()
        .iter()
        .map(|(name, about)| vec![(*name).into(), about.clone()])
        .collect();
    text.push_str("\nScenarios (elevator run NAME; elevator show NAME prints one):\n");
    elevator_metrics::text::columns(&mut text, &scenarios);
    out.extend_from_slice(text.as_bytes());
    Ok(())
}
