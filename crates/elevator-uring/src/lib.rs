//! The real runtime: `elevator`'s policies in front of a real file or block
//! device through io_uring.
//!
//! The same `Box<dyn Scheduler>` the simulator drives (any registered
//! policy, with its tunables and group layers) orders real requests here:
//! [`Runtime`] inserts what clients submit, dispatches up to the device
//! queue depth into an io_uring ([`Uring`]), reaps completions, arms an
//! io_uring timeout for `Dispatch::Wait`, and returns each result to its
//! submitter, errors and short transfers included. It also drives any
//! [`elevator_core::Workload`] (direct jobs, fio job files), the port the
//! simulator speaks, with the real clock as `now`.
//!
//! This is the only crate with `unsafe` (pushing SQEs that point at our
//! buffers; see `backend.rs`, every block with its `// SAFETY:` line) and
//! with a real clock ([`Clock`]). The deterministic crates never depend on
//! it. [`target`] opens files and block devices under the safety rules
//! (mounted or held devices refused, writes only when allowed).

#[allow(unsafe_code)] // the SQE pushes; each block says why it is sound
mod backend;
#[allow(unsafe_code)] // sigaction; the block says why it is sound
pub mod interrupt;
pub mod probe;
mod runtime;
mod service;
#[allow(unsafe_code)] // getrusage, fallocate, posix_fadvise; each block says why it is sound
pub mod sys;
pub mod target;

pub use backend::{Backend, FaultPlan, Faulty, Slot, Submission, Uring, BUFFER_ALIGN};
pub use runtime::{
    sqe_ioprio, Clock, Done, Errno, Payload, RunError, Runtime, RuntimeStats, Submit, SubmitError,
    EILSEQ,
};
pub use service::{Client, Service, Ticket};
