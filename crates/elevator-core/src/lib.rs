//! Core types shared by every part of `elevator`.
//!
//! Nothing here reads a clock or draws an unseeded random number: time is an
//! [`Instant`] passed in by whoever drives the policies (the simulator or the
//! io_uring runtime), and randomness comes from a [`Prng`] seeded by the
//! scenario. Two helpers touch files, for the edges that read input and never
//! for a policy or a model: [`read_input`] (a user's file, size-capped, FIFOs
//! and devices refused) and [`shared`] (where tests find `../shared`).

mod error;
mod group;
mod input;
mod ioprio;
mod limits;
mod port;
mod prng;
mod request;
pub mod shared;
mod time;

pub use error::IoError;
pub use group::{Group, GroupTree, IoMax, IoMaxError, DEFAULT_WEIGHT, MAX_WEIGHT};
pub use input::read_input;
pub use ioprio::{IoClass, IoPrio, IoPrioError, IOPRIO_LEVELS};
pub use limits::QueueLimits;
pub use port::{BlockIo, Completion, Congestion, Io, Workload};
pub use prng::Prng;
pub use request::{GroupId, Op, Request, RequestId, Sector, TaskId, SECTOR_SIZE};
pub use time::{Duration, Instant};
