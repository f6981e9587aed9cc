//! What a process asks of the host, and how it hears back.
//!
//! A [`Program`] is a state machine that, each time its previous system
//! call returns, says which call to make next. The host carries the call
//! out against the page cache and the file system — blocking the process
//! on reads, throttling it in `balance_dirty_pages`, waiting for writeback
//! in `fsync` — and charges CPU time for what costs CPU time. Programs
//! never see requests or the device.

use crate::fs::FileId;
use crate::params::HostParams;
use crate::FileSystem;
use elevator_core::{Duration, Instant};
use elevator_metrics::JobStats;

/// A pipe between two processes of the host (`find | xargs cat`).
pub type PipeId = usize;
/// A barrier the threads of one process meet at (tiotest's phases).
pub type BarrierId = usize;

/// A system call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syscall {
    /// open(2): reads the file's inode if it is not cached, and starts a
    /// fresh readahead state for this process and file.
    Open(FileId),
    /// lstat(2): reads the inode if it is not cached.
    Stat(FileId),
    /// close(2): drops the readahead state, gives back preallocated blocks.
    Close(FileId),
    /// posix_fadvise(POSIX_FADV_DONTNEED) over the whole file: its clean
    /// pages leave the cache (dirty pages, pages under writeback or being
    /// read stay, as `invalidate_mapping_pages` leaves them); fio's
    /// `invalidate=1` at a buffered job's start.
    DropCache(FileId),
    /// read(2) of `len` bytes at `offset` (short at end of file), through
    /// the page cache with readahead.
    Read { file: FileId, offset: u64, len: u64 },
    /// A page fault on a mapping of `file` at `offset`: reads around the
    /// page (`MMAP_READAROUND` pages) if it is not cached.
    Fault { file: FileId, offset: u64 },
    /// write(2) of `len` bytes at `offset`: dirties the page cache,
    /// allocating blocks as ext2 does, and may throttle the writer.
    Write { file: FileId, offset: u64, len: u64 },
    /// fsync(2): writes the file's dirty pages and metadata as synchronous
    /// writes and waits until they (and earlier writeback of the file) are
    /// on the device.
    Fsync(FileId),
    /// sync(2): the same for every dirty page of the host.
    Sync,
    /// getdents(2) over a whole directory: reads its blocks one by one.
    ReadDir(FileId),
    /// creat(2) or mkdir(2) in `parent`; returns the new file.
    Create { parent: FileId, dir: bool },
    /// Compute (or sleep) for this long.
    Sleep(Duration),
    /// Sleep until this instant (no-op if it has passed).
    SleepUntil(Instant),
    /// Put an item into a pipe, blocking while it is full.
    PipePut { pipe: PipeId, item: u64 },
    /// Take an item from a pipe, blocking while it is empty and open;
    /// returns `None` at end of file.
    PipeGet(PipeId),
    /// The writer closes the pipe.
    PipeClose(PipeId),
    /// Wait until all threads of the barrier have arrived.
    Barrier(BarrierId),
    /// The process (thread) ends.
    Exit,
}

/// What a system call returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ret {
    #[default]
    None,
    /// Bytes read or written.
    Bytes(u64),
    /// The file `Create` made.
    File(FileId),
    /// An item from a pipe, or `None` at end of file.
    Item(Option<u64>),
    /// The call failed.
    Err(Errno),
}

/// Why a system call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errno {
    /// `ENOSPC`: a write or create found the file system full. Linux
    /// returns the bytes that fit first (a short write), then this.
    NoSpace,
}

impl Errno {
    /// The name reports count it under (`enospc`).
    pub fn name(self) -> &'static str {
        match self {
            Errno::NoSpace => "enospc",
        }
    }
}

/// The previous call's outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SysResult {
    pub ret: Ret,
    /// From the call to its return, CPU time included.
    pub latency: Duration,
}

impl SysResult {
    pub fn bytes(&self) -> u64 {
        match self.ret {
            Ret::Bytes(n) => n,
            _ => 0,
        }
    }

    pub fn error(&self) -> Option<Errno> {
        match self.ret {
            Ret::Err(e) => Some(e),
            _ => None,
        }
    }

    pub fn file(&self) -> Option<FileId> {
        match self.ret {
            Ret::File(f) => Some(f),
            _ => None,
        }
    }
}

/// What a program sees when it decides its next call.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub now: Instant,
    pub fs: &'a FileSystem,
    pub params: &'a HostParams,
    /// The previous call's result (`Ret::None` before the first call).
    pub last: SysResult,
    /// The statistics row this process reports in (for its extra figures;
    /// the host records read/write bytes and latencies itself).
    pub stats: &'a mut JobStats,
}

/// A process (or one thread of one).
pub trait Program: std::fmt::Debug {
    /// The next system call.
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall;

    /// The next system call after the previous one failed with `errno`
    /// (also in `cx.last`). By default the program exits, as `dd`, `cp`,
    /// `tiotest` and the other tools modelled here do on `ENOSPC`.
    fn failed(&mut self, errno: Errno, cx: &mut Ctx<'_>) -> Syscall {
        let _ = (errno, cx);
        Syscall::Exit
    }
}
