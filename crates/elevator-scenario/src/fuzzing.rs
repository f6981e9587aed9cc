//! Entry points for fuzzing the parsers a user feeds: scenario files,
//! device profiles and start-up traces.
//!
//! The cargo-fuzz targets in `fuzz/` call these with arbitrary bytes, and
//! the stable test `tests/fuzz_corpus.rs` replays the committed corpus
//! through the same functions, so CI holds the line without nightly.
//! Each takes any bytes and returns normally: a parse ends in a value or
//! in an error naming the input; a panic here is a bug the fuzzer found.

use crate::Scenario;
use elevator_workload::{StartupReplay, StartupTrace};

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
