//! The host: processes making system calls against a page cache and a file
//! system, and the flusher, as one workload of the simulator.
//!
//! Each process runs a [`Program`]. The host executes its calls:
//!
//! - **reads** go page by page through the cache, as
//!   `do_generic_mapping_read` does: readahead first (see [`readahead`]),
//!   then the page — a hit costs CPU only, a page being read blocks the
//!   process until its request completes, a missing page is read alone.
//!   Mapping a page past the twelfth block needs ext2's indirect block
//!   (and past 4 MiB the double indirect one): a dependent read of the
//!   block-device page holding it, if it is not cached. Opening a file
//!   needs its inode-table block the same way, and `find` reads directory
//!   blocks one at a time.
//! - **writes** dirty pages (allocating blocks as ext2 does, reading a
//!   partially overwritten page first), then every `ratelimit_pages` dirtied
//!   pages (8 once the limit was exceeded) enter `balance_dirty_pages`:
//!   above `dirty_ratio` of memory dirty or under writeback, the writer
//!   writes back `sync_writeback_pages()` pages itself (as requests of its
//!   own task, blocking while the queue has no free request) and waits in
//!   `blk_congestion_wait` until it has written that much or the total is
//!   under the limit; above `dirty_background_ratio` it wakes the flusher.
//! - the **flusher** (pdflush, its own task) writes dirty files oldest
//!   first, each in file order from where it stopped, as requests of up to
//!   `max_sectors`, `MAX_WRITEBACK_PAGES` per pass, and stops while the
//!   queue is congested (113 of 128 requests) until it drains below 103 or
//!   100 ms pass. It runs background writeback until dirty memory is under
//!   the background threshold, and every `dirty_writeback_centisecs` the
//!   kupdate pass over files dirty for longer than `dirty_expire_centisecs`.
//! - **fsync** writes the file's dirty pages, its dirty indirect blocks and
//!   its inode block as synchronous writes of the calling task and waits
//!   for them and for any earlier writeback of the file; a second pass
//!   picks up pages that were under writeback when it started. **sync**
//!   does the same for every dirty page.
//! - **the journal and the log** (`layers.rs`, switched on by the mounted
//!   file system's [`Layer`]: ext3's and nilfs2's) hook in at four places
//!   and nowhere else, so the ext2 host runs as before: dirtied metadata
//!   and data join jbd's running transaction, kjournald (one more task)
//!   commits it by timer, size or fsync and fsync waits for the commit
//!   (see [`crate::fs::ext3`]); on nilfs2 the flusher writes nothing and
//!   segctord appends every dirty block to the log, relocating the file's
//!   blocks there, by its timer, its watermark or fsync
//!   (see [`crate::fs::nilfs2`]). Their writes without a page-cache page
//!   (descriptors, commit blocks, summaries, DAT) are submitted as raw
//!   blocks.
//!
//! Simplifications, each small against a disk's milliseconds: a process's
//! CPU time is charged in slices of up to [`CPU_QUANTUM`] after the calls
//! that used it, so an I/O may be issued up to that much early; there is
//! one flusher thread, not a pool; the queue's congestion is the engine's
//! async-list bit where it models one (the 2.6.32 preset,
//! [`Io::write_congested`]), else judged from the host's own write requests
//! in flight; the block bitmap is not
//! written back (inode tables, inode bitmaps, directory and indirect blocks
//! are).
//!
//! [`readahead`]: crate::readahead
//! [`CPU_QUANTUM`]: crate::params::CPU_QUANTUM

mod complete;
mod create;
mod issue;
mod layers;
mod read;
mod run;
mod sync;
mod write;

use crate::bdflush::{self, Bdflushd, DirtyState};
use crate::cache::{PageCache, PageState, CHUNK_PAGES};
use crate::fs::ext3::{self, DataMode, Journal, Phase, Reason};
use crate::fs::nilfs2::{self, Log, Nilfs2Options, Run};
use crate::fs::registry::Layer;
use crate::fs::{FileId, FileSystem, Kind, NoSpace};
use crate::params::{
    Ext3Fsync, HostParams, Readahead, Writeback, WritebackCharge, CONGESTION_WAIT, CPU_QUANTUM,
    DEF_PRIORITY, MMAP_READAROUND_PAGES, NRSYNC, PAGE_SIZE, RATELIMIT_EXCEEDED_PAGES,
};
use crate::readahead::RaState;
use crate::readahead24::Ra24;
use crate::syscall::{BarrierId, Ctx, Errno, PipeId, Program, Ret, SysResult, Syscall};
use elevator_core::{BlockIo, Completion, Io, Workload};
use elevator_core::{Duration, GroupId, Instant, IoPrio, Op, RequestId, Sector, TaskId};
use elevator_metrics::JobStats;
use elevator_workload::Part;
use rustc_hash::FxHashMap;
use std::collections::{BTreeSet, VecDeque};

/// A process (thread) of the host.
pub type Pid = usize;

/// Who issued a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Issuer {
    Proc(Pid),
    Flusher,
    /// The file system's own thread: kjournald (ext3) or segctord (nilfs2).
    Daemon,
}

/// Owner of jbd's journal writes (no file's fsync waits for them).
const JOURNAL: FileId = FileId(u32::MAX);
/// Owner of nilfs2's log writes.
const LOG: FileId = FileId(u32::MAX - 1);
/// The `file` of a write with no page-cache page (journal descriptors and
/// commit blocks, segment summaries, nilfs2's metadata files).
const RAW: FileId = FileId(u32::MAX - 2);

/// What the mounted file system adds to ext2's behaviour ([`Layer`], with
/// its running state).
#[derive(Debug)]
enum FsLayer {
    Plain,
    /// ext3's jbd journal.
    Journal(Box<Journal>),
    /// The log is laid out at the first construction, after the file sets
    /// were placed.
    Log(Nilfs2Options, Option<Box<Log>>),
}

/// What the host remembers of a request in flight.
#[derive(Clone, Copy, Debug)]
struct Tag {
    file: FileId,
    page: u64,
    pages: u64,
    write: bool,
    seq: u64,
    /// The file whose fsync waits for this write (data: the file itself).
    owner: FileId,
    issuer: Issuer,
    /// Counts in `writes_in_flight` (the first block of a piece).
    slot: bool,
}

#[derive(Clone, Copy, Debug)]
enum TimerAction {
    Start(Pid),
    Wake(Pid, u64),
    FlusherWake(u64),
    Kupdate,
    /// ext3: the commit timer of transaction `tid`.
    JournalCommit(u64),
    /// nilfs2: the checkpoint timer of this generation.
    SegctorTimer(u64),
}

/// Conditions a process waits for on write completions.
#[derive(Clone, Copy, Debug)]
enum WaitCond {
    /// At most this many host writes in flight (`get_request_wait`).
    SlotsBelow(u32),
    /// No write owned by `file` with sequence number <= `seq` in flight.
    FileWrites { file: FileId, seq: u64 },
    /// No write with sequence number <= `seq` in flight.
    AllWrites { seq: u64 },
    /// ext3: transaction `tid` committed.
    Committed(u64),
    /// nilfs2: `n` segment constructions finished.
    Logged(u64),
}

#[derive(Debug)]
struct Row {
    stats: JobStats,
    measured: bool,
    procs: u32,
    exited: u32,
    group: GroupId,
}

#[derive(Debug)]
struct Proc {
    task: TaskId,
    prio: IoPrio,
    group: GroupId,
    row: usize,
    program: Box<dyn Program>,
    start: Duration,
    sys: Option<Sys>,
    sys_start: Instant,
    cpu_debt: Duration,
    gen: u64,
    blocked: bool,
    exited: bool,
    last: SysResult,
    ra: FxHashMap<u32, RaState>,
    /// 2.4 read-ahead contexts, per open file.
    ra24: FxHashMap<u32, Ra24>,
}

#[derive(Clone, Copy, Debug)]
struct ReadOp {
    file: FileId,
    start: u64,
    pos: u64,
    end: u64,
    ra_page: Option<u64>,
    pending: Option<crate::readahead::Window>,
    missed: bool,
    /// 2.4: `reada_ok` of this call, once computed.
    reada_ok: Option<bool>,
    /// Bytes asked for (`desc->count`, before clipping at end of file).
    count: u64,
    /// 2.4: pages to read ahead, not yet submitted.
    pending24: Option<(u64, u64)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ThrottleStage {
    Check,
    AfterWrite,
}

#[derive(Clone, Copy, Debug)]
struct Throttle {
    pages_written: u64,
    written: u64,
    stage: ThrottleStage,
}

#[derive(Clone, Copy, Debug)]
struct WriteOp {
    file: FileId,
    start: u64,
    pos: u64,
    end: u64,
    inode_done: bool,
    throttle: Option<Throttle>,
    /// 2.4: `balance_dirty` calls still to make, one per page dirtied.
    balance: u64,
    /// The file system filled up: `end` was cut to what fit.
    full: bool,
}

#[derive(Clone, Copy, Debug)]
struct SyncOp {
    target: Option<FileId>,
    pass: u8,
    /// ext3: the transaction to wait for; nilfs2: the construction.
    wait_for: u64,
    /// 2.6.30's ext3 fsync: the last write sequence number of the data it
    /// started before the commit (`filemap_fdatawait` waits for it after).
    data_seq: u64,
}

/// Which requests of an [`Host::issue_at`] run carry the sync hint.
#[derive(Clone, Copy, Debug)]
enum SyncMark {
    /// None: `WRITE`.
    Async,
    /// The last one, with `REQ_NOIDLE` if asked: nilfs2's segment buffer
    /// sets `BIO_RW_SYNCIO` on its last bio (segbuf.c).
    Last { noidle: bool },
    /// Every one, sync and `REQ_NOIDLE`: jbd's synchronous commit
    /// (`WRITE_SYNC_PLUG`, 2.6.30) and its commit block (`WRITE_SYNC`).
    Every,
}

#[derive(Clone, Copy, Debug)]
struct CreateOp {
    parent: FileId,
    dir: bool,
    file: Option<FileId>,
    parent_grew: bool,
}

#[derive(Clone, Copy, Debug)]
enum Sys {
    /// `posix_fadvise(POSIX_FADV_DONTNEED)`: the file's clean pages go.
    DropCache(FileId),
    Open {
        file: FileId,
        fresh: bool,
    },
    Close(FileId),
    Read(ReadOp),
    Fault {
        file: FileId,
        page: u64,
    },
    Write(WriteOp),
    Sync(SyncOp),
    ReadDir {
        dir: FileId,
        next: u64,
    },
    Create(CreateOp),
    Sleep {
        until: Instant,
        armed: bool,
    },
    PipePut {
        pipe: PipeId,
        item: u64,
    },
    PipeGet(PipeId),
    PipeClose(PipeId),
    Barrier {
        id: BarrierId,
        arrived: bool,
    },
    Exit {
        until: Instant,
        armed: bool,
    },
}

enum Step {
    Done {
        ret: Ret,
        cpu: Duration,
        io: Option<bool>,
    },
    Block,
    Exit,
}

/// Result of an attempt that may have to wait.
type Wait<T> = Result<T, Blocked>;
#[derive(Debug)]
struct Blocked;

#[derive(Debug)]
struct Pipe {
    buf: VecDeque<u64>,
    cap: usize,
    closed: bool,
    reader: Option<(Pid, u64)>,
    writer: Option<(Pid, u64)>,
}

#[derive(Debug)]
struct Barrier {
    parties: usize,
    waiting: Vec<(Pid, u64)>,
}

#[derive(Debug, Default)]
struct Flusher {
    background: bool,
    kupdate: bool,
    kupdate_start: Instant,
    kupdate_left: i64,
    waiting: bool,
    wait_congested: bool,
    gen: u64,
}

/// Counters of host activity, reported as extra figures of the flusher's
/// row.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostStats {
    pub read_requests: u64,
    pub write_requests: u64,
    pub pages_read: u64,
    pub pages_written: u64,
    /// Pages written by throttled writers themselves.
    pub pages_written_by_writers: u64,
    /// Times a writer waited in `balance_dirty_pages`.
    pub throttle_waits: u64,
    /// Times a throttled writer left `balance_dirty_pages` with dirty and
    /// writeback memory still over the limit, having written its
    /// `sync_writeback_pages()` (never with
    /// [`HostParams::throttle_until_below_limit`]).
    pub throttle_exits_over_limit: u64,
    pub peak_dirty_pages: u64,
    /// Most pages ever dirty or under writeback at once.
    pub peak_dirty_writeback_pages: u64,
    /// 2.4: pages page reclaim wrote (the allocating process's requests).
    pub reclaim_pages_written: u64,
    /// 2.4: times an allocating process waited for a page under writeback.
    pub reclaim_stalls: u64,
}

/// Controls one `writeback_inodes` call.
#[derive(Clone, Copy, Debug)]
struct WbCtl {
    budget: u64,
    nonblocking: bool,
    older_than: Option<Instant>,
    issuer: Issuer,
    sync: bool,
}

/// The host workload.
#[derive(Debug)]
pub struct Host {
    params: HostParams,
    fs: FileSystem,
    cache: PageCache,
    rows: Vec<Row>,
    procs: Vec<Proc>,
    pdflush: TaskId,
    pdflush_row: usize,
    tags: FxHashMap<RequestId, Tag>,
    timers: FxHashMap<u64, TimerAction>,
    next_token: u64,
    page_waiters: FxHashMap<u64, Vec<(Pid, u64)>>,
    write_waiters: Vec<(Pid, u64, WaitCond)>,
    congestion_waiters: Vec<(Pid, u64)>,
    writes_in_flight: u32,
    congested: bool,
    /// A process started waiting for a page or its writeback in this
    /// call: ask the engine to unplug (see [`Io::unplug`]).
    unplug: bool,
    write_seq: u64,
    outstanding: BTreeSet<u64>,
    /// Each file's writes in flight, by sequence number (a completion removes
    /// one, `fsync` waits for the lowest: both logarithmic, as a streaming
    /// writer keeps thousands in flight under the 2.4 elevator).
    file_writes: FxHashMap<u32, BTreeSet<u64>>,
    /// The group that dirtied each file (cgroup v2 writeback ownership).
    dirtier: FxHashMap<u32, GroupId>,
    wb_cursor: FxHashMap<u32, u64>,
    ratelimit_count: u64,
    dirty_exceeded: bool,
    flusher: Flusher,
    /// 2.4's bdflush and kupdated ([`Writeback::Bdflush`]).
    bd: Bdflushd,
    pipes: Vec<Pipe>,
    barriers: Vec<Barrier>,
    ready: VecDeque<Pid>,
    runs: Vec<(u64, u64)>,
    pieces: Vec<(u64, u64, u64, bool)>,
    fsl: FsLayer,
    pub stats: HostStats,
}

impl Host {
    /// A host with a fresh file system on a device of `capacity` sectors.
    /// Its tasks are numbered from `first_task` (the flusher first).
    pub fn new(params: HostParams, capacity: Sector, seed: u64, first_task: u32) -> Self {
        let mut fs = FileSystem::new(&params.fs, capacity, seed);
        let fsl = match &params.fs.fs_type.layer {
            Layer::Plain => FsLayer::Plain,
            Layer::Journal(o) => {
                let blocks = ext3::default_journal_blocks(fs.geo.blocks).max(1024);
                let runs = fs.reserve_journal(blocks);
                FsLayer::Journal(Box::new(Journal::new(*o, runs)))
            }
            Layer::Log(o) => FsLayer::Log(*o, None),
        };
        let cache = PageCache::new(params.cache_pages());
        let mut pdflush_stats = JobStats::new(match params.writeback {
            Writeback::Pdflush => "pdflush",
            Writeback::Bdflush(_) => "bdflush",
        });
        pdflush_stats.started = Some(Instant::ZERO);
        Host {
            params,
            fs,
            cache,
            rows: vec![Row {
                stats: pdflush_stats,
                measured: false,
                procs: 0,
                exited: 0,
                group: GroupId::ROOT,
            }],
            procs: Vec::new(),
            pdflush: TaskId(first_task),
            pdflush_row: 0,
            tags: FxHashMap::default(),
            timers: FxHashMap::default(),
            next_token: 1,
            page_waiters: FxHashMap::default(),
            write_waiters: Vec::new(),
            congestion_waiters: Vec::new(),
            writes_in_flight: 0,
            congested: false,
            unplug: false,
            write_seq: 0,
            outstanding: BTreeSet::new(),
            file_writes: FxHashMap::default(),
            dirtier: FxHashMap::default(),
            wb_cursor: FxHashMap::default(),
            ratelimit_count: 0,
            dirty_exceeded: false,
            flusher: Flusher::default(),
            bd: Bdflushd::default(),
            pipes: Vec::new(),
            barriers: Vec::new(),
            ready: VecDeque::new(),
            runs: Vec::new(),
            pieces: Vec::new(),
            fsl,
            stats: HostStats::default(),
        }
    }

    /// The ext3 journal, if the host mounted ext3.
    pub fn journal(&self) -> Option<&Journal> {
        match &self.fsl {
            FsLayer::Journal(j) => Some(j),
            _ => None,
        }
    }

    /// The nilfs2 log, once the first log was written.
    pub fn nilfs_log(&self) -> Option<&Log> {
        match &self.fsl {
            FsLayer::Log(_, log) => log.as_deref(),
            _ => None,
        }
    }

    /// The task kjournald or segctord issues its I/O as (after every
    /// process's, so that ext2 hosts number their tasks as before).
    pub fn daemon_task(&self) -> TaskId {
        TaskId(self.pdflush.0 + 1 + self.procs.len() as u32)
    }

    pub fn params(&self) -> &HostParams {
        &self.params
    }

    pub fn fs(&self) -> &FileSystem {
        &self.fs
    }

    /// The file system, to place file sets before the run starts.
    pub fn fs_mut(&mut self) -> &mut FileSystem {
        &mut self.fs
    }

    pub fn cache(&self) -> &PageCache {
        &self.cache
    }

    /// A statistics row (one per reported process, however many threads).
    pub fn add_row(&mut self, name: &str, measured: bool) -> usize {
        self.rows.push(Row {
            stats: JobStats::new(name),
            measured,
            procs: 0,
            exited: 0,
            group: GroupId::ROOT,
        });
        self.rows.len() - 1
    }

    /// Put process `pid` (and its report row) in control group `group`:
    /// its requests carry the group.
    pub fn set_group(&mut self, pid: Pid, group: GroupId) {
        self.procs[pid].group = group;
        let row = self.procs[pid].row;
        self.rows[row].group = group;
    }

    /// The control group of each report row (aligned with `Part::stats`).
    pub fn row_groups(&self) -> Vec<GroupId> {
        self.rows.iter().map(|r| r.group).collect()
    }

    /// Add a process reporting in `row`, starting at `start`.
    pub fn spawn(
        &mut self,
        row: usize,
        program: Box<dyn Program>,
        start: Duration,
        prio: IoPrio,
    ) -> Pid {
        let pid = self.procs.len();
        self.rows[row].procs += 1;
        self.procs.push(Proc {
            task: TaskId(self.pdflush.0 + 1 + pid as u32),
            prio,
            group: GroupId::ROOT,
            row,
            program,
            start,
            sys: None,
            sys_start: Instant::ZERO,
            cpu_debt: Duration::ZERO,
            gen: 0,
            blocked: true,
            exited: false,
            last: SysResult::default(),
            ra: FxHashMap::default(),
            ra24: FxHashMap::default(),
        });
        pid
    }

    /// Processes spawned so far (the next one's `Pid`).
    pub fn process_count(&self) -> usize {
        self.procs.len()
    }

    /// The task a process issues its I/O as.
    pub fn task_of(&self, pid: Pid) -> TaskId {
        self.procs[pid].task
    }

    /// The flusher's task.
    pub fn flusher_task(&self) -> TaskId {
        self.pdflush
    }

    pub fn new_pipe(&mut self, cap: usize) -> PipeId {
        self.pipes.push(Pipe {
            buf: VecDeque::new(),
            cap: cap.max(1),
            closed: false,
            reader: None,
            writer: None,
        });
        self.pipes.len() - 1
    }

    pub fn new_barrier(&mut self, parties: usize) -> BarrierId {
        self.barriers.push(Barrier {
            parties: parties.max(1),
            waiting: Vec::new(),
        });
        self.barriers.len() - 1
    }

    /// Whether every process of `row` has exited.
    pub fn row_done(&self, row: usize) -> bool {
        let r = &self.rows[row];
        r.procs > 0 && r.exited == r.procs
    }

    /// Whether each report row is measured (aligned with `Part::stats`).
    pub fn measured(&self) -> Vec<bool> {
        self.rows.iter().map(|r| r.measured).collect()
    }

    pub fn row_stats(&self, row: usize) -> &JobStats {
        &self.rows[row].stats
    }
}

impl Workload for Host {
    fn start(&mut self, io: &mut Io<'_>) {
        for pid in 0..self.procs.len() {
            let at = Instant::ZERO + self.procs[pid].start;
            self.arm(at, TimerAction::Start(pid), io);
        }
        let interval = self.params.dirty_writeback_interval();
        if interval > Duration::ZERO {
            self.arm(Instant::ZERO + interval, TimerAction::Kupdate, io);
        }
    }

    fn wake(&mut self, token: u64, io: &mut Io<'_>) {
        let Some(action) = self.timers.remove(&token) else {
            return;
        };
        match action {
            TimerAction::Start(pid) => {
                let p = &mut self.procs[pid];
                p.blocked = false;
                let row = &mut self.rows[p.row].stats;
                if row.started.is_none() {
                    row.started = Some(io.now());
                }
                self.ready.push_back(pid);
            }
            TimerAction::Wake(pid, gen) => self.wake(pid, gen),
            TimerAction::FlusherWake(gen) => {
                if self.flusher.waiting && self.flusher.gen == gen {
                    self.flusher_woken(io);
                }
            }
            TimerAction::Kupdate if self.params.writeback != Writeback::Pdflush => {
                self.bd.kupdate = true;
                self.bdflush_run(io);
            }
            TimerAction::Kupdate => {
                self.flusher.kupdate = true;
                self.flusher.kupdate_start = io.now();
                self.flusher.kupdate_left = self.cache.dirty() as i64 + 1;
                self.kick_flusher(io);
            }
            TimerAction::JournalCommit(tid) => {
                if let FsLayer::Journal(j) = &mut self.fsl {
                    j.timer(tid);
                }
                self.kjournald(io);
            }
            TimerAction::SegctorTimer(gen) => {
                if self.nilfs_log().and_then(|l| l.timer) == Some(gen) {
                    self.segctor_construct(true, io);
                }
            }
        }
        self.run_ready(io);
    }

    fn completed(&mut self, done: &Completion, io: &mut Io<'_>) {
        self.on_complete(done, io);
        if !self.params.wake_after_request {
            self.run_ready(io);
        }
    }

    fn request_done(&mut self, io: &mut Io<'_>) {
        self.run_ready(io);
    }

    fn finished(&self) -> bool {
        self.rows
            .iter()
            .enumerate()
            .all(|(i, r)| !r.measured || self.row_done(i))
    }
}

impl Part for Host {
    fn tasks(&self) -> Vec<TaskId> {
        let daemon = (!matches!(self.fsl, FsLayer::Plain)).then(|| self.daemon_task());
        std::iter::once(self.pdflush)
            .chain(self.procs.iter().map(|p| p.task))
            .chain(daemon)
            .collect()
    }

    fn measured(&self) -> bool {
        self.rows.iter().any(|r| r.measured)
    }

    fn stats(&self) -> Vec<JobStats> {
        let mut out: Vec<JobStats> = self.rows.iter().map(|r| r.stats.clone()).collect();
        let s = &self.stats;
        let figures = [
            ("host_read_requests", s.read_requests as f64),
            ("host_write_requests", s.write_requests as f64),
            (
                "host_pages_written_by_writers",
                s.pages_written_by_writers as f64,
            ),
            ("host_throttle_waits", s.throttle_waits as f64),
            (
                "host_peak_dirty_mb",
                (s.peak_dirty_pages * PAGE_SIZE) as f64 / 1e6,
            ),
            ("host_pages_evicted", self.cache.stats.pages_evicted as f64),
            ("host_reclaim_pages_written", s.reclaim_pages_written as f64),
            ("host_reclaim_stalls", s.reclaim_stalls as f64),
            ("host_overcommits", self.cache.stats.overcommits as f64),
        ];
        let mut fs_figures = Vec::new();
        if let Some(j) = self.journal() {
            let s = &j.stats;
            fs_figures = vec![
                ("ext3_commits", s.commits as f64),
                ("ext3_commits_by_timer", s.by_timer as f64),
                ("ext3_commits_by_fsync", s.by_fsync as f64),
                ("ext3_commits_by_size", s.by_size as f64),
                ("ext3_journal_blocks", s.log_blocks as f64),
                ("ext3_shadow_waits", s.shadow_waits as f64),
            ];
        }
        if let Some(l) = self.nilfs_log() {
            let s = &l.stats;
            fs_figures = vec![
                ("nilfs2_logs", s.logs as f64),
                ("nilfs2_checkpoints", s.checkpoints as f64),
                ("nilfs2_log_blocks", s.blocks as f64),
            ];
        }
        let extra = &mut out[self.pdflush_row].extra;
        for (k, v) in figures.into_iter().chain(fs_figures) {
            if v != 0.0 {
                extra.insert(k.to_string(), v);
            }
        }
        out
    }

    fn stats_mut(&mut self) -> Vec<&mut JobStats> {
        self.rows.iter_mut().map(|r| &mut r.stats).collect()
    }
}
