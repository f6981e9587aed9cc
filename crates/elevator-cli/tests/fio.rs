//! fio job files through `elevator run`: the same file under the simulator
//! and the io_uring runtime (on a temporary file, no root), fio's JSON keys
//! as scripts read them, and the runtime's refusals.

use std::path::{Path, PathBuf};
use std::process::Command;

fn elevator(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_elevator"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn job(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fio")
        .join(name);
    assert!(p.exists(), "{} is missing", p.display());
    p.display().to_string()
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a temporary directory")
}

/// What `jq '.jobs[0].read.clat_ns.percentile["99.000000"]'` reads.
fn p99(json: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(json).expect("valid JSON");
    v["jobs"][0]["read"]["clat_ns"]["percentile"]["99.000000"]
        .as_u64()
        .unwrap_or_else(|| panic!("no p99 in {json}"))
}

fn check_randread(json: &str) {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let read = &v["jobs"][0]["read"];
    assert_eq!(v["jobs"][0]["jobname"], "randread");
    assert_eq!(read["total_ios"], 16384, "64 MiB in 4 KiB reads");
    assert_eq!(read["io_bytes"], 64u64 << 20);
    assert!(read["iops"].as_f64().unwrap() > 0.0);
    assert!(read["bw"].as_u64().unwrap() > 0);
    assert!(read["runtime"].as_u64().is_some());
    assert_eq!(read["clat_ns"]["N"], 16384);
    let p99 = p99(json);
    let max = read["clat_ns"]["max"].as_u64().unwrap();
    assert!(p99 > 0 && p99 <= max, "p99 {p99}, max {max}");
    assert!(v["disk_util"][0]["util"].as_f64().is_some());
    assert!(!json.contains("NaN"));
}

#[test]
fn one_job_file_runs_unchanged_on_both_engines_and_prints_fio_json() {
    let file = job("randread-qd32.fio");
    let (code, out, err) = elevator(
        &["run", &file, "--engine", "sim", "--output-format=json"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    check_randread(&out);
    let dir = tempdir();
    let target = dir.path().join("target.bin");
    for sched in ["noop", "bfq", "deadline-mc"] {
        let (code, out, err) = elevator(
            &[
                "run",
                &file,
                "--engine",
                "uring",
                "--target",
                target.to_str().unwrap(),
                "--sched",
                sched,
                "--output-format",
                "json",
            ],
            &[],
        );
        assert_eq!(code, 0, "{sched}: {err}");
        check_randread(&out);
    }
    assert_eq!(
        std::fs::metadata(&target).unwrap().len(),
        64 << 20,
        "created at the job's size"
    );
}

#[test]
fn the_table_shows_the_settings_in_force() {
    let file = job("randread-qd32.fio");
    let (code, out, err) = elevator(&["run", &file, "--sched", "noop,deadline"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("engine sim, device nvme"), "{out}");
    assert!(out.contains("deadline:") && out.contains("noop:"), "{out}");
    assert!(out.lines().all(|l| l.len() <= 100), "{out}");
}

#[test]
fn weights_and_priorities_reach_the_policy_from_the_job_file() {
    let env = [("SIZE", "64m"), ("RUNTIME", "2s")];
    let (code, out, err) = elevator(
        &[
            "run",
            &job("weights-100-300.fio"),
            "--sched",
            "bfq",
            "--device",
            "sata-hdd",
            "--format",
            "json",
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ios = |i: usize| v["jobs"][i]["read"]["total_ios"].as_f64().unwrap();
    let ratio = ios(1) / ios(0);
    // bfq on a disk serves the weight-300 group more (how much more, for
    // seeky readers, is BFQ's business; 5.1x for this seed).
    assert!(ratio > 1.5, "w300/w100 = {ratio:.2}");
    let (code, out, err) = elevator(
        &[
            "run",
            &job("rt-vs-idle.fio"),
            "--sched",
            "cfq",
            "--device",
            "sata-hdd",
            "--format",
            "json",
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["jobs"][0]["read"]["prios"][0]["prioclass"], 1);
    let rt = v["jobs"][0]["read"]["total_ios"].as_u64().unwrap();
    let idle = v["jobs"][1]["read"]["total_ios"].as_u64().unwrap();
    assert!(rt > 10 * idle.max(1), "rt {rt}, idle {idle}");
}

fn write_job(dir: &Path, text: &str) -> String {
    let p = dir.join("job.fio");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn a_write_job_needs_allow_write_and_then_runs() {
    let dir = tempdir();
    let file = write_job(dir.path(), "[w]\nrw=randwrite\nbs=4k\nsize=1m\niodepth=4\n");
    let target = dir.path().join("t.bin");
    std::fs::write(&target, vec![7u8; 1 << 20]).unwrap();
    let t = target.to_str().unwrap();
    let (code, _, err) = elevator(&["run", &file, "--engine", "uring", "--target", t], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("--allow-write"), "{err}");
    assert_eq!(
        std::fs::read(&target).unwrap(),
        vec![7u8; 1 << 20],
        "untouched"
    );
    let (code, out, err) = elevator(
        &[
            "run",
            &file,
            "--engine",
            "uring",
            "--target",
            t,
            "--allow-write",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("w                write"), "{out}");
}

#[test]
fn a_mounted_block_device_is_refused_by_the_cli() {
    // Whatever holds `/` (when it is a block device we can name) is mounted.
    // Any mounted block device will do: `/` first, else whatever a container
    // bind-mounts from one (/etc/hosts, a volume).
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let mounted: Vec<(&str, &str)> = mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?, f.next()?))
        })
        .filter(|(src, _)| src.starts_with("/dev/") && is_block_device(src))
        .collect();
    let dev = match mounted
        .iter()
        .find(|(_, at)| *at == "/")
        .or(mounted.first())
    {
        Some((src, _)) => src.to_string(),
        None if std::env::var_os("ELEVATOR_SKIP_NO_BLOCK_DEVICE").is_some() => {
            // The rule itself is also tested on device numbers in
            // elevator-uring's tests/runtime.rs.
            eprintln!("skipped (ELEVATOR_SKIP_NO_BLOCK_DEVICE): no mounted block device");
            return;
        }
        None => panic!(
            "no mounted block device in /proc/self/mounts to test the refusal on; \
             set ELEVATOR_SKIP_NO_BLOCK_DEVICE=1 to skip this test"
        ),
    };
    let (code, _, err) = elevator(
        &[
            "run",
            &job("randread-qd32.fio"),
            "--engine",
            "uring",
            "--target",
            &dev,
        ],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("mounted at /"), "{err}");
}

#[test]
fn job_file_errors_name_file_line_and_option_and_exit_2() {
    let dir = tempdir();
    for (text, want) in [
        (
            "[j]\nrw=randread\nrate_iops=100\n",
            ":3: rate_iops: not supported",
        ),
        ("[j]\nrw=randread\nbs=3k7\n", ":3: bs:"),
        ("[j]\nioengine=mmap\n", ":2: ioengine:"),
    ] {
        let file = write_job(dir.path(), text);
        let (code, out, err) = elevator(&["run", &file], &[]);
        assert_eq!(code, 2, "{text}");
        assert!(out.is_empty());
        assert!(err.contains(&format!("{file}{want}")), "{err}");
    }
    let (code, _, err) = elevator(
        &["run", &job("randread-qd32.fio"), "--engine", "uring"],
        &[],
    );
    assert_eq!(code, 2);
    assert!(err.contains("--target"), "{err}");
}

fn is_block_device(path: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}
