//! Block requests as a scheduler sees them.
//!
//! A request covers `sectors` 512-byte sectors from `sector`. When the
//! scheduler merges two adjacent requests, the survivor lists the ids of the
//! requests it absorbed in `merged`: completing it completes them all.
//! Invariant: a request's id appears once, either as a queued request's
//! `id` or inside exactly one queued request's `merged`.

use crate::{Instant, IoPrio};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A position on the device, in 512-byte sectors.
pub type Sector = u64;

/// Bytes per sector.
pub const SECTOR_SIZE: u64 = 512;

/// Unique id of a request within a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequestId(pub u64);

/// The task (process or thread) that issued a request; policies key their
/// per-task state (the kernel's io_context) by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskId(pub u32);

/// The control group a request is charged to. Group 0 is the root.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct GroupId(pub u32);

impl GroupId {
    pub const ROOT: GroupId = GroupId(0);
}

/// What a request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    Read,
    Write,
    /// Flush the device's write cache; carries no data.
    Flush,
}

/// One block request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub id: RequestId,
    pub op: Op,
    /// Someone waits for it (reads, O_DIRECT, fsync); async is writeback.
    pub sync: bool,
    pub sector: Sector,
    pub sectors: u32,
    pub task: TaskId,
    pub prio: IoPrio,
    pub group: GroupId,
    /// When it entered the scheduler (set by whoever inserts it).
    pub arrival: Instant,
    /// Ids of requests merged into this one.
    pub merged: Vec<RequestId>,
    /// Filesystem metadata (the kernel's `REQ_META | REQ_PRIO`): CFQ lets
    /// it preempt and serves it first within a queue.
    pub meta: bool,
    /// The kernel's `REQ_NOIDLE` (2.6.30-rc1, commit aeb6faf; `REQ_SYNC |
    /// REQ_NOIDLE` through 3.x): "do not anticipate more I/O from this
    /// task". Set on fsync and journal writes (`WRITE_SYNC`,
    /// `WRITE_SYNC_PLUG`), never on O_DIRECT writes (`WRITE_ODIRECT` in
    /// 2.6.30-2.6.32, `WRITE_ODIRECT_PLUG` in 2.6.33-2.6.36, `REQ_SYNC` in
    /// 3.x) nor on reads. CFQ does not idle for a queue whose next request
    /// carries it.
    pub noidle: bool,
}

impl Request {
    /// A sync read of `sectors` at `sector` by `task`, best-effort, root group.
    pub fn read(id: u64, task: u32, sector: Sector, sectors: u32) -> Self {
        Request {
            id: RequestId(id),
            op: Op::Read,
            sync: true,
            sector,
            sectors,
            task: TaskId(task),
            prio: IoPrio::default(),
            group: GroupId::ROOT,
            arrival: Instant::ZERO,
            merged: Vec::new(),
            meta: false,
            noidle: false,
        }
    }

    /// An async (writeback) write.
    pub fn write(id: u64, task: u32, sector: Sector, sectors: u32) -> Self {
        Request {
            op: Op::Write,
            sync: false,
            ..Request::read(id, task, sector, sectors)
        }
    }

    /// A sync write as fsync and the journal issue it (`WRITE_SYNC`: sync
    /// and `REQ_NOIDLE`).
    pub fn write_sync(id: u64, task: u32, sector: Sector, sectors: u32) -> Self {
        Request {
            sync: true,
            noidle: true,
            ..Request::write(id, task, sector, sectors)
        }
    }

    /// A direct (O_DIRECT) write (`WRITE_ODIRECT`: sync, no `REQ_NOIDLE`).
    pub fn write_direct(id: u64, task: u32, sector: Sector, sectors: u32) -> Self {
        Request {
            sync: true,
            ..Request::write(id, task, sector, sectors)
        }
    }

    /// One past the last sector.
    pub fn end(&self) -> Sector {
        self.sector + u64::from(self.sectors)
    }

    pub fn bytes(&self) -> u64 {
        u64::from(self.sectors) * SECTOR_SIZE
    }

    pub fn is_read(&self) -> bool {
        self.op == Op::Read
    }

    /// This request's id and every id merged into it.
    pub fn ids(&self) -> impl Iterator<Item = RequestId> + '_ {
        std::iter::once(self.id).chain(self.merged.iter().copied())
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match (self.op, self.sync) {
            (Op::Read, _) => "R",
            (Op::Write, true) => "WS",
            (Op::Write, false) => "W",
            (Op::Flush, _) => "F",
        };
        write!(
            f,
            "#{} {op} {}+{} task {} {}",
            self.id.0, self.sector, self.sectors, self.task.0, self.prio
        )
    }
}
