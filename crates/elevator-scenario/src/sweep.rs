//! A scenario's sweep: the one parameter it runs once per point of
//! (`[sweep]`), as the parser reads it and the tables label it.

use elevator_core::IoPrio;

/// Run the scenario once per point of one parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sweep {
    /// Per count of one job's instances.
    Count { job: String, counts: Vec<u32> },
    /// Per I/O priority of one job or process (`ionice`), each as written.
    Prio {
        target: String,
        prios: Vec<(String, IoPrio)>,
    },
    /// Per block-layer in-flight limit in sectors (`None`: no limit).
    InflightLimit(Vec<Option<u64>>),
}
