//! One module per policy, named after it.

pub mod anticipatory;
pub mod bfq;
pub mod cfq;
pub mod cfq2003;
pub mod cfq_2632;
pub(crate) mod cfq_common;
pub mod cfq_v10;
pub mod deadline;
pub mod deadline_mc;
pub mod kyber;
pub mod linus24;
pub mod mclock;
pub mod mq_deadline;
pub mod noop;
