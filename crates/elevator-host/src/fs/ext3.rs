//! ext3: the ext2 layout plus jbd's journal, as Linux 2.6.32 ran it.
//!
//! The placement of files and metadata is the ext2-like file system of
//! [`super`]; this module holds what ext3 adds, the journal (fs/jbd of
//! 2.6.32), as a state machine the host drives (it issues the I/O):
//!
//! - **Transactions.** Every handle joins the running transaction: the
//!   metadata blocks it dirties (`journal_dirty_metadata`), and in
//!   `data=ordered` the files whose data it dirtied
//!   (`ext3_ordered_write_end` → `journal_dirty_data`, the transaction's
//!   `t_sync_datalist`), in `data=journal` the data blocks themselves
//!   (`ext3_journalled_write_end`). Every `write(2)` dirties the inode
//!   (`file_update_time` → `ext3_dirty_inode`), so every file written in a
//!   transaction has that transaction as its sync tid.
//! - **kjournald** commits the running transaction when its timer fires,
//!   `commit=` seconds (default `JBD_DEFAULT_MAX_COMMIT_AGE`, 5 s) after
//!   its first handle, rounded up to a whole second (`round_jiffies_up`,
//!   2.6.32, commit b449fc6); when it would outgrow a quarter of the journal
//!   (`j_max_transaction_buffers`, fs/jbd/journal.c `journal_reset`); or
//!   when `fsync` asks (`log_start_commit`). One commit runs at a time.
//! - **A commit** (`journal_commit_transaction`, fs/jbd/commit.c): in
//!   `data=ordered` it first writes every dirty data page of the
//!   transaction's files and waits for them (`journal_submit_data_buffers`,
//!   plain `WRITE`); then it writes descriptor blocks and the copies of the
//!   metadata blocks (and in `data=journal` of the data blocks)
//!   sequentially at the journal's head (`WRITE`), waits, and writes the
//!   commit block through `sync_dirty_buffer` (`WRITE_SYNC`: sync and
//!   `REQ_NOIDLE`), and waits for it. 2.6.32's fsync sets no `h_sync`, so
//!   only the commit block is synchronous (reference §5, derived from
//!   fs/ext3/fsync.c after commit fe8bc91).
//! - **fsync** (fs/ext3/fsync.c `ext3_sync_file`, 2.6.32): the VFS first
//!   writes and waits for the file's data (`filemap_write_and_wait_range`,
//!   `WRITE_SYNC_PLUG`: sync and `REQ_NOIDLE`, commit a64c861), then ext3
//!   commits the inode's transaction and waits (`log_start_commit`,
//!   `log_wait_commit`); in `data=journal` it only forces the commit
//!   (`ext3_force_commit`). A transaction already committed costs nothing
//!   (barriers are off by default, so no cache flush).
//!
//! The journal is one run of blocks in the middle of the file system:
//! e2fsprogs' `write_journal_inode` (lib/ext2fs/mkjournal.c) sets the goal
//! to the group holding the middle block; its size is
//! `ext2fs_default_journal_size` ([`default_journal_blocks`]).
//!
//! Departures, each noted where it matters: metadata blocks also stay
//! dirty in the page cache and reach their home location through ordinary
//! writeback, possibly before their transaction commits (jbd holds them
//! back until then and checkpoints later; the number of home writes is the
//! same); the journal never fills (checkpointing is not modelled: a
//! 128 MiB journal outruns the runs here); revoke records are not written.
//!
//! Invariants: tids increase by one; `committed < running.tid`; at most
//! one transaction commits, and it is `committed + 1`.

use super::FileId;
use elevator_core::{Duration, Instant};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// `JBD_DEFAULT_MAX_COMMIT_AGE`, 5 s: how long after its first handle a
/// transaction commits (include/linux/jbd.h, 2.6.32); `commit=` overrides.
pub const JBD_DEFAULT_MAX_COMMIT_AGE: Duration = Duration::from_secs(5);

/// Block tags in one descriptor block: a 12-byte header, then 8-byte
/// `journal_block_tag_t`s, the first followed by the 16-byte journal UUID
/// (include/linux/jbd.h; fs/jbd/commit.c starts a new descriptor when the
/// next tag and a UUID no longer fit): (4096 - 12 - 16) / 8 = 508.
pub const TAGS_PER_DESCRIPTOR: u64 = (4096 - 12 - 16) / 8;

/// The journal's size in blocks for a file system of `blocks` blocks:
/// e2fsprogs' `ext2fs_default_journal_size` (lib/ext2fs/mkjournal.c of
/// the 1.41 series; reference §5: 32768 blocks, 128 MiB, on large file
/// systems).
pub fn default_journal_blocks(blocks: u64) -> u64 {
    match blocks {
        b if b < 2048 => 0,
        b if b < 32768 => 1024,
        b if b < 256 * 1024 => 4096,
        b if b < 512 * 1024 => 8192,
        b if b < 1024 * 1024 => 16384,
        _ => 32768,
    }
}

/// ext3's `data=` mount option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataMode {
    /// Data is written before the commit of the metadata that points at it.
    Ordered,
    /// Only metadata is journaled.
    Writeback,
    /// Data is journaled too.
    Journal,
}

impl DataMode {
    pub fn name(self) -> &'static str {
        match self {
            DataMode::Ordered => "ordered",
            DataMode::Writeback => "writeback",
            DataMode::Journal => "journal",
        }
    }
}

/// What the 2.6.3x kernel mounted: vanilla 2.6.30-2.6.35 default to
/// `data=writeback` (`EXT3_DEFAULTS_TO_ORDERED` without a default, commit
/// bbae8bc; `default y` only in 2.6.36, commit aa32a79).
pub const DEFAULT_DATA_MODE: DataMode = DataMode::Writeback;

/// Validated ext3 mount options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ext3Options {
    pub data: DataMode,
    /// `commit=`: the commit interval.
    pub commit_interval: Duration,
}

impl Default for Ext3Options {
    fn default() -> Self {
        Ext3Options {
            data: DEFAULT_DATA_MODE,
            commit_interval: JBD_DEFAULT_MAX_COMMIT_AGE,
        }
    }
}

/// Validate ext3's mount options (`data=`, `commit=`); the registry's
/// `build` for ext3 (`fs/registry.rs`).
pub fn parse_options(options: &[(&str, &str)]) -> Result<Ext3Options, String> {
    let mut o = Ext3Options::default();
    for &(k, v) in options {
        match k {
            "data" => {
                o.data = match v {
                    "ordered" => DataMode::Ordered,
                    "writeback" => DataMode::Writeback,
                    "journal" => DataMode::Journal,
                    _ => {
                        return Err(format!(
                            "data={v:?}: ext3 takes data=ordered, data=writeback or data=journal"
                        ))
                    }
                }
            }
            "commit" => {
                // fs/ext3/super.c: `commit=0` means the default; we ask
                // for the number itself, 1 to 300 s.
                let secs: u64 = v
                    .parse()
                    .ok()
                    .filter(|s| (1..=300).contains(s))
                    .ok_or_else(|| format!("commit={v:?}: whole seconds, 1 to 300"))?;
                o.commit_interval = Duration::from_secs(secs);
            }
            _ => {
                return Err(format!(
                    "unknown ext3 mount option {k:?} (data=ordered|writeback|journal, commit=SECS)"
                ))
            }
        }
    }
    Ok(o)
}

/// The running transaction.
#[derive(Clone, Debug, Default)]
pub struct Transaction {
    pub tid: u64,
    /// When its first handle started (its commit timer runs from then).
    pub started: Option<Instant>,
    /// Metadata blocks (pages of [`FileId::BDEV`]) it logs.
    pub meta: BTreeSet<u64>,
    /// `data=ordered`: files whose dirty data its commit writes first.
    pub files: BTreeSet<FileId>,
    /// `data=journal`: data blocks it logs.
    pub data_blocks: u64,
}

impl Transaction {
    fn is_empty(&self) -> bool {
        self.started.is_none()
    }

    /// Blocks its commit writes into the journal: descriptors, metadata
    /// and journaled data copies, the commit block.
    pub fn log_blocks(&self) -> u64 {
        let copies = self.meta.len() as u64 + self.data_blocks;
        copies + copies.div_ceil(TAGS_PER_DESCRIPTOR) + 1
    }
}

/// Where a commit is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// `data=ordered`: waiting for the transaction's data writes.
    Data,
    /// Waiting for the descriptor and copied blocks.
    Log,
    /// Waiting for the commit block.
    CommitBlock,
}

/// The transaction being committed.
#[derive(Clone, Debug)]
pub struct Committing {
    pub tid: u64,
    pub phase: Phase,
    /// Writes with a sequence number up to this one belong to the phase.
    pub seq: u64,
    pub files: Vec<FileId>,
    /// Blocks of the log phase (all but the commit block).
    pub log_blocks: u64,
}

/// Why a commit started (for the report).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Timer,
    Fsync,
    Size,
}

/// Counters of journal activity.
#[derive(Clone, Copy, Debug, Default)]
pub struct JournalStats {
    pub commits: u64,
    pub by_timer: u64,
    pub by_fsync: u64,
    pub by_size: u64,
    pub log_blocks: u64,
}

/// jbd's journal of one file system.
#[derive(Clone, Debug)]
pub struct Journal {
    pub options: Ext3Options,
    /// The journal's disk blocks as runs `(start, len)`, in journal order.
    pub runs: Vec<(u64, u64)>,
    pub len: u64,
    /// Next block of the journal to write (relative to `start`).
    head: u64,
    pub running: Transaction,
    pub committing: Option<Committing>,
    /// The last committed tid (0: none yet).
    pub committed: u64,
    /// The highest tid a commit was asked for.
    pub requested: u64,
    requested_by: Option<Reason>,
    /// Each file's sync tid (`i_sync_tid`).
    file_tid: FxHashMap<u32, u64>,
    pub stats: JournalStats,
}

impl Journal {
    /// A journal over the disk runs `runs`, in journal order.
    pub fn new(options: Ext3Options, runs: Vec<(u64, u64)>) -> Self {
        let len = runs.iter().map(|r| r.1).sum();
        assert!(
            len > 2,
            "a journal needs room for a descriptor and a commit block"
        );
        Journal {
            options,
            runs,
            len,
            head: 0,
            running: Transaction {
                tid: 1,
                ..Transaction::default()
            },
            committing: None,
            committed: 0,
            requested: 0,
            requested_by: None,
            file_tid: FxHashMap::default(),
            stats: JournalStats::default(),
        }
    }

    /// `j_max_transaction_buffers`: a quarter of the journal.
    pub fn max_transaction_blocks(&self) -> u64 {
        self.len / 4
    }

    /// A handle starts at `now`: returns when the commit timer fires if
    /// this is the running transaction's first handle.
    fn handle(&mut self, now: Instant) -> Option<Instant> {
        if self.running.started.is_some() {
            return None;
        }
        self.running.started = Some(now);
        let at = now + self.options.commit_interval;
        // round_jiffies_up: the next whole second.
        let sec = Duration::from_secs(1).nanos();
        Some(Instant(at.nanos().div_ceil(sec) * sec))
    }

    /// Metadata block `block` is dirtied on behalf of `file`. Returns the
    /// commit timer's expiry if the transaction just started.
    pub fn dirty_meta(
        &mut self,
        block: u64,
        file: Option<FileId>,
        now: Instant,
    ) -> Option<Instant> {
        let timer = self.handle(now);
        self.running.meta.insert(block);
        if let Some(f) = file {
            self.file_tid.insert(f.0, self.running.tid);
        }
        self.size_check();
        timer
    }

    /// `pages` data pages of `file` are dirtied by `write(2)`.
    pub fn dirty_data(&mut self, file: FileId, pages: u64, now: Instant) -> Option<Instant> {
        let timer = self.handle(now);
        match self.options.data {
            DataMode::Ordered => {
                self.running.files.insert(file);
            }
            DataMode::Journal => self.running.data_blocks += pages,
            DataMode::Writeback => {}
        }
        self.file_tid.insert(file.0, self.running.tid);
        self.size_check();
        timer
    }

    fn size_check(&mut self) {
        if self.running.log_blocks() > self.max_transaction_blocks() {
            self.request(self.running.tid, Reason::Size);
        }
    }

    /// The transaction `fsync(file)` must see committed (0: none).
    pub fn sync_tid(&self, file: FileId) -> u64 {
        self.file_tid.get(&file.0).copied().unwrap_or(0)
    }

    /// `log_start_commit(tid)`.
    pub fn request(&mut self, tid: u64, why: Reason) {
        if tid > self.requested {
            self.requested = tid;
            self.requested_by = Some(why);
        }
    }

    /// The commit timer of transaction `tid` fired.
    pub fn timer(&mut self, tid: u64) {
        if self.running.tid == tid && !self.running.is_empty() {
            self.request(tid, Reason::Timer);
        }
    }

    /// kjournald: start committing the running transaction if one was
    /// asked for and none is committing. An empty transaction commits at
    /// once without I/O. Returns the commit to drive.
    pub fn start_commit(&mut self, seq: u64) -> Option<&Committing> {
        if self.committing.is_some() || self.requested < self.running.tid {
            return None;
        }
        let next = Transaction {
            tid: self.running.tid + 1,
            ..Transaction::default()
        };
        let t = std::mem::replace(&mut self.running, next);
        if t.is_empty() {
            self.committed = t.tid;
            return None;
        }
        match self.requested_by.take() {
            Some(Reason::Timer) => self.stats.by_timer += 1,
            Some(Reason::Fsync) => self.stats.by_fsync += 1,
            Some(Reason::Size) => self.stats.by_size += 1,
            None => {}
        }
        let log_blocks = t.log_blocks() - 1;
        self.committing = Some(Committing {
            tid: t.tid,
            phase: if t.files.is_empty() {
                Phase::Log
            } else {
                Phase::Data
            },
            seq,
            files: t.files.into_iter().collect(),
            log_blocks,
        });
        self.committing.as_ref()
    }

    /// Take `n` blocks at the journal's head, wrapping: disk runs.
    pub fn take_log(&mut self, n: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut left = n;
        while left > 0 {
            // The run holding the head, and the head's offset in it.
            let mut off = self.head;
            let &(start, len) = self
                .runs
                .iter()
                .find(|&&(_, len)| {
                    let inside = off < len;
                    if !inside {
                        off -= len;
                    }
                    inside
                })
                .expect("the head is inside the journal");
            let k = left.min(len - off);
            out.push((start + off, k));
            self.head = (self.head + k) % self.len;
            left -= k;
        }
        self.stats.log_blocks += n;
        out
    }

    /// The commit block completed: the transaction is committed.
    pub fn finish_commit(&mut self) {
        let c = self.committing.take().expect("a commit in progress");
        debug_assert_eq!(c.tid, self.committed + 1, "commits in tid order");
        self.committed = c.tid;
        self.stats.commits += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_rounds_up_to_a_second_and_commit_moves_to_the_next_tid() {
        let mut j = Journal::new(Ext3Options::default(), vec![(1000, 4000), (9000, 96)]);
        let t = j.dirty_meta(7, Some(FileId(3)), Instant(1_200_000_000));
        assert_eq!(t, Some(Instant(7_000_000_000)));
        assert_eq!(j.dirty_meta(8, None, Instant(1_300_000_000)), None);
        assert_eq!(j.sync_tid(FileId(3)), 1);
        assert!(j.start_commit(0).is_none(), "nobody asked yet");
        j.timer(1);
        let c = j.start_commit(0).expect("a commit").clone();
        assert_eq!((c.tid, c.phase, c.log_blocks), (1, Phase::Log, 3));
        assert_eq!(j.running.tid, 2);
        j.finish_commit();
        assert_eq!(j.committed, 1);
        assert_eq!(j.take_log(4090), vec![(1000, 4000), (9000, 90)]);
        assert_eq!(j.take_log(8), vec![(9090, 6), (1000, 2)]);
    }

    #[test]
    fn a_quarter_journal_transaction_asks_for_a_commit() {
        let mut j = Journal::new(Ext3Options::default(), vec![(0, 400)]);
        for b in 0..98 {
            j.dirty_meta(b, None, Instant::ZERO);
        }
        assert_eq!(j.requested, 0);
        j.dirty_meta(98, None, Instant::ZERO);
        assert_eq!(j.requested, 1, "101 log blocks > 400 / 4");
    }
}
