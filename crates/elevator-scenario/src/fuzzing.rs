//! Entry points for fuzzing the parsers a user feeds: scenario files,
//! device profiles, start-up traces, fio job files, block traces (blkparse,
//! fio iologs, MSR Cambridge, MQSim, DiskSim ASCII and validation) and
//! DiskSim drives to import.
//!
//! The cargo-fuzz targets in `fuzz/` call these with arbitrary bytes, and
//! the stable test `tests/fuzz_corpus.rs` replays the committed corpus
//! through the same functions, so CI holds the line without nightly.
//! Each takes any bytes and returns normally: a parse ends in a value or
//! in an error naming the input; a panic here is a bug the fuzzer found.

use crate::Scenario;
use elevator_workload::trace::{parse_all, TraceFormat};
use elevator_workload::{StartupReplay, StartupTrace};
use std::cell::Cell;
use std::path::Path;

/// The name inputs are parsed under; every error must mention it.
pub const FUZZ_FILE: &str = "fuzz-input";

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// A scenario file: parsed and validated as `elevator run FILE` does.
pub fn scenario(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Err(e) = Scenario::parse(FUZZ_FILE, text) {
        let shown = e.to_string();
        assert!(
            shown.starts_with(FUZZ_FILE),
            "error without the file: {shown}"
        );
        assert!(!shown.contains('\n'), "error over several lines: {shown}");
    }
}

/// A device profile: parsed, then asked for its limits.
pub fn device_profile(data: &[u8]) {
    let Some(text) = text(data) else { return };
    match elevator_device::parse(FUZZ_FILE, text) {
        Ok(device) => {
            let limits = device.limits();
            assert!(limits.capacity > 0, "a device with no sectors");
        }
        Err(e) => {
            let shown = e.to_string();
            assert!(shown.contains(FUZZ_FILE), "error without the file: {shown}");
        }
    }
}

/// A start-up trace: parsed, then laid out as a replay.
pub fn startup_trace(data: &[u8]) {
    let Some(text) = text(data) else { return };
    match StartupTrace::parse(FUZZ_FILE, text) {
        Ok(trace) => {
            let replay = StartupReplay::new("app", trace.with_think_scaled(0.5), 1, 1);
            let _ = replay.footprint_sectors();
        }
        Err(e) => {
            let shown = e.to_string();
            assert!(
                shown.starts_with(FUZZ_FILE),
                "error without the file: {shown}"
            );
        }
    }
}

/// Every error of a parser that names its file must start with the fuzz
/// input's name (or an included file's) and fit on one line.
fn one_line_naming(shown: &str, names: &[&str]) {
    assert!(
        names.iter().any(|n| shown.starts_with(n)),
        "error without the file: {shown}"
    );
    assert!(!shown.contains('\n'), "error over several lines: {shown}");
}

/// The environment fio job files are fuzzed in: the variables the job
/// files in `fio/` and fio's examples (the seeds) use, so `${VAR}`
/// expansion is exercised.
pub fn fio_env(name: &str) -> Option<String> {
    match name {
        "SIZE" => Some("64m".into()),
        "RUNTIME" => Some("1".into()),
        "FIO_BS" => Some("4k".into()),
        "FIO_RW" => Some("randread".into()),
        "FIO_IODEPTH" => Some("4".into()),
        _ => None,
    }
}

/// A fio job file: parsed (an `include` of any name reads the same bytes
/// again, so include nesting and the byte budget are fuzzed too), planned
/// on a 1 GiB simulated device (every `/dev/` path is it, no file exists),
/// and its threads built. Every error line names the input.
pub fn fio_job(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Err(e) = fio_job_checked(text) {
        for line in e.lines() {
            one_line_naming(line, &[FUZZ_FILE]);
        }
    }
}

/// [`fio_job`]'s steps; the error text if a step refuses the input.
pub fn fio_job_checked(text: &str) -> Result<(), String> {
    use elevator_workload::fio::{self, Existing, Place, ReadOptions, Runner, Setup};
    let mut read = |_: &Path| Ok(text.to_string());
    let opts = ReadOptions {
        env: &fio_env,
        keywords: fio::parse::Keywords::default(),
        runner: Runner::Sim,
        overrides: fio::Overrides::default(),
    };
    let file = fio::parse_with_reader(Path::new(FUZZ_FILE), &opts, &mut read)
        .map_err(|e| e.to_string())?;
    let capacity: u64 = 1 << 30;
    let existing = |p: &str| {
        if p.starts_with("/dev/") {
            Existing::Device(capacity)
        } else {
            Existing::Missing
        }
    };
    let plan = file.plan(&existing, capacity).map_err(|e| e.to_string())?;
    // Bound the work: a plan whose maps outgrow memory is a valid plan the
    // run itself would refuse (the device is too small).
    let blocks: u64 = plan
        .threads
        .iter()
        .map(|t| {
            let bs = file.jobs[t.job].rw_min_bs().max(1);
            t.files.iter().map(|f| f.io_size / bs).sum::<u64>()
        })
        .sum();
    if plan.threads.len() > 4096 || blocks > 1 << 24 {
        return Ok(());
    }
    let places = plan
        .files
        .iter()
        .map(|f| Place::at(0, f.size.min(capacity)))
        .collect();
    let run = fio::FioRun::new(Setup {
        jobs: &file.jobs,
        plan: &plan,
        places,
        seed: 1,
        groups: vec![elevator_core::GroupId::ROOT; file.jobs.len()],
        hosted: vec![false; plan.threads.len()],
        first_task: 1,
    });
    let _ = run.report(elevator_core::Instant::ZERO);
    Ok(())
}

/// A block trace: the first byte picks the format (one of
/// [`TraceFormat::ALL`], or detection from the first line as `elevator
/// trace` does without `--format`), the rest is the trace. Records must
/// come in time order with sizes within the reader's bound and processes
/// it named.
pub fn trace(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Some(text) = text(rest) else { return };
    let formats = TraceFormat::ALL;
    let format = match formats.get(usize::from(pick) % (formats.len() + 1)) {
        Some(&f) => f,
        None => {
            let first = text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#'));
            match first.and_then(TraceFormat::detect) {
                Some(f) => f,
                None => return,
            }
        }
    };
    match parse_all(FUZZ_FILE, text, format) {
        Ok((records, processes)) => {
            let mut last = elevator_core::Duration::ZERO;
            for r in &records {
                assert!(
                    r.time >= last,
                    "{format}: line {} goes back in time",
                    r.line
                );
                last = r.time;
                assert!(
                    r.sectors > 0
                        && u64::from(r.sectors)
                            <= elevator_workload::trace::read::MAX_REQUEST_SECTORS,
                    "{format}: line {}: {} sectors",
                    r.line,
                    r.sectors
                );
                assert!(
                    (r.process as usize) < processes.len(),
                    "{format}: line {}: process {} of {}",
                    r.line,
                    r.process,
                    processes.len()
                );
            }
        }
        Err(e) => one_line_naming(&e.to_string(), &[FUZZ_FILE]),
    }
}

/// A DiskSim drive to import: the input is the `.parv`, `.diskspecs`,
/// `.model` and `.seek` files separated by NUL bytes, served in the order
/// the importer asks for them (whatever names the files give each other).
/// An import must give a profile that parses, or one error.
pub fn disksim(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let files: Vec<&str> = text.split('\0').collect();
    let next = Cell::new(0);
    let read = |path: &Path| {
        let i = next.get();
        next.set(i + 1);
        files.get(i).map(|f| (*f).to_string()).ok_or_else(|| {
            elevator_device::disksim::ImportError {
                file: path.display().to_string(),
                line: 0,
                key: "file".into(),
                message: "not in the fuzz input".into(),
            }
        })
    };
    let parv = Path::new(FUZZ_FILE).with_extension("parv");
    match elevator_device::disksim::import_disksim_with(&parv, &read) {
        Ok(imported) => {
            // Whatever the importer writes must parse, or fail cleanly.
            if let Err(e) = elevator_device::parse("imported", &imported.profile) {
                one_line_naming(&e.to_string(), &["imported"]);
            }
        }
        Err(e) => assert!(
            !e.to_string().contains('\n'),
            "error over several lines: {e}"
        ),
    }
}
