//! fio job files as workloads, for either engine.
//!
//! A job file is read as fio reads it ([`parse`]: sections, inline `;`
//! and `#` comments, `${VAR}`, `include`, fio's size and time units),
//! every option is applied with fio's meaning or refused with the reason
//! ([`options`], [`job`]: every error of the file is reported at once),
//! the files each thread uses are worked out ([`plan`]), and the threads
//! run as fio's do ([`thread`], [`run`]) on the simulator or on the
//! io_uring runtime, recording fio's statistics (`elevator-metrics`'
//! `fio`). [`data`] is what writes carry and how a read-back is checked.
//!
//! Invariants: every option is understood or an error naming the file,
//! line and option; options are checked before anything runs; the same
//! job file, seed and engine inputs give the same run.

pub mod data;
pub mod job;
pub mod logs;
pub mod options;
pub mod parse;
pub mod plan;
pub mod random;
pub mod run;
pub mod thread;
pub mod value;
pub mod zbd;

pub use job::{Job, Jobs, Overrides, Runner};
pub use plan::{Existing, Plan, PlanFile, PlanThread};
pub use run::{DataBook, FioRun, Place, Progress, Setup, Shared};
pub use thread::{Action, Dir, Unit};

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

/// Every error found in a job file, in file order: one line each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FioErrors(pub Vec<FioError>);

impl fmt::Display for FioErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for FioErrors {}

impl From<FioError> for FioErrors {
    fn from(e: FioError) -> Self {
        FioErrors(vec![e])
    }
}

/// Most bytes read for one job file, its includes counted (1 MiB; fio's
/// own examples are a few hundred bytes). A file that includes itself many
/// times per line would otherwise expand to thousands of copies within the
/// nesting limit, and `/dev/zero` as a job file would never end.
pub const MAX_JOB_FILE_BYTES: usize = 1 << 20;

/// A parsed and checked job file.
#[derive(Clone, Debug)]
pub struct JobFile {
    pub path: PathBuf,
    pub jobs: Vec<Job>,
    /// Options of the `[global]` sections (and command-line overrides).
    pub global: Vec<(String, String)>,
    /// What fio would note, and where a run here differs.
    pub notes: Vec<String>,
}

/// How to read a job file.
pub struct ReadOptions<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub keywords: parse::Keywords,
    pub runner: Runner,
    pub overrides: Overrides,
}

impl fmt::Debug for ReadOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadOptions")
            .field("runner", &self.runner)
            .field("overrides", &self.overrides)
            .finish_non_exhaustive()
    }
}

/// Read `path`, its includes through `read`.
pub fn parse_with_reader(
    path: &Path,
    opts: &ReadOptions<'_>,
    read: &mut dyn FnMut(&Path) -> Result<String, String>,
) -> Result<JobFile, FioErrors> {
    let mut src = parse::Source {
        env: opts.env,
        read,
        keywords: opts.keywords,
        budget: MAX_JOB_FILE_BYTES,
    };
    let sections = parse::read(path, &mut src)?;
    let jobs = job::jobs(path, &sections, opts.runner, &opts.overrides)?;
    Ok(JobFile {
        path: path.to_path_buf(),
        jobs: jobs.jobs,
        global: jobs.global,
        notes: jobs.notes,
    })
}

/// Read the job file at `path` from the file system.
pub fn parse_file(path: &Path, opts: &ReadOptions<'_>) -> Result<JobFile, FioErrors> {
    let mut read =
        |p: &Path| elevator_core::read_input(p, MAX_JOB_FILE_BYTES).map_err(|e| e.to_string());
    parse_with_reader(path, opts, &mut read)
}

impl JobFile {
    /// The files and threads of a run, given what each path is.
    pub fn plan(
        &self,
        existing: &dyn Fn(&str) -> Existing,
        fill_free: u64,
    ) -> Result<Plan, FioErrors> {
        plan::plan(&self.jobs, existing, fill_free)
    }

    /// A run with every job on one target of `bytes` (each job's files
    /// are the target, as with `--filename`), no I/O through a page cache
    /// model: what a single real target is for `tune --verify`. Returns
    /// the run and the control groups of `cgroup=`.
    pub fn on_target(
        &self,
        bytes: u64,
        seed: u64,
    ) -> Result<(FioRun, elevator_core::GroupTree), FioErrors> {
        let plan = self.plan(&|_| Existing::Device(bytes), bytes)?;
        let places = plan.files.iter().map(|_| Place::at(0, bytes)).collect();
        let mut groups = elevator_core::GroupTree::default();
        let of = self
            .jobs
            .iter()
            .map(|j| match &j.o.cgroup {
                None => elevator_core::GroupId::ROOT,
                Some(name) => groups.find(name).unwrap_or_else(|| {
                    groups.add(
                        name,
                        elevator_core::GroupId::ROOT,
                        j.o.cgroup_weight.unwrap_or(elevator_core::DEFAULT_WEIGHT),
                        elevator_core::IoMax::default(),
                    )
                }),
            })
            .collect();
        let run = FioRun::new(Setup {
            jobs: &self.jobs,
            plan: &plan,
            places,
            seed,
            groups: of,
            hosted: vec![false; plan.threads.len()],
            first_task: 1,
        });
        Ok((run, groups))
    }

    /// Whether any job writes.
    pub fn writes(&self) -> bool {
        self.jobs.iter().any(|j| j.writes())
    }

    /// Every path the jobs name (a clone each), for the engine to look up.
    pub fn paths(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for j in &self.jobs {
            for c in 0..j.o.numjobs {
                for p in plan::paths(j, c) {
                    if !out.contains(&p) {
                        out.push(p);
                    }
                }
            }
        }
        out
    }
}
