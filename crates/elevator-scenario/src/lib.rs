//! Scenarios: what runs, on which device, measured how.
//!
//! A scenario is a TOML file (see `docs/scenarios.md`): a name, a
//! description, the default device and policies, the headline result, the
//! published figures to print beside ours, tunable overrides, block-layer
//! settings, the jobs and the application start-ups. [`Scenario::parse`]
//! validates everything up front and reports the first problem with the
//! file, line and key; running a valid scenario can only fail on what it
//! reads then (a start-up trace) or on a device too small for its regions.
//!
//! Built-in scenarios live in the repository's `scenarios/` folder and are
//! compiled into the binary.

mod block;
mod builtin;
mod ctx;
mod error;
pub mod fio_sim;
pub mod fuzzing;
mod host;
pub mod html;
pub mod letter;
mod parse;
mod quantity;
pub mod replay;
pub mod reproduce;
mod result;
mod run;
pub mod startup;
pub mod swarm;
mod sweep;
mod table;
mod units;
pub mod validate;

pub use builtin::{builtin, builtins};
pub use elevator_sched::group::wbt::WbtSpec;
pub use error::ScenarioError;
pub use host::{FileKind, FileSetSpec, HostSpec, ProcessSpec};
pub use parse::{
    JobTemplate, Scenario, MAX_SCENARIO_BYTES, MAX_TASKS, MAX_TICKS, MAX_WBT_LAT_USEC,
};
pub use quantity::Unit;
pub use run::{run, run_one, run_policy, RunOptions};
pub use sweep::Sweep;
pub use table::{CellSpec, TableSpec};
pub use units::{parse_duration, parse_size};
