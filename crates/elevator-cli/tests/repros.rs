//! The inputs that once panicked, hung or were accepted silently (issue
//! 15), run through the binary as a user would: each now ends at once with
//! a clear error, or runs and reports what Linux would have done.
//!
//! The files are read from `../shared/tools/mutation-fuzz/repros/` beside
//! the repository. Without that folder these tests fail, unless
//! `ELEVATOR_SKIP_SHARED=1` says to skip what needs it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn repros() -> Option<PathBuf> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tools/mutation-fuzz/repros");
    elevator_core::shared::shared_present(&dir).then_some(dir)
}

/// Run the binary with a wall-time cap; (status, stdout, stderr).
fn elevator(args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_elevator"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    // The cap is generous for a shared CI machine; the inputs take well
    // under a second each.
    #[allow(clippy::disallowed_methods)]
    let started = std::time::Instant::now();
    while child.try_wait().expect("waits").is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().expect("kills");
            panic!("elevator {args:?} still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The file fails with status 2 and one line naming it, its line and key.
fn fails_cleanly(name: &str, line_and_key: &str, message: &str) {
    let Some(dir) = repros() else { return };
    let path = dir.join(name);
    let path = path.to_str().expect("UTF-8 path");
    let (code, _, err) = elevator(&["run", path]);
    assert_eq!(code, 2, "{name}: {err}");
    assert!(!err.contains("panicked"), "{name}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{name}: {err}");
    let want = format!("{path}:{line_and_key}");
    assert!(err.contains(&want), "{name}: want {want:?} in {err}");
    assert!(err.contains(message), "{name}: want {message:?} in {err}");
}

/// The file runs, and the process that filled the file system saw ENOSPC
/// (`enospc` in its report row) under every policy.
fn runs_with_enospc(name: &str) {
    let Some(dir) = repros() else { return };
    let path = dir.join(name);
    let (code, out, err) = elevator(&["run", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{name}: {err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let runs = report["runs"].as_array().expect("runs");
    assert!(!runs.is_empty());
    for run in runs {
        let r = run["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["name"] == "r")
            .expect("the writer's row");
        let errors = r["extra"]["enospc"].as_f64().unwrap_or(0.0);
        assert!(errors >= 1.0, "{name}: no ENOSPC counted in {r}");
    }
}

#[test]
fn a_size_under_one_sector_is_an_error_not_an_empty_region() {
    fails_cleanly(
        "panic-empty-region.toml",
        "13: key `job.size`",
        "multiple of 512",
    );
    fails_cleanly(
        "panic-empty-region-2.toml",
        "14: key `job.region`",
        "multiple of 512",
    );
}

#[test]
fn a_one_nanosecond_period_is_refused_before_it_runs() {
    fails_cleanly("hang-period-1ns.toml", "14: key `job.period`", "wake-ups");
}

#[test]
fn a_file_system_past_the_device_is_refused() {
    fails_cleanly(
        "silent-fs-past-device.toml",
        "10: key `host.fs_offset`",
        "past the device",
    );
}

#[test]
fn file_sets_that_do_not_fit_are_refused_before_the_run() {
    fails_cleanly("panic-fs-full.toml", "10: key `files`", "does not fit");
    fails_cleanly("trees-fill-fs.toml", "13: key `files`", "does not fit");
}

#[test]
fn writers_that_fill_the_file_system_get_enospc() {
    for name in [
        "dd-fill-fs.toml",
        "cp-fill-fs.toml",
        "wf-fill-fs.toml",
        "tiotest-fill-fs.toml",
    ] {
        runs_with_enospc(name);
    }
}

#[test]
fn fifos_devices_and_huge_files_are_refused_without_reading_them() {
    let (code, _, err) = elevator(&["run", "/dev/zero"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a regular file"), "{err}");
    let (code, _, err) = elevator(&["run", "ten-streaming-readers", "--device", "/dev/zero"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a regular file"), "{err}");

    let dir = std::env::temp_dir().join(format!("elevator-repros-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo.toml");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let (code, _, err) = elevator(&["run", fifo.to_str().unwrap()]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("not a regular file"), "{err}");
    }
    let huge = dir.join("huge.toml");
    let file = std::fs::File::create(&huge).unwrap();
    file.set_len(elevator_scenario::MAX_SCENARIO_BYTES as u64 + 1)
        .unwrap();
    let (code, _, err) = elevator(&["run", huge.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("larger than"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fifty_thousand_jobs_parse_in_linear_time() {
    let Some(dir) = repros() else { return };
    let out = Command::new("python3")
        .arg(dir.join("gen-many-jobs.py"))
        .arg("50000")
        .output()
        .expect("python3 runs the generator");
    assert!(out.status.success());
    let file = std::env::temp_dir().join(format!("elevator-many-{}.toml", std::process::id()));
    std::fs::write(&file, &out.stdout).unwrap();
    // 40 s when every error line was counted from the top; about 1 s now.
    let (code, _, err) = elevator(&["run", file.to_str().unwrap()]);
    std::fs::remove_file(&file).unwrap();
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("key `job.bs`"), "{err}");
}
