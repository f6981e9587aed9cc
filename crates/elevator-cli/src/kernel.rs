//! `tune --verify --kernel`: a setting applied to the kernel's own block
//! layer through sysfs, and put back afterwards.
//!
//! [`SysfsGuard`] owns a device's `queue/` directory for the length of a
//! verify run. When it is made it reads what it may change: the scheduler
//! in force (the bracketed name of `queue/scheduler`), every file of that
//! scheduler's `queue/iosched/`, and the block files a setting may write
//! (`nr_requests`, `read_ahead_kb`, `wbt_lat_usec`). [`SysfsGuard::apply`]
//! writes a setting as [`elevator_tune::apply::shell_lines`] prints it (scheduler
//! first, its tunables under `iosched/`, block files last: switching
//! scheduler resets `nr_requests`, block/elevator.c `elevator_switch` ->
//! `blk_mq_init_sched` sets it from the tag set's depth).
//! [`SysfsGuard::restore`] writes the snapshot back in the same order, and
//! `Drop` calls it, so the device gets its values back when the run ends,
//! on an error (the guard unwinds with the stack) and on Ctrl-C (the
//! turns SIGINT into an error between runs: `elevator_uring::interrupt`).
//! This is what `bench/kernel-beside-us.sh` does with a shell trap.
//!
//! The directory is an argument, so the tests run the guard on a fake
//! `queue/` made of plain files.

use elevator_tune::apply::kernel_name;
use elevator_tune::objective::{Figures, JobFigures};
use elevator_tune::space::Setting;
use std::fmt;
use std::path::{Path, PathBuf};

/// Block-layer files under `queue/` a setting may write.
pub const BLOCK_FILES: &[&str] = &["nr_requests", "read_ahead_kb", "wbt_lat_usec"];

/// A sysfs read or write that failed.
#[derive(Debug)]
pub struct SysfsError {
    pub path: PathBuf,
    /// What was being written, if a write.
    pub value: Option<String>,
    pub error: std::io::Error,
}

impl fmt::Display for SysfsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => write!(f, "{}: writing {v:?}: {}", self.path.display(), self.error),
            None => write!(f, "{}: {}", self.path.display(), self.error),
        }
    }
}

impl std::error::Error for SysfsError {}

fn read(path: &Path) -> Result<String, SysfsError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|error| SysfsError {
            path: path.to_path_buf(),
            value: None,
            error,
        })
}

fn write(path: &Path, value: &str) -> Result<(), SysfsError> {
    std::fs::write(path, value).map_err(|error| SysfsError {
        path: path.to_path_buf(),
        value: Some(value.to_string()),
        error,
    })
}

/// The scheduler in force: the bracketed name (`none [mq-deadline] bfq`),
/// or the whole content when there are no brackets (one name).
pub fn scheduler_in_force(content: &str) -> String {
    match (content.find('['), content.find(']')) {
        (Some(a), Some(b)) if a < b => content[a + 1..b].to_string(),
        _ => content.trim().to_string(),
    }
}

/// What a device's `queue/` held before a verify run, and the promise to
/// put it back.
#[derive(Debug)]
pub struct SysfsGuard {
    queue: PathBuf,
    scheduler: String,
    /// `iosched/` files of the scheduler in force, with their values.
    iosched: Vec<(String, String)>,
    /// Block files that exist, with their values.
    block: Vec<(String, String)>,
    restored: bool,
}

impl SysfsGuard {
    /// Snapshot `queue` (`/sys/block/DEV/queue`, or a fake one).
    pub fn new(queue: &Path) -> Result<Self, SysfsError> {
        let scheduler = scheduler_in_force(&read(&queue.join("scheduler"))?);
        let mut iosched = Vec::new();
        let dir = queue.join("iosched");
        if let Ok(entries) = std::fs::read_dir(&dir) {
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok())
                .filter(|e| e.path().is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            for n in names {
                iosched.push((n.clone(), read(&dir.join(&n))?));
            }
        }
        let mut block = Vec::new();
        for f in BLOCK_FILES {
            let p = queue.join(f);
            if p.exists() {
                block.push((f.to_string(), read(&p)?));
            }
        }
        Ok(SysfsGuard {
            queue: queue.to_path_buf(),
            scheduler,
            iosched,
            block,
            restored: false,
        })
    }

    /// The scheduler that was in force when the guard was made.
    pub fn original_scheduler(&self) -> &str {
        &self.scheduler
    }

    /// Write `s` (its kernel scheduler, tunables, block files). A policy
    /// no current kernel has is an error; so is a block file the guard did
    /// not snapshot (it could not be put back).
    pub fn apply(&mut self, s: &Setting) -> Result<(), SysfsError> {
        self.restored = false;
        let name = kernel_name(&s.policy).ok_or_else(|| SysfsError {
            path: self.queue.join("scheduler"),
            value: Some(s.policy.clone()),
            error: std::io::Error::other("no current kernel has this scheduler"),
        })?;
        write(&self.queue.join("scheduler"), name)?;
        for (t, v) in &s.tunables {
            write(&self.queue.join("iosched").join(t), &v.to_string())?;
        }
        for (b, v) in &s.block {
            if !self.block.iter().any(|(n, _)| n == b) {
                return Err(SysfsError {
                    path: self.queue.join(b),
                    value: Some(v.to_string()),
                    error: std::io::Error::other("not a block file the guard restores"),
                });
            }
            write(&self.queue.join(b), &v.to_string())?;
        }
        Ok(())
    }

    /// Put every snapshotted value back: the scheduler, its `iosched/`
    /// files, the block files. Every write is tried; the errors are
    /// returned together.
    pub fn restore(&mut self) -> Result<(), Vec<SysfsError>> {
        self.restored = true;
        let mut errors = Vec::new();
        if let Err(e) = write(&self.queue.join("scheduler"), &self.scheduler) {
            errors.push(e);
        }
        let dir = self.queue.join("iosched");
        for (n, v) in &self.iosched {
            if let Err(e) = write(&dir.join(n), v) {
                errors.push(e);
            }
        }
        for (n, v) in &self.block {
            if let Err(e) = write(&self.queue.join(n), v) {
                errors.push(e);
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

impl Drop for SysfsGuard {
    fn drop(&mut self) {
        if self.restored {
            return;
        }
        if let Err(errors) = self.restore() {
            // Drop cannot return them: the user must hear which value is
            // not back.
            for e in errors {
                eprintln!("elevator: restoring sysfs: {e}");
            }
        }
    }
}

/// fio's JSON (`--output-format=json`) as the figures an objective reads:
/// per job, IOPS and MB/s of reads and writes together, completion-latency
/// percentiles (`clat_ns`, of the direction with more I/Os); the totals
/// over every job. fio reports no device time per job, so a weights-share
/// objective cannot be measured this way (no groups).
pub fn fio_json_figures(json: &str) -> Result<Figures, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("fio's JSON output: {e}"))?;
    let jobs = v
        .get("jobs")
        .and_then(|j| j.as_array())
        .ok_or("fio's JSON output: no \"jobs\" array")?;
    let num = |x: &serde_json::Value, k: &str| x.get(k).and_then(|n| n.as_f64()).unwrap_or(0.0);
    let mut out = Vec::new();
    for j in jobs {
        let name = j
            .get("jobname")
            .and_then(|n| n.as_str())
            .ok_or("fio's JSON output: a job without \"jobname\"")?;
        let (r, w) = match (j.get("read"), j.get("write")) {
            (Some(r), Some(w)) => (r, w),
            _ => return Err(format!("fio's JSON output: job {name} has no read/write")),
        };
        let main = if num(w, "total_ios") > num(r, "total_ios") {
            w
        } else {
            r
        };
        let clat = main.get("clat_ns").cloned().unwrap_or_default();
        let pct = |q: &str| {
            clat.get("percentile")
                .and_then(|p| p.get(q))
                .and_then(|n| n.as_f64())
                .unwrap_or(0.0)
                / 1e6
        };
        out.push(JobFigures {
            name: name.to_string(),
            p50_ms: pct("50.000000"),
            p99_ms: pct("99.000000"),
            p999_ms: pct("99.900000"),
            mean_ms: num(&clat, "mean") / 1e6,
            max_ms: num(&clat, "max") / 1e6,
            mb_s: (num(r, "bw_bytes") + num(w, "bw_bytes")) / 1e6,
            iops: num(r, "iops") + num(w, "iops"),
        });
    }
    Ok(Figures {
        total_mb_s: out.iter().map(|j| j.mb_s).sum(),
        total_iops: out.iter().map(|j| j.iops).sum(),
        jobs: out,
        groups: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake `queue/`: mq-deadline in force with two tunables.
    fn fake() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let q = d.path();
        std::fs::write(q.join("scheduler"), "none [mq-deadline] kyber bfq\n").unwrap();
        std::fs::create_dir(q.join("iosched")).unwrap();
        std::fs::write(q.join("iosched/read_expire"), "500\n").unwrap();
        std::fs::write(q.join("iosched/fifo_batch"), "16\n").unwrap();
        std::fs::write(q.join("nr_requests"), "64\n").unwrap();
        std::fs::write(q.join("read_ahead_kb"), "128\n").unwrap();
        d
    }

    fn contents(q: &Path) -> Vec<String> {
        [
            "scheduler",
            "iosched/read_expire",
            "iosched/fifo_batch",
            "nr_requests",
            "read_ahead_kb",
        ]
        .iter()
        .map(|f| {
            std::fs::read_to_string(q.join(f))
                .unwrap()
                .trim()
                .to_string()
        })
        .collect()
    }

    fn setting(policy: &str, tunables: &[(&str, i64)], block: &[(&str, i64)]) -> Setting {
        Setting {
            policy: policy.into(),
            tunables: tunables.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            block: block.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    #[test]
    fn applies_then_restores_on_drop() {
        let d = fake();
        let q = d.path();
        {
            let mut g = SysfsGuard::new(q).unwrap();
            assert_eq!(g.original_scheduler(), "mq-deadline");
            g.apply(&setting(
                "mq-deadline",
                &[("read_expire", 100), ("fifo_batch", 4)],
                &[("nr_requests", 32), ("read_ahead_kb", 0)],
            ))
            .unwrap();
            assert_eq!(contents(q), ["mq-deadline", "100", "4", "32", "0"]);
            std::fs::write(q.join("iosched/slice_idle"), "8").unwrap();
            g.apply(&setting("bfq", &[("slice_idle", 0)], &[])).unwrap();
            assert_eq!(std::fs::read_to_string(q.join("scheduler")).unwrap(), "bfq");
        }
        assert_eq!(contents(q), ["mq-deadline", "500", "16", "64", "128"]);
    }

    #[test]
    fn restores_when_applying_fails_halfway() {
        let d = fake();
        let q = d.path();
        let run = || -> Result<(), SysfsError> {
            let mut g = SysfsGuard::new(q)?;
            // The scheduler and nr_requests go in; the tunable's file is
            // missing (a directory cannot be written), so apply fails and
            // the `?` drops the guard.
            std::fs::create_dir(q.join("iosched/fifo_batch_dir")).unwrap();
            g.apply(&setting("kyber", &[("fifo_batch_dir", 1)], &[]))?;
            unreachable!("the write to a directory must fail");
        };
        let e = run().unwrap_err();
        assert!(e.to_string().contains("fifo_batch_dir"), "{e}");
        assert_eq!(contents(q), ["mq-deadline", "500", "16", "64", "128"]);
    }

    #[test]
    fn refuses_what_it_could_not_restore() {
        let d = fake();
        let q = d.path();
        let mut g = SysfsGuard::new(q).unwrap();
        let e = g
            .apply(&setting("noop", &[], &[("wbt_lat_usec", 0)]))
            .unwrap_err();
        assert!(e.to_string().contains("wbt_lat_usec"), "{e}");
        assert!(g.apply(&setting("cfq", &[], &[])).is_err());
        drop(g);
        assert!(!q.join("wbt_lat_usec").exists());
        assert_eq!(contents(q), ["mq-deadline", "500", "16", "64", "128"]);
    }

    #[test]
    fn reads_fio_json() {
        let json = r#"{"jobs": [
          {"jobname": "rt", "read": {"iops": 1000.0, "bw_bytes": 4096000, "total_ios": 10,
             "clat_ns": {"mean": 2000000.0, "max": 9000000,
                         "percentile": {"50.000000": 1500000, "99.000000": 8000000,
                                        "99.900000": 9000000}}},
           "write": {"iops": 0.0, "bw_bytes": 0, "total_ios": 0}},
          {"jobname": "idle", "read": {"iops": 10.0, "bw_bytes": 40960, "total_ios": 1},
           "write": {"iops": 0.0, "bw_bytes": 0, "total_ios": 0}}]}"#;
        let f = fio_json_figures(json).unwrap();
        assert_eq!(f.jobs.len(), 2);
        assert_eq!(f.jobs[0].name, "rt");
        assert_eq!(f.jobs[0].p50_ms, 1.5);
        assert_eq!(f.jobs[0].p99_ms, 8.0);
        assert!((f.total_iops - 1010.0).abs() < 1e-9);
        assert!((f.jobs[0].mb_s - 4.096).abs() < 1e-9);
        assert!(fio_json_figures("{}").unwrap_err().contains("jobs"));
    }

    #[test]
    fn reads_the_bracketed_scheduler() {
        assert_eq!(scheduler_in_force("none [bfq] kyber\n"), "bfq");
        assert_eq!(scheduler_in_force("none\n"), "none");
    }
}
