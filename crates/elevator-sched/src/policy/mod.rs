//! One module per policy, named after it.

pub mod cfq;
pub mod deadline;
pub mod deadline_mc;
pub mod noop;
