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
    for want in [
        "policy    noop",
        "policy    deadline",
        "device    ide-2003",
        "device    ssd-sata-2016",
        "scenario  ten-streaming-readers",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
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

#[test]
fn reproduce_checks_one_experiment_against_the_committed_verdicts() {
    let (code, out, err) = elevator(&["reproduce", "--only", "morton-2", "--check", "--jobs", "2"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("verdict: ordering matches"), "{out}");
    assert!(
        out.contains("summary: orderings matched 1/1 tables"),
        "{out}"
    );
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
