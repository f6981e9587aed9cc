//! One module per policy, named after it.

pub mod anticipatory;
pub mod bfq;
pub mod cfq;
pub mod cfq_2632;
pub mod deadline;
pub mod deadline_mc;
pub mod linus24;
pub mod noop;
