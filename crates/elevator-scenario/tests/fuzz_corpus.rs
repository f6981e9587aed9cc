//! The cargo-fuzz corpus (`fuzz/corpus/<target>/`), replayed on stable
//! through the entry points the fuzz targets call: every seed and every
//! input that once found a bug must still return normally.

use std::path::Path;

fn replay(target: &str, entry: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    inputs.sort();
    // An empty corpus would make this test pass on nothing.
    assert!(!inputs.is_empty(), "no corpus in {}", dir.display());
    for path in &inputs {
        let data = std::fs::read(path).unwrap();
        println!("{target}: {}", path.display());
        entry(&data);
    }
}

#[test]
fn scenario_corpus() {
    replay("scenario", elevator_scenario::fuzzing::scenario);
}

#[test]
fn device_profile_corpus() {
    replay("device_profile", elevator_scenario::fuzzing::device_profile);
}

#[test]
fn startup_trace_corpus() {
    replay("startup_trace", elevator_scenario::fuzzing::startup_trace);
}
