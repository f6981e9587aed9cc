//! fio job files through `elevator run`: fio's JSON as fio prints it (the
//! key set of fio 3.33, `json+` bins fio's own tool reads), safety (nothing
//! created or written without `--allow-write`, nothing ever under `/dev`),
//! the page cache under `direct=0`, fio's sync-engine note, Ctrl-C, the
//! progress line, verification, and flags that do not apply.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn elevator_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_elevator"))
        .current_dir(dir)
        .args(args)
        .env("SIZE", "64m")
        .env("RUNTIME", "2s")
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

fn data(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    assert!(p.exists(), "{} is missing", p.display());
    p
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a temporary directory")
}

fn write_job(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Every key path of a JSON document, maps of numbers and options as `/*`
/// (the form of the committed lists).
fn keys(v: &serde_json::Value, path: &str, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                if path.ends_with("/bins") || path.ends_with("options") {
                    out.insert(format!("{path}/*"));
                    continue;
                }
                keys(x, &format!("{path}/{k}"), out);
            }
        }
        serde_json::Value::Array(a) => {
            for x in a {
                keys(x, &format!("{path}[]"), out);
            }
        }
        _ => {
            out.insert(path.to_string());
        }
    }
}

fn committed(name: &str) -> BTreeSet<String> {
    std::fs::read_to_string(data(name))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn our_json_has_fios_key_set_on_both_engines() {
    let dir = tempdir();
    let file = data("fio-keys.fio");
    let file = file.to_str().unwrap();
    let target = dir.path().join("keys.bin");
    let t = target.to_str().unwrap();
    for (format, list) in [
        ("json", "fio-3.33-json-keys.txt"),
        ("json+", "fio-3.33-json-plus-keys.txt"),
    ] {
        let want = committed(list);
        let runs: [Vec<&str>; 2] = [
            vec!["run", file, "--output-format", format],
            vec![
                "run",
                file,
                "--engine",
                "uring",
                "--filename",
                t,
                "--allow-write",
                "--output-format",
                format,
            ],
        ];
        for args in runs {
            let (code, out, err) = elevator_in(dir.path(), &args);
            assert_eq!(code, 0, "{args:?}: {err}");
            let mut got = BTreeSet::new();
            keys(&json(&out), "", &mut got);
            let missing: Vec<_> = want.difference(&got).collect();
            let extra: Vec<_> = got.difference(&want).collect();
            assert!(
                missing.is_empty() && extra.is_empty(),
                "{args:?}: missing {missing:?}, extra {extra:?}"
            );
            assert!(!out.contains("NaN"));
        }
    }
}

/// What fio's `fio_jsonplus_clat2csv` does with `json+` (its logic, here
/// in Rust): per job, direction and latency kind, the bins as (ns, count),
/// their running total, and the percentile of each (running / total); the
/// totals must be the samples fio says there are.
#[test]
fn json_plus_bins_read_as_fios_clat2csv_reads_them() {
    let dir = tempdir();
    let file = data("fio-keys.fio");
    let (code, out, err) = elevator_in(
        dir.path(),
        &["run", file.to_str().unwrap(), "--output-format", "json+"],
    );
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let mut checked = 0;
    for j in v["jobs"].as_array().unwrap() {
        for ddir in ["read", "write", "trim"] {
            for lat in ["slat_ns", "clat_ns", "lat_ns"] {
                let Some(bins) = j[ddir][lat]["bins"].as_object() else {
                    continue;
                };
                let mut rows: Vec<(u64, u64)> = bins
                    .iter()
                    .map(|(k, c)| (k.parse().expect("ns keys"), c.as_u64().expect("counts")))
                    .collect();
                rows.sort();
                let mut run = 0;
                let mut last = 0.0;
                let total: u64 = rows.iter().map(|r| r.1).sum();
                for (_, c) in &rows {
                    run += c;
                    let p = run as f64 / total as f64;
                    assert!(p >= last);
                    last = p;
                }
                assert_eq!(total, j[ddir][lat]["N"].as_u64().unwrap(), "{ddir} {lat}");
                assert_eq!(last, 1.0);
                checked += 1;
            }
        }
    }
    assert!(checked >= 2, "read and write clat bins");
    // And fio's script itself, where fio is installed (`apt-get install
    // fio`): it writes the CSV and validates it against the JSON.
    let tool = Command::new("fio_jsonplus_clat2csv").arg("--help").output();
    if tool.is_ok_and(|o| o.status.success()) {
        let src = dir.path().join("out.json");
        std::fs::write(&src, &out).unwrap();
        let dest = dir.path().join("out.csv");
        for extra in [None, Some("--validate")] {
            let mut c = Command::new("fio_jsonplus_clat2csv");
            c.arg(&src).arg(&dest);
            if let Some(e) = extra {
                c.arg(e);
            }
            let o = c.current_dir(dir.path()).output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert!(!String::from_utf8_lossy(&o.stderr).contains("Traceback"));
        }
        assert!(dir.path().join("out_job0.csv").exists());
    } else {
        eprintln!("note: fio_jsonplus_clat2csv is not installed; its logic was checked above");
    }
}

#[test]
fn a_missing_target_is_neither_created_nor_written_without_allow_write() {
    let dir = tempdir();
    let reader = write_job(dir.path(), "r.fio", "[r]\nrw=randread\nbs=4k\nsize=1m\n");
    let writer = write_job(dir.path(), "w.fio", "[w]\nrw=randwrite\nbs=4k\nsize=1m\n");
    let target = dir.path().join("missing.bin");
    let t = target.to_str().unwrap();
    for job in [&reader, &writer] {
        let (code, out, err) = elevator_in(
            dir.path(),
            &["run", job, "--engine", "uring", "--filename", t],
        );
        assert_eq!(code, 2, "{err}");
        assert!(out.is_empty());
        assert!(err.contains("--allow-write"), "{err}");
        assert!(!target.exists(), "created without --allow-write");
    }
    // The job's own default file name (r.0.0) is not created either.
    let (code, _, err) = elevator_in(dir.path(), &["run", &reader, "--engine", "uring"]);
    assert_eq!(code, 2, "{err}");
    assert!(!dir.path().join("r.0.0").exists());
    // An existing file is not written without it, and not grown.
    std::fs::write(&target, vec![7u8; 4096]).unwrap();
    for job in [&reader, &writer] {
        let (code, _, err) = elevator_in(
            dir.path(),
            &["run", job, "--engine", "uring", "--filename", t],
        );
        assert_eq!(code, 2, "{err}");
        assert_eq!(
            std::fs::read(&target).unwrap(),
            vec![7u8; 4096],
            "untouched"
        );
    }
    // Nothing is ever created under /dev, --allow-write or not.
    let dev = "/dev/elevator-test-no-such-disk";
    let (code, _, err) = elevator_in(
        dir.path(),
        &[
            "run",
            &reader,
            "--engine",
            "uring",
            "--filename",
            dev,
            "--allow-write",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nothing is ever created under /dev"), "{err}");
    assert!(!Path::new(dev).exists());
    // With --allow-write the reader's file is laid out with data (fio
    // writes it first), the writer's written.
    std::fs::remove_file(&target).unwrap();
    let (code, out, err) = elevator_in(
        dir.path(),
        &[
            "run",
            &reader,
            "--engine",
            "uring",
            "--filename",
            t,
            "--allow-write",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("r                  read"), "{out}");
    let laid = std::fs::read(&target).unwrap();
    assert_eq!(laid.len(), 1 << 20);
    assert!(
        laid.iter().filter(|b| **b != 0).count() > laid.len() / 2,
        "real data"
    );
}

fn figures(out: &str, dir: &str) -> (f64, u64, u64, u64) {
    let v = json(out);
    let d = &v["jobs"][0][dir];
    (
        d["iops"].as_f64().unwrap(),
        d["clat_ns"]["percentile"]["50.000000"].as_u64().unwrap(),
        d["total_ios"].as_u64().unwrap(),
        v["disk_util"][0][if dir == "read" {
            "read_ios"
        } else {
            "write_ios"
        }]
        .as_u64()
        .unwrap(),
    )
}

#[test]
fn direct_0_goes_through_the_simulated_page_cache() {
    let dir = tempdir();
    let run = |text: &str| {
        let file = write_job(dir.path(), "pc.fio", text);
        let (code, out, err) = elevator_in(
            dir.path(),
            &[
                "run",
                &file,
                "--device",
                "sata-hdd",
                "--output-format",
                "json",
            ],
        );
        assert_eq!(code, 0, "{err}");
        out
    };
    // Reads: a 2 MiB file read at random for 4 s. Direct, every read is a
    // disk read; buffered, the first pass fills the cache and the rest hit
    // it: far more reads than the disk serves, each far faster.
    let reads = |direct: u8| {
        run(&format!(
            "[r]\nfilename=f\nsize=2m\nrw=randread\nbs=4k\nioengine=psync\ndirect={direct}\n\
             time_based\nruntime=4s\n"
        ))
    };
    let (d_iops, d_p50, d_ios, d_disk) = figures(&reads(1), "read");
    let (b_iops, b_p50, b_ios, b_disk) = figures(&reads(0), "read");
    assert_eq!(d_ios, d_disk, "direct: every read is a disk read");
    assert!(
        b_disk < b_ios / 2,
        "buffered: {b_disk} disk reads for {b_ios} reads"
    );
    assert!(
        b_iops > 10.0 * d_iops,
        "buffered {b_iops} vs direct {d_iops} IOPS"
    );
    assert!(
        b_p50 * 10 < d_p50,
        "a cache hit: {b_p50} ns vs a disk read {d_p50} ns"
    );
    // Writes: absorbed by the cache (returning in microseconds, where a
    // direct write waits for the disk), and written back: with end_fsync
    // every byte reaches the disk before the job ends.
    let writes = |direct: u8| {
        run(&format!(
            "[w]\nfilename=f\nsize=16m\nrw=randwrite\nbs=4k\nioengine=psync\ndirect={direct}\n\
             end_fsync=1\n"
        ))
    };
    let (_, dw_p50, dw_ios, dw_disk) = figures(&writes(1), "write");
    let out = writes(0);
    let (_, bw_p50, bw_ios, bw_disk) = figures(&out, "write");
    assert_eq!(dw_ios, dw_disk);
    assert_eq!(bw_ios, 4096);
    assert!(bw_p50 * 10 < dw_p50, "absorbed: {bw_p50} ns vs {dw_p50} ns");
    assert!(bw_disk > 0, "written back");
    let v = json(&out);
    assert_eq!(v["jobs"][0]["sync"]["total_ios"], 1, "end_fsync");
}

#[test]
fn sync_engines_run_one_io_at_a_time_with_fios_note() {
    let dir = tempdir();
    let file = write_job(
        dir.path(),
        "s.fio",
        "[s]\nrw=randread\nbs=4k\nsize=4m\nioengine=psync\niodepth=16\ndirect=1\n",
    );
    let (code, out, err) = elevator_in(dir.path(), &["run", &file, "--output-format", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will \
             be capped at 1"
        ),
        "{err}"
    );
    let v = json(&out);
    assert_eq!(v["jobs"][0]["iodepth_level"]["1"], 100.0);
    assert_eq!(v["jobs"][0]["latency_depth"], 1);
}

#[test]
fn verification_checks_the_bytes_on_the_runtime() {
    let dir = tempdir();
    let target = dir.path().join("v.bin");
    let t = target.to_str().unwrap();
    let writer = write_job(
        dir.path(),
        "w.fio",
        "[w]\nrw=randwrite\nbs=4k\nsize=2m\ndirect=1\nioengine=io_uring\niodepth=8\n\
         verify=crc32c\n",
    );
    let reader = write_job(
        dir.path(),
        "r.fio",
        "[r]\nrw=read\nbs=4k\nsize=2m\ndirect=1\nioengine=io_uring\niodepth=8\nverify=crc32c\n",
    );
    let uring = |job: &str, allow: bool| {
        let mut args = vec![
            "run",
            job,
            "--engine",
            "uring",
            "--filename",
            t,
            "--output-format",
            "json",
        ];
        if allow {
            args.push("--allow-write");
        }
        elevator_in(dir.path(), &args)
    };
    let (code, out, err) = uring(&writer, true);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["jobs"][0]["write"]["total_ios"], 512);
    assert_eq!(v["jobs"][0]["read"]["total_ios"], 512, "the verify pass");
    let (code, _, err) = uring(&reader, false);
    assert_eq!(code, 0, "what was written checks out: {err}");
    // A flipped byte fails the read that meets it (EILSEQ, fio's 84).
    let mut bytes = std::fs::read(&target).unwrap();
    bytes[8192 + 100] ^= 0xff;
    std::fs::write(&target, &bytes).unwrap();
    let (code, out, err) = uring(&reader, false);
    assert_eq!(code, 1, "{err}");
    assert_eq!(json(&out)["jobs"][0]["error"], 84);
    assert!(err.contains("bad crc32c checksum at offset 8192"), "{err}");
}

#[test]
fn flags_that_do_not_apply_are_errors_and_the_rest_work() {
    let dir = tempdir();
    let file = job("randread-qd32.fio");
    let target = dir.path().join("t.bin");
    let t = target.to_str().unwrap();
    for (args, want) in [
        (vec!["--report", "out"], "--report"),
        (
            vec!["--engine", "uring", "--check", "--filename", t],
            "--check",
        ),
        (
            vec!["--engine", "uring", "--trace", "tr", "--filename", t],
            "--trace",
        ),
        (
            vec![
                "--engine",
                "uring",
                "--set",
                "block.nr_requests=4",
                "--filename",
                t,
            ],
            "block",
        ),
        (vec!["--allow-write"], "--allow-write is for --engine uring"),
    ] {
        let mut a = vec!["run", file.as_str()];
        a.extend(args.iter().copied());
        let (code, out, err) = elevator_in(dir.path(), &a);
        assert_eq!(code, 2, "{a:?}: {out}");
        assert!(err.contains(want), "{a:?}: {err}");
    }
    // On the simulator --trace writes the decision trace, --check runs the
    // checker, --set block.* and --depth change the run.
    let trace = dir.path().join("trace.txt");
    let (code, _, err) = elevator_in(
        dir.path(),
        &["run", &file, "--check", "--trace", trace.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(&trace).unwrap().lines().count() > 1000);
    let iops = |extra: &[&str]| {
        let mut a = vec!["run", file.as_str(), "--output-format", "json"];
        a.extend(extra);
        let (code, out, err) = elevator_in(dir.path(), &a);
        assert_eq!(code, 0, "{err}");
        json(&out)["jobs"][0]["read"]["iops"].as_f64().unwrap()
    };
    let full = iops(&[]);
    assert!(
        iops(&["--depth", "1"]) < full / 2.0,
        "--depth caps the device queue"
    );
    assert!(
        iops(&["--set", "block.nr_requests=2"]) < full / 2.0,
        "--set block.nr_requests reaches the block layer"
    );
}

#[test]
fn overrides_and_sections_as_fio_takes_them() {
    let dir = tempdir();
    let file = write_job(
        dir.path(),
        "o.fio",
        "[global]\nrw=randread\nbs=4k\nsize=8m\nruntime=60 ; a minute\n\
         [a]\niodepth=1\n[b]\nstonewall\n",
    );
    let (code, out, err) = elevator_in(
        dir.path(),
        &[
            "run",
            &file,
            "--section",
            "b",
            "--size",
            "1m",
            "--iodepth",
            "4",
            "--ioengine",
            "libaio",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(v["jobs"][0]["jobname"], "b");
    assert_eq!(v["jobs"][0]["read"]["io_bytes"], 1 << 20);
    assert_eq!(v["global options"]["iodepth"], "4");
}

#[test]
fn job_file_errors_name_file_line_and_option_all_at_once() {
    let dir = tempdir();
    let file = write_job(
        dir.path(),
        "bad.fio",
        "[j]\nrw=randread\nbs=3k7\nfrobnicate=1\nioengine=rdma\nrw=trim\n",
    );
    let (code, out, err) = elevator_in(dir.path(), &["run", &file]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    for want in [":3: bs:", ":4: frobnicate:", ":5: ioengine:", ":6: rw:"] {
        assert!(err.contains(&format!("{file}{want}")), "{want}: {err}");
    }
}

#[test]
fn ctrl_c_prints_the_partial_report() {
    let dir = tempdir();
    let file = write_job(
        dir.path(),
        "long.fio",
        "[long]\nrw=randread\nbs=4k\nsize=64m\ndirect=1\nioengine=io_uring\niodepth=4\n\
         time_based\nruntime=60\n",
    );
    let target = dir.path().join("long.bin");
    let child = Command::new(env!("CARGO_BIN_EXE_elevator"))
        .current_dir(dir.path())
        .args([
            "run",
            &file,
            "--engine",
            "uring",
            "--filename",
            target.to_str().unwrap(),
            "--allow-write",
            "--eta",
            "never",
            "--output-format",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("terminating on signal 2"), "{stderr}");
    let v = json(&stdout);
    let ios = v["jobs"][0]["read"]["total_ios"].as_u64().unwrap();
    let ms = v["jobs"][0]["read"]["runtime"].as_u64().unwrap();
    assert!(ios > 0, "what completed is reported");
    assert!(ms < 30_000, "stopped early: {ms} ms");
}

#[test]
fn a_long_run_shows_fios_progress_line() {
    let dir = tempdir();
    let file = write_job(
        dir.path(),
        "p.fio",
        "[p]\nrw=randread\nbs=4k\nsize=16m\ndirect=1\nioengine=io_uring\niodepth=2\n\
         time_based\nruntime=4\n",
    );
    let target = dir.path().join("p.bin");
    let (code, _, err) = elevator_in(
        dir.path(),
        &[
            "run",
            &file,
            "--engine",
            "uring",
            "--filename",
            target.to_str().unwrap(),
            "--allow-write",
            "--eta",
            "always",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("Jobs: ")).collect();
    assert!(!lines.is_empty(), "{err}");
    assert!(lines[0].contains("[eta "), "{}", lines[0]);
    assert!(lines[0].contains("IOPS]"), "{}", lines[0]);
    // A short run draws nothing, on a terminal or not.
    let (_, _, err) = elevator_in(dir.path(), &["run", &job("randread-qd32.fio")]);
    assert!(!err.contains("Jobs: "), "{err}");
}

#[test]
fn weights_and_priorities_reach_the_policy_from_the_job_file() {
    let dir = tempdir();
    let (code, out, err) = elevator_in(
        dir.path(),
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
    );
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let ios = |i: usize| v["jobs"][i]["read"]["total_ios"].as_f64().unwrap();
    let ratio = ios(1) / ios(0);
    assert!(ratio > 1.5, "w300/w100 = {ratio:.2}");
    let (code, out, err) = elevator_in(
        dir.path(),
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
    );
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let rt = v["jobs"][0]["read"]["total_ios"].as_u64().unwrap();
    let idle = v["jobs"][1]["read"]["total_ios"].as_u64().unwrap();
    assert!(rt > 10 * idle.max(1), "rt {rt}, idle {idle}");
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
    let dir = tempdir();
    let (code, _, err) = elevator_in(
        dir.path(),
        &[
            "run",
            &job("randread-qd32.fio"),
            "--engine",
            "uring",
            "--target",
            &dev,
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("mounted at /"), "{err}");
}

fn is_block_device(path: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}
