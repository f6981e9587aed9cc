//! The host's mechanisms, observed at the device: readahead windows,
//! throttling above dirty_ratio, fsync, determinism.

mod common;

use common::Seen;
use elevator_core::{Duration, IoPrio, Op};
use elevator_host::fs::gen::big_file;
use elevator_host::fs::FileId;
use elevator_host::process::{Cat, Cp, Dd, WriteAndFsync, BUFFER_2003};
use elevator_host::{HostParams, SyncWriteHint};

fn data_reads(log: &[Seen]) -> Vec<&Seen> {
    // Single-block reads are metadata (inode table, indirect blocks).
    log.iter()
        .filter(|s| s.op == Op::Read && s.sectors > 8)
        .collect()
}

#[test]
fn readahead_window_grows_to_128k_and_stays_one_window_ahead() {
    let mut host = common::host_on("ide-2003", 1, None);
    let f = big_file(host.fs_mut(), FileId::ROOT, 8 << 20, 1).unwrap();
    let row = host.add_row("cat", true);
    host.spawn(
        row,
        Box::new(Cat::new(vec![f], BUFFER_2003, false)),
        Duration::ZERO,
        IoPrio::default(),
    );
    let (summary, log) = common::run(&mut host, "noop", "ide-2003", 60);
    let all: Vec<u32> = log
        .iter()
        .filter(|s| s.op == Op::Read)
        .map(|s| s.sectors)
        .collect();
    println!(
        "read request sizes (sectors) in order: {:?} ...",
        &all[..all.len().min(12)]
    );
    // The inode-table block, then the indirect block (window 1 reaches
    // page 12), then window 1's 16 pages in two pieces around the indirect
    // block — pages 0-11, then pages 12-15, which the policy merges with
    // the 18-page ahead window queued behind it (32 + 144 sectors) — then
    // 128 KiB windows.
    assert_eq!(
        (all[0], all[1]),
        (8, 8),
        "inode-table block, indirect block"
    );
    assert_eq!(
        (all[2], all[3], all[4]),
        (96, 176, 256),
        "16 pages, 4 + 18 pages, 32 pages"
    );
    let data = data_reads(&log);
    let full = data.iter().filter(|s| s.sectors == 256).count();
    println!("{full} of {} data requests are 128 KiB", data.len());
    assert!(full * 10 >= data.len() * 9);
    // The next window is always queued before the current one completes:
    // the disk never waits for the reader after the first windows.
    let mut waits = 0;
    for w in data.windows(2).skip(3) {
        if w[1].submitted > w[0].completed.unwrap() {
            waits += 1;
        }
    }
    println!(
        "disk waited for the reader {waits} times in {} requests; {:.2} s",
        data.len(),
        summary.end.as_secs_f64()
    );
    assert!(waits * 20 <= data.len(), "{waits} waits");
}

#[test]
fn eight_kib_readahead_gives_eight_kib_requests() {
    let params = HostParams {
        readahead_max: 8 << 10,
        ..HostParams::default()
    };
    let mut host = common::host_on("ide-2003", 1, Some(params));
    let f = big_file(host.fs_mut(), FileId::ROOT, 2 << 20, 1).unwrap();
    let row = host.add_row("cat", true);
    host.spawn(
        row,
        Box::new(Cat::new(vec![f], BUFFER_2003, false)),
        Duration::ZERO,
        IoPrio::default(),
    );
    let (_, log) = common::run(&mut host, "noop", "ide-2003", 60);
    let sizes: Vec<u32> = log
        .iter()
        .filter(|s| s.op == Op::Read)
        .map(|s| s.sectors)
        .collect();
    println!(
        "8 KiB readahead request sizes at the device: {:?} ...",
        &sizes[..sizes.len().min(12)]
    );
    // The host asks for at most two pages at a time (the policy may merge a
    // window with the next when both wait in the queue).
    let per_request = host.stats.pages_read as f64 / host.stats.read_requests as f64;
    println!(
        "host: {} read requests, {:.2} pages each",
        host.stats.read_requests, per_request
    );
    assert!(per_request <= 2.0);
    let sixteen = sizes.iter().filter(|&&s| s == 16).count();
    assert!(
        sixteen * 10 >= sizes.len() * 7,
        "{sixteen} of {}",
        sizes.len()
    );
}

/// A writer dirtying more than `dirty_ratio` of memory is held in
/// balance_dirty_pages until writeback has cleaned enough: it cannot finish
/// before all but about `dirty_ratio` of its data is on the device.
#[test]
fn a_writer_above_dirty_ratio_blocks_until_writeback_frees_memory() {
    let run = |params: HostParams| {
        let mut host = common::host_on("ide-2003", 1, Some(params));
        let f = host
            .fs_mut()
            .create(FileId::ROOT, elevator_host::fs::Kind::File, 1)
            .unwrap();
        let row = host.add_row("dd", true);
        host.spawn(
            row,
            Box::new(Dd::new(f, 1 << 20, 400, false)),
            Duration::ZERO,
            IoPrio::default(),
        );
        let (summary, log) = common::run(&mut host, "deadline", "ide-2003", 600);
        let done = host.row_stats(row).finished.expect("dd finished");
        let written_by_then: u64 = log
            .iter()
            .filter(|s| s.op == Op::Write && s.completed.is_some_and(|c| c <= done))
            .map(|s| u64::from(s.sectors) * 512)
            .sum();
        let lat = host.row_stats(row).latency.max();
        (summary, done, written_by_then, lat, host.stats)
    };
    let p = HostParams::default();
    let (_, thresh) = p.dirty_limits();
    let limit_bytes = thresh * 4096;
    let (_, done, written, max_write, stats) = run(p.clone());
    println!(
        "dd of 400 MB, dirty limit {:.0} MB: returned at {:.2} s with {:.0} MB on the device, longest write() {:.0} ms, \
         peak dirty+writeback {:.0} MB, {} throttle waits",
        limit_bytes as f64 / 1e6,
        done.as_secs_f64(),
        written as f64 / 1e6,
        max_write.as_millis_f64(),
        (stats.peak_dirty_writeback_pages * 4096) as f64 / 1e6,
        stats.throttle_waits
    );
    let total = 400u64 << 20;
    // Everything beyond the dirty limit (less one ratelimit step of slack)
    // had to be written before dd could return.
    let slack = p.ratelimit_pages() * 4096 * 2;
    assert!(
        written + limit_bytes + slack >= total,
        "only {written} bytes written by then"
    );
    assert!(stats.peak_dirty_writeback_pages <= thresh + 2 * p.sync_writeback_pages());
    assert!(
        max_write > Duration::from_millis(100),
        "no write() was ever held"
    );
    assert!(stats.throttle_waits > 0);

    // Control: with memory for all of it, dd returns at memory speed.
    let big = HostParams {
        memory: 4 << 30,
        ..HostParams::default()
    };
    let (_, done_big, written_big, _, _) = run(big);
    println!(
        "with 4 GB of memory: returned at {:.2} s with {:.0} MB on the device",
        done_big.as_secs_f64(),
        written_big as f64 / 1e6
    );
    assert!(done_big.as_secs_f64() < 1.0);
    assert!(done.as_secs_f64() > 5.0 * done_big.as_secs_f64());
}

#[test]
fn fsync_returns_only_after_the_files_data_completed_on_the_device() {
    for fsync in [true, false] {
        let mut host = common::host_on("ide-2003", 1, None);
        let row = host.add_row("w", true);
        host.spawn(
            row,
            Box::new(WriteAndFsync::new(FileId::ROOT, 20 << 20, fsync)),
            Duration::ZERO,
            IoPrio::default(),
        );
        let (_, log) = common::run(&mut host, "deadline", "ide-2003", 600);
        let done = host.row_stats(row).finished.expect("finished");
        // The new file is the root's last entry.
        let file = *host.fs().children(FileId::ROOT).last().unwrap();
        let geo = &host.fs().geo;
        let mut sectors = Vec::new();
        host.fs().for_runs(file, 0, 20 << 8, |_, d, n| {
            sectors.push((geo.sector_of(d), geo.sector_of(d + n)))
        });
        let covers = |s: &Seen| {
            sectors
                .iter()
                .any(|&(a, b)| s.sector < b && s.sector + u64::from(s.sectors) > a)
        };
        let writes: Vec<&Seen> = log
            .iter()
            .filter(|s| s.op == Op::Write && covers(s))
            .collect();
        let bytes: u64 = writes.iter().map(|s| u64::from(s.sectors) * 512).sum();
        let last = writes.iter().filter_map(|s| s.completed).max();
        println!(
            "fsync {fsync}: returned at {:.3} s; {:.1} MB of its data written, last completed at {:?} s",
            done.as_secs_f64(),
            bytes as f64 / 1e6,
            last.map(|t| t.as_secs_f64())
        );
        if fsync {
            assert!(bytes >= 20 << 20, "all data written");
            let last = last.unwrap();
            assert!(
                last <= done,
                "fsync returned before its data was on the device"
            );
            assert!(
                done.since(last) < Duration::from_millis(5),
                "fsync returned promptly"
            );
            assert!(writes
                .iter()
                .all(|s| s.completed.is_some_and(|c| c <= done)));
            // The 2.5.61 host's block layer carries no sync hint.
            assert!(writes.iter().all(|s| !s.sync && !s.noidle), "fsync writes");
        } else {
            assert!(last.is_none_or(|t| t < done) || bytes < 20 << 20);
            // Writeback is async and never REQ_NOIDLE.
            assert!(writes.iter().all(|s| !s.sync && !s.noidle), "writeback");
            assert!(
                done.as_secs_f64() < 0.1,
                "without fsync the writer returns at memory speed"
            );
        }
    }
}

/// Which writes carry the sync hint, by kernel: none on 2.5.61's block
/// layer; fsync's (`PF_SYNCWRITE` in `sys_fsync`) but not sync(2)'s from
/// 2.5.74; every data-integrity writeback (`WRITE_SYNC_PLUG`) from 2.6.30.
#[test]
fn the_sync_hint_marks_fsync_and_sync_writes_as_the_kernel_did() {
    // fsync: write-and-fsync of 8 MB; sync(2): cp of an 8 MB file, then
    // sync. Under the background threshold and younger than
    // dirty_expire, so fsync or sync(2) writes all of the data.
    let writes = |hint: SyncWriteHint, fsync: bool| {
        let params = HostParams {
            sync_write_hint: hint,
            ..HostParams::default()
        };
        let mut host = common::host_on("ide-2003", 1, Some(params));
        let row = host.add_row("w", true);
        let program: Box<dyn elevator_host::Program> = if fsync {
            Box::new(WriteAndFsync::new(FileId::ROOT, 8 << 20, true))
        } else {
            let src = big_file(host.fs_mut(), FileId::ROOT, 8 << 20, 1).unwrap();
            Box::new(Cp::new(src, false, FileId::ROOT, 4096, true))
        };
        host.spawn(row, program, Duration::ZERO, IoPrio::default());
        let (_, log) = common::run(&mut host, "deadline", "ide-2003", 600);
        host.row_stats(row).finished.expect("finished");
        let w: Vec<(bool, bool)> = log
            .iter()
            .filter(|s| s.op == Op::Write)
            .map(|s| (s.sync, s.noidle))
            .collect();
        assert!(w.len() >= 8 << 20 >> 17, "{} writes", w.len());
        w
    };
    for (hint, fsync_marked, sync_marked) in [
        (SyncWriteHint::Never, false, false),
        (SyncWriteHint::Fsync, true, false),
        (SyncWriteHint::DataIntegrity, true, true),
    ] {
        for (fsync, marked) in [(true, fsync_marked), (false, sync_marked)] {
            let w = writes(hint, fsync);
            println!(
                "{hint:?}, {}: {} of {} writes sync",
                if fsync { "fsync" } else { "sync(2)" },
                w.iter().filter(|x| x.0).count(),
                w.len()
            );
            assert!(
                w.iter()
                    .all(|&(sync, noidle)| sync == marked && noidle == marked),
                "{hint:?} fsync={fsync}"
            );
        }
    }
    assert_eq!(
        HostParams::linux_2_6().sync_write_hint,
        SyncWriteHint::Never
    );
    assert_eq!(
        HostParams::linux_2_6_32().sync_write_hint,
        SyncWriteHint::DataIntegrity
    );
}

/// 2.5.61's `balance_dirty_pages` keeps a throttled writer until dirty and
/// writeback memory is under the limit; from 2.5.65 it lets it go once it
/// has written `sync_writeback_pages()`, over the limit or not. A second
/// writer that dirties a little while dd streams is held far longer by the
/// first rule.
#[test]
fn a_throttled_writer_leaves_only_under_the_limit_on_2_5_61() {
    let run = |until_below: bool| {
        // Request slots enough that a writer never waits for one (Andrew
        // Morton tested "an 8192-slot queue" in the seed's thread): only
        // balance_dirty_pages holds it.
        let params = HostParams {
            throttle_until_below_limit: until_below,
            nr_requests: 8192,
            ..HostParams::default()
        };
        let mut host = common::host_on("ide-2003", 1, Some(params));
        let f = host
            .fs_mut()
            .create(FileId::ROOT, elevator_host::fs::Kind::File, 1)
            .unwrap();
        let dd = host.add_row("dd", false);
        host.spawn(
            dd,
            Box::new(Dd::new(f, 1 << 20, 400, true)),
            Duration::ZERO,
            IoPrio::default(),
        );
        // Once dd holds memory at the limit: 64 writes of 64 KiB.
        let small = host.add_row("small", true);
        host.spawn(
            small,
            Box::new(WriteAndFsync::new(FileId::ROOT, 4 << 20, false)),
            Duration::from_secs(8),
            IoPrio::default(),
        );
        common::run(&mut host, "deadline", "ide-2003", 600);
        let s = host.row_stats(small);
        let took = s.finished.expect("small writer finished").as_secs_f64() - 8.0;
        (took, host.stats)
    };
    let (held, old) = run(true);
    let (let_go, new) = run(false);
    println!(
        "4 MB written during dd: {held:.2} s on 2.5.61 ({} exits over the limit, {} waits), \
         {let_go:.2} s on 2.5.65+ ({} exits over the limit, {} waits)",
        old.throttle_exits_over_limit,
        old.throttle_waits,
        new.throttle_exits_over_limit,
        new.throttle_waits
    );
    assert_eq!(old.throttle_exits_over_limit, 0);
    assert!(new.throttle_exits_over_limit > 0);
    assert!(old.throttle_waits > new.throttle_waits);
    assert!(
        held > 2.0 * let_go,
        "held {held:.2} s, let go {let_go:.2} s"
    );
    assert!(HostParams::linux_2_6().throttle_until_below_limit);
    assert!(!HostParams::linux_2_6_32().throttle_until_below_limit);
}

#[test]
fn same_seed_same_run() {
    let once = || {
        let mut host = common::host_on("ide-2003", 7, None);
        let f = big_file(host.fs_mut(), FileId::ROOT, 20 << 20, 1).unwrap();
        let g = host
            .fs_mut()
            .create(FileId::ROOT, elevator_host::fs::Kind::File, 1)
            .unwrap();
        let row = host.add_row("cat", true);
        host.spawn(
            row,
            Box::new(Cat::new(vec![f], BUFFER_2003, false)),
            Duration::ZERO,
            IoPrio::default(),
        );
        let w = host.add_row("dd", false);
        host.spawn(
            w,
            Box::new(Dd::new(g, 1 << 20, 100, true)),
            Duration::ZERO,
            IoPrio::default(),
        );
        let (summary, log) = common::run(&mut host, "deadline", "ide-2003", 600);
        let trace: Vec<(u64, u32, u64, u64)> = log
            .iter()
            .map(|s| {
                (
                    s.sector,
                    s.sectors,
                    s.submitted.nanos(),
                    s.completed.map_or(0, |c| c.nanos()),
                )
            })
            .collect();
        (summary.end, trace)
    };
    assert_eq!(once(), once());
}
