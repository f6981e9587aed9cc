//! fio's buffered jobs (`direct=0`) on the simulator: each thread is a
//! process of the host making `pread`/`pwrite`/`fsync` calls through the
//! page cache, one at a time, as a buffered job's thread does in fio
//! (with a synchronous engine, and with libaio too, whose `io_submit`
//! blocks for buffered I/O).
//!
//! The thread decides what to do exactly as a direct one does
//! (`elevator_workload::fio::thread`): the program only turns its answer
//! into a system call and reports the call's latency back. A read of
//! cached data costs CPU time only; a write dirties the cache and returns,
//! and writeback reaches the device later (pdflush, `balance_dirty_pages`,
//! fsync), as the host models them.

use crate::fs::gen;
use crate::fs::FileId;
use crate::syscall::{Ctx, Errno, Program, Syscall};
use crate::{Host, HostParams, NoSpace};
use elevator_core::{Duration, IoPrio, Sector};
use elevator_workload::fio::{Action, Dir, Shared, Unit};

/// One fio thread as a host process.
#[derive(Debug)]
pub struct FioProgram {
    shared: Shared,
    thread: usize,
    /// The host file of each of the run's files.
    files: Vec<FileId>,
    pending: Option<Unit>,
    /// Cache drops still to make before the first I/O (`invalidate=1`).
    to_drop: Option<Vec<FileId>>,
    /// The first I/O, held while the drops are made.
    held: Option<Unit>,
}

impl FioProgram {
    pub fn new(shared: Shared, thread: usize, files: Vec<FileId>) -> Self {
        FioProgram {
            shared,
            thread,
            files,
            pending: None,
            to_drop: None,
            held: None,
        }
    }

    fn report(&mut self, cx: &Ctx<'_>, error: i32) {
        if let Some(u) = self.pending.take() {
            let lat = cx.last.latency.nanos();
            let got = cx.last.bytes();
            let error = if error == 0 && u.dir != Dir::Sync && got < u.len {
                // A short write is the start of ENOSPC.
                28
            } else {
                error
            };
            self.shared
                .borrow_mut()
                .completed(self.thread, &u, cx.now, 0, lat, error, 1);
        }
    }
}

/// How often a process waiting for another job looks again: fio's main
/// thread checks waiting jobs on the same order (`run_threads`).
const GATE_POLL: Duration = Duration::from_millis(1);

impl Program for FioProgram {
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall {
        self.report(cx, 0);
        if let Some(f) = self.to_drop.as_mut().and_then(Vec::pop) {
            return Syscall::DropCache(f);
        }
        let now = cx.now;
        let action = match self.held.take() {
            Some(mut u) => {
                u.issued = now;
                Action::Issue(u)
            }
            None => self.shared.borrow_mut().next(self.thread, now),
        };
        if let (None, Action::Issue(u)) = (&self.to_drop, action) {
            // The job has started: invalidate=1 drops its files' clean
            // pages before its first I/O (fio's file_invalidate_cache at
            // open).
            let mut files: Vec<FileId> = self
                .shared
                .borrow()
                .invalidate_files(self.thread)
                .into_iter()
                .map(|f| self.files[f])
                .collect();
            if let Some(f) = files.pop() {
                self.to_drop = Some(files);
                self.held = Some(u);
                return Syscall::DropCache(f);
            }
            self.to_drop = Some(Vec::new());
        }
        match action {
            Action::Issue(u) => {
                self.shared.borrow_mut().submitted(self.thread, now);
                let file = self.files[u.file];
                self.pending = Some(u);
                match u.dir {
                    Dir::Read => Syscall::Read {
                        file,
                        offset: u.offset,
                        len: u.len,
                    },
                    Dir::Write => Syscall::Write {
                        file,
                        offset: u.offset,
                        len: u.len,
                    },
                    Dir::Sync => Syscall::Fsync(file),
                }
            }
            Action::Sleep(at) => Syscall::SleepUntil(at),
            Action::Wait | Action::Blocked => Syscall::Sleep(GATE_POLL),
            Action::Done => Syscall::Exit,
        }
    }

    fn failed(&mut self, errno: Errno, cx: &mut Ctx<'_>) -> Syscall {
        let e = match errno {
            Errno::NoSpace => 28,
        };
        self.report(cx, e);
        self.next(cx)
    }
}

/// The host for a job file: `params` on a device of `capacity` sectors,
/// with `sizes` (bytes) laid out as files in the root directory (fio lays
/// its files out before the jobs start). Returns the host and each file.
pub fn host_with_files(
    params: HostParams,
    capacity: Sector,
    sizes: &[u64],
    seed: u64,
    first_task: u32,
) -> Result<(Host, Vec<FileId>), NoSpace> {
    let mut host = Host::new(params, capacity, seed, first_task);
    let mut files = Vec::new();
    for (i, size) in sizes.iter().enumerate() {
        let f = gen::big_file(host.fs_mut(), FileId::ROOT, *size, 200 + i as u32)?;
        files.push(f);
    }
    Ok((host, files))
}

/// The disk extents of `file`'s first `bytes`: (byte offset in the file,
/// first sector, bytes), for direct I/O to a host file.
pub fn extents(host: &Host, file: FileId, bytes: u64) -> Vec<(u64, Sector, u64)> {
    let fs = host.fs();
    let bsize = fs.geo.block_size;
    let spb = fs.geo.sectors_per_block();
    let mut out: Vec<(u64, Sector, u64)> = Vec::new();
    fs.for_runs(file, 0, bytes.div_ceil(bsize), |fb, db, len| {
        out.push((fb * bsize, fs.geo.sector_of(db), len * bsize));
    });
    let _ = spb;
    out
}

/// Spawn thread `thread` of the run as a process of `host`.
pub fn spawn(
    host: &mut Host,
    shared: Shared,
    thread: usize,
    name: &str,
    files: Vec<FileId>,
    prio: IoPrio,
) {
    let row = host.add_row(name, true);
    host.spawn(
        row,
        Box::new(FioProgram::new(shared, thread, files)),
        Duration::ZERO,
        prio,
    );
}
