//! Issue 6: where buffered writes are charged. With cgroup v2 writeback
//! the flusher writes a group's dirty pages on its behalf and the group's
//! io.max holds; charged to the flusher (v1), buffered writes escape it.

use elevator_scenario::{builtin, run, RunOptions, Scenario};

fn dd_seconds(text: &str) -> f64 {
    let s = Scenario::parse("writeback", text).expect("valid");
    let r = run(&s, &RunOptions::default(), &mut |_| {}).expect("runs");
    r.runs[0].result.value
}

#[test]
fn cgroup_v2_writeback_holds_the_write_limit_and_v1_does_not() {
    let v2 = builtin("group-buffered-write-limit")
        .expect("built-in")
        .expect("valid");
    let text = include_str!("../../../scenarios/group-buffered-write-limit.toml");
    assert_eq!(v2.name, "group-buffered-write-limit");
    let charged_to_dirtier = dd_seconds(text);
    let charged_to_flusher = dd_seconds(&text.replace(
        "writeback_charge = \"dirtier\"",
        "writeback_charge = \"flusher\"",
    ));
    // 300 MB at 5 MB/s once the ~94 MB of dirty memory allowed is used up.
    println!(
        "dd 300 MB in a group with wbps=5 MB/s: {charged_to_dirtier:.1} s charged to the dirtier (v2), {charged_to_flusher:.1} s charged to the flusher (v1)"
    );
    assert!(
        charged_to_dirtier > 35.0,
        "v2 writeback did not hold the limit"
    );
    assert!(charged_to_dirtier > 4.0 * charged_to_flusher);
}

#[test]
fn a_bad_writeback_charge_names_its_line() {
    let text = include_str!("../../../scenarios/group-buffered-write-limit.toml").replace(
        "writeback_charge = \"dirtier\"",
        "writeback_charge = \"nobody\"",
    );
    let e = Scenario::parse("w.toml", &text).unwrap_err().to_string();
    assert!(e.contains("key `host.writeback_charge`"), "{e}");
}
