//! Several workloads driven as one.
//!
//! Each part gets timer tokens and request ids routed back to it: tokens are
//! tagged with the part's index in their top bits, and completions are
//! matched by the task that issued them (tasks are never shared between
//! parts).

use elevator_core::TaskId;
use elevator_core::{Completion, Io, Workload};
use elevator_metrics::JobStats;
use rustc_hash::FxHashMap;

/// A workload that can be part of a [`Mix`].
pub trait Part: Workload {
    /// The tasks this part issues I/O as.
    fn tasks(&self) -> Vec<TaskId>;
    /// Whether the run should wait for this part (background loads say no);
    /// fixed when the part is made.
    fn measured(&self) -> bool;
    /// Statistics per job, for the report.
    fn stats(&self) -> Vec<JobStats>;
    /// The same statistics, to switch on what a report asks for before
    /// the run ([`JobStats::record_series`]).
    fn stats_mut(&mut self) -> Vec<&mut JobStats>;
}

const PART_SHIFT: u32 = 48;

/// Workloads run side by side.
#[derive(Default)]
pub struct Mix {
    parts: Vec<Box<dyn Part>>,
    by_task: FxHashMap<TaskId, usize>,
    /// The parts the run waits for, asked after every event: with hundreds
    /// of background jobs, scanning them all made each event O(parts).
    measured: Vec<usize>,
}

impl std::fmt::Debug for Mix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mix")
            .field("parts", &self.parts.len())
            .finish()
    }
}

impl Mix {
    pub fn new() -> Self {
        Mix::default()
    }

    pub fn push(&mut self, part: Box<dyn Part>) {
        let index = self.parts.len();
        for task in part.tasks() {
            let clash = self.by_task.insert(task, index);
            assert!(clash.is_none(), "task {task:?} belongs to two workloads");
        }
        if part.measured() {
            self.measured.push(index);
        }
        self.parts.push(part);
    }

    pub fn stats(&self) -> Vec<JobStats> {
        self.parts.iter().flat_map(|p| p.stats()).collect()
    }

    /// Keep every job's throughput timeline ([`JobStats::record_series`]);
    /// call before the run.
    pub fn record_series(&mut self) {
        for part in &mut self.parts {
            for stats in part.stats_mut() {
                stats.record_series();
            }
        }
    }

    fn with_part(
        &mut self,
        index: usize,
        io: &mut Io<'_>,
        f: impl FnOnce(&mut dyn Part, &mut Io<'_>),
    ) {
        // Tag the timers the part arms with its index.
        let part = self.parts[index].as_mut();
        io.tag_timers(
            u64::try_from(index).expect("few parts") << PART_SHIFT,
            |io| f(part, io),
        );
    }
}

impl Workload for Mix {
    fn start(&mut self, io: &mut Io<'_>) {
        for i in 0..self.parts.len() {
            self.with_part(i, io, |p, io| p.start(io));
        }
    }

    fn wake(&mut self, token: u64, io: &mut Io<'_>) {
        let index = (token >> PART_SHIFT) as usize;
        let token = token & ((1 << PART_SHIFT) - 1);
        self.with_part(index, io, |p, io| p.wake(token, io));
    }

    fn completed(&mut self, done: &Completion, io: &mut Io<'_>) {
        let index = *self
            .by_task
            .get(&done.task)
            .expect("completion for a task no part owns");
        self.with_part(index, io, |p, io| p.completed(done, io));
    }

    fn request_done(&mut self, io: &mut Io<'_>) {
        for i in 0..self.parts.len() {
            self.with_part(i, io, |p, io| p.request_done(io));
        }
    }

    fn finished(&self) -> bool {
        self.measured.iter().all(|&i| self.parts[i].finished())
    }
}
