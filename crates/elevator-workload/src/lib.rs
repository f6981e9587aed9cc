//! Workloads: what issues the I/O.
//!
//! [`direct`] holds fio-like jobs that talk to the block device directly
//! (O_DIRECT): sequential or random, read, write or mixed, a block size, a
//! region, a queue depth, think time, priority, start time and a size or
//! duration, or a period (a media player). [`startup`] replays an
//! application's cold-cache start-up from a real block trace. [`Mix`] runs
//! several workloads as one, which is how a scenario combines its jobs.
//! [`trace`] reads block traces (blkparse, fio iologs, MSR Cambridge,
//! MQSim, DiskSim) as streams and replays them open or closed loop.

pub mod direct;
pub mod fio;
mod mix;
pub mod startup;
pub mod trace;

pub use direct::{DirectJob, Pattern};
pub use mix::{Mix, Part};
pub use startup::{StartupReplay, StartupTrace, TraceError};
