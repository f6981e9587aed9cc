//! One module per policy, named after it.

pub mod anticipatory;
pub mod deadline;
pub mod noop;
