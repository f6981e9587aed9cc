//! 2.4's writeback on the 2.4 host (`elevator_host::bdflush`): bdflush
//! woken above `nfract` and asleep again at `nfract_stop_bdflush`, the
//! writer writing itself above `nfract_sync`, kupdated writing a buffer
//! once it is `age_buffer` old, and reclaim that writes the dirty pages it
//! meets and stalls the allocating process.

mod common;

use elevator_core::{Duration, IoPrio, Op};
use elevator_host::fs::gen::big_file;
use elevator_host::fs::FileId;
use elevator_host::params::{Bdflush, Writeback, PAGE_SIZE};
use elevator_host::{Ctx, Host, HostParams, Pid, Program, Syscall};

/// A process making a fixed list of calls, then exiting.
#[derive(Debug)]
struct Script(std::vec::IntoIter<Syscall>);

impl Program for Script {
    fn next(&mut self, _cx: &mut Ctx<'_>) -> Syscall {
        self.0.next().unwrap_or(Syscall::Exit)
    }
}

/// Create a file, write `size` bytes to it in 1 MiB calls, sleep `then`:
/// a writer that needs no indirect block read (its blocks are new).
#[derive(Debug)]
struct NewFile {
    size: u64,
    then: Duration,
    file: Option<FileId>,
    written: u64,
    slept: bool,
}

impl Program for NewFile {
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall {
        let Some(file) = self.file.or(cx.last.file()) else {
            return Syscall::Create {
                parent: FileId::ROOT,
                dir: false,
            };
        };
        self.file = Some(file);
        if self.written < self.size {
            self.written += 1 << 20;
            return Syscall::Write {
                file,
                offset: self.written - (1 << 20),
                len: 1 << 20,
            };
        }
        if !self.slept {
            self.slept = true;
            return Syscall::Sleep(self.then);
        }
        Syscall::Exit
    }
}

/// The 2.4 host on the 2003 disk with `params` changed by `edit`.
fn host_24(edit: impl FnOnce(&mut HostParams)) -> Host {
    let dev = elevator_device::open("ide-2003").expect("device profile");
    let limits = dev.limits();
    let mut params = HostParams::linux_2_4();
    params.max_sectors = limits.max_sectors.min(elevator_sim::IDE_24_MAX_SECTORS);
    // The scenario runner sets the host's slots to the 2.4 write list.
    params.nr_requests = 64;
    edit(&mut params);
    Host::new(params, limits.capacity, 1, 1)
}

/// One process: open a `size`-byte file, write it whole in 1 MiB calls
/// (as `dd bs=1M` does), then sleep `then`.
fn writer(host: &mut Host, size: u64, then: Duration) -> Pid {
    let f = big_file(host.fs_mut(), FileId::ROOT, size, 1).unwrap();
    let mut calls = vec![Syscall::Open(f)];
    calls.extend((0..size >> 20).map(|i| Syscall::Write {
        file: f,
        offset: i << 20,
        len: 1 << 20,
    }));
    calls.push(Syscall::Sleep(then));
    let row = host.add_row("writer", true);
    host.spawn(
        row,
        Box::new(Script(calls.into_iter())),
        Duration::ZERO,
        IoPrio::default(),
    )
}

fn tot() -> u64 {
    HostParams::linux_2_4().buffer_pages()
}

#[test]
fn bdflush_sleeps_below_nfract_wakes_above_it_and_stops_at_nfract_stop_bdflush() {
    let tot = tot();
    let p = Bdflush::default();
    // 75 MiB dirty: 19200 pages, at most 30 % of 64675. Within 10 s
    // (kupdated waits for 30 s old buffers) nothing is written.
    let mut host = host_24(|_| {});
    writer(&mut host, 75 << 20, Duration::from_secs(10));
    let (_, log) = common::run_24(&mut host, "ide-2003", 60);
    let writes = log.iter().filter(|s| s.op == Op::Write).count();
    assert!(host.cache().dirty() * 100 <= tot * u64::from(p.nfract));
    assert_eq!(writes, 0, "bdflush wrote below nfract");

    // 90 MiB: past 30 % bdflush wakes, writes cycles of 500 buffers (16
    // calls of 32) and sleeps after the cycle that brings dirty buffers to
    // 20 % or below.
    let mut host = host_24(|_| {});
    let pid = writer(&mut host, 90 << 20, Duration::from_secs(10));
    let (summary, log) = common::run_24(&mut host, "ide-2003", 60);
    let dirty = host.cache().dirty();
    let stop = tot * u64::from(p.nfract_stop_bdflush) / 100;
    println!(
        "2.4, 90 MiB written: {} pages left dirty (nfract_stop_bdflush {stop}), {} written",
        dirty, host.stats.pages_written
    );
    assert!(dirty <= stop && dirty + 512 > stop, "{dirty} pages dirty");
    let flusher = host.flusher_task().0;
    assert!(log
        .iter()
        .filter(|s| s.op == Op::Write)
        .all(|s| s.task == flusher));
    // The buffer-head write path: every block its own request
    // (`submit_bh`), merged below into IDE's 64 KiB at most.
    assert!(summary.completed >= host.stats.pages_written);
    assert!(log
        .iter()
        .filter(|s| s.op == Op::Write)
        .all(|s| s.sectors <= 128));
    // Below nfract_sync the writer never wrote.
    assert_eq!(host.stats.pages_written_by_writers, 0);
    assert!(
        host.row_stats(1).finished.is_some(),
        "writer {pid} ran to its end"
    );
}

#[test]
fn above_nfract_sync_the_writer_writes_itself_and_sleeps_for_requests() {
    let tot = tot();
    let sync = tot * u64::from(Bdflush::default().nfract_sync) / 100;
    let new_file = |host: &mut Host, size: u64| {
        let row = host.add_row("writer", true);
        let program = NewFile {
            size,
            then: Duration::from_secs(1),
            file: None,
            written: 0,
            slept: false,
        };
        host.spawn(row, Box::new(program), Duration::ZERO, IoPrio::default())
    };
    // 140 MiB (35840 pages) stays under 60 %: bdflush writes alone.
    let mut host = host_24(|_| {});
    new_file(&mut host, 140 << 20);
    common::run_24(&mut host, "ide-2003", 120);
    assert_eq!(host.stats.pages_written_by_writers, 0);

    // 200 MiB outruns the disk: dirty buffers reach 60 % and the writer
    // writes NRSYNC buffers per page it dirties, waiting for requests.
    let mut host = host_24(|_| {});
    let pid = new_file(&mut host, 200 << 20);
    let (_, log) = common::run_24(&mut host, "ide-2003", 120);
    let s = host.stats;
    println!(
        "2.4, 200 MiB written: peak {} dirty pages (nfract_sync {sync}), {} written by the \
         writer, {} waits",
        s.peak_dirty_pages, s.pages_written_by_writers, s.throttle_waits
    );
    assert!(s.pages_written_by_writers > 0);
    assert!(s.throttle_waits > 0, "the writer never slept for a request");
    // Never more than a chunk of pages past the limit before it writes.
    assert!(
        s.peak_dirty_pages <= sync + 33,
        "{} dirty",
        s.peak_dirty_pages
    );
    let task = host.task_of(pid).0;
    assert!(log.iter().any(|r| r.op == Op::Write && r.task == task));
}

#[test]
fn kupdated_writes_a_buffer_once_it_is_30_s_old() {
    // 4 MiB, far below nfract: only kupdated writes it, at its first pass
    // after the buffers turned 30 s old (passes every 5 s from 5 s).
    let mut host = host_24(|_| {});
    writer(&mut host, 4 << 20, Duration::from_secs(45));
    let (_, log) = common::run_24(&mut host, "ide-2003", 60);
    let first = log
        .iter()
        .filter(|s| s.op == Op::Write)
        .map(|s| s.submitted.as_secs_f64())
        .fold(f64::INFINITY, f64::min);
    println!("2.4: kupdated's first write at {first:.3} s");
    assert!((30.0..=35.5).contains(&first), "first write at {first} s");
    assert_eq!(host.cache().dirty(), 0, "kupdated left dirty pages");
}

#[test]
fn reclaim_writes_the_dirty_pages_it_meets_and_stalls_the_allocator() {
    // A 64 MB machine whose bdflush and kupdated never run: 80 MiB of
    // writes fill the cache with dirty pages, and each allocation past it
    // must write pages from the LRU tail and wait for them.
    let mut host = host_24(|p| {
        p.memory = 64 << 20;
        p.reserved = 8 << 20;
        p.writeback = Writeback::Bdflush(Bdflush {
            nfract: 100,
            nfract_sync: 100,
            nfract_stop_bdflush: 100,
            ..Bdflush::default()
        });
        p.dirty_writeback_centisecs = 0;
    });
    let pid = writer(&mut host, 80 << 20, Duration::ZERO);
    let (summary, log) = common::run_24(&mut host, "ide-2003", 120);
    let s = host.stats;
    println!(
        "2.4 reclaim, 80 MiB into a {} MiB cache: {} pages written by reclaim, {} stalls, \
         done at {:.2} s",
        (host.cache().capacity() * PAGE_SIZE) >> 20,
        s.reclaim_pages_written,
        s.reclaim_stalls,
        summary.end.as_secs_f64()
    );
    assert!(!summary.timed_out);
    assert!(s.reclaim_pages_written > 0);
    assert!(s.reclaim_stalls > 0, "the allocator never waited");
    // It waited instead of growing the cache past memory.
    assert_eq!(host.cache().stats.overcommits, 0);
    // Every write was the allocating process's own.
    let task = host.task_of(pid).0;
    assert!(log
        .iter()
        .filter(|r| r.op == Op::Write)
        .all(|r| r.task == task));
}
