//! One module per policy, named after it.

pub mod bfq;
pub mod deadline;
pub mod noop;
