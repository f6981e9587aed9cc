//! The `elevator` binary as a user meets it.

use std::process::Command;

fn elevator(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_elevator"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn ten_streaming_readers_prints_completion_times_and_aggregate_bandwidth() {
    let (code, out, err) = elevator(&["run", "ten-streaming-readers", "--sched", "noop,deadline"]);
    assert_eq!(code, 0, "{err}");
    println!("{out}");
    assert!(out.contains("aggregate MB/s"));
    for i in 0..10 {
        assert!(out.contains(&format!("reader.{i}")), "missing reader.{i}");
    }
    assert!(out.contains("noop") && out.contains("deadline"));
}

#[test]
fn list_names_policies_devices_and_scenarios() {
    let (code, out, _) = elevator(&["list"]);
    assert_eq!(code, 0);
    // Each name starts a row of its kind's block.
    let block = |heading: &str| -> Vec<String> {
        let start = out
            .find(heading)
            .unwrap_or_else(|| panic!("no {heading:?} in\n{out}"));
        out[start..]
            .lines()
            .skip(1)
            .take_while(|l| !l.is_empty())
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    };
    for (heading, name) in [
        ("Policies", "noop"),
        ("Policies", "deadline"),
        ("Group layers", "io.max"),
        ("Group layers", "io.cost"),
        ("Group layers", "wbt"),
        ("Scenarios", "modern-read-vs-writeback-wbt"),
        ("Scenarios", "iocost-weights-100-vs-300"),
        ("Host programs", "tiotest"),
        ("Host programs", "fsync-tester"),
        ("Devices", "ide-2003"),
        ("Devices", "ssd-sata-2016"),
        ("Scenarios", "ten-streaming-readers"),
        ("Scenarios", "io-throttle-2009-seq-vs-seq"),
        ("Scenarios", "io-throttle-2009-rand-vs-rand-unlimited"),
    ] {
        assert!(
            block(heading).iter().any(|n| n == name),
            "{name} not under {heading} in\n{out}"
        );
    }
    let wide: Vec<&str> = out.lines().filter(|l| l.chars().count() > 100).collect();
    assert!(
        wide.is_empty(),
        "lines over 100 columns:\n{}",
        wide.join("\n")
    );
}

#[test]
fn json_has_the_documented_fields() {
    let (code, out, err) = elevator(&[
        "run",
        "ten-streaming-readers",
        "--sched",
        "noop",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    for key in [
        "\"scenario\"",
        "\"device\"",
        "\"seed\"",
        "\"runs\"",
        "\"scheduler\"",
        "\"result\"",
        "\"unit\"",
        "\"value\"",
        "\"jobs\"",
        "\"lat_p999_ms\"",
        "\"pct_over_10s\"",
    ] {
        assert!(out.contains(key), "missing {key}");
    }
}

#[test]
fn bad_input_fails_cleanly_with_status_2() {
    let dir = std::env::temp_dir().join(format!("elevator-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\ndescription = \"y\"\n[result]\nname = \"a\"\nunit = \"s\"\nmetric = \"completion\"\n[[job]]\nname = \"r\"\nrw = \"read\"\nbs = \"4q\"\nsize = \"1m\"\n").unwrap();
    let bad = bad.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", bad], "bad.toml:10: key `job.bs`"),
        (vec!["run", "no-such-scenario"], "no scenario"),
        (
            vec!["run", "ten-streaming-readers", "--sched", "fifo"],
            "unknown scheduler",
        ),
        (
            vec!["run", "ten-streaming-readers", "--device", "floppy"],
            "floppy",
        ),
        (
            vec!["run", "ten-streaming-readers", "--set", "deadline.nope=1"],
            "no tunable",
        ),
        (
            vec!["run", "ten-streaming-readers", "--set", "block.elevator=1"],
            "no block setting",
        ),
        (vec!["letter", "--think-scale=-1"], "think-scale"),
        (
            vec!["run", "ten-streaming-readers", "--seed", "lots"],
            "--seed",
        ),
        (
            vec!["run", "ten-streaming-readers", "--format", "xml"],
            "xml",
        ),
    ];
    for (args, want) in cases {
        let (code, out, err) = elevator(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?} printed {out}");
        assert!(err.contains(want), "{args:?}: want {want:?} in {err:?}");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn same_seed_same_output_bytes() {
    let a = elevator(&["run", "streaming-write-vs-reader", "--format", "csv"]);
    let b = elevator(&["run", "streaming-write-vs-reader", "--format", "csv"]);
    assert_eq!(a.0, 0, "{}", a.2);
    assert_eq!(a.1, b.1);
}

/// The host's reads (cat through the page cache) are built no larger than
/// the block layer's `max_sectors`.
#[test]
fn block_max_sectors_caps_request_size() {
    let requests = |extra: &[&str]| -> f64 {
        let mut args = vec![
            "run",
            "morton-1-parallel-streaming-reads",
            "--sched",
            "noop",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = elevator(&args);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["runs"][0]["device"]["requests"]
            .as_f64()
            .expect("device requests")
    };
    let default = requests(&[]);
    let small = requests(&["--set", "block.max_sectors=16384"]);
    assert!(
        small > 1.5 * default,
        "16 KiB requests: {small} requests vs {default}"
    );
}

// ------------------------------------------------------------- traces --

const MQSIM: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/traces/mqsim/tpcc-small.trace"
);

fn shared(path: &str) -> &str {
    assert!(
        std::path::Path::new(path).exists(),
        "{path} is missing: the shared traces are needed"
    );
    path
}

#[test]
fn whatif_ranks_every_policy_on_the_tpcc_trace() {
    let (code, out, err) = elevator(&[
        "whatif",
        shared(MQSIM),
        "--device",
        "ssd-sata-2016",
        "--threads",
        "1",
        "--report",
    ]);
    assert_eq!(code, 0, "{err}");
    println!("{out}");
    assert!(out.contains("6999 requests, 16 processes"), "{out}");
    assert!(out.contains("ranked by p99-read"));
    for t in elevator_sched_names() {
        assert!(out.contains(&t), "{t} missing");
    }
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
    assert!(!out.contains("NaN") && !out.contains("inf"));
}

fn elevator_sched_names() -> Vec<String> {
    let (_, out, _) = elevator(&["list"]);
    // The rows of the Policies block (a row starts two spaces in; its
    // wrapped description further).
    let names: Vec<String> = out
        .lines()
        .skip_while(|l| !l.starts_with("Policies"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    assert!(names.len() > 5, "no policies found in\n{out}");
    names
}

#[test]
fn replay_prints_processes_total_and_zero_drift() {
    let (code, out, err) = elevator(&[
        "replay",
        shared(MQSIM),
        "--device",
        "nvme",
        "--sched",
        "bfq",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("dev0") && out.contains("total"), "{out}");
    assert!(
        out.contains("drift (submission after schedule): max 0.000 µs"),
        "{out}"
    );
    let (code, out, err) = elevator(&["replay", MQSIM, "--device", "nvme", "--closed"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("closed loop"), "{out}");
}

#[test]
fn bad_traces_and_flags_exit_2_naming_file_line_and_field() {
    let dir = std::env::temp_dir().join(format!("elevator-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.trace");
    std::fs::write(&bad, "0 0 8 8 1\n10 0 16 8 7\n").unwrap();
    let bad = bad.to_str().unwrap();
    let (code, _, err) = elevator(&["replay", bad, "--device", "nvme"]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.trace:2: key `type`"), "{err}");
    let (code, _, err) = elevator(&["whatif", bad, "--device", "nvme", "--by", "speed"]);
    assert_eq!(code, 2);
    assert!(err.contains("--by \"speed\""), "{err}");
    let (code, _, err) = elevator(&["replay", MQSIM, "--device", "nvme", "--format", "csv"]);
    assert_eq!(code, 2);
    assert!(err.contains("--format"), "{err}");
    let (code, _, err) = elevator(&[
        "whatif",
        MQSIM,
        "--device",
        "nvme",
        "--grid",
        "deadline.nope=1",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("nope"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn validate_and_import_disksim_work_together() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces/disksim-validation"
    );
    let out_path = std::env::temp_dir().join(format!("ibm18es-{}.toml", std::process::id()));
    let out_path = out_path.to_str().unwrap();
    let (code, _, err) = elevator(&[
        "device",
        "import-disksim",
        shared(&format!("{dir}/ibm18es.parv")),
        "-o",
        out_path,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning:") && err.contains("is not modelled"),
        "{err}"
    );
    let (code, out, err) = elevator(&[
        "validate",
        &format!("{dir}/ibm18es.trace"),
        "--device",
        out_path,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("demerit (DiskSim's rms"), "{out}");
    std::fs::remove_file(out_path).unwrap();
}

#[test]
fn import_disksim_writes_its_output_whole_or_not_at_all() {
    let dir = std::env::temp_dir().join(format!("elevator-import-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let target = dir.join("drive.toml");
    std::fs::write(&target, "# a profile the user had\n").unwrap();
    let target_s = target.to_str().unwrap();
    // A refused import leaves the file as it was and prints nothing.
    let missing = dir.join("no-such.parv");
    let (code, out, err) = elevator(&[
        "device",
        "import-disksim",
        missing.to_str().unwrap(),
        "-o",
        target_s,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("no-such.parv"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "# a profile the user had\n"
    );
    // A successful one replaces it whole, and leaves no temporary file.
    let tiny = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../elevator-device/testdata/disksim/inline.parv"
    );
    let (code, out, err) = elevator(&["device", "import-disksim", tiny, "-o", target_s]);
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty(), "{out}");
    let written = std::fs::read_to_string(&target).unwrap();
    assert!(
        written.starts_with("# Imported from DiskSim's"),
        "{written}"
    );
    assert!(written.contains("write_settle_ms = -0.2"), "{written}");
    // Where it approximates DiskSim, stderr says so.
    assert!(err.contains("warning: approximated:"), "{err}");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("drive.toml")]);
    // To standard output: the profile, or nothing on an error.
    let (code, out, _) = elevator(&["device", "import-disksim", tiny]);
    assert_eq!(code, 0);
    assert_eq!(out, written);
    let (code, out, _) = elevator(&["device", "import-disksim", missing.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reproduce_checks_one_experiment_against_the_committed_verdicts() {
    let (code, out, err) = elevator(&["reproduce", "--only", "morton-2", "--check", "--jobs", "2"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("verdict: ordering"), "{out}");
    assert!(out.contains("summary: orderings matched"), "{out}");
    assert!(err.contains("check: 1 tables no worse than"), "{err}");
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
    let (code, _, err) = elevator(&["reproduce", "--only", "no-such-table"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("matches no experiment"), "{err}");
}

#[test]
fn list_tunables_and_show_print_kernel_names_defaults_units_and_meaning() {
    let (code, out, err) = elevator(&["list", "--tunables"]);
    assert_eq!(code, 0, "{err}");
    for want in ["read_expire", "antic_expire", "slice_idle", "nr_requests"] {
        assert!(out.contains(want), "missing {want} in\n{out}");
    }
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
    let (code, out, _) = elevator(&["show", "deadline"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("fifo_batch") && out.contains("default"),
        "{out}"
    );
    let (code, _, err) = elevator(&["show", "nosuch"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown policy"), "{err}");
}

#[test]
fn run_and_reproduce_write_report_pages_with_their_charts() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-pages");
    let _ = std::fs::remove_dir_all(&dir);
    let scenario = "morton-2-streaming-write-vs-interactivity";
    let run_dir = dir.join("run");
    let (code, out, err) = elevator(&[
        "run",
        scenario,
        "--sched",
        "deadline,anticipatory",
        "--report",
        run_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("report: wrote"), "{err}");
    let page = std::fs::read_to_string(run_dir.join("index.html")).expect("index.html");
    // A CDF and a timeline for pdflush, the writer and the xterm.
    assert_eq!(page.matches("<svg class=\"chart\"").count(), 6, "{page}");
    assert!(page.contains("anticipatory") && page.contains("antic_expire="));
    // The text report on the page is the one printed.
    let first = out.lines().next().expect("a table");
    assert!(page.contains(first), "{first}");

    let rep_dir = dir.join("reproduce");
    let (code, _, err) = elevator(&[
        "reproduce",
        "--only",
        scenario,
        "--report",
        rep_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let index = std::fs::read_to_string(rep_dir.join("reproduce.html")).expect("reproduce.html");
    let link = format!("href=\"{scenario}.html\"");
    assert!(index.contains(&link), "{index}");
    let linked =
        std::fs::read_to_string(rep_dir.join(format!("{scenario}.html"))).expect("the linked page");
    assert!(linked.matches("<svg class=\"chart\"").count() >= 6);
    for html in [&page, &index, &linked] {
        assert!(!html.contains("NaN"), "NaN on a page");
    }
}

#[test]
fn set_reaches_policies_whose_names_hold_dots() {
    // The tunable is what follows the last dot: cfq-2.6.32.slice_idle.
    let (code, out, err) = elevator(&[
        "run",
        "ten-streaming-readers",
        "--sched",
        "cfq-2.6.32",
        "--set",
        "cfq-2.6.32.slice_idle=0",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("slice_idle=0"), "{out}");
    let (code, _, err) = elevator(&["run", "ten-streaming-readers", "--set", "slice_idle=0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("expected POLICY.TUNABLE=VALUE"), "{err}");
}
