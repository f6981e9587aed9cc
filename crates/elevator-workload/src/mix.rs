//! Several workloads driven as one.
//!
//! Each part gets timer tokens and request ids routed back to it: tokens are
//! tagged with the part's index in their top bits, and completions are
//! matched by the task that issued them (tasks are never shared between
//! parts).
//!
//! Invariant: every event costs O(1) parts, not O(parts). A completion goes
//! to the part owning its task; [`Workload::request_done`] goes only to the
//! parts that received a completion since the last call (in index order),
//! because the call means "the request whose parts you were just given has
//! ended" and a part given none has nothing to release. A scenario with
//! thousands of background jobs otherwise spent its time asking each of them
//! after every request.

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
    /// Parts given a completion since the last `request_done`, each once.
    completed_since_done: Vec<usize>,
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
        if !self.completed_since_done.contains(&index) {
            self.completed_since_done.push(index);
        }
        self.with_part(index, io, |p, io| p.completed(done, io));
    }

    fn request_done(&mut self, io: &mut Io<'_>) {
        // Almost always one part (a request belongs to one task); sorted so
        // the order is the one a scan over all parts would give.
        let mut pending = std::mem::take(&mut self.completed_since_done);
        pending.sort_unstable();
        for &i in &pending {
            self.with_part(i, io, |p, io| p.request_done(io));
        }
        pending.clear();
        self.completed_since_done = pending;
    }

    fn finished(&self) -> bool {
        self.measured.iter().all(|&i| self.parts[i].finished())
    }
}
