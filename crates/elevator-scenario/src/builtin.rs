//! Scenarios compiled into the binary, from the repository's `scenarios/`.

use crate::{Scenario, ScenarioError};

macro_rules! scenarios {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../../scenarios/", $name, ".toml")))),*]
    };
}

/// (name, TOML text) of every built-in scenario.
#[rustfmt::skip]
const BUILTIN: &[(&str, &str)] = scenarios![
    "ten-streaming-readers",
    "streaming-write-vs-reader",
    "group-read-limits",
    "group-read-unlimited",
    "group-random-vs-sequential",
    "group-weights-1-vs-4",
    "lowlatency-24",
    "ioprio-17-sync",
    "ioprio-17-async",
    "ioprio-17-2009-sync",
    "ioprio-17-2009-async",
    "group-random-vs-sequential-2009",
    "group-random-vs-sequential-2009-io-throttle",
    "io-throttle-2009-seq-vs-seq",
    "io-throttle-2009-seq-vs-seq-unlimited",
    "io-throttle-2009-seq-vs-rand",
    "io-throttle-2009-seq-vs-rand-unlimited",
    "io-throttle-2009-rand-vs-seq",
    "io-throttle-2009-rand-vs-seq-unlimited",
    "io-throttle-2009-rand-vs-rand",
    "io-throttle-2009-rand-vs-rand-unlimited",
    "group-buffered-write-limit",
    "morton-1-parallel-streaming-reads",
    "morton-1b-parallel-streaming-reads-8k",
    "morton-2-streaming-write-vs-interactivity",
    "morton-3-streaming-read-vs-interactivity",
    "morton-4-copy-three-trees",
    "morton-5-six-tree-readers",
    "morton-6-streaming-write-vs-read",
    "morton-7-streaming-write-vs-tree-read",
    "morton-8-streaming-read-vs-write-and-fsync",
    "morton-9-streaming-read-vs-tree-read",
    "morton-10-cp-1g-and-sync",
    "bfq-startup-seq",
    "bfq-startup-random",
    "bfq-media-player",
    "modern-ionice-rt-vs-idle",
    "modern-random-read-vs-buffered-write",
    "modern-read-vs-writeback-wbt",
    "kyber-read-latency-vs-write-flood",
    "mclock-reservation-and-limit",
    "iocost-weights-100-vs-300",
    "iocost-qos-read-latency",
    "tiotest-2009-ext3-hdd",
    "tiotest-2009-nilfs2-sdcard",
    "fsync-tester-2009-ext3",
];

/// Names and descriptions of the built-in scenarios.
pub fn builtins() -> Vec<(&'static str, String)> {
    BUILTIN
        .iter()
        .map(|(name, text)| {
            let description = Scenario::parse(name, text)
                .map(|s| s.description)
                .unwrap_or_else(|e| format!("(broken: {e})"));
            (*name, description)
        })
        .collect()
}

/// A built-in scenario by name.
pub fn builtin(name: &str) -> Option<Result<Scenario, ScenarioError>> {
    BUILTIN
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, text)| Scenario::parse(&format!("<built-in {n}>"), text))
}
