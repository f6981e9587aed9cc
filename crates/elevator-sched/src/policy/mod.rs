//! One module per policy, named after it.

pub mod deadline;
pub mod noop;
