//! The decision trace (`elevator run --trace FILE`) of a short deadline and
//! anticipatory run is a snapshot: `testdata/trace-deadline-as.txt`
//! (`UPDATE_EXPECT=1` rewrites it). It shows why each policy did what it
//! did, among others an anticipation hit and a batch started at an expired
//! FIFO head.

use elevator_scenario::{run, RunOptions, Scenario};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata");

#[test]
fn deadline_and_anticipatory_decisions_match_the_snapshot() {
    let file = format!("{DIR}/trace-deadline-as.toml");
    let text = std::fs::read_to_string(&file).expect("trace scenario");
    let scenario = Scenario::parse(&file, &text).expect("valid scenario");
    let options = RunOptions {
        trace: true,
        ..RunOptions::default()
    };
    let report = run(&scenario, &options, &mut |_| {}).expect("runs");
    let trace = report.trace_text();
    for want in [
        "# policy deadline",
        "# policy anticipatory",
        "] anticipation hit",
        "] batch start, expired fifo",
        "] expired fifo",
        "  M  ",
        "  C  ",
        "  W  until",
    ] {
        assert!(trace.contains(want), "no {want:?} in the trace:\n{trace}");
    }
    let snapshot = format!("{DIR}/trace-deadline-as.txt");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&snapshot, &trace).expect("snapshot written");
        return;
    }
    let expected = std::fs::read_to_string(&snapshot)
        .unwrap_or_else(|e| panic!("{snapshot}: {e} (UPDATE_EXPECT=1 writes it)"));
    assert!(
        trace == expected,
        "the trace differs from {snapshot} (UPDATE_EXPECT=1 rewrites it):\n{trace}"
    );
}

#[test]
fn no_trace_is_recorded_unless_asked() {
    let file = format!("{DIR}/trace-deadline-as.toml");
    let text = std::fs::read_to_string(&file).expect("trace scenario");
    let scenario = Scenario::parse(&file, &text).expect("valid scenario");
    let report = run(&scenario, &RunOptions::default(), &mut |_| {}).expect("runs");
    assert!(report.runs.iter().all(|r| r.trace.is_none()));
}
