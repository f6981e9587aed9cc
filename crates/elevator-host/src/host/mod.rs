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
//! - **ext3 and nilfs2** ([`crate::fs::registry`]) hook in at four places
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

use crate::bdflush::{self, Bdflushd, DirtyState};
use crate::cache::{PageCache, PageState, CHUNK_PAGES};
use crate::fs::ext3::{self, DataMode, Journal, Phase, Reason};
use crate::fs::nilfs2::{self, Log, Nilfs2Options, Run};
use crate::fs::registry::FsType;
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

/// What the mounted file system adds to ext2's behaviour.
#[derive(Debug)]
enum FsLayer {
    Ext2,
    Ext3(Box<Journal>),
    /// The log is laid out at the first construction, after the file sets
    /// were placed.
    Nilfs2(Nilfs2Options, Option<Box<Log>>),
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
    file_writes: FxHashMap<u32, Vec<u64>>,
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
        let fsl = match &params.fs.fs_type {
            FsType::Ext2 => FsLayer::Ext2,
            FsType::Ext3(o) => {
                let blocks = ext3::default_journal_blocks(fs.geo.blocks).max(1024);
                let runs = fs.reserve_journal(blocks);
                FsLayer::Ext3(Box::new(Journal::new(*o, runs)))
            }
            FsType::Nilfs2(o) => FsLayer::Nilfs2(*o, None),
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
            FsLayer::Ext3(j) => Some(j),
            _ => None,
        }
    }

    /// The nilfs2 log, once the first log was written.
    pub fn nilfs_log(&self) -> Option<&Log> {
        match &self.fsl {
            FsLayer::Nilfs2(_, log) => log.as_deref(),
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

    // ---------------------------------------------------------------
    // Timers, waking, running.

    fn arm(&mut self, at: Instant, action: TimerAction, io: &mut Io<'_>) {
        let token = self.next_token;
        self.next_token += 1;
        self.timers.insert(token, action);
        io.wake_at(at, token);
    }

    fn wake(&mut self, pid: Pid, gen: u64) {
        let p = &mut self.procs[pid];
        if p.blocked && !p.exited && p.gen == gen {
            p.gen += 1;
            p.blocked = false;
            self.ready.push_back(pid);
        }
    }

    fn gen(&self, pid: Pid) -> u64 {
        self.procs[pid].gen
    }

    fn sleep_until(&mut self, pid: Pid, at: Instant, io: &mut Io<'_>) {
        let gen = self.gen(pid);
        self.arm(at, TimerAction::Wake(pid, gen), io);
    }

    fn wait_page(&mut self, pid: Pid, file: FileId, page: u64) {
        // `lock_page` → `sync_page` → `blk_run_backing_dev`: a process
        // that waits for a page unplugs the queue (pre-2.6.39).
        self.unplug = true;
        let key = (u64::from(file.0) << 32) | (page / CHUNK_PAGES);
        let gen = self.gen(pid);
        self.page_waiters.entry(key).or_default().push((pid, gen));
    }

    fn wait_writes(&mut self, pid: Pid, cond: WaitCond) {
        // `wait_on_page_writeback` → `sync_page` unplugs as well.
        self.unplug = true;
        let gen = self.gen(pid);
        self.write_waiters.push((pid, gen, cond));
    }

    fn congestion_wait(&mut self, pid: Pid, io: &mut Io<'_>) {
        let gen = self.gen(pid);
        self.congestion_waiters.push((pid, gen));
        self.arm(io.now() + CONGESTION_WAIT, TimerAction::Wake(pid, gen), io);
        self.stats.throttle_waits += 1;
    }

    fn run_ready(&mut self, io: &mut Io<'_>) {
        while let Some(pid) = self.ready.pop_front() {
            self.run_proc(pid, io);
        }
        if std::mem::take(&mut self.unplug) {
            io.unplug();
        }
    }

    fn run_proc(&mut self, pid: Pid, io: &mut Io<'_>) {
        loop {
            if self.procs[pid].exited || self.procs[pid].blocked {
                return;
            }
            if self.procs[pid].sys.is_none() {
                let debt = self.procs[pid].cpu_debt;
                if debt >= CPU_QUANTUM {
                    self.procs[pid].cpu_debt = Duration::ZERO;
                    self.procs[pid].blocked = true;
                    self.sleep_until(pid, io.now() + debt, io);
                    return;
                }
                let call = {
                    let p = &mut self.procs[pid];
                    let mut cx = Ctx {
                        now: io.now(),
                        fs: &self.fs,
                        params: &self.params,
                        last: p.last,
                        stats: &mut self.rows[p.row].stats,
                    };
                    match p.last.error() {
                        Some(errno) => p.program.failed(errno, &mut cx),
                        None => p.program.next(&mut cx),
                    }
                };
                let sys = self.begin(pid, call, io.now());
                let p = &mut self.procs[pid];
                p.sys = Some(sys);
                p.sys_start = io.now();
            }
            let mut sys = self.procs[pid].sys.take().expect("a call in progress");
            let step = self.advance(pid, &mut sys, io);
            match step {
                Step::Done { ret, cpu, io: kind } => {
                    let now = io.now();
                    let p = &mut self.procs[pid];
                    let latency = now.since(p.sys_start) + cpu;
                    p.cpu_debt += cpu;
                    p.last = SysResult { ret, latency };
                    match (kind, ret) {
                        (Some(read), Ret::Bytes(n)) => {
                            self.rows[p.row].stats.record(now, read, n, latency);
                        }
                        // The report counts each error its process saw.
                        (_, Ret::Err(errno)) => {
                            *self.rows[p.row]
                                .stats
                                .extra
                                .entry(errno.name().to_string())
                                .or_default() += 1.0;
                        }
                        _ => {}
                    }
                }
                Step::Block => {
                    let p = &mut self.procs[pid];
                    p.sys = Some(sys);
                    p.blocked = true;
                    return;
                }
                Step::Exit => {
                    let now = io.now();
                    let p = &mut self.procs[pid];
                    p.exited = true;
                    let task = p.task;
                    let row = &mut self.rows[p.row];
                    row.exited += 1;
                    if row.exited == row.procs {
                        row.stats.finished = Some(now);
                    }
                    io.task_exited(task);
                    return;
                }
            }
        }
    }

    /// Turn a call into its in-progress state.
    fn begin(&mut self, pid: Pid, call: Syscall, now: Instant) -> Sys {
        match call {
            Syscall::Open(file) => Sys::Open { file, fresh: true },
            Syscall::Stat(file) => Sys::Open { file, fresh: false },
            Syscall::Close(file) => Sys::Close(file),
            Syscall::DropCache(file) => Sys::DropCache(file),
            Syscall::Read { file, offset, len } => {
                let end = (offset + len).min(self.fs.size(file));
                Sys::Read(ReadOp {
                    file,
                    start: offset.min(end),
                    pos: offset.min(end),
                    end,
                    ra_page: None,
                    pending: None,
                    missed: false,
                    reada_ok: None,
                    pending24: None,
                    count: len,
                })
            }
            Syscall::Fault { file, offset } => Sys::Fault {
                file,
                page: offset / PAGE_SIZE,
            },
            Syscall::Write { file, offset, len } => {
                // cgroup v2 writeback: the inode belongs to the group that
                // dirties it (the kernel switches an inode to the group
                // doing most of its writing; the last writer stands in).
                self.dirtier.insert(file.0, self.procs[pid].group);
                Sys::Write(WriteOp {
                    file,
                    start: offset,
                    pos: offset,
                    end: offset + len,
                    inode_done: false,
                    throttle: None,
                    balance: 0,
                    full: false,
                })
            }
            Syscall::Fsync(file) => Sys::Sync(SyncOp {
                target: Some(file),
                pass: 0,
                wait_for: 0,
                data_seq: 0,
            }),
            Syscall::Sync => Sys::Sync(SyncOp {
                target: None,
                pass: 0,
                wait_for: 0,
                data_seq: 0,
            }),
            Syscall::ReadDir(dir) => Sys::ReadDir { dir, next: 0 },
            Syscall::Create { parent, dir } => Sys::Create(CreateOp {
                parent,
                dir,
                file: None,
                parent_grew: false,
            }),
            Syscall::Sleep(d) => {
                let p = &mut self.procs[pid];
                let until = now + p.cpu_debt + d;
                p.cpu_debt = Duration::ZERO;
                Sys::Sleep {
                    until,
                    armed: false,
                }
            }
            Syscall::SleepUntil(t) => {
                let p = &mut self.procs[pid];
                let until = t.max(now + p.cpu_debt);
                p.cpu_debt = Duration::ZERO;
                Sys::Sleep {
                    until,
                    armed: false,
                }
            }
            Syscall::PipePut { pipe, item } => Sys::PipePut { pipe, item },
            Syscall::PipeGet(pipe) => Sys::PipeGet(pipe),
            Syscall::PipeClose(pipe) => Sys::PipeClose(pipe),
            Syscall::Barrier(id) => Sys::Barrier { id, arrived: false },
            Syscall::Exit => {
                // Finish the CPU work first, then exit.
                let p = &mut self.procs[pid];
                let until = now + p.cpu_debt;
                p.cpu_debt = Duration::ZERO;
                Sys::Exit {
                    until,
                    armed: false,
                }
            }
        }
    }

    fn advance(&mut self, pid: Pid, sys: &mut Sys, io: &mut Io<'_>) -> Step {
        let syscall = self.params.syscall_cpu;
        let done = |ret: Ret| Step::Done {
            ret,
            cpu: syscall,
            io: None,
        };
        match sys {
            Sys::Open { file, fresh } => {
                let block = self.fs.inode_block(*file);
                if self.ensure_page(pid, FileId::BDEV, block, io).is_err() {
                    return Step::Block;
                }
                if *fresh {
                    self.procs[pid].ra.insert(file.0, RaState::new());
                    self.procs[pid].ra24.insert(file.0, Ra24::new());
                }
                done(Ret::None)
            }
            Sys::DropCache(file) => {
                self.cache.drop_clean(*file);
                done(Ret::None)
            }
            Sys::Close(file) => {
                self.procs[pid].ra.remove(&file.0);
                self.procs[pid].ra24.remove(&file.0);
                self.fs.discard_prealloc(*file);
                done(Ret::None)
            }
            Sys::Read(op) => self.do_read(pid, op, io),
            Sys::Fault { file, page } => {
                let (file, page) = (*file, *page);
                match self.cache.state(file, page) {
                    PageState::Uptodate => {
                        self.cache.touch(file, page);
                        done(Ret::None)
                    }
                    PageState::Locked => {
                        self.wait_page(pid, file, page);
                        Step::Block
                    }
                    PageState::Absent => {
                        let start = page - page % MMAP_READAROUND_PAGES;
                        if self
                            .submit_window(pid, file, start, MMAP_READAROUND_PAGES, io)
                            .is_err()
                        {
                            return Step::Block;
                        }
                        if self.cache.state(file, page) == PageState::Locked {
                            self.wait_page(pid, file, page);
                            return Step::Block;
                        }
                        // Past the end of the file.
                        done(Ret::None)
                    }
                }
            }
            Sys::Write(op) => self.do_write(pid, op, io),
            Sys::Sync(op) => self.do_sync(pid, op, io),
            Sys::ReadDir { dir, next } => {
                let dir = *dir;
                let blocks = self.fs.inode(dir).nblocks();
                while *next < blocks {
                    if self.ensure_page(pid, dir, *next, io).is_err() {
                        return Step::Block;
                    }
                    *next += 1;
                }
                let entries = self.fs.children(dir).len() as u64;
                Step::Done {
                    ret: Ret::None,
                    cpu: syscall + Duration(50 * entries),
                    io: None,
                }
            }
            Sys::Create(op) => self.do_create(pid, op, io),
            Sys::Sleep { until, armed } => {
                if io.now() >= *until {
                    return Step::Done {
                        ret: Ret::None,
                        cpu: Duration::ZERO,
                        io: None,
                    };
                }
                if !*armed {
                    *armed = true;
                    let until = *until;
                    self.sleep_until(pid, until, io);
                }
                Step::Block
            }
            Sys::PipePut { pipe, item } => {
                let p = &mut self.pipes[*pipe];
                if p.buf.len() < p.cap {
                    p.buf.push_back(*item);
                    if let Some((r, g)) = p.reader.take() {
                        self.wake(r, g);
                    }
                    done(Ret::None)
                } else {
                    let gen = self.procs[pid].gen;
                    self.pipes[*pipe].writer = Some((pid, gen));
                    Step::Block
                }
            }
            Sys::PipeGet(pipe) => {
                let p = &mut self.pipes[*pipe];
                if let Some(x) = p.buf.pop_front() {
                    if let Some((w, g)) = p.writer.take() {
                        self.wake(w, g);
                    }
                    done(Ret::Item(Some(x)))
                } else if p.closed {
                    done(Ret::Item(None))
                } else {
                    let gen = self.procs[pid].gen;
                    self.pipes[*pipe].reader = Some((pid, gen));
                    Step::Block
                }
            }
            Sys::PipeClose(pipe) => {
                let p = &mut self.pipes[*pipe];
                p.closed = true;
                if let Some((r, g)) = p.reader.take() {
                    self.wake(r, g);
                }
                done(Ret::None)
            }
            Sys::Barrier { id, arrived } => {
                if *arrived {
                    return done(Ret::None);
                }
                *arrived = true;
                let gen = self.procs[pid].gen;
                let b = &mut self.barriers[*id];
                if b.waiting.len() + 1 >= b.parties {
                    let others = std::mem::take(&mut b.waiting);
                    for (q, g) in others {
                        self.wake(q, g);
                    }
                    done(Ret::None)
                } else {
                    b.waiting.push((pid, gen));
                    Step::Block
                }
            }
            Sys::Exit { until, armed } => {
                if io.now() >= *until {
                    return Step::Exit;
                }
                if !*armed {
                    *armed = true;
                    let until = *until;
                    self.sleep_until(pid, until, io);
                }
                Step::Block
            }
        }
    }

    // ---------------------------------------------------------------
    // Reading.

    /// Make `page` of `file` up to date, reading it (alone) if absent.
    fn ensure_page(&mut self, pid: Pid, file: FileId, page: u64, io: &mut Io<'_>) -> Wait<()> {
        match self.cache.state(file, page) {
            PageState::Uptodate => {
                self.cache.touch(file, page);
                Ok(())
            }
            PageState::Locked => {
                self.wait_page(pid, file, page);
                Err(Blocked)
            }
            PageState::Absent => {
                self.submit_window(pid, file, page, 1, io)?;
                if self.cache.state(file, page) == PageState::Locked {
                    self.wait_page(pid, file, page);
                }
                Err(Blocked)
            }
        }
    }

    /// Pages of `file` (its size rounded up).
    fn pages_of(&self, file: FileId) -> u64 {
        self.fs.size(file).div_ceil(PAGE_SIZE)
    }

    /// Read the absent pages of `[start, start + len)` (clipped to the
    /// file): `__do_page_cache_readahead`. Reading the indirect blocks that
    /// map them comes first and may block. Returns the pages read.
    fn submit_window(
        &mut self,
        pid: Pid,
        file: FileId,
        start: u64,
        len: u64,
        io: &mut Io<'_>,
    ) -> Wait<u64> {
        let end = (start + len).min(self.pages_of(file));
        if start >= end {
            return Ok(0);
        }
        let mut runs = std::mem::take(&mut self.runs);
        self.cache.absent_runs(file, start, end, &mut runs);
        if runs.is_empty() {
            self.runs = runs;
            return Ok(0);
        }
        // The indirect blocks mapping the first and last page of each run
        // (a run is at most a window, so it spans at most two).
        if file != FileId::BDEV {
            for &(s, n) in &runs {
                for b in [s, s + n - 1] {
                    for meta in self.fs.meta_path(file, b).into_iter().flatten() {
                        if let Err(e) = self.ensure_page(pid, FileId::BDEV, meta, io) {
                            self.runs = runs;
                            return Err(e);
                        }
                    }
                }
            }
        }
        let need = runs.iter().map(|&(_, n)| n).sum();
        if let Err(e) = self.reclaim24(pid, need, io) {
            self.runs = runs;
            return Err(e);
        }
        let mut total = 0;
        for &(s, n) in &runs {
            total += self.cache.insert_locked(file, s, s + n);
            self.issue(Issuer::Proc(pid), file, s, n, false, true, file, io);
        }
        self.runs = runs;
        Ok(total)
    }

    fn do_read(&mut self, pid: Pid, op: &mut ReadOp, io: &mut Io<'_>) -> Step {
        if self.params.readahead == Readahead::Linux24 {
            return self.do_read24(pid, op, io);
        }
        let max = self.params.readahead_max_pages();
        let min = self.params.readahead_min_pages();
        let file = op.file;
        while op.pos < op.end {
            let page = op.pos / PAGE_SIZE;
            if op.ra_page != Some(page) {
                op.ra_page = Some(page);
                op.missed = false;
                let ra = self.procs[pid].ra.entry(file.0).or_default();
                op.pending = ra.on_read(page, max, min);
            }
            if let Some(w) = op.pending {
                match self.submit_window(pid, file, w.start, w.len, io) {
                    Ok(actual) => {
                        op.pending = None;
                        if let Some(ra) = self.procs[pid].ra.get_mut(&file.0) {
                            ra.submitted(&w, actual);
                        }
                    }
                    Err(Blocked) => return Step::Block,
                }
            }
            match self.cache.state(file, page) {
                PageState::Uptodate => {
                    self.cache.touch(file, page);
                    op.pos = ((page + 1) * PAGE_SIZE).min(op.end);
                }
                PageState::Locked => {
                    self.wait_page(pid, file, page);
                    return Step::Block;
                }
                PageState::Absent => {
                    if !op.missed {
                        op.missed = true;
                        if let Some(ra) = self.procs[pid].ra.get_mut(&file.0) {
                            ra.on_miss(page, max, min);
                        }
                    }
                    let _ = self.ensure_page(pid, file, page, io);
                    return Step::Block;
                }
            }
        }
        let n = op.end - op.start;
        Step::Done {
            ret: Ret::Bytes(n),
            cpu: self.params.copy_cost(n),
            io: Some(true),
        }
    }

    /// `do_generic_file_read` of 2.4 (mm/filemap.c, 2.4.20): per call,
    /// the read-ahead context is checked and `f_ramax` sized; per page, an
    /// up-to-date page calls `generic_file_readahead` (which may start an
    /// asynchronous read-ahead) and is copied; a page being read calls it
    /// as locked and waits; a missing page is read alone (`readpage`),
    /// then read-ahead runs as for a locked page, then the reader waits.
    /// After a wait the page is copied without another read-ahead call.
    fn do_read24(&mut self, pid: Pid, op: &mut ReadOp, io: &mut Io<'_>) -> Step {
        let max = self.params.readahead_max_pages();
        let min = self.params.readahead_min_pages();
        let file = op.file;
        let end_index = self.fs.size(file) / PAGE_SIZE;
        let reada_ok = *op.reada_ok.get_or_insert_with(|| {
            let ra = self.procs[pid].ra24.entry(file.0).or_default();
            ra.begin_read(op.start, op.count, max, min)
        });
        loop {
            if let Some((start, len)) = op.pending24 {
                if self.submit_window(pid, file, start, len, io).is_err() {
                    return Step::Block;
                }
                op.pending24 = None;
            }
            if op.pos >= op.end {
                break;
            }
            let page = op.pos / PAGE_SIZE;
            let state = self.cache.state(file, page);
            let first_look = op.ra_page != Some(page);
            match state {
                PageState::Uptodate => {
                    if first_look {
                        op.ra_page = Some(page);
                        let ra = self.procs[pid].ra24.entry(file.0).or_default();
                        if let Some(a) = ra.readahead(reada_ok, page, false, end_index, max) {
                            op.pending24 = (a.len > 0).then_some((a.start, a.len));
                            continue;
                        }
                    }
                    self.cache.touch(file, page);
                    op.pos = ((page + 1) * PAGE_SIZE).min(op.end);
                }
                PageState::Locked => {
                    if first_look {
                        op.ra_page = Some(page);
                        let ra = self.procs[pid].ra24.entry(file.0).or_default();
                        if let Some(a) = ra.readahead(reada_ok, page, true, end_index, max) {
                            op.pending24 = (a.len > 0).then_some((a.start, a.len));
                            continue;
                        }
                    }
                    self.wait_page(pid, file, page);
                    return Step::Block;
                }
                PageState::Absent => {
                    // readpage: this page on its own (its indirect blocks
                    // first); then read-ahead sees it locked.
                    if self.submit_window(pid, file, page, 1, io).is_err() {
                        return Step::Block;
                    }
                    op.ra_page = Some(page);
                    let ra = self.procs[pid].ra24.entry(file.0).or_default();
                    if let Some(a) = ra.readahead(reada_ok, page, true, end_index, max) {
                        op.pending24 = (a.len > 0).then_some((a.start, a.len));
                    }
                }
            }
        }
        let n = op.end - op.start;
        Step::Done {
            ret: Ret::Bytes(n),
            cpu: self.params.copy_cost(n),
            io: Some(true),
        }
    }

    // ---------------------------------------------------------------
    // Writing.

    fn do_write(&mut self, pid: Pid, op: &mut WriteOp, io: &mut Io<'_>) -> Step {
        let file = op.file;
        if !op.inode_done {
            let ib = self.fs.inode_block(file);
            if self.ensure_page(pid, FileId::BDEV, ib, io).is_err() {
                return Step::Block;
            }
            op.inode_done = true;
        }
        loop {
            if let Some(mut th) = op.throttle {
                let r = self.balance_dirty_pages(pid, &mut th, io);
                op.throttle = Some(th);
                if r.is_err() {
                    return Step::Block;
                }
                op.throttle = None;
            }
            if op.balance > 0 && self.balance_dirty(pid, &mut op.balance, io).is_err() {
                return Step::Block;
            }
            if op.pos >= op.end {
                break;
            }
            if let Some(n) = self.segctor_lock_held() {
                self.wait_writes(pid, WaitCond::Logged(n));
                return Step::Block;
            }
            let page = op.pos / PAGE_SIZE;
            let chunk_end = (page / CHUNK_PAGES + 1) * CHUNK_PAGES * PAGE_SIZE;
            let mut stop = op.end.min(chunk_end);
            let mut last = (stop - 1) / PAGE_SIZE;
            let old_size = self.fs.size(file);
            let old_blocks = self.fs.inode(file).nblocks();
            // Mapping already-allocated blocks needs their indirect blocks.
            if page < old_blocks {
                for b in [page, last.min(old_blocks - 1)] {
                    for meta in self.fs.meta_path(file, b).into_iter().flatten() {
                        if self.ensure_page(pid, FileId::BDEV, meta, io).is_err() {
                            return Step::Block;
                        }
                    }
                }
            }
            // A page being read must finish first; a partly overwritten page
            // of old data is read first.
            for p in page..=last {
                if self.cache.state(file, p) == PageState::Locked {
                    self.wait_page(pid, file, p);
                    return Step::Block;
                }
            }
            // 2.4: the pages to allocate may cost reclaim I/O first (the
            // count is only needed there).
            if self.params.writeback != Writeback::Pdflush {
                let absent = (page..=last)
                    .filter(|&p| self.cache.state(file, p) == PageState::Absent)
                    .count() as u64;
                if self.reclaim24(pid, absent, io).is_err() {
                    return Step::Block;
                }
            }
            for (p, partial) in [
                (page, !op.pos.is_multiple_of(PAGE_SIZE)),
                (last, !stop.is_multiple_of(PAGE_SIZE)),
            ] {
                if partial
                    && p * PAGE_SIZE < old_size
                    && self.ensure_page(pid, file, p, io).is_err()
                {
                    return Step::Block;
                }
            }
            let now = io.now();
            if stop > old_size {
                let colour = self.procs[pid].task.0;
                let (new_meta, full) = match self.fs.extend_to(file, stop, colour) {
                    Ok(meta) => (meta, false),
                    Err(NoSpace { meta }) => (meta, true),
                };
                for m in new_meta {
                    self.dirty_meta(m, Some(file), now, io);
                }
                let ib = self.fs.inode_block(file);
                self.dirty_meta(ib, Some(file), now, io);
                if full {
                    // Data goes only where blocks were had: the write ends
                    // there, short, or fails with ENOSPC if nothing fit.
                    let room = self.fs.inode(file).nblocks() * self.fs.geo.block_size;
                    op.end = room.clamp(op.pos, op.end);
                    op.full = true;
                    stop = op.end;
                    if stop <= op.pos {
                        break;
                    }
                    last = (stop - 1) / PAGE_SIZE;
                }
            }
            let n = self.cache.dirty_range(file, page, last + 1, now);
            self.data_dirtied(file, n, now, io);
            self.stats.peak_dirty_pages = self.stats.peak_dirty_pages.max(self.cache.dirty());
            self.stats.peak_dirty_writeback_pages = self
                .stats
                .peak_dirty_writeback_pages
                .max(self.cache.dirty() + self.cache.writeback());
            op.pos = stop;
            if let Writeback::Bdflush(_) = self.params.writeback {
                // `__block_commit_write` calls `balance_dirty` once per
                // page that got a newly dirty buffer.
                op.balance = n;
                continue;
            }
            self.ratelimit_count += n;
            let limit = if self.dirty_exceeded {
                RATELIMIT_EXCEEDED_PAGES
            } else {
                self.params.ratelimit_pages()
            };
            if self.ratelimit_count >= limit {
                self.ratelimit_count = 0;
                op.throttle = Some(Throttle {
                    pages_written: 0,
                    written: 0,
                    stage: ThrottleStage::Check,
                });
            }
        }
        let n = op.end - op.start;
        if op.full && n == 0 {
            return Step::Done {
                ret: Ret::Err(Errno::NoSpace),
                cpu: self.params.syscall_cpu,
                io: None,
            };
        }
        Step::Done {
            ret: Ret::Bytes(n),
            cpu: self.params.copy_cost(n),
            io: Some(false),
        }
    }

    /// `balance_dirty_pages`, resumable.
    fn balance_dirty_pages(&mut self, pid: Pid, th: &mut Throttle, io: &mut Io<'_>) -> Wait<()> {
        let (background, thresh) = self.params.dirty_limits();
        let chunk = self.params.sync_writeback_pages();
        loop {
            let over = self.cache.dirty() + self.cache.writeback() > thresh;
            match th.stage {
                ThrottleStage::Check => {
                    if !over {
                        break;
                    }
                    self.dirty_exceeded = true;
                    if self.params.io_less_throttling {
                        // 3.2+: the writer only waits; the flusher writes.
                        if !self.flusher.background && !self.flusher.kupdate {
                            self.flusher.background = true;
                            self.kick_flusher(io);
                        }
                        self.stats.throttle_waits += 1;
                        self.congestion_wait(pid, io);
                        return Err(Blocked);
                    }
                    if self.cache.dirty() > 0 {
                        let ctl = WbCtl {
                            budget: chunk,
                            nonblocking: false,
                            older_than: None,
                            issuer: Issuer::Proc(pid),
                            sync: false,
                        };
                        let (written, _) = self.writeback_inodes(ctl, io);
                        self.stats.pages_written_by_writers += written;
                        th.written = written;
                        th.stage = ThrottleStage::AfterWrite;
                        if self.writes_in_flight > self.params.nr_requests {
                            // get_request_wait: no free request for the last ones.
                            self.wait_writes(pid, WaitCond::SlotsBelow(self.params.nr_requests));
                            self.stats.throttle_waits += 1;
                            return Err(Blocked);
                        }
                        continue;
                    }
                    self.congestion_wait(pid, io);
                    return Err(Blocked);
                }
                ThrottleStage::AfterWrite => {
                    if !over {
                        break;
                    }
                    th.pages_written += th.written;
                    th.written = 0;
                    if th.pages_written >= chunk && !self.params.throttle_until_below_limit {
                        // 2.5.65+: "We've done our duty".
                        self.stats.throttle_exits_over_limit += 1;
                        break;
                    }
                    th.stage = ThrottleStage::Check;
                    self.congestion_wait(pid, io);
                    return Err(Blocked);
                }
            }
        }
        if self.cache.dirty() + self.cache.writeback() <= thresh {
            self.dirty_exceeded = false;
        }
        if !self.flusher.background && !self.flusher.kupdate && self.cache.dirty() > background {
            self.flusher.background = true;
            self.kick_flusher(io);
        }
        Ok(())
    }

    // ---------------------------------------------------------------
    // 2.4's writeback (crate::bdflush): bdflush, kupdated, balance_dirty,
    // reclaim that writes.

    /// Whether the host's write requests fill the queue's write list: a
    /// 2.4 submitter sleeps in `__get_request_wait`.
    fn write_slots_full(&self) -> bool {
        self.writes_in_flight >= self.params.nr_requests
    }

    /// Whether bdflush or kupdated must sleep for a request: the list is
    /// full, or a process sleeps for one already (`__get_request_wait`
    /// queues sleepers first come, first served).
    fn daemon_must_wait(&self) -> bool {
        self.write_slots_full()
            || self
                .write_waiters
                .iter()
                .any(|&(_, _, c)| matches!(c, WaitCond::SlotsBelow(_)))
    }

    /// `write_some_buffers`: start writeback of up to `NRSYNC` dirty pages
    /// from the head of the dirty list, skipping pages already under I/O,
    /// as requests of `issuer`. Returns the pages submitted.
    fn write_some_buffers(&mut self, issuer: Issuer, io: &mut Io<'_>) -> u64 {
        let mut written = 0;
        let mut after = None;
        while written < NRSYNC {
            let Some((pos, file, base)) = self.cache.next_dirty_chunk(after) else {
                break;
            };
            after = Some(pos);
            let mut from = base;
            while written < NRSYNC {
                let Some((s, n)) =
                    self.cache
                        .start_writeback(file, from, base + CHUNK_PAGES, NRSYNC - written)
                else {
                    break;
                };
                self.issue(issuer, file, s, n, true, false, file, io);
                written += n;
                from = s + n;
            }
        }
        written
    }

    /// `balance_dirty`, resumable: `calls` is what is left of one call per
    /// page the writer dirtied. Above `nfract_sync` each call writes
    /// `NRSYNC` buffers itself, and sleeps while its requests wait for a
    /// free one.
    fn balance_dirty(&mut self, pid: Pid, calls: &mut u64, io: &mut Io<'_>) -> Wait<()> {
        let Writeback::Bdflush(p) = self.params.writeback else {
            *calls = 0;
            return Ok(());
        };
        let tot = self.params.buffer_pages();
        while *calls > 0 {
            match bdflush::balance_dirty_state(&p, self.cache.dirty(), tot) {
                // Dirty pages only fall during these calls: the rest would
                // find the same.
                DirtyState::Balanced => *calls = 0,
                DirtyState::Async => {
                    self.wakeup_bdflush(io);
                    *calls = 0;
                }
                DirtyState::Sync => {
                    self.wakeup_bdflush(io);
                    let n = self.write_some_buffers(Issuer::Proc(pid), io);
                    self.stats.pages_written_by_writers += n;
                    *calls = if n == 0 { 0 } else { *calls - 1 };
                    if self.writes_in_flight > self.params.nr_requests {
                        // Its buffers wait for requests in the block layer,
                        // and so does it.
                        let free = self.params.nr_requests.saturating_sub(1);
                        self.wait_writes(pid, WaitCond::SlotsBelow(free));
                        self.stats.throttle_waits += 1;
                        return Err(Blocked);
                    }
                }
            }
        }
        Ok(())
    }

    /// `wakeup_bdflush`: a sleeping bdflush starts a cycle.
    fn wakeup_bdflush(&mut self, io: &mut Io<'_>) {
        if let Writeback::Bdflush(p) = self.params.writeback {
            if !self.bd.awake {
                self.bd.awake = true;
                self.bd.ndirty = p.ndirty as i64;
                self.bdflush_run(io);
            }
        }
    }

    /// kupdated's `sync_old_buffers`, then bdflush's cycles, as far as free
    /// requests let them (both sleep for one in `__get_request_wait` and go
    /// on from a write completion).
    fn bdflush_run(&mut self, io: &mut Io<'_>) {
        let Writeback::Bdflush(p) = self.params.writeback else {
            return;
        };
        let age = self.params.dirty_expire();
        while self.bd.kupdate {
            let expired = self
                .cache
                .next_dirty_chunk(None)
                .is_some_and(|((dirtied, _), _, _)| dirtied + age <= io.now());
            if !expired {
                self.finish_kupdated(io);
                break;
            }
            if self.daemon_must_wait() {
                return;
            }
            if self.write_some_buffers(Issuer::Flusher, io) < NRSYNC {
                self.finish_kupdated(io);
            }
        }
        let tot = self.params.buffer_pages();
        while self.bd.awake {
            if self.bd.ndirty <= 0 {
                if bdflush::bdflush_stop(&p, self.cache.dirty(), tot) {
                    self.bd.awake = false;
                    break;
                }
                self.bd.ndirty = p.ndirty as i64;
            }
            if self.daemon_must_wait() {
                return;
            }
            if self.write_some_buffers(Issuer::Flusher, io) < NRSYNC {
                // The list ran dry before the cycle ended: sleep.
                self.bd.awake = false;
                break;
            }
            self.bd.ndirty -= NRSYNC as i64;
        }
    }

    /// kupdated sleeps `interval` after a pass.
    fn finish_kupdated(&mut self, io: &mut Io<'_>) {
        self.bd.kupdate = false;
        let interval = self.params.dirty_writeback_interval();
        if interval > Duration::ZERO {
            self.arm(io.now() + interval, TimerAction::Kupdate, io);
        }
    }

    /// 2.4's page reclaim before `need` pages are allocated
    /// (`__alloc_pages` → `try_to_free_pages` → `shrink_cache`): the
    /// allocating process writes the dirty pages it meets in the first
    /// pass's share of the LRU tail (`sync_page_buffers`, `writepage`)
    /// and, when the clean pages it met there do not cover the
    /// allocation, waits for the page under writeback nearest the tail
    /// and scans again. The pdflush host never writes
    /// from reclaim: it returns at once.
    fn reclaim24(&mut self, pid: Pid, need: u64, io: &mut Io<'_>) -> Wait<()> {
        if self.params.writeback == Writeback::Pdflush
            || self.cache.present() + need <= self.cache.capacity()
        {
            return Ok(());
        }
        // The first pass of `try_to_free_pages` scans 1/DEF_PRIORITY of
        // the inactive list (`max_scan = nr_inactive_pages / priority`).
        let max_scan = self.cache.present() / DEF_PRIORITY;
        let scan = self.cache.tail_scan(need, max_scan);
        for &(file, base) in &scan.busy {
            let mut from = base;
            while let Some((s, n)) =
                self.cache
                    .start_writeback(file, from, base + CHUNK_PAGES, CHUNK_PAGES)
            {
                self.issue(Issuer::Proc(pid), file, s, n, true, false, file, io);
                self.stats.reclaim_pages_written += n;
                from = s + n;
            }
        }
        // `try_to_free_buffers` on a busy page wakes bdflush when dirty
        // buffers are past `nfract`.
        if let Writeback::Bdflush(p) = self.params.writeback {
            let tot = self.params.buffer_pages();
            if !scan.busy.is_empty()
                && bdflush::balance_dirty_state(&p, self.cache.dirty(), tot) != DirtyState::Balanced
            {
                self.wakeup_bdflush(io);
            }
        }
        if scan.enough {
            return Ok(());
        }
        // Too few clean pages: wait for the write of the page under
        // writeback nearest the tail (its own, or bdflush's).
        let oldest = scan.busy.iter().find_map(|&(file, base)| {
            self.tags
                .values()
                .filter(|t| {
                    t.write
                        && t.file == file
                        && t.page < base + CHUNK_PAGES
                        && t.page + t.pages > base
                })
                .map(|t| (t.owner, t.seq))
                .min_by_key(|&(_, seq)| seq)
        });
        match oldest {
            Some((file, seq)) => {
                self.wait_writes(pid, WaitCond::FileWrites { file, seq });
                self.stats.reclaim_stalls += 1;
                Err(Blocked)
            }
            // Nothing under writeback to wait for: the cache grows
            // (`make_room` counts an overcommit).
            None => Ok(()),
        }
    }

    /// `writeback_inodes`: dirty files oldest first (file data before the
    /// block device's metadata, as the kernel walks the ext2 superblock
    /// before the block device's), each from where its last writeback
    /// stopped. Returns pages written and whether it stopped at congestion.
    fn writeback_inodes(&mut self, ctl: WbCtl, io: &mut Io<'_>) -> (u64, bool) {
        if matches!(self.fsl, FsLayer::Nilfs2(..)) {
            // nilfs_writepages ignores WB_SYNC_NONE; segctord writes.
            return (0, false);
        }
        let mut written = 0;
        for metadata in [false, true] {
            let mut after = None;
            while let Some((since, file)) = self.cache.next_dirty_file(after) {
                after = Some((since, file.0));
                if (file == FileId::BDEV) != metadata {
                    continue;
                }
                if ctl.older_than.is_some_and(|t| since > t) {
                    break;
                }
                let (n, congested) = self.write_file(file, ctl, ctl.budget - written, file, io);
                written += n;
                if congested {
                    return (written, true);
                }
                if written >= ctl.budget {
                    return (written, false);
                }
            }
        }
        (written, false)
    }

    /// Whether writeback should back off the queue: the engine's async
    /// congestion bit where it models one (the 2.6.32 preset:
    /// `bdi_write_congested`, v2.6.32 include/linux/backing-dev.h, tested
    /// by `writeback_inodes_wb` for non-blocking writeback), else the
    /// host's own count of its write requests in flight against the
    /// thresholds.
    fn is_congested(&self, io: &Io<'_>) -> bool {
        io.write_congested()
            .unwrap_or(self.writes_in_flight >= self.params.congestion_on())
    }

    /// Write up to `budget` dirty pages of `file`, cyclically from its
    /// cursor (`writeback_index`).
    fn write_file(
        &mut self,
        file: FileId,
        ctl: WbCtl,
        budget: u64,
        owner: FileId,
        io: &mut Io<'_>,
    ) -> (u64, bool) {
        let max_req = u64::from(self.params.max_sectors) * 512 / PAGE_SIZE;
        let cursor = self.wb_cursor.get(&file.0).copied().unwrap_or(0);
        let mut written = 0;
        let mut congested = false;
        'ranges: for (lo, hi) in [(cursor, u64::MAX), (0, cursor)] {
            let mut from = lo;
            while written < budget {
                if ctl.nonblocking && self.is_congested(io) {
                    congested = true;
                    break 'ranges;
                }
                let Some((s, n)) = self.cache.start_writeback(
                    file,
                    from,
                    hi,
                    (budget - written).min(max_req.max(1)),
                ) else {
                    break;
                };
                self.issue(ctl.issuer, file, s, n, true, ctl.sync, owner, io);
                written += n;
                from = s + n;
                self.wb_cursor.insert(file.0, from);
            }
            if written >= budget {
                break;
            }
        }
        (written, congested)
    }

    /// Submit the disk requests for pages `[page, page + pages)` of `file`:
    /// one per disk-contiguous piece, at most `max_sectors` each.
    #[allow(clippy::too_many_arguments)]
    fn issue(
        &mut self,
        issuer: Issuer,
        file: FileId,
        page: u64,
        pages: u64,
        write: bool,
        sync: bool,
        owner: FileId,
        io: &mut Io<'_>,
    ) {
        let (task, prio, group) = match issuer {
            Issuer::Proc(pid) => {
                let p = &self.procs[pid];
                (p.task, p.prio, p.group)
            }
            Issuer::Flusher => {
                let group = match self.params.writeback_charge {
                    WritebackCharge::Dirtier => {
                        self.dirtier.get(&owner.0).copied().unwrap_or(GroupId::ROOT)
                    }
                    WritebackCharge::Flusher => GroupId::ROOT,
                };
                (self.pdflush, IoPrio::default(), group)
            }
            Issuer::Daemon => (self.daemon_task(), IoPrio::default(), GroupId::ROOT),
        };
        let read_meta = !write && matches!(self.fsl, FsLayer::Ext3(_));
        let max_pages = (u64::from(self.params.max_sectors) * 512 / PAGE_SIZE).max(1);
        let spb = self.fs.geo.sectors_per_block();
        let mut pieces = std::mem::take(&mut self.pieces);
        pieces.clear();
        self.fs.for_runs(file, page, pages, |fb, db, n| {
            let mut off = 0;
            while off < n {
                let k = (n - off).min(max_pages);
                pieces.push((fb + off, db + off, k, true));
                off += k;
            }
        });
        // 2.4: one request per block (`submit_bh`), merged below. The
        // blocks of a piece count as one request for the host's estimate
        // of the queue's write slots (they merge into one).
        if self.params.submit_buffers {
            let per_piece = std::mem::take(&mut pieces);
            for (fb, db, n, _) in per_piece {
                pieces.extend((0..n).map(|k| (fb + k, db + k, 1, k == 0)));
            }
        }
        for &(fb, db, n, first) in &pieces {
            let id = io.submit(BlockIo {
                op: if write { Op::Write } else { Op::Read },
                sync: !write || sync,
                sector: self.fs.geo.sector_of(db),
                sectors: (n * spb) as u32,
                task,
                prio,
                group,
                // READ_META on inode-table and directory reads where the
                // preset's kernel had it (2.6.32), and always on ext3,
                // which sets it itself (`__ext3_get_inode_loc`,
                // `ext3_bread`); never on indirect blocks or bitmaps.
                meta: (read_meta || (!write && self.params.read_meta))
                    && (self.fs.is_dir(file)
                        || (file == FileId::BDEV && self.fs.geo.is_inode_table(db))),
                // Sync writes here are fsync's and sync's (WB_SYNC_ALL):
                // WRITE_SYNC_PLUG from 2.6.30, sync + REQ_NOIDLE (commits
                // a64c861, aeb6faf). Writeback is async and never NOIDLE.
                noidle: write && sync,
            });
            let mut seq = 0;
            if write {
                self.write_seq += 1;
                seq = self.write_seq;
                self.outstanding.insert(seq);
                self.file_writes.entry(owner.0).or_default().push(seq);
                if first {
                    self.writes_in_flight += 1;
                    if self.is_congested(io) {
                        self.congested = true;
                    }
                    self.stats.write_requests += 1;
                }
                self.stats.pages_written += n;
            } else {
                if first {
                    self.stats.read_requests += 1;
                }
                self.stats.pages_read += n;
            }
            self.tags.insert(
                id,
                Tag {
                    file,
                    page: fb,
                    pages: n,
                    write,
                    seq,
                    owner,
                    issuer,
                    slot: first,
                },
            );
        }
        self.pieces = pieces;
    }

    /// fsync and sync, resumable: issue, wait, issue what was under
    /// writeback the first time, wait.
    fn do_sync(&mut self, pid: Pid, op: &mut SyncOp, io: &mut Io<'_>) -> Step {
        // data=journal and nilfs2 write no data home here: the commit or
        // the log carries it.
        let skip_data = match &self.fsl {
            FsLayer::Ext2 => false,
            FsLayer::Ext3(j) => j.options.data == DataMode::Journal,
            FsLayer::Nilfs2(..) => true,
        };
        // 2.6.30's ext3 fsync: start the data, commit, then wait for the
        // data (vfs_fsync; `Ext3Fsync::ForceCommit`).
        let force_commit = op.target.is_some()
            && self.params.ext3_fsync == Ext3Fsync::ForceCommit
            && matches!(self.fsl, FsLayer::Ext3(_));
        loop {
            match op.pass {
                0..=3 if skip_data => op.pass = 4,
                1..=3 if force_commit => op.pass = 4,
                0 | 2 => {
                    let ctl = WbCtl {
                        budget: u64::MAX,
                        nonblocking: false,
                        older_than: None,
                        issuer: Issuer::Proc(pid),
                        sync: self.params.sync_write_hint.marks(op.target.is_some()),
                    };
                    match op.target {
                        Some(f) => {
                            self.write_file(f, ctl, u64::MAX, f, io);
                            op.data_seq = self.write_seq;
                            if !matches!(self.fsl, FsLayer::Ext2) {
                                // ext3: the commit carries the metadata.
                                op.pass += 1;
                                continue;
                            }
                            // Its indirect blocks and inode, if dirty.
                            let mut meta = self.fs.inode(f).meta.clone();
                            meta.push(self.fs.inode_block(f));
                            for b in meta {
                                if self.cache.is_dirty(FileId::BDEV, b) {
                                    if let Some((s, n)) =
                                        self.cache.start_writeback(FileId::BDEV, b, b + 1, 1)
                                    {
                                        self.issue(
                                            Issuer::Proc(pid),
                                            FileId::BDEV,
                                            s,
                                            n,
                                            true,
                                            ctl.sync,
                                            f,
                                            io,
                                        );
                                    }
                                }
                            }
                        }
                        None => {
                            self.writeback_inodes(ctl, io);
                        }
                    }
                    op.pass += 1;
                }
                1 | 3 => {
                    let seq = self.write_seq;
                    let cond = match op.target {
                        Some(file) => WaitCond::FileWrites { file, seq },
                        None => WaitCond::AllWrites { seq },
                    };
                    if !self.satisfied(cond) {
                        self.wait_writes(pid, cond);
                        // Re-check this pass when woken.
                        return Step::Block;
                    }
                    op.pass += 1;
                }
                4 => {
                    op.pass = 5;
                    match &mut self.fsl {
                        FsLayer::Ext2 => op.pass = 6,
                        FsLayer::Ext3(j) if force_commit => {
                            // 2.6.30: sync_inode → ext3_write_inode →
                            // ext3_force_commit if the inode is dirty
                            // (data=journal: ext3_force_commit always).
                            let f = op.target.expect("fsync has a file");
                            let always = j.options.data == DataMode::Journal;
                            let (tid, timer) = j.force_commit(f, always, io.now());
                            match tid {
                                Some(tid) => {
                                    op.wait_for = tid;
                                    if let Some(at) = timer {
                                        self.arm(at, TimerAction::JournalCommit(tid), io);
                                    }
                                    self.kjournald(io);
                                }
                                None => op.pass = 6,
                            }
                        }
                        FsLayer::Ext3(j) => {
                            // ext3_sync_file: commit the inode's
                            // transaction and wait (sync(2): the running
                            // one).
                            let tid = match op.target {
                                Some(f) => j.sync_tid(f),
                                None if j.running.started.is_some() => j.running.tid,
                                None => j.committed,
                            };
                            op.wait_for = tid;
                            if tid > j.committed {
                                j.request(tid, Reason::Fsync);
                                self.kjournald(io);
                            }
                        }
                        FsLayer::Nilfs2(..) => {
                            op.wait_for = self.segctor_construct(true, io);
                        }
                    }
                }
                5 => {
                    let cond = match self.fsl {
                        FsLayer::Nilfs2(..) => WaitCond::Logged(op.wait_for),
                        _ => WaitCond::Committed(op.wait_for),
                    };
                    if !self.satisfied(cond) {
                        self.wait_writes(pid, cond);
                        return Step::Block;
                    }
                    op.pass = 6;
                }
                6 if force_commit => {
                    // filemap_fdatawait after ->fsync (2.6.30 vfs_fsync).
                    let file = op.target.expect("fsync has a file");
                    let cond = WaitCond::FileWrites {
                        file,
                        seq: op.data_seq,
                    };
                    if !self.satisfied(cond) {
                        self.wait_writes(pid, cond);
                        return Step::Block;
                    }
                    op.pass = 7;
                }
                _ => {
                    return Step::Done {
                        ret: Ret::None,
                        cpu: self.params.syscall_cpu,
                        io: None,
                    }
                }
            }
        }
    }

    fn satisfied(&self, cond: WaitCond) -> bool {
        match cond {
            WaitCond::SlotsBelow(n) => self.writes_in_flight <= n,
            WaitCond::FileWrites { file, seq } => self
                .file_writes
                .get(&file.0)
                .is_none_or(|v| v.iter().all(|&s| s > seq)),
            WaitCond::AllWrites { seq } => self.outstanding.first().is_none_or(|&s| s > seq),
            WaitCond::Committed(tid) => match &self.fsl {
                FsLayer::Ext3(j) => j.committed >= tid,
                _ => true,
            },
            WaitCond::Logged(n) => self.nilfs_log().is_none_or(|l| l.done >= n),
        }
    }

    // ---------------------------------------------------------------
    // Creating files.

    fn do_create(&mut self, pid: Pid, op: &mut CreateOp, io: &mut Io<'_>) -> Step {
        let f = match op.file {
            Some(f) => f,
            None => {
                let before = self.fs.inode(op.parent).nblocks();
                let kind = if op.dir { Kind::Dir } else { Kind::File };
                let colour = self.procs[pid].task.0;
                let Ok(f) = self.fs.create(op.parent, kind, colour) else {
                    return Step::Done {
                        ret: Ret::Err(Errno::NoSpace),
                        cpu: self.params.syscall_cpu,
                        io: None,
                    };
                };
                op.parent_grew = self.fs.inode(op.parent).nblocks() > before;
                op.file = Some(f);
                f
            }
        };
        let group = self.fs.inode(f).group;
        let geo = &self.fs.geo;
        let meta = [
            self.fs.inode_block(f),
            geo.inode_bitmap(group),
            geo.block_bitmap(group),
        ];
        for b in meta {
            if self.ensure_page(pid, FileId::BDEV, b, io).is_err() {
                return Step::Block;
            }
        }
        let last = self.fs.last_dir_block(op.parent);
        if !op.parent_grew && self.ensure_page(pid, op.parent, last, io).is_err() {
            return Step::Block;
        }
        let now = io.now();
        for b in meta {
            self.dirty_meta(b, Some(f), now, io);
        }
        self.cache.dirty_range(op.parent, last, last + 1, now);
        if op.dir {
            self.cache.dirty_range(f, 0, 1, now);
        }
        self.dir_dirtied(op.parent, last, f, now, io);
        Step::Done {
            ret: Ret::File(f),
            cpu: self.params.syscall_cpu,
            io: None,
        }
    }

    // ---------------------------------------------------------------
    // What ext3 and nilfs2 add (fs::ext3, fs::nilfs2).

    /// Metadata block `block` is dirtied (for `file`): the page cache in
    /// every file system, and ext3's running transaction.
    fn dirty_meta(&mut self, block: u64, file: Option<FileId>, now: Instant, io: &mut Io<'_>) {
        self.cache.dirty_range(FileId::BDEV, block, block + 1, now);
        if let FsLayer::Ext3(j) = &mut self.fsl {
            let tid = j.running.tid;
            if let Some(at) = j.dirty_meta(block, file, now) {
                self.arm(at, TimerAction::JournalCommit(tid), io);
            }
            self.kjournald(io);
        }
    }

    /// A directory block `page` of `dir` got an entry for `file`: ext3
    /// journals it; nilfs2's transaction ends.
    fn dir_dirtied(&mut self, dir: FileId, page: u64, file: FileId, now: Instant, io: &mut Io<'_>) {
        match &mut self.fsl {
            FsLayer::Ext2 => {}
            FsLayer::Ext3(j) => {
                let block = self.fs.map(dir, page).unwrap_or(0);
                let tid = j.running.tid;
                if let Some(at) = j.dirty_meta(block, Some(file), now) {
                    self.arm(at, TimerAction::JournalCommit(tid), io);
                }
                self.kjournald(io);
            }
            FsLayer::Nilfs2(..) => self.segctor_dirtied(now, io),
        }
    }

    /// `write(2)` dirtied `pages` pages of `file`: ext3 files them in the
    /// running transaction and dirties the inode (`file_update_time`);
    /// nilfs2's transaction ends (timer, watermark).
    fn data_dirtied(&mut self, file: FileId, pages: u64, now: Instant, io: &mut Io<'_>) {
        match &mut self.fsl {
            FsLayer::Ext2 => {}
            FsLayer::Ext3(j) => {
                let tid = j.running.tid;
                let timer = j.dirty_data(file, pages, now);
                if let Some(at) = timer {
                    self.arm(at, TimerAction::JournalCommit(tid), io);
                }
                let ib = self.fs.inode_block(file);
                self.dirty_meta(ib, Some(file), now, io);
            }
            FsLayer::Nilfs2(..) => self.segctor_dirtied(now, io),
        }
    }

    /// Write `n` blocks from disk block `disk` as requests of `issuer`,
    /// each at most `max_sectors`: pages `[page, page + n)` of `cache` if
    /// given (their writeback ends on completion), else no page ([`RAW`]).
    /// `mark` says which of the requests carry the sync hint.
    #[allow(clippy::too_many_arguments)]
    fn issue_at(
        &mut self,
        issuer: Issuer,
        cache: Option<(FileId, u64)>,
        disk: u64,
        n: u64,
        mark: SyncMark,
        owner: FileId,
        io: &mut Io<'_>,
    ) {
        let max_pages = (u64::from(self.params.max_sectors) * 512 / PAGE_SIZE).max(1);
        let spb = self.fs.geo.sectors_per_block();
        let mut off = 0;
        while off < n {
            let k = (n - off).min(max_pages);
            let last = off + k == n;
            let (sync, noidle) = match mark {
                SyncMark::Async => (false, false),
                SyncMark::Last { noidle } => (last, noidle && last),
                SyncMark::Every => (true, true),
            };
            let id = io.submit(BlockIo {
                op: Op::Write,
                sync,
                sector: self.fs.geo.sector_of(disk + off),
                sectors: (k * spb) as u32,
                task: self.daemon_task(),
                prio: IoPrio::default(),
                group: GroupId::ROOT,
                meta: false,
                noidle,
            });
            self.write_seq += 1;
            let seq = self.write_seq;
            self.outstanding.insert(seq);
            self.file_writes.entry(owner.0).or_default().push(seq);
            self.writes_in_flight += 1;
            if self.is_congested(io) {
                self.congested = true;
            }
            self.stats.write_requests += 1;
            self.stats.pages_written += k;
            let (file, page) = cache.map_or((RAW, 0), |(f, p)| (f, p + off));
            self.tags.insert(
                id,
                Tag {
                    file,
                    page,
                    pages: k,
                    write: true,
                    seq,
                    owner,
                    issuer,
                    slot: true,
                },
            );
            off += k;
        }
    }

    /// kjournald: move the committing transaction through its phases as
    /// its writes complete, and start the next commit when one is asked
    /// for (`journal_commit_transaction`, fs/jbd/commit.c 2.6.32).
    fn kjournald(&mut self, io: &mut Io<'_>) {
        loop {
            let FsLayer::Ext3(j) = &mut self.fsl else {
                return;
            };
            let Some(c) = &j.committing else {
                let seq = self.write_seq;
                let FsLayer::Ext3(j) = &mut self.fsl else {
                    return;
                };
                let Some(c) = j.start_commit(seq) else {
                    return;
                };
                // Ordered mode: the transaction's data first from kjournald
                // (journal_submit_data_buffers): WRITE, or WRITE_SYNC_PLUG
                // for a synchronous commit.
                let files = c.files.clone();
                let synchronous = c.synchronous;
                if !files.is_empty() {
                    let ctl = WbCtl {
                        budget: u64::MAX,
                        nonblocking: false,
                        older_than: None,
                        issuer: Issuer::Daemon,
                        sync: synchronous,
                    };
                    for &f in &files {
                        self.write_file(f, ctl, u64::MAX, f, io);
                    }
                    let seq = self.write_seq;
                    if let FsLayer::Ext3(j) = &mut self.fsl {
                        j.committing.as_mut().expect("committing").seq = seq;
                    }
                } else {
                    self.journal_log_phase(io);
                }
                continue;
            };
            let (phase, seq) = (c.phase, c.seq);
            let done = match phase {
                Phase::Data => {
                    let files = c.files.clone();
                    files
                        .iter()
                        .all(|&file| self.satisfied(WaitCond::FileWrites { file, seq }))
                }
                Phase::Log | Phase::CommitBlock => {
                    self.satisfied(WaitCond::FileWrites { file: JOURNAL, seq })
                }
            };
            if !done {
                return;
            }
            match phase {
                Phase::Data => self.journal_log_phase(io),
                Phase::Log => {
                    // The commit block: sync_dirty_buffer, WRITE_SYNC.
                    let FsLayer::Ext3(j) = &mut self.fsl else {
                        return;
                    };
                    let runs = j.take_log(1);
                    for (b, n) in runs {
                        self.issue_at(Issuer::Daemon, None, b, n, SyncMark::Every, JOURNAL, io);
                    }
                    let seq = self.write_seq;
                    if let FsLayer::Ext3(j) = &mut self.fsl {
                        let c = j.committing.as_mut().expect("committing");
                        c.phase = Phase::CommitBlock;
                        c.seq = seq;
                    }
                }
                Phase::CommitBlock => {
                    if let FsLayer::Ext3(j) = &mut self.fsl {
                        j.finish_commit();
                    }
                }
            }
        }
    }

    /// A commit writes its descriptors and block copies at the journal's
    /// head: `WRITE`, or `WRITE_SYNC_PLUG` for a synchronous commit
    /// (2.6.30's fsync).
    fn journal_log_phase(&mut self, io: &mut Io<'_>) {
        let FsLayer::Ext3(j) = &mut self.fsl else {
            return;
        };
        let c = j.committing.as_ref().expect("committing");
        let (n, synchronous) = (c.log_blocks, c.synchronous);
        let runs = j.take_log(n);
        let mark = if synchronous {
            SyncMark::Every
        } else {
            SyncMark::Async
        };
        for (b, k) in runs {
            self.issue_at(Issuer::Daemon, None, b, k, mark, JOURNAL, io);
        }
        let seq = self.write_seq;
        if let FsLayer::Ext3(j) = &mut self.fsl {
            let c = j.committing.as_mut().expect("committing");
            c.phase = Phase::Log;
            c.seq = seq;
        }
    }

    /// nilfs2: lay the log out at the first use, past the segments the
    /// file sets placed before the run occupy (segment 0 starts after the
    /// super block, block 1).
    fn nilfs_mount(&mut self) {
        if let FsLayer::Nilfs2(o, log @ None) = &mut self.fsl {
            let used = self.fs.used_end();
            *log = Some(Box::new(Log::new(*o, 1, self.fs.geo.blocks, used)));
        }
    }

    /// nilfs2: the construction a `write(2)` must wait for, if one is
    /// running. `nilfs_write_begin` starts a transaction, which takes
    /// `ns_segctor_sem` for reading (`nilfs_transaction_begin`); segctord
    /// holds it for writing through a whole construction, including the
    /// wait for its log's I/O (`nilfs_segctor_thread_construct` →
    /// `nilfs_transaction_lock`; `nilfs_segctor_write` → `nilfs_segbuf_wait`;
    /// fs/nilfs2/segment.c of v2.6.30). The semaphore queues in order, so a
    /// writer that waited goes on once that construction is done, even if
    /// another was queued behind it.
    fn segctor_lock_held(&self) -> Option<u64> {
        let l = self.nilfs_log()?;
        l.waiting_seq.map(|_| l.started)
    }

    /// nilfs2: a transaction ended at `now`: arm the checkpoint timer, and
    /// above the watermark start a log at once.
    fn segctor_dirtied(&mut self, now: Instant, io: &mut Io<'_>) {
        self.nilfs_mount();
        let FsLayer::Nilfs2(_, Some(l)) = &mut self.fsl else {
            return;
        };
        if let Some((at, gen)) = l.transaction_end(now) {
            self.arm(at, TimerAction::SegctorTimer(gen), io);
        }
        if self.cache.dirty() > nilfs2::SC_DEFAULT_WATERMARK {
            let sr = self.nilfs_log().is_some_and(|l| l.super_root_due(now));
            self.segctor_construct(sr, io);
        }
    }

    /// segctord builds a log of every dirty block, in log order, with a
    /// super root (a checkpoint) if `super_root`; if one is being written
    /// the next is queued. Returns the construction count to wait for.
    fn segctor_construct(&mut self, super_root: bool, io: &mut Io<'_>) -> u64 {
        let now = io.now();
        self.nilfs_mount();
        let FsLayer::Nilfs2(_, Some(l)) = &mut self.fsl else {
            return 0;
        };
        if l.waiting_seq.is_some() {
            l.again = Some(l.again.unwrap_or(false) || super_root);
            return l.started + 1;
        }
        l.begin(super_root, now);
        let mut l = match &mut self.fsl {
            FsLayer::Nilfs2(_, log) => log.take().expect("the log"),
            _ => unreachable!("nilfs2"),
        };
        // Data files first, then the block device's metadata (the files'
        // B-tree nodes and inodes), as a log orders its payload.
        let mut files = Vec::new();
        let mut after = None;
        while let Some((since, file)) = self.cache.next_dirty_file(after) {
            after = Some((since, file.0));
            files.push(file);
        }
        files.sort_by_key(|&f| (f == FileId::BDEV, f));
        // (the page-cache pages it writes, if any; disk block; blocks)
        type Piece = (Option<(FileId, u64)>, u64, u64);
        let mut plan: Vec<Piece> = Vec::new();
        let mut runs: Vec<Run> = Vec::new();
        let mut payload = 0;
        for f in files {
            while let Some((s, n)) = self.cache.start_writeback(f, 0, u64::MAX, u64::MAX) {
                runs.clear();
                l.place(n, &mut runs);
                let mut off = 0;
                for r in &runs {
                    if r.summary {
                        plan.push((None, r.block, 1));
                        continue;
                    }
                    if f != FileId::BDEV {
                        self.fs.relocate(f, s + off, r.len, r.block);
                    }
                    plan.push((Some((f, s + off)), r.block, r.len));
                    off += r.len;
                }
                payload += n;
            }
        }
        // The DAT entries of the blocks written, the sufile, and with a
        // checkpoint the cpfile and the super root.
        let extra =
            payload.div_ceil(nilfs2::DAT_ENTRIES_PER_BLOCK) + 1 + if super_root { 2 } else { 0 };
        runs.clear();
        l.place(extra, &mut runs);
        plan.extend(runs.iter().map(|r| (None, r.block, r.len)));
        let last = plan.len() - 1;
        for (i, (cache, disk, n)) in plan.into_iter().enumerate() {
            // The last bio of the construction is SYNCIO (segbuf.c).
            let mark = if i == last {
                SyncMark::Last { noidle: false }
            } else {
                SyncMark::Async
            };
            self.issue_at(Issuer::Daemon, cache, disk, n, mark, LOG, io);
        }
        l.waiting_seq = Some(self.write_seq);
        let started = l.started;
        if let FsLayer::Nilfs2(_, log) = &mut self.fsl {
            *log = Some(l);
        }
        started
    }

    /// A write completed: finish the running construction if all its
    /// writes are done, and start a queued one.
    fn segctor_step(&mut self, io: &mut Io<'_>) {
        let Some(seq) = self.nilfs_log().and_then(|l| l.waiting_seq) else {
            return;
        };
        if !self.satisfied(WaitCond::FileWrites { file: LOG, seq }) {
            return;
        }
        let FsLayer::Nilfs2(_, Some(l)) = &mut self.fsl else {
            return;
        };
        l.waiting_seq = None;
        l.done += 1;
        if let Some(sr) = l.again.take() {
            self.segctor_construct(sr, io);
        }
    }

    // ---------------------------------------------------------------
    // Completions and the flusher.

    fn on_complete(&mut self, done: &Completion, io: &mut Io<'_>) {
        let Some(tag) = self.tags.remove(&done.id) else {
            panic!("host: completion of unknown request {:?}", done.id);
        };
        let end = tag.page + tag.pages;
        if done.error.is_some() {
            self.count_error(tag.issuer);
        }
        if !tag.write {
            if done.error.is_some() {
                // The pages leave the cache; whoever waits for them wakes
                // and reads them again. (Linux retries once in `readpage`
                // and then returns EIO; here the retry repeats until the
                // read succeeds, which injected faults, each below one half,
                // let it do.)
                self.cache.fail_read(tag.file, tag.page, end);
            } else {
                self.cache.mark_uptodate(tag.file, tag.page, end);
            }
            let mut c = tag.page / CHUNK_PAGES;
            while c * CHUNK_PAGES < end {
                let key = (u64::from(tag.file.0) << 32) | c;
                if let Some(waiters) = self.page_waiters.remove(&key) {
                    for (pid, gen) in waiters {
                        self.wake(pid, gen);
                    }
                }
                c += 1;
            }
            return;
        }
        if tag.file != RAW {
            self.cache.end_writeback(tag.file, tag.page, end);
        }
        if tag.slot {
            self.writes_in_flight -= 1;
        }
        self.outstanding.remove(&tag.seq);
        if let Some(v) = self.file_writes.get_mut(&tag.owner.0) {
            if let Some(i) = v.iter().position(|&s| s == tag.seq) {
                v.swap_remove(i);
            }
            if v.is_empty() {
                self.file_writes.remove(&tag.owner.0);
            }
        }
        if tag.issuer == Issuer::Flusher {
            let stats = &mut self.rows[self.pdflush_row].stats;
            stats.record(
                done.completed,
                false,
                tag.pages * PAGE_SIZE,
                done.completed.since(done.submitted),
            );
        }
        let cleared = match io.write_congested() {
            Some(bit) => !bit,
            None => self.writes_in_flight < self.params.congestion_off(),
        };
        if self.congested && cleared {
            self.congested = false;
            for (pid, gen) in std::mem::take(&mut self.congestion_waiters) {
                self.wake(pid, gen);
            }
            if self.flusher.waiting {
                self.flusher_woken(io);
            }
        }
        match self.fsl {
            FsLayer::Ext2 => {}
            FsLayer::Ext3(_) => self.kjournald(io),
            FsLayer::Nilfs2(..) => self.segctor_step(io),
        }
        if !self.write_waiters.is_empty() {
            let waiters = std::mem::take(&mut self.write_waiters);
            for (pid, gen, cond) in waiters {
                if self.procs[pid].gen != gen || self.procs[pid].exited {
                    continue;
                }
                if self.satisfied(cond) {
                    self.wake(pid, gen);
                } else {
                    self.write_waiters.push((pid, gen, cond));
                }
            }
        }
        if self.bd.awake || self.bd.kupdate {
            self.bdflush_run(io);
        }
    }

    /// A request of `issuer` failed: the process's (or the flusher's) row
    /// counts it. A failed write's pages are clean anyway, their data lost,
    /// as after the kernel's `end_page_writeback` with an error (which
    /// also marks the mapping so that a later fsync returns EIO).
    fn count_error(&mut self, issuer: Issuer) {
        let row = match issuer {
            Issuer::Proc(pid) => self.procs[pid].row,
            Issuer::Flusher | Issuer::Daemon => self.pdflush_row,
        };
        self.rows[row].stats.errors += 1;
    }

    fn kick_flusher(&mut self, io: &mut Io<'_>) {
        if !self.flusher.waiting {
            self.flusher_run(io);
        }
    }

    fn flusher_wait(&mut self, congested: bool, io: &mut Io<'_>) {
        self.flusher.waiting = true;
        self.flusher.wait_congested = congested;
        self.flusher.gen += 1;
        let gen = self.flusher.gen;
        self.arm(
            io.now() + CONGESTION_WAIT,
            TimerAction::FlusherWake(gen),
            io,
        );
    }

    fn flusher_woken(&mut self, io: &mut Io<'_>) {
        self.flusher.waiting = false;
        self.flusher.gen += 1;
        if self.flusher.background && !self.flusher.wait_congested {
            // background_writeout: wrote less than asked, not congested.
            self.flusher.background = false;
        }
        self.flusher_run(io);
    }

    /// pdflush: background writeout first, then a pending kupdate pass.
    fn flusher_run(&mut self, io: &mut Io<'_>) {
        let budget = self.params.max_writeback_pages;
        loop {
            if self.flusher.background {
                let (background, _) = self.params.dirty_limits();
                if self.cache.dirty() < background {
                    self.flusher.background = false;
                    continue;
                }
                let ctl = WbCtl {
                    budget,
                    nonblocking: true,
                    older_than: None,
                    issuer: Issuer::Flusher,
                    sync: false,
                };
                let (written, congested) = self.writeback_inodes(ctl, io);
                if written < budget {
                    self.flusher_wait(congested, io);
                    return;
                }
                continue;
            }
            if self.flusher.kupdate {
                if self.flusher.kupdate_left <= 0 {
                    self.finish_kupdate(io);
                    continue;
                }
                let oldest = Instant(
                    io.now()
                        .nanos()
                        .saturating_sub(self.params.dirty_expire().nanos()),
                );
                let ctl = WbCtl {
                    budget,
                    nonblocking: true,
                    older_than: Some(oldest),
                    issuer: Issuer::Flusher,
                    sync: false,
                };
                let (written, congested) = self.writeback_inodes(ctl, io);
                self.flusher.kupdate_left -= written as i64;
                if written < budget {
                    if congested {
                        self.flusher_wait(true, io);
                        return;
                    }
                    self.finish_kupdate(io);
                }
                continue;
            }
            return;
        }
    }

    fn finish_kupdate(&mut self, io: &mut Io<'_>) {
        self.flusher.kupdate = false;
        let interval = self.params.dirty_writeback_interval();
        if interval > Duration::ZERO {
            let next =
                (self.flusher.kupdate_start + interval).max(io.now() + Duration::from_secs(1));
            self.arm(next, TimerAction::Kupdate, io);
        }
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
                if let FsLayer::Ext3(j) = &mut self.fsl {
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
        let daemon = (!matches!(self.fsl, FsLayer::Ext2)).then(|| self.daemon_task());
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
