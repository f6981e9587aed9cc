//! Issue 6's evidence for io.max: each group holds its limit whatever its
//! task count; without limits, bandwidth follows the task count. And bad
//! group declarations name file, line and key.

use elevator_metrics::Report;
use elevator_scenario::{builtin, run, RunOptions, Scenario};

fn report(name: &str) -> Report {
    let scenario = builtin(name).expect("built-in").expect("valid");
    run(&scenario, &RunOptions::default(), &mut |_| {}).expect("runs")
}

/// (policy, tasks in a, MB/s of a, MB/s of b) per run.
fn rows(r: &Report) -> Vec<(String, usize, f64, f64)> {
    r.runs
        .iter()
        .map(|run| {
            let g = |n: &str| run.groups.iter().find(|g| g.name == n).expect("group");
            (
                run.scheduler.clone(),
                g("a").tasks,
                g("a").mb_s,
                g("b").mb_s,
            )
        })
        .collect()
}

fn print(title: &str, rows: &[(String, usize, f64, f64)]) {
    println!("{title}\n  policy    tasks in a   a MB/s   b MB/s");
    for (p, n, a, b) in rows {
        println!("  {p:<9} {n:>10} {a:>8.2} {b:>8.2}");
    }
}

#[test]
fn each_limited_group_holds_ten_mb_s_whatever_its_task_count() {
    let limited = rows(&report("group-read-limits"));
    print("io.max rbps=10 MB/s per group, ssd-sata-2016", &limited);
    assert_eq!(limited.len(), 8, "2 policies x 4 sweep points");
    for (p, n, a, b) in &limited {
        for (group, mb_s) in [("a", a), ("b", b)] {
            assert!(
                (mb_s - 10.0).abs() <= 0.3,
                "{p}, {n} tasks: group {group} read {mb_s:.2} MB/s, not 10 within 3%"
            );
        }
    }
}

#[test]
fn without_limits_bandwidth_follows_the_task_count() {
    let free = rows(&report("group-read-unlimited"));
    print("no io.max, ssd-sata-2016", &free);
    for policy in ["noop", "deadline"] {
        let mine: Vec<_> = free.iter().filter(|r| r.0 == policy).collect();
        assert_eq!(
            mine.iter().map(|r| r.1).collect::<Vec<_>>(),
            vec![1, 2, 4, 8]
        );
        for w in mine.windows(2) {
            assert!(w[1].2 > w[0].2 * 1.05, "{policy}: a did not grow: {:?}", w);
            assert!(
                w[1].3 < w[0].3 * 0.95,
                "{policy}: b did not shrink: {:?}",
                w
            );
        }
    }
}

const BASE: &str = r#"name = "g"
description = "groups"
[result]
name = "x"
unit = "MB/s"
metric = "mb_s"
group = "a"
[[group]]
name = "a"
io_max = "rbps=10m"
weight = 200
[[job]]
name = "r"
group = "a"
rw = "read"
bs = "1m"
size = "10m"
"#;

#[test]
fn bad_group_declarations_name_file_line_and_key() {
    assert!(Scenario::parse("g.toml", BASE).is_ok());
    let cases = [
        (
            BASE.replace("rbps=10m", "rbps=fast"),
            "g.toml:10: key `group.io_max`: io.max field \"rbps=fast\"",
        ),
        (
            BASE.replace("rbps=10m", "rbps=10m xbps=1"),
            "g.toml:10: key `group.io_max`: io.max field \"xbps=1\"",
        ),
        (
            BASE.replace("rbps=10m", "rbps=0"),
            "g.toml:10: key `group.io_max`",
        ),
        (
            BASE.replace("io_max = \"rbps=10m\"", "io_throttle = \"iops-max=10:2\""),
            "g.toml:10: key `group.io_throttle`: io-throttle rule \"iops-max=10:2\"",
        ),
        (
            BASE.replace("io_max = \"rbps=10m\"", "io_throttle = \"rbps=1\""),
            "g.toml:10: key `group.io_throttle`: io-throttle rule \"rbps=1\"",
        ),
        (
            BASE.replace("weight = 200", "weight = 0"),
            "g.toml:11: key `group.weight`",
        ),
        (
            BASE.replace("weight = 200", "weight = 1001"),
            "g.toml:11: key `group.weight`",
        ),
        (
            BASE.replace("weight = 200", "weight = \"heavy\""),
            "g.toml:11: key `weight`",
        ),
        (
            BASE.replace("group = \"a\"\nrw", "group = \"b\"\nrw"),
            "g.toml:14: key `job.group`",
        ),
        (
            BASE.replace("io_max = \"rbps=10m\"", "parent = \"z\""),
            "g.toml:10: key `group.parent`",
        ),
        (
            BASE.replace("group = \"a\"\n[[group]]", "group = \"zz\"\n[[group]]"),
            "g.toml:7: key `result.group`",
        ),
    ];
    for (text, want) in cases {
        let got = Scenario::parse("g.toml", &text).unwrap_err().to_string();
        assert!(got.starts_with(want), "want {want:?}\n got {got:?}");
    }
}
