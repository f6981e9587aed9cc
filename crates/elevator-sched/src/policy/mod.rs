//! One module per policy, named after it.

pub mod anticipatory;
pub mod bfq;
pub mod cfq;
pub mod cfq2003;
pub mod deadline;
pub mod deadline_mc;
pub mod linus24;
pub mod noop;
