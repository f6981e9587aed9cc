//! The file systems: the host checks every registered one passes (a toy
//! shows that a registry entry is all a file system made of the host's
//! mechanisms needs), then ext3's journal and nilfs2's log, each mechanism
//! alone, observed at the device: `data=ordered` against `data=writeback`
//! fsync, the commit interval, nilfs2's sequential log writes.

mod common;

use common::Seen;
use elevator_core::{Duration, Instant, IoPrio, Op, Prng};
use elevator_host::fs::gen::big_file;
use elevator_host::fs::registry::{
    mount, mount_with, Alloc, FileSystemType, FsType, Layer, FILE_SYSTEMS,
};
use elevator_host::fs::FileId;
use elevator_host::process::{Cat, WriteAndFsync};
use elevator_host::{Ctx, Host, HostParams, Program, Syscall};

fn params(fs: &str, options: &str) -> HostParams {
    let mut p = HostParams::linux_2_6();
    p.fs.fs_type = mount(fs, options).expect("mount options");
    p
}

/// Does request `s` touch any of `file`'s first `blocks` blocks?
fn touches(host: &Host, file: FileId, blocks: u64, s: &Seen) -> bool {
    let geo = &host.fs().geo;
    let mut hit = false;
    host.fs().for_runs(file, 0, blocks, |_, d, n| {
        let (a, b) = (geo.sector_of(d), geo.sector_of(d + n));
        hit |= s.sector < b && s.sector + u64::from(s.sectors) > a;
    });
    hit
}

/// Sleeps, then exits: keeps the host running while timers fire.
#[derive(Debug)]
struct Idle(Duration, bool);

impl Program for Idle {
    fn next(&mut self, _: &mut Ctx<'_>) -> Syscall {
        if self.1 {
            return Syscall::Exit;
        }
        self.1 = true;
        Syscall::Sleep(self.0)
    }
}

/// A big writer (8 MiB, no fsync) at 0 s and a small writer that fsyncs
/// 1 MiB at 1 s, on ext3 with `options`. Returns (the fsync's return
/// time, device writes of the big writer's data completed before it).
fn ordered_vs_writeback(options: &str) -> (Instant, usize, Vec<Seen>, Host) {
    let mut host = common::host_on("hdd-2009", 1, Some(params("ext3", options)));
    let big = host.add_row("big", true);
    host.spawn(
        big,
        Box::new(WriteAndFsync::new(FileId::ROOT, 8 << 20, false)),
        Duration::ZERO,
        IoPrio::default(),
    );
    let small = host.add_row("small", true);
    host.spawn(
        small,
        Box::new(WriteAndFsync::new(FileId::ROOT, 1 << 20, true)),
        Duration::from_secs(1),
        IoPrio::default(),
    );
    let (_, log) = common::run(&mut host, "deadline", "hdd-2009", 60);
    let done = host.row_stats(small).finished.expect("the fsync returned");
    let big_file = host.fs().children(FileId::ROOT)[0];
    let before = log
        .iter()
        .filter(|s| s.op == Op::Write && touches(&host, big_file, 2048, s))
        .filter(|s| s.completed.is_some_and(|c| c <= done))
        .count();
    (done, before, log, host)
}

#[test]
fn ordered_fsync_writes_the_transactions_other_data_first_and_writeback_does_not() {
    let (done, before, log, host) = ordered_vs_writeback("data=ordered");
    let j = host.journal().expect("ext3");
    println!(
        "ordered: fsync returned at {:.3} s, {before} writes of the other file's data before it",
        done.as_secs_f64()
    );
    assert!(
        before > 0,
        "data=ordered: the commit wrote the other file's data"
    );
    let daemon = host.daemon_task().0;
    let big_file = host.fs().children(FileId::ROOT)[0];
    // (The policy may merge the other file's first blocks into the
    // fsync's own writes, which follow it on disk: look for kjournald's.)
    let by_kjournald = log
        .iter()
        .filter(|s| s.op == Op::Write && touches(&host, big_file, 2048, s))
        .any(|s| s.task == daemon && !s.sync);
    assert!(by_kjournald, "kjournald writes ordered data as plain WRITE");
    assert!(j.stats.by_fsync >= 1, "{:?}", j.stats);
    // The commit block: WRITE_SYNC, inside the journal.
    let (start, len) = j.runs[0];
    let geo = &host.fs().geo;
    let journal = geo.sector_of(start)..geo.sector_of(start + len);
    assert!(log
        .iter()
        .any(|s| journal.contains(&s.sector) && s.sync && s.noidle));
    assert!(log
        .iter()
        .filter(|s| journal.contains(&s.sector))
        .all(|s| s.task == daemon));

    let (done_wb, before_wb, _, _) = ordered_vs_writeback("data=writeback");
    println!(
        "writeback: fsync returned at {:.3} s, {before_wb} writes of the other file's data before it",
        done_wb.as_secs_f64()
    );
    assert_eq!(before_wb, 0, "data=writeback: only the file's own data");
    assert!(done_wb < done, "writeback's fsync is the quicker");
}

#[test]
fn a_commit_happens_by_the_interval_without_fsync() {
    // The first handle (the file's creation) at 0.3 s; the timer runs
    // from it and is rounded up to a whole second.
    for (options, at) in [("data=ordered", 6.0), ("data=writeback,commit=2", 3.0)] {
        let mut host = common::host_on("hdd-2009", 1, Some(params("ext3", options)));
        let w = host.add_row("w", true);
        host.spawn(
            w,
            Box::new(WriteAndFsync::new(FileId::ROOT, 64 << 10, false)),
            Duration::from_millis(300),
            IoPrio::default(),
        );
        let idle = host.add_row("idle", true);
        host.spawn(
            idle,
            Box::new(Idle(Duration::from_secs(8), false)),
            Duration::ZERO,
            IoPrio::default(),
        );
        let (_, log) = common::run(&mut host, "deadline", "hdd-2009", 60);
        let j = host.journal().expect("ext3");
        assert_eq!(
            (j.stats.commits, j.stats.by_timer, j.stats.by_fsync),
            (1, 1, 0)
        );
        let daemon = host.daemon_task().0;
        let first = log
            .iter()
            .filter(|s| s.task == daemon)
            .map(|s| s.submitted)
            .min();
        let first = first.expect("kjournald wrote").as_secs_f64();
        println!("{options}: first kjournald write at {first:.3} s");
        assert!((first - at).abs() < 1e-3, "{first}");
    }
}

/// `n` random 4 KiB writes into `file` of `blocks` blocks, then fsync.
#[derive(Debug)]
struct RandomWrites {
    file: FileId,
    blocks: u64,
    left: u64,
    rng: Prng,
    synced: bool,
}

impl Program for RandomWrites {
    fn next(&mut self, _: &mut Ctx<'_>) -> Syscall {
        if self.left > 0 {
            self.left -= 1;
            let b = self.rng.below(self.blocks);
            return Syscall::Write {
                file: self.file,
                offset: b * 4096,
                len: 4096,
            };
        }
        if !self.synced {
            self.synced = true;
            return Syscall::Fsync(self.file);
        }
        Syscall::Exit
    }
}

/// Random writes on `fs`: (share of written sectors that continue the
/// previous write, the host, the device's requests, the end of the blocks
/// in use before the run).
fn random_writes(fs: &str) -> (f64, Host, Vec<Seen>, u64) {
    let mut host = common::host_on("sdcard-2009", 3, Some(params(fs, "")));
    let blocks = 16384; // 64 MiB
    let file = big_file(host.fs_mut(), FileId::ROOT, blocks * 4096, 300).expect("fits");
    let used = host.fs().used_end();
    let row = host.add_row("rw", true);
    let program = RandomWrites {
        file,
        blocks,
        left: 2000,
        rng: Prng::derive(7, "random-writes"),
        synced: false,
    };
    host.spawn(row, Box::new(program), Duration::ZERO, IoPrio::default());
    let (_, log) = common::run(&mut host, "noop", "sdcard-2009", 600);
    let writes: Vec<&Seen> = log.iter().filter(|s| s.op == Op::Write).collect();
    let total: u64 = writes.iter().map(|s| u64::from(s.sectors)).sum();
    let mut seq = 0;
    for w in writes.windows(2) {
        if w[1].sector == w[0].sector + u64::from(w[0].sectors) {
            seq += u64::from(w[1].sectors);
        }
    }
    (seq as f64 / total.max(1) as f64, host, log, used)
}

#[test]
fn nilfs2_turns_random_writes_into_sequential_device_writes() {
    let (ext2, _, _, _) = random_writes("ext2");
    let (nilfs, host, log, used) = random_writes("nilfs2");
    println!("sequential share of written sectors: ext2 {ext2:.2}, nilfs2 {nilfs:.2}");
    assert!(ext2 < 0.3, "ext2 writes in place: {ext2}");
    assert!(nilfs > 0.95, "nilfs2 appends to its log: {nilfs}");
    let l = host.nilfs_log().expect("a log was written");
    assert!(l.stats.checkpoints >= 1, "fsync wrote a super root");
    // Reads follow the log: the rewritten blocks now lie past the file's
    // original place, where the log's writes went.
    let file = host.fs().children(FileId::ROOT)[0];
    let geo = &host.fs().geo;
    let original_end = geo.sector_of(used);
    let mut moved = 0;
    host.fs().for_runs(file, 0, 16384, |_, d, n| {
        if geo.sector_of(d) >= original_end {
            moved += n;
        }
    });
    assert!(
        moved >= 1500,
        "rewritten blocks are where the log put them: {moved}"
    );
    let written: Vec<u64> = log
        .iter()
        .filter(|s| s.op == Op::Write)
        .map(|s| s.sector)
        .collect();
    assert!(
        written.iter().all(|&s| s >= original_end),
        "no write in place"
    );
    assert!(matches!(host.params().fs.fs_type.layer, Layer::Log(_)));
}

/// ext3 reads inode-table blocks with READ_META (`__ext3_get_inode_loc`),
/// file data without; ext2 (the 2003 host, before REQ_META) flags none.
#[test]
fn ext3_reads_inodes_with_read_meta() {
    for (fs, flagged) in [("ext3", true), ("ext2", false)] {
        let mut host = common::host_on("hdd-2009", 1, Some(params(fs, "")));
        let f = big_file(host.fs_mut(), FileId::ROOT, 1 << 20, 300).expect("fits");
        let inode_sector = host.fs().geo.sector_of(host.fs().inode_block(f));
        let row = host.add_row("cat", true);
        host.spawn(
            row,
            Box::new(Cat::new(vec![f], 64 << 10, false)),
            Duration::ZERO,
            IoPrio::default(),
        );
        let (_, log) = common::run(&mut host, "deadline", "hdd-2009", 60);
        let reads: Vec<&Seen> = log.iter().filter(|s| s.op == Op::Read).collect();
        let inode = reads
            .iter()
            .find(|s| s.sector == inode_sector)
            .expect("inode read");
        assert_eq!(inode.meta, flagged, "{fs}: the inode block's read");
        let data: Vec<_> = reads.iter().filter(|s| touches(&host, f, 256, s)).collect();
        assert!(
            !data.is_empty() && data.iter().all(|s| !s.meta),
            "{fs}: data reads"
        );
    }
}

/// data=journal: fsync only forces the commit, which carries the file's
/// data into the journal; nothing is written at the file's home first.
#[test]
fn data_journal_fsync_writes_the_data_into_the_journal() {
    let mut host = common::host_on("hdd-2009", 1, Some(params("ext3", "data=journal")));
    let w = host.add_row("w", true);
    host.spawn(
        w,
        Box::new(WriteAndFsync::new(FileId::ROOT, 1 << 20, true)),
        Duration::ZERO,
        IoPrio::default(),
    );
    let (_, log) = common::run(&mut host, "deadline", "hdd-2009", 60);
    let done = host.row_stats(w).finished.expect("fsync returned");
    let file = host.fs().children(FileId::ROOT)[0];
    let home = log
        .iter()
        .filter(|s| s.op == Op::Write && touches(&host, file, 256, s))
        .filter(|s| s.submitted <= done)
        .count();
    let j = host.journal().expect("ext3");
    println!(
        "data=journal: fsync at {:.3} s, {} journal blocks, {home} home writes before",
        done.as_secs_f64(),
        j.stats.log_blocks
    );
    assert_eq!(home, 0, "data=journal: the data goes to the journal first");
    assert!(j.stats.log_blocks > 256, "1 MiB of data copies and more");
    assert_eq!(j.stats.by_fsync, 1);
}

/// The host checks a file system must pass: a 4 MiB file written and
/// fsynced, then another process writing 4 MiB without fsync, on a
/// 2009 disk. The fsync returns, by then the device has completed writes of
/// at least the file's size (home, journal or log), the file holds its
/// size in blocks, every request lies on the device and completes, and
/// the run ends with nothing left dirty past the writeback horizon.
fn check_file_system(fs: FsType) -> Result<(), String> {
    let name = fs.name;
    let mut p = HostParams::linux_2_6();
    p.fs.fs_type = fs;
    let mut host = common::host_on("hdd-2009", 5, Some(p));
    let size = 4u64 << 20;
    let syncer = host.add_row("fsync", true);
    host.spawn(
        syncer,
        Box::new(WriteAndFsync::new(FileId::ROOT, size, true)),
        Duration::ZERO,
        IoPrio::default(),
    );
    let writer = host.add_row("write", true);
    host.spawn(
        writer,
        Box::new(WriteAndFsync::new(FileId::ROOT, size, false)),
        Duration::from_millis(10),
        IoPrio::default(),
    );
    let (_, log) = common::run(&mut host, "cfq", "hdd-2009", 120);
    let done = (host.row_stats(syncer).finished)
        .ok_or_else(|| format!("{name}: the fsync never returned"))?;
    let written: u64 = log
        .iter()
        .filter(|s| s.op == Op::Write && s.completed.is_some_and(|c| c <= done))
        .map(|s| u64::from(s.sectors) * 512)
        .sum();
    if written < size {
        return Err(format!(
            "{name}: fsync returned at {done:?} with {written} bytes written, under {size}"
        ));
    }
    let capacity = host.fs().geo.sector_of(host.fs().geo.blocks);
    if let Some(s) = log
        .iter()
        .find(|s| s.sector + u64::from(s.sectors) > capacity)
    {
        return Err(format!("{name}: request past the file system: {s:?}"));
    }
    if let Some(s) = log.iter().find(|s| s.completed.is_none()) {
        return Err(format!("{name}: request never completed: {s:?}"));
    }
    let file = host.fs().children(FileId::ROOT)[0];
    let blocks = host.fs().inode(file).nblocks();
    if blocks * 4096 < size {
        return Err(format!(
            "{name}: the file holds {blocks} blocks for {size} bytes"
        ));
    }
    Ok(())
}

#[test]
fn every_registered_file_system_passes_the_host_checks() {
    for t in FILE_SYSTEMS {
        let fs = mount(t.name, "").unwrap_or_else(|e| panic!("{}: {e}", t.name));
        assert_eq!(fs.name, t.name);
        check_file_system(fs).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// A toy file system: ext2's layout with ext3's reservation windows and no
/// journal, a combination no registered file system has. Its entry is all
/// it takes.
const TOYFS: FileSystemType = FileSystemType {
    name: "toyfs",
    about: "toy: ext2 with reservation windows, no journal",
    keys: &[],
    build: |options| match options.first() {
        None => Ok(FsType {
            name: "toyfs",
            alloc: Alloc::Reservations,
            layer: Layer::Plain,
        }),
        Some((k, _)) => Err(format!("toyfs takes no mount options (got {k:?})")),
    },
};

#[test]
fn a_file_system_is_one_module_and_one_registry_line() {
    let mut with_toy: Vec<FileSystemType> = FILE_SYSTEMS.to_vec();
    with_toy.push(TOYFS);
    let err = mount("toyfs", "").unwrap_err();
    assert!(err.contains("unknown file system \"toyfs\""), "{err}");
    let fs = mount_with(&with_toy, "toyfs", "").expect("the toy mounts");
    check_file_system(fs.clone()).expect("the toy passes the host checks");
    let err = mount_with(&with_toy, "toyfs", "data=journal").unwrap_err();
    assert!(err.contains("toyfs") && err.contains("data"), "{err}");
    // It writes as ext2 does: no journal, no log.
    let mut p = HostParams::linux_2_6();
    p.fs.fs_type = fs;
    let host = common::host_on("hdd-2009", 5, Some(p));
    assert!(host.journal().is_none() && host.nilfs_log().is_none());
}
