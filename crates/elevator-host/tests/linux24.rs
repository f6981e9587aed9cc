//! The 2.4 host on the 2.4 block layer under linus24: 2.4's read-ahead,
//! one request per block merged by the elevator, 64 KiB requests, and the
//! streaming reader's capture of the disk.

mod common;

use elevator_core::{Duration, IoPrio, Op};
use elevator_host::fs::gen::big_file;
use elevator_host::fs::FileId;
use elevator_host::process::{Cat, BUFFER_2003};
use elevator_host::{Host, HostParams};

fn cat(host: &mut Host, files: Vec<FileId>) -> usize {
    let row = host.add_row("cat", true);
    host.spawn(
        row,
        Box::new(Cat::new(files, BUFFER_2003, false)),
        Duration::ZERO,
        IoPrio::default(),
    );
    row
}

#[test]
fn a_2_4_cat_ramps_up_to_two_64k_requests_per_window() {
    let mut host = common::host_on_24("ide-2003", 1);
    let f = big_file(host.fs_mut(), FileId::ROOT, 8 << 20, 1).unwrap();
    cat(&mut host, vec![f]);
    let (summary, log) = common::run_24(&mut host, "ide-2003", 60);
    let sizes: Vec<u32> = log
        .iter()
        .filter(|s| s.op == Op::Read)
        .map(|s| s.sectors)
        .collect();
    let mb_s = 8.0 * 1.048_576 / summary.end.as_secs_f64();
    println!(
        "2.4 cat of 8 MiB: {:.1} MB/s, {} requests at the device for {} blocks read; first sizes {:?}",
        mb_s,
        sizes.len(),
        summary.completed,
        &sizes[..12]
    );
    // The inode block, then page 0 with 3 pages of read-ahead (32
    // sectors), then the 7-page window; the 13-page one is split by the
    // indirect block read in its middle.
    assert_eq!(&sizes[..3], &[8, 32, 56]);
    // Nothing larger than IDE's 128 sectors; the stream in 64 KiB pieces.
    assert!(sizes.iter().all(|&s| s <= 128));
    let full = sizes.iter().filter(|&&s| s == 128).count();
    assert!(full * 10 >= sizes.len() * 8, "{full} of {}", sizes.len());
    // Every block went down as its own request and was merged below.
    assert!(summary.completed >= 2048);
    // Read-ahead keeps the disk busy: near the disk's rate.
    assert!(mb_s > 30.0, "{mb_s:.1} MB/s");
}

#[test]
fn the_last_partial_page_is_a_read_of_its_own_on_2_4() {
    let count_reads = |params: HostParams, twenty_four: bool| {
        let mut host = if twenty_four {
            common::host_on_24("ide-2003", 1)
        } else {
            common::host_on("ide-2003", 1, Some(params))
        };
        let f = big_file(host.fs_mut(), FileId::ROOT, 10 * 1024, 1).unwrap();
        cat(&mut host, vec![f]);
        let (_, log) = if twenty_four {
            common::run_24(&mut host, "ide-2003", 10)
        } else {
            common::run(&mut host, "noop", "ide-2003", 10)
        };
        // Data reads only: the file's blocks lie past the inode table.
        let first_data = log
            .iter()
            .filter(|s| s.op == Op::Read)
            .map(|s| s.sector)
            .max()
            .unwrap();
        log.iter()
            .filter(|s| s.op == Op::Read && s.sector + 24 >= first_data)
            .map(|s| (s.sector, s.sectors))
            .collect::<Vec<_>>()
    };
    let old = count_reads(HostParams::linux_2_4(), true);
    let new = count_reads(HostParams::linux_2_6(), false);
    println!("reads of a 10 KiB file: 2.4 {old:?}, 2.6 {new:?}");
    // 2.4: pages 0-1, then page 2 when cat gets there; 2.6: one read.
    assert_eq!(old.len(), 2);
    assert_eq!(old[0].1, 16);
    assert_eq!(old[1].1, 8);
    assert_eq!(new.len(), 1);
}

#[test]
fn parallel_2_4_cats_take_turns_holding_the_disk() {
    let mut host = common::host_on_24("ide-2003", 1);
    let files: Vec<FileId> = (0..4)
        .map(|i| big_file(host.fs_mut(), FileId::ROOT, 40 << 20, 300 + i).unwrap())
        .collect();
    let rows: Vec<usize> = files.iter().map(|&f| cat(&mut host, vec![f])).collect();
    let (summary, log) = common::run_24(&mut host, "ide-2003", 120);
    let done: Vec<f64> = rows
        .iter()
        .map(|&r| host.row_stats(r).finished.expect("done").as_secs_f64())
        .collect();
    // Runs of consecutive requests from one reader at the device.
    let mut runs = Vec::new();
    let mut run = 0;
    let mut last = None;
    for s in log.iter().filter(|s| s.op == Op::Read && s.sectors > 8) {
        if last == Some(s.task) {
            run += 1;
        } else {
            if run > 0 {
                runs.push(run);
            }
            run = 1;
            last = Some(s.task);
        }
    }
    let longest = runs.iter().copied().max().unwrap_or(0);
    let mb_s = 4.0 * 40.0 * 1.048_576 / summary.end.as_secs_f64();
    println!(
        "four 40 MiB cats on 2.4: done at {done:.1?} s, {mb_s:.1} MB/s, longest run of one reader's requests {longest}"
    );
    // A reader whose read-ahead merges into its own queued request holds
    // the disk for many requests in a row (fair C-SCAN would give each 2
    // per sweep): unfair, but few seeks.
    assert!(longest >= 30, "{longest}");
    let first = done.iter().copied().fold(f64::MAX, f64::min);
    let lastf = done.iter().copied().fold(0.0, f64::max);
    assert!(lastf > 1.5 * first, "{first:.1} vs {lastf:.1}");
    assert!(mb_s > 25.0, "{mb_s:.1} MB/s");
}
