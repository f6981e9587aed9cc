//! One module per policy, named after it.

pub mod anticipatory;
pub mod bfq;
pub mod deadline;
pub mod linus24;
pub mod noop;
