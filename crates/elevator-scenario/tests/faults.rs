//! A failing device: errors, timeouts and stalls reach the jobs and the
//! host's processes, are counted in the report, and nothing is lost. Every
//! run here goes through the invariant checker (`check: true`), which
//! counts an errored request as completed exactly once.

use elevator_scenario::{run, RunOptions, Scenario};

const FAULTY: &str = r#"
name = "faulty"
description = "direct readers and writers, a cat and a dd, on a disk that fails"
device = "sata-hdd"
seed = 7
time_limit = "600s"

[result]
name = "seconds to read 32 MB"
unit = "s"
metric = "completion"
job = "reader"

[faults]
eio_rate = 0.02
timeout_rate = 0.002
stall_rate = 0.01
timeout = "2s"
stall = "300ms"
eio_at = ["1s", "2s"]

[[job]]
name = "random"
rw = "randread"
bs = "4k"
region = "1g"
iodepth = 4
size = "4m"

[[job]]
name = "writer"
rw = "write"
bs = "64k"
region = "256m"
offset = "8g"
sync = true
size = "16m"

[host]
preset = "linux-2.6"

[[files]]
name = "file"
kind = "file"
size = "32m"

[[files]]
name = "out"
kind = "file"
size = "64m"

[[process]]
name = "reader"
kind = "cat"
files = "file"

[[process]]
name = "dd"
kind = "dd"
files = "out"
bs = "1m"
size = "64m"
"#;

#[test]
fn faults_reach_jobs_and_processes_and_nothing_is_lost() {
    let scenario = Scenario::parse("faulty.toml", FAULTY).expect("parses");
    let policies: Vec<String> = elevator_sched::registry()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    let options = RunOptions {
        schedulers: Some(policies),
        check: true,
        ..RunOptions::default()
    };
    let report = run(&scenario, &options, &mut |_| {}).expect("runs");
    for r in &report.runs {
        let errors: u64 = r.jobs.iter().map(|j| j.errors).sum();
        let by_job: Vec<(&str, u64)> = r.jobs.iter().map(|j| (j.name.as_str(), j.errors)).collect();
        eprintln!("{:12} errors {errors:4} {by_job:?}", r.scheduler);
        assert!(
            errors > 0,
            "{}: no injected error reached a job",
            r.scheduler
        );
        assert!(
            r.jobs.iter().filter(|j| j.errors > 0).count() >= 2,
            "{}: errors reached only one job: {by_job:?}",
            r.scheduler
        );
        let reader = r.jobs.iter().find(|j| j.name == "reader").expect("reader");
        assert!(
            reader.completion_s.is_some(),
            "{}: the cat did not finish: failed reads must be retried",
            r.scheduler
        );
        assert_eq!(
            reader.read_bytes,
            32 << 20,
            "{}: cat read it all",
            r.scheduler
        );
    }
}

#[test]
fn a_faults_table_is_checked_with_file_line_and_key() {
    let body = "eio_rate = 0.02\ntimeout_rate = 0.002\nstall_rate = 0.01\ntimeout = \"2s\"\n\
                stall = \"300ms\"\neio_at = [\"1s\", \"2s\"]\n";
    assert!(FAULTY.contains(body), "the test's table is the scenario's");
    for (bad, key) in [
        ("eio_rate = 0.9\n", "faults.eio_rate"),
        ("timeout = \"0ms\"\n", "faults.timeout"),
        ("eio_at = [\"soon\"]\n", "faults.eio_at"),
        ("eio_rate = 0.3\ntimeout_rate = 0.3\n", "faults"),
        ("bogus = 1\n", "bogus"),
    ] {
        let text = FAULTY.replace(body, bad);
        let e = Scenario::parse("faulty.toml", &text)
            .expect_err(bad)
            .to_string();
        let line = e
            .strip_prefix("faulty.toml:")
            .and_then(|rest| rest.split(':').next())
            .and_then(|n| n.parse::<u32>().ok());
        assert!(line.is_some(), "{bad}: no file and line in {e}");
        assert!(e.contains(key), "{bad}: {e}");
    }
}

/// Swarm seed 852: commands time out while an NCQ disk still holds them
/// (31 queued random reads take longer than the 50 ms timeout). The engine
/// got the timeouts back and, before `Faulty` counted the abandoned commands
/// as still in flight, filled the drive past its queue depth (the model's
/// debug assertion). Reads only, so no write cache hides the queue.
const TIMEOUTS_ON_A_FULL_QUEUE: &str = r#"
name = "timeouts-ncq"
description = "random readers keep an NCQ disk full while commands time out"
device = "hdd-2009-ncq"
schedulers = ["noop", "cfq-2003"]
seed = 852
time_limit = "3s"

[result]
name = "aggregate"
unit = "MB/s"
metric = "aggregate_mb_s"

[faults]
timeout_rate = 0.05
timeout = "50ms"

[[job]]
name = "deep"
rw = "randread"
bs = "16k"
region = "2g"
iodepth = 48
runtime = "2s"

[[job]]
name = "shallow"
rw = "randread"
bs = "4k"
region = "1g"
offset = "3g"
iodepth = 4
runtime = "2s"
"#;

#[test]
fn commands_that_time_out_inside_a_full_ncq_disk_keep_their_slots() {
    let scenario = Scenario::parse("timeouts-ncq.toml", TIMEOUTS_ON_A_FULL_QUEUE).expect("parses");
    let options = RunOptions {
        check: true,
        ..RunOptions::default()
    };
    let report = run(&scenario, &options, &mut |_| {}).expect("runs");
    assert_eq!(report.runs.len(), 2);
    for r in &report.runs {
        let errors: u64 = r.jobs.iter().map(|j| j.errors).sum();
        assert!(errors > 0, "{}: no command timed out", r.scheduler);
    }
}
