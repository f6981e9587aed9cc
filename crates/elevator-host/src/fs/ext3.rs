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
//! - **fsync, 2.6.30–2.6.31** (`HostParams::ext3_fsync` =
//!   `ForceCommit`; fs/sync.c `vfs_fsync`, fs/ext3/fsync.c, fs/jbd of
//!   v2.6.30): the VFS starts the file's data (`WRITE_SYNC_PLUG`) without
//!   waiting; if the inode is dirty, `sync_inode` → `ext3_write_inode` →
//!   `ext3_force_commit` stops a handle with `h_sync` in the running
//!   transaction ([`Journal::force_commit`]), which makes its commit
//!   synchronous (`t_synchronous_commit`): every block that commit writes
//!   (ordered data, descriptors and copies) goes out `WRITE_SYNC_PLUG`, sync
//!   and `REQ_NOIDLE`, not `WRITE`; the caller waits for the commit, then
//!   for its data. Timer and size commits stay `WRITE`.
//! - **fsync, 2.6.32+** (fs/ext3/fsync.c `ext3_sync_file`): the VFS first
//!   writes and waits for the file's data (`filemap_write_and_wait_range`,
//!   `WRITE_SYNC_PLUG`: sync and `REQ_NOIDLE`, commit a64c861), then ext3
//!   commits the inode's transaction and waits (`log_start_commit`,
//!   `log_wait_commit`); in `data=journal` it only forces the commit
//!   (`ext3_force_commit`). A transaction already committed costs nothing
//!   (barriers are off by default, so no cache flush).
//!
//! - **Block reservation windows** (fs/ext3/balloc.c of v2.6.30,
//!   `ext3_try_to_allocate_with_rsv`, `alloc_new_reservation`,
//!   `find_next_reservable_window`): a regular file allocates inside its
//!   own window of `rsv_goal_size` blocks, which no other file's window
//!   overlaps. The first window has `EXT3_DEFAULT_RESERVE_BLOCKS` (8); when
//!   a new one is needed and more than half of the old one was allocated,
//!   the size doubles, up to `EXT3_MAX_RESERVE_BLOCKS` (1027,
//!   include/linux/ext3_fs.h), and never below the blocks asked for. A new
//!   window is searched from the goal block within its group, skipping
//!   other windows, and must have a free block inside; failing that, in the
//!   following groups with more than half a window free; failing that,
//!   the file allocates without one. Closing the file drops the window
//!   (`ext3_discard_reservation`). So concurrent streaming writers
//!   interleave in windows of about 4 MiB, where ext2's 8-block
//!   preallocation interleaves them every 32 KiB. Directories allocate
//!   without a window. Departure: windows are not moved when their goal
//!   lies in the part of a window crossing into the next group.
//!
//! - **Shadowed buffers** (fs/jbd/transaction.c `do_get_write_access`,
//!   fs/jbd/journal.c `journal_write_metadata_buffer`, v2.6.30): while a
//!   commit writes a metadata block's copy to the log the buffer is
//!   `BJ_Shadow`, and a handle that wants to modify it sleeps until the
//!   log write is done ([`Journal::shadowed`]). A `write(2)` modifies its
//!   inode when it extends the file (`i_disksize`) or when its mtime moves
//!   to a new second (`file_update_time`; `s_time_gran` is one second on
//!   ext3, fs/super.c `alloc_super`), so writers stall behind a timer
//!   commit whose log writes wait in the elevator. Departure: only that
//!   inode update asks; file creation and the bitmaps and indirect blocks
//!   of an allocation (which an extending write's inode update already
//!   covers) do not.
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

use super::{FileId, FileSystem};
use elevator_core::{Duration, Instant};
use rustc_hash::{FxHashMap, FxHashSet};
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

/// `EXT3_DEFAULT_RESERVE_BLOCKS`: a file's first reservation window, in
/// blocks (include/linux/ext3_fs.h, v2.6.30).
pub const EXT3_DEFAULT_RESERVE_BLOCKS: u64 = 8;
/// `EXT3_MAX_RESERVE_BLOCKS`: the largest window a streaming writer's
/// doubling reaches (include/linux/ext3_fs.h, v2.6.30).
pub const EXT3_MAX_RESERVE_BLOCKS: u64 = 1027;

/// A file's reservation window: blocks `start..=end`, of which `hit` were
/// allocated to it (`rsv_alloc_hit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rsv {
    pub start: u64,
    pub end: u64,
    pub hit: u64,
}

impl FileSystem {
    /// ext3's block allocation for regular file `f` from `goal`, up to
    /// `want` contiguous blocks (`ext3_new_blocks` with a reservation
    /// window; module docs).
    pub(super) fn alloc_rsv(&mut self, f: FileId, goal: u64, want: u64) -> (u64, u64) {
        let goal = goal.min(self.geo.blocks - 1);
        if let Some(w) = self.inodes[f.0 as usize].rsv {
            if (w.start..=w.end).contains(&goal) {
                if let Some((s, _)) = self.first_free(goal, w.end + 1) {
                    return self.take_in_window(f, s, want);
                }
            }
        }
        // A new window: double the goal size if the old one was more than
        // half used (alloc_new_reservation), at least `want`.
        let inode = &mut self.inodes[f.0 as usize];
        let old = inode.rsv.take();
        let mut size = if inode.rsv_goal == 0 {
            EXT3_DEFAULT_RESERVE_BLOCKS
        } else {
            inode.rsv_goal
        };
        if let Some(w) = old {
            let len = w.end - w.start + 1;
            if w.hit > len / 2 {
                size = (size * 2).min(EXT3_MAX_RESERVE_BLOCKS);
            }
            self.windows.remove(&w.start);
        }
        let size = size.max(want);
        self.inodes[f.0 as usize].rsv_goal = size;
        let bpg = self.geo.blocks_per_group;
        let first = self.geo.group_of(goal);
        for i in 0..self.geo.groups {
            let g = (first + i) % self.geo.groups;
            let lo = self.geo.group_start(g);
            if i > 0 && self.groups[g as usize].free_blocks <= size / 2 {
                continue;
            }
            let from = if i == 0 { goal } else { lo };
            if let Some((start, free)) = self.find_window(f, from, size, lo + bpg) {
                self.windows.insert(start, (start + size - 1, f));
                self.inodes[f.0 as usize].rsv = Some(Rsv {
                    start,
                    end: start + size - 1,
                    hit: 0,
                });
                return self.take_in_window(f, free, want);
            }
        }
        // No window anywhere: allocate without one (ext3_new_blocks retries
        // with `my_rsv = NULL`).
        let (start, len) = self.take_near(goal, want);
        self.inodes[f.0 as usize].goal = Some(start + len);
        (start, len)
    }

    /// Take the free run at `s` inside `f`'s window, up to `want` blocks.
    fn take_in_window(&mut self, f: FileId, s: u64, want: u64) -> (u64, u64) {
        let w = self.inodes[f.0 as usize].rsv.expect("a window");
        let (_, run) = self.first_free(s, w.end + 1).expect("a free block at s");
        let len = run.min(want).min(w.end + 1 - s);
        self.take(s, len);
        let inode = &mut self.inodes[f.0 as usize];
        inode.rsv.as_mut().expect("a window").hit += len;
        inode.goal = Some(s + len);
        (s, len)
    }

    /// `find_next_reservable_window` plus the bitmap check of
    /// `alloc_new_reservation`: the first `size` blocks from `from` that no
    /// other file's window overlaps, starting before `group_end`, with a
    /// free block inside. Returns the window's start and that free block.
    fn find_window(&self, f: FileId, from: u64, size: u64, group_end: u64) -> Option<(u64, u64)> {
        let mut cur = from;
        loop {
            // Windows do not overlap, so in start order their ends grow.
            let before = self.windows.range(..=cur).next_back().map(|(&s, _)| s);
            for (&start, &(end, owner)) in self.windows.range(before.unwrap_or(0)..) {
                if owner == f || end < cur {
                    continue;
                }
                if start >= cur + size {
                    break;
                }
                cur = end + 1;
            }
            if cur >= group_end {
                return None;
            }
            let (free, _) = self.first_free(cur, group_end)?;
            if free < cur + size {
                return Some((cur, free));
            }
            cur = free;
        }
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
    /// `t_synchronous_commit`: a handle with `h_sync` stopped in it (2.6.30's
    /// fsync), so its commit writes `WRITE_SYNC_PLUG`.
    pub synchronous: bool,
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
    /// The metadata blocks it logs: in the log phase each is `BJ_Shadow`
    /// (see [`Journal::shadowed`]).
    pub meta: BTreeSet<u64>,
    /// Someone waits for it (`t_synchronous_commit`): its data and log
    /// writes are `WRITE_SYNC_PLUG`.
    pub synchronous: bool,
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
    /// Handles that waited for a shadowed metadata block.
    pub shadow_waits: u64,
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
    /// Files whose inode was dirtied since their last fsync (the VFS's
    /// `I_DIRTY_SYNC | I_DIRTY_DATASYNC`, which 2.6.30's fsync tests).
    inode_dirty: FxHashSet<u32>,
    /// Each written file's mtime, in whole seconds (see
    /// [`Journal::mtime_changes`]).
    mtime_sec: FxHashMap<u32, u64>,
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
            inode_dirty: Default::default(),
            mtime_sec: FxHashMap::default(),
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
            self.inode_dirty.insert(f.0);
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
        self.inode_dirty.insert(file.0);
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

    /// 2.6.30's fsync of `file` after its data went out: if its inode is
    /// dirty (or `always`: data=journal calls it unconditionally),
    /// `ext3_force_commit` (`journal_force_commit`: a one-credit
    /// handle with `h_sync` joins the running transaction, which becomes
    /// `t_synchronous_commit`, and asks for its commit) and the caller waits
    /// for the returned tid; otherwise `None`. The second value is the
    /// commit timer's expiry if the handle started the transaction. The
    /// inode counts as clean afterwards (`sync_inode` cleared `I_DIRTY`).
    /// Departure: background writeback, which in the kernel also clears
    /// `I_DIRTY` (`__writeback_single_inode`), does not here, so a file
    /// written back since its last write and fsynced later still commits.
    pub fn force_commit(
        &mut self,
        file: FileId,
        always: bool,
        now: Instant,
    ) -> (Option<u64>, Option<Instant>) {
        if !self.inode_dirty.remove(&file.0) && !always {
            return (None, None);
        }
        let timer = self.handle(now);
        self.running.synchronous = true;
        let tid = self.running.tid;
        self.request(tid, Reason::Fsync);
        (Some(tid), timer)
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
            meta: t.meta,
            synchronous: t.synchronous,
        });
        self.committing.as_ref()
    }

    /// `do_get_write_access` (fs/jbd/transaction.c of v2.6.30) on metadata
    /// block `block`: while the committing transaction writes its copy to
    /// the log, the buffer is `BJ_Shadow` (`journal_write_metadata_buffer`,
    /// fs/jbd/journal.c) and a handle that wants to modify it sleeps on
    /// `BH_Unshadow` until kjournald has seen that log write complete
    /// (`journal_commit_transaction`'s `wait_for_iobuf` loop, fs/jbd/commit.c,
    /// before the commit block). Returns the sequence number of the log
    /// phase's last write to wait for, or `None` if the block is not
    /// shadowed. Before the log phase (`data=ordered`'s data writes) jbd
    /// gives the handle a frozen copy instead (`b_frozen_data`) and it does
    /// not wait; during the commit block the shadows are gone. Departure:
    /// jbd lifts each shadow as its own log write completes, here all at
    /// the end of the phase (its writes go out together and sort together).
    pub fn shadowed(&self, block: u64) -> Option<u64> {
        let c = self.committing.as_ref()?;
        (c.phase == Phase::Log && c.meta.contains(&block)).then_some(c.seq)
    }

    /// Would a `write(2)` of `file` at `now` change its mtime?
    /// `file_update_time` (fs/inode.c of v2.6.30) marks the inode dirty only
    /// when the time changes, at the super block's `s_time_gran`, which
    /// `alloc_super` (fs/super.c) sets to one second and ext3 leaves so: an
    /// overwrite modifies the inode once a second, an extending write every
    /// time (`i_disksize`, `ext3_writeback_write_end` and its siblings).
    pub fn mtime_changes(&self, file: FileId, now: Instant) -> bool {
        let sec = now.nanos() / Duration::from_secs(1).nanos();
        self.mtime_sec.get(&file.0) != Some(&sec)
    }

    /// A `write(2)` of `file` set its mtime at `now`.
    pub fn set_mtime(&mut self, file: FileId, now: Instant) {
        let sec = now.nanos() / Duration::from_secs(1).nanos();
        self.mtime_sec.insert(file.0, sec);
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
    use crate::fs::registry::{mount, FsType};

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

    /// A committing transaction's metadata blocks are shadowed while its
    /// log is written, and only then; an overwrite touches the inode once a
    /// second (`s_time_gran`), so only then does it ask.
    #[test]
    fn metadata_is_shadowed_during_the_log_phase_only() {
        let mut j = Journal::new(Ext3Options::default(), vec![(1000, 4000)]);
        j.dirty_meta(7, Some(FileId(3)), Instant::ZERO);
        assert_eq!(
            j.shadowed(7),
            None,
            "the running transaction shadows nothing"
        );
        j.timer(1);
        j.start_commit(5).expect("the timer's commit");
        assert_eq!(j.shadowed(7), Some(5), "the log phase's writes");
        assert_eq!(j.shadowed(8), None, "not in the transaction");
        j.committing.as_mut().unwrap().phase = Phase::CommitBlock;
        assert_eq!(j.shadowed(7), None, "unshadowed before the commit block");
        j.finish_commit();
        assert_eq!(j.shadowed(7), None);

        let f = FileId(3);
        assert!(j.mtime_changes(f, Instant(1_200_000_000)), "never written");
        j.set_mtime(f, Instant(1_200_000_000));
        assert!(!j.mtime_changes(f, Instant(1_900_000_000)), "same second");
        assert!(
            j.mtime_changes(f, Instant(2_000_000_000)),
            "the next second"
        );
    }

    /// 2.6.30's fsync of a dirty inode makes the running transaction's
    /// commit synchronous (its log writes go out WRITE_SYNC_PLUG); a clean
    /// inode forces nothing; timer commits stay asynchronous.
    #[test]
    fn force_commit_makes_the_running_transaction_synchronous() {
        let mut j = Journal::new(Ext3Options::default(), vec![(1000, 4000)]);
        let (tid, _) = j.force_commit(FileId(3), false, Instant::ZERO);
        assert_eq!(tid, None, "a clean inode commits nothing");
        j.dirty_meta(7, Some(FileId(3)), Instant::ZERO);
        j.dirty_meta(8, Some(FileId(4)), Instant::ZERO);
        j.timer(1);
        let c = j.start_commit(0).expect("the timer's commit").clone();
        assert!(!c.synchronous, "a timer commit writes WRITE");
        j.finish_commit();
        j.dirty_data(FileId(3), 1, Instant(1_000_000));
        let (tid, timer) = j.force_commit(FileId(3), false, Instant(1_000_000));
        assert_eq!(tid, Some(2));
        assert_eq!(timer, None, "the write's handle started the transaction");
        assert!(j.running.synchronous);
        let c = j.start_commit(0).expect("the forced commit").clone();
        assert!(c.synchronous, "t_synchronous_commit reaches the commit");
        assert_eq!(j.force_commit(FileId(3), false, Instant(2_000_000)).0, None);
        assert!(
            j.force_commit(FileId(3), true, Instant(2_000_000))
                .0
                .is_some(),
            "data=journal forces a commit whatever the inode"
        );
    }

    /// Two files grown one block at a time, turn about, as concurrent
    /// writers grow them: ext3's reservation windows double up to 1027
    /// blocks, so each file ends in few extents; ext2's 8-block
    /// preallocation interleaves them every 8 blocks.
    #[test]
    fn reservation_windows_keep_concurrent_writers_apart() {
        let extents = |fs_type: FsType| {
            let params = crate::params::FsParams {
                fs_type,
                ..crate::params::FsParams::default()
            };
            let mut fs = FileSystem::new(&params, 8 * (128 << 20) / 512, 1);
            let a = fs.create(FileId::ROOT, crate::fs::Kind::File, 1).unwrap();
            let b = fs.create(FileId::ROOT, crate::fs::Kind::File, 1).unwrap();
            for k in 1..=4096u64 {
                fs.extend_to(a, k * 4096, 1).unwrap();
                fs.extend_to(b, k * 4096, 2).unwrap();
            }
            fs.check();
            let (ea, eb) = (fs.inode(a).extents.len(), fs.inode(b).extents.len());
            // Windows never overlap, so no block is in both files.
            let blocks = |f: FileId| -> std::collections::BTreeSet<u64> {
                fs.inode(f)
                    .extents
                    .iter()
                    .flat_map(|e| e.disk_block..e.disk_block + e.len)
                    .collect()
            };
            assert!(blocks(a).is_disjoint(&blocks(b)));
            (
                ea,
                eb,
                fs.inode(a).extents.iter().map(|e| e.len).max().unwrap(),
            )
        };
        let (ext3_a, ext3_b, longest) = extents(mount("ext3", "").unwrap());
        let (ext2_a, _, _) = extents(FsType::default());
        println!("extents: ext3 {ext3_a} and {ext3_b} (longest {longest}), ext2 {ext2_a}");
        assert!(ext3_a <= 16 && ext3_b <= 16, "{ext3_a} {ext3_b}");
        assert!(longest >= EXT3_MAX_RESERVE_BLOCKS - 8, "{longest}");
        assert!(ext2_a >= 256, "ext2 interleaves every 8 blocks: {ext2_a}");
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
