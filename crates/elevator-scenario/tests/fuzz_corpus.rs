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

#[test]
fn fio_job_corpus() {
    replay("fio_job", elevator_scenario::fuzzing::fio_job);
}

#[test]
fn trace_corpus() {
    replay("trace", elevator_scenario::fuzzing::trace);
}

#[test]
fn disksim_corpus() {
    replay("disksim", elevator_scenario::fuzzing::disksim);
}

/// The seeds must be inputs the parsers accept, or the fuzzer starts from
/// the first error and rarely gets past it.
#[test]
fn seeds_parse() {
    use elevator_workload::trace::{parse_all, TraceFormat};
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let drive = std::fs::read_to_string(corpus.join("disksim/tiny-drive")).unwrap();
    let files: Vec<&str> = drive.split('\0').collect();
    let next = std::cell::Cell::new(0);
    let read = |_: &Path| {
        next.set(next.get() + 1);
        Ok(files[next.get() - 1].to_string())
    };
    let imported =
        elevator_device::disksim::import_disksim_with(Path::new("tiny.parv"), &read).unwrap();
    elevator_device::parse("tiny", &imported.profile).unwrap();
    // The forms DiskSim 4.0 takes that the importer once refused (an
    // inline model, the HPL and Lee seek equations, a negative write
    // settle, skews in revolutions or out of range, slips out of order, a
    // seek file with a stdev column and a bogus line) import and load.
    for seed in [
        "inline-model-hplplus10-slips-out-of-order",
        "extracted-seek-with-stdev-and-a-bogus-line",
        "lee-curve-negative-and-wide-skews",
    ] {
        let drive = std::fs::read_to_string(corpus.join("disksim").join(seed)).unwrap();
        let files: Vec<&str> = drive.split('\0').collect();
        let next = std::cell::Cell::new(0);
        let read = |p: &Path| {
            next.set(next.get() + 1);
            files
                .get(next.get() - 1)
                .map(|f| f.to_string())
                .ok_or_else(|| elevator_device::disksim::ImportError {
                    file: p.display().to_string(),
                    line: 0,
                    key: "file".into(),
                    message: "not in the seed".into(),
                })
        };
        let imported = elevator_device::disksim::import_disksim_with(Path::new("d.parv"), &read)
            .unwrap_or_else(|e| panic!("{seed}: {e}"));
        elevator_device::parse(seed, &imported.profile)
            .unwrap_or_else(|e| panic!("{seed}: {e}\n{}", imported.profile));
    }
    for entry in std::fs::read_dir(corpus.join("trace")).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let text = std::str::from_utf8(&data[1..]).unwrap();
        let format = TraceFormat::ALL
            .get(usize::from(data[0]))
            .copied()
            .or_else(|| TraceFormat::detect(text.lines().next().unwrap()))
            .unwrap();
        let (records, _) =
            parse_all("seed", text, format).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!records.is_empty(), "{}: no records", path.display());
    }
    for entry in std::fs::read_dir(corpus.join("fio_job")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        elevator_scenario::fuzzing::fio_job_checked(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}
