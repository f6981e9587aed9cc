//! fio's own example job files (`../shared/fio-examples/`, read there,
//! never copied), run unchanged.
//!
//! Of the 47 examples whose engines are sync, psync, pvsync(2), libaio,
//! io_uring, posixaio, mmap or null (no `ioengine=` is psync, fio's
//! default), every one but six runs on the simulator; the six fail with one
//! message that lists every option we cannot honour (and why), each line
//! naming the file and line. Every one that only touches files (no `/dev`
//! path) runs on the io_uring runtime in a temporary directory.
//!
//! Runs are bounded from the command line as fio's own flags bound them
//! (`--runtime`, `--size`), so the suite takes seconds, not the examples'
//! hours; the job files themselves are read as they are.

use elevator_core::shared::shared_present;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The 47 examples, as the issue counts them.
const EXAMPLES: [&str; 47] = [
    "1mbs_clients",
    "aio-read",
    "atomic-verify",
    "backwards-read",
    "basic-verify",
    "butterfly",
    "cmdprio-bssplit",
    "cmdprio-percentage",
    "cross-stripe-verify",
    "dedupe-global",
    "disk-zone-profile",
    "enospc-pressure",
    "example_latency_steadystate",
    "exitwhat",
    "fio-rand-RW",
    "fio-rand-read",
    "fio-rand-write",
    "fio-seq-RW",
    "fio-seq-read",
    "fio-seq-write",
    "fixed-rate-submission",
    "flow",
    "fsx",
    "iometer-file-access-server",
    "jesd219",
    "latency-profile",
    "null",
    "numa",
    "poisson-rate-submission",
    "rand-zones",
    "sequence-distribution",
    "sprandom",
    "ssd-steadystate",
    "ssd-test",
    "steadystate",
    "surface-scan",
    "tiobench-example",
    "waitfor",
    "xnvme-compare",
    "xnvme-fdp",
    "xnvme-pi",
    "xnvme-zoned",
    "zbd-rand-write-trim-gc",
    "zbd-rand-write-zone-reset-gc",
    "zbd-rand-write",
    "zbd-seq-read",
    "zipf",
];

/// The examples we refuse, with every option each message must name.
const REFUSED: [(&str, &[&str]); 6] = [
    ("enospc-pressure", &["rw=randtrim"]),
    ("sprandom", &["sprandom", "spr_op", "spr_num_regions"]),
    ("xnvme-fdp", &["fdp", "fdp_pli"]),
    (
        "xnvme-pi",
        &[
            "md_per_io_size",
            "pi_act",
            "pi_chk",
            "apptag",
            "apptag_mask",
        ],
    ),
    ("xnvme-zoned", &["zonesize"]),
    ("zbd-rand-write-trim-gc", &["rw=randtrim"]),
];

/// Examples that touch only files (no `/dev` path): they run on the
/// io_uring runtime too.
const FILES_ONLY: [&str; 26] = [
    "1mbs_clients",
    "aio-read",
    "backwards-read",
    "butterfly",
    "dedupe-global",
    "exitwhat",
    "fio-rand-RW",
    "fio-rand-read",
    "fio-rand-write",
    "fio-seq-RW",
    "fio-seq-read",
    "fio-seq-write",
    "fixed-rate-submission",
    "flow",
    "fsx",
    "iometer-file-access-server",
    "null",
    "poisson-rate-submission",
    "rand-zones",
    "sequence-distribution",
    "ssd-test",
    "surface-scan",
    "tiobench-example",
    "waitfor",
    "xnvme-compare",
    "zipf",
];

fn examples_dir() -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fio-examples");
    shared_present(&d).then_some(d)
}

/// The variables fio's xnvme and sprandom examples expect (their README
/// lines set them on the command line).
const ENV: [(&str, &str); 3] = [
    ("FIO_RW", "randread"),
    ("FIO_IODEPTH", "4"),
    ("FIO_BS", "4k"),
];

fn elevator(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_elevator"))
        .current_dir(dir)
        .args(args)
        .envs(ENV)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a temporary directory")
}

/// The engines the examples name are the ones counted (a check of the
/// list above against the files, so the count stays true).
#[test]
fn the_examples_counted_are_the_block_io_ones() {
    let Some(dir) = examples_dir() else { return };
    let ours = [
        "sync", "psync", "pvsync", "pvsync2", "libaio", "io_uring", "posixaio", "mmap", "null",
    ];
    let mut counted = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_none_or(|e| e != "fio") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let engines: Vec<String> = text
            .lines()
            .map(|l| l.trim())
            .filter(|l| l.starts_with("ioengine"))
            .filter_map(|l| l.split_once('='))
            .map(|(_, v)| v.split([';', '#']).next().unwrap().trim().to_string())
            .collect();
        let all_ours = engines.iter().all(|e| ours.contains(&e.as_str()));
        if all_ours {
            counted.push(p.file_stem().unwrap().to_string_lossy().into_owned());
        }
    }
    counted.sort();
    let mut want: Vec<String> = EXAMPLES.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(counted, want);
    assert_eq!(counted.len(), 47, "the issue's count");
}

/// The examples that touch only files are the ones whose options (outside
/// comments) name no `/dev` path, less the refused: a check of the list
/// above against the files.
#[test]
fn the_file_only_examples_are_the_ones_without_a_dev_path() {
    let Some(dir) = examples_dir() else { return };
    let mut found = Vec::new();
    for name in EXAMPLES {
        if REFUSED.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let text = std::fs::read_to_string(dir.join(format!("{name}.fio"))).unwrap();
        let names_a_device = text
            .lines()
            .map(|l| l.split([';', '#']).next().unwrap())
            .any(|l| l.contains("/dev/"));
        if !names_a_device {
            found.push(name);
        }
    }
    assert_eq!(found, FILES_ONLY, "the file-only examples changed");
    assert_eq!(EXAMPLES.len() - REFUSED.len(), 41);
    assert_eq!(FILES_ONLY.len(), 26);
}

#[test]
fn fios_examples_run_unchanged_on_the_simulator() {
    let Some(ex) = examples_dir() else { return };
    let dir = tempdir();
    // cross-stripe-verify assumes a drive of about 30 x 124 GiB (its own
    // comment): the nvme model with 4 TB.
    let nvme = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../elevator-device/profiles/nvme.toml"),
    )
    .unwrap();
    assert!(
        nvme.contains("capacity_gb = 1000"),
        "the nvme profile changed"
    );
    let big = dir.path().join("nvme-4tb.toml");
    std::fs::write(
        &big,
        nvme.replace("capacity_gb = 1000", "capacity_gb = 4000"),
    )
    .unwrap();
    let mut passed = Vec::new();
    let mut refused = Vec::new();
    for name in EXAMPLES {
        let file = ex.join(format!("{name}.fio"));
        let file = file.to_str().unwrap();
        let mut args = vec![
            "run",
            file,
            "--engine",
            "sim",
            "--eta",
            "never",
            "--runtime",
            "1s",
            "--size",
            "32m",
        ];
        match name {
            "cross-stripe-verify" => args.extend(["--device", big.to_str().unwrap()]),
            // Its README runs it with --filename=/dev/nvme0n1 (its files
            // must exist: allow_file_create=0).
            "xnvme-compare" => args.extend(["--filename", "/dev/nvme0n1"]),
            _ => {}
        }
        let (code, out, err) = elevator(dir.path(), &args);
        if code == 0 {
            assert!(out.contains("IOPS"), "{name}: {out}");
            // (The first line is the job file's path, as given.)
            assert!(out.lines().skip(1).all(|l| l.len() <= 100), "{name}: {out}");
            passed.push(name);
            continue;
        }
        assert_eq!(code, 2, "{name}: {err}");
        let Some((_, options)) = REFUSED.iter().find(|(n, _)| *n == name) else {
            panic!("{name} failed: {err}");
        };
        // One message: every line names the file and a line in it.
        let message: Vec<&str> = err
            .lines()
            .skip_while(|l| !l.starts_with("elevator: "))
            .collect();
        assert!(!message.is_empty(), "{name}: {err}");
        for (i, line) in message.iter().enumerate() {
            let line = if i == 0 {
                line.strip_prefix("elevator: ").unwrap()
            } else {
                line
            };
            assert!(line.starts_with(&format!("{file}:")), "{name}: {line}");
        }
        for o in *options {
            let named = message.iter().any(|l| {
                l.contains(&format!(": {o}:")) || l.contains(&format!(" {o}:")) || l.contains(o)
            });
            assert!(named, "{name}: {o} not listed in {err}");
        }
        refused.push(name);
    }
    let expected: Vec<&str> = REFUSED.iter().map(|(n, _)| *n).collect();
    assert_eq!(refused, expected, "passed: {passed:?}");
    assert!(passed.len() >= 40, "{} of 47 ran: {passed:?}", passed.len());
    assert_eq!(passed.len() + refused.len(), EXAMPLES.len());
    println!(
        "{} of {} ran on the simulator; refused, every option named: {refused:?}",
        passed.len(),
        EXAMPLES.len()
    );
}

#[test]
fn file_only_examples_run_on_io_uring_in_a_temporary_directory() {
    let Some(ex) = examples_dir() else { return };
    // Examples whose paths are fixed under /tmp (butterfly and flow share
    // one) run one after another; the rest run alongside, each in its own
    // directory (1mbs_clients starts its last client at 124 s).
    let (fixed, free): (Vec<&str>, Vec<&str>) = FILES_ONLY
        .iter()
        .partition(|n| ["butterfly", "flow", "exitwhat", "waitfor"].contains(n));
    let run = |name: &str| {
        let dir = tempdir();
        let file = ex.join(format!("{name}.fio"));
        let d = dir.path().to_str().unwrap().to_string();
        let mut args = vec![
            "run".to_string(),
            file.to_str().unwrap().into(),
            "--engine".into(),
            "uring".into(),
            "--allow-write".into(),
            "--eta".into(),
            "never".into(),
            "--size".into(),
            "8m".into(),
        ];
        // Its verify phase reads what the write phase wrote: cutting the
        // write phase short would leave it blocks to fail (as in fio).
        if name != "surface-scan" {
            args.extend(["--runtime".into(), "1s".into()]);
        }
        match name {
            // Their directories are a mount point and /data1.
            "aio-read" | "ssd-test" => args.extend(["--directory".into(), d.clone()]),
            // allow_file_create=0: its files must be there.
            "xnvme-compare" => {
                for f in ["default.0.0", "override.0.0"] {
                    std::fs::write(dir.path().join(f), vec![0u8; 8 << 20]).unwrap();
                }
            }
            _ => {}
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = elevator(dir.path(), &args);
        assert_eq!(code, 0, "{name}: {err}");
        assert!(out.contains("engine uring"), "{name}: {out}");
        // Nothing outside the directory but the example's own /tmp paths.
        drop(dir);
    };
    let ran = std::sync::atomic::AtomicUsize::new(0);
    let run = |name: &str| {
        run(name);
        ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    let run = &run;
    std::thread::scope(|s| {
        for name in free {
            s.spawn(move || run(name));
        }
        s.spawn(|| {
            for name in fixed {
                run(name);
            }
            for p in ["/tmp/testfile", "/tmp/test", "/tmp/data"] {
                let _ = std::fs::remove_file(p);
            }
        });
    });
    let ran = ran.into_inner();
    assert_eq!(ran, FILES_ONLY.len());
    println!(
        "{ran} of {} file-only examples ran on io_uring",
        FILES_ONLY.len()
    );
}
