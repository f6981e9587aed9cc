//! Running a measuring workload on a real target, and what sysfs says of
//! it: the real-clock half of `elevator device probe` and `tune --verify`.
//!
//! The workload (the probe's phases, a fio job file) is a
//! [`elevator_core::Workload`] from the deterministic crates; here it runs
//! on [`Runtime::run`] with the real clock, under whichever policy the
//! caller built. The target is opened by [`crate::target::open`], so every
//! safety rule holds: a mounted, swap or held device is refused, writes
//! need `allow_write`.

use crate::runtime::{RunError, Runtime};
use crate::target::{self, Access, Target, TargetError};
use elevator_core::{Instant, Workload};
use elevator_sched::Scheduler;
use std::fmt;
use std::path::{Path, PathBuf};

/// What sysfs says of a block device (all `None` for a file).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sysfs {
    /// The kernel's name (`loop0`, `sda`), for `/sys/block/NAME/queue`.
    pub name: Option<String>,
    pub rotational: Option<bool>,
    pub max_sectors_kb: Option<u32>,
    /// The scheduler in force (the bracketed one).
    pub scheduler: Option<String>,
    pub nr_requests: Option<u32>,
}

impl Sysfs {
    /// `/sys/block/NAME/queue`, if this is a whole block device.
    pub fn queue_dir(&self) -> Option<PathBuf> {
        self.name
            .as_ref()
            .map(|n| PathBuf::from(format!("/sys/block/{n}/queue")))
    }
}

/// Read sysfs for `path` (a block device; a file gets the defaults).
pub fn sysfs(path: &Path) -> Sysfs {
    let Some(name) = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
    else {
        return Sysfs::default();
    };
    let dir = PathBuf::from(format!("/sys/block/{name}/queue"));
    if !dir.is_dir() {
        return Sysfs::default();
    }
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .ok()
            .map(|s| s.trim().to_string())
    };
    Sysfs {
        rotational: read("rotational").map(|s| s == "1"),
        max_sectors_kb: read("max_sectors_kb").and_then(|s| s.parse().ok()),
        scheduler: read("scheduler").and_then(|s| {
            let start = s.find('[')?;
            let end = s[start..].find(']')? + start;
            Some(s[start + 1..end].to_string())
        }),
        nr_requests: read("nr_requests").and_then(|s| s.parse().ok()),
        name: Some(name),
    }
}

/// Why a measuring run failed.
#[derive(Debug)]
pub enum MeasureError {
    Target(TargetError),
    Setup(PathBuf, std::io::Error),
    Run(RunError),
}

impl fmt::Display for MeasureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MeasureError::Target(e) => write!(f, "{e}"),
            MeasureError::Setup(p, e) => write!(f, "{}: setting up io_uring: {e}", p.display()),
            MeasureError::Run(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for MeasureError {}

/// Open `path` for a measuring run: O_DIRECT, read-only unless `writes`
/// (which needs `allow_write`); an existing file or device only (its size
/// is what the workload may address).
pub fn open_target(path: &Path, writes: bool, allow_write: bool) -> Result<Target, MeasureError> {
    if std::fs::metadata(path).is_err() {
        return Err(MeasureError::Target(TargetError::NotFileOrDevice {
            path: path.to_path_buf(),
        }));
    }
    target::open(
        path,
        Access {
            direct: true,
            writes,
            allow_write,
            size: 0,
        },
    )
    .map_err(MeasureError::Target)
}

/// Run `workload` on `target` under `policy` with `depth` operations in
/// flight at most; returns the real-clock instant it ended.
pub fn run(
    target: Target,
    policy: Box<dyn Scheduler>,
    depth: usize,
    workload: &mut dyn Workload,
) -> Result<Instant, MeasureError> {
    let path = target.path.clone();
    let backend = crate::Uring::new(target.file, (depth * 2 + 16) as u32)
        .map_err(|e| MeasureError::Setup(path, e))?;
    let mut rt = Runtime::new(backend, policy, depth);
    rt.run(workload, None).map_err(MeasureError::Run)
}
