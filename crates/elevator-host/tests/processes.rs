//! Each process kind runs on `ide-2003` and reports its figures.

mod common;

use elevator_core::{Duration, IoPrio, Prng};
use elevator_host::fs::gen::{big_file, files_under, place_tree, xterm_startup, TreeShape};
use elevator_host::fs::{FileId, Kind};
use elevator_host::process::{
    AppStart, Cp, FsyncTester, Player, RandomWriter, TiotestThread, BUFFER_2003,
};

#[test]
fn tiotest_fills_its_rate_and_latency_tables() {
    let mut host = common::host_on("ide-2003", 1, None);
    let row = host.add_row("tiotest", true);
    let threads = 4;
    let barrier = host.new_barrier(threads);
    for t in 0..threads {
        let rng = Prng::derive(1, &format!("t{t}"));
        let program = TiotestThread::new(
            FileId::ROOT,
            32 << 20,
            4096,
            1000,
            threads as u32,
            barrier,
            rng,
        );
        host.spawn(row, Box::new(program), Duration::ZERO, IoPrio::default());
    }
    let (summary, _) = common::run(&mut host, "deadline", "ide-2003", 3600);
    assert!(!summary.timed_out);
    let x = &host.row_stats(row).extra;
    println!("tiotest, 4 threads x 32 MB, 4 KiB blocks, 1000 random ops per thread:");
    println!("  phase        MB/s    avg ms    max ms   %>2s  %>10s");
    for p in elevator_host::process::tiotest::PHASES {
        let g = |k: &str| x.get(&format!("{p}_{k}")).copied().unwrap_or(f64::NAN);
        println!(
            "  {p:<10} {:>7.2} {:>9.3} {:>9.1} {:>6.2} {:>6.2}",
            g("mb_s"),
            g("lat_avg_ms"),
            g("lat_max_ms"),
            g("pct_over_2s"),
            g("pct_over_10s")
        );
        assert!(g("mb_s") > 0.0 && g("mb_s").is_finite(), "{p}");
        assert_eq!(
            g("calls"),
            if p.starts_with("seq") {
                4.0 * 8192.0
            } else {
                4000.0
            }
        );
    }
    // 128 MB of files in 256 MB of memory: the reads hit the cache.
    assert!(x["seq_read_mb_s"] > 10.0 * x["seq_write_mb_s"]);
}

#[test]
fn a_player_alone_misses_no_frame() {
    let mut host = common::host_on("ide-2003", 1, None);
    let f = big_file(host.fs_mut(), FileId::ROOT, 64 << 20, 1).unwrap();
    let row = host.add_row("player", true);
    let program = Player::new(f, 16 << 10, Duration::from_millis(40), 250, 1, false);
    host.spawn(row, Box::new(program), Duration::ZERO, IoPrio::default());
    common::run(&mut host, "deadline", "ide-2003", 600);
    let x = &host.row_stats(row).extra;
    println!(
        "player alone: {} frames, {} missed, worst frame {:.1} ms",
        x["frames"], x["frames_missed"], x["worst_frame_ms"]
    );
    assert_eq!(x["frames"], 250.0);
    assert_eq!(x["frames_missed"], 0.0);
}

#[test]
fn fsync_tester_times_each_fsync_and_a_random_writer_makes_them_slower() {
    let mut results = Vec::new();
    for random_writer in [false, true] {
        let mut host = common::host_on("ide-2003", 1, None);
        let f = host.fs_mut().create(FileId::ROOT, Kind::File, 1).unwrap();
        let rnd = big_file(host.fs_mut(), FileId::ROOT, 256 << 20, 1).unwrap();
        let row = host.add_row("fsync-tester", true);
        let program = FsyncTester::new(f, 1 << 20, Duration::from_secs(4), Duration::from_secs(40));
        host.spawn(row, Box::new(program), Duration::ZERO, IoPrio::default());
        if random_writer {
            let r = host.add_row("rnd", false);
            host.spawn(
                r,
                Box::new(RandomWriter::new(rnd, Prng::new(4096))),
                Duration::ZERO,
                IoPrio::default(),
            );
        }
        common::run(&mut host, "deadline", "ide-2003", 600);
        let x = host.row_stats(row).extra.clone();
        println!(
            "fsync-tester{}: {} fsyncs, mean {:.3} s, max {:.3} s",
            if random_writer {
                " with a random writer"
            } else {
                ""
            },
            x["fsyncs"],
            x["fsync_mean_s"],
            x["fsync_max_s"]
        );
        assert!(x["fsyncs"] >= 4.0);
        results.push(x["fsync_max_s"]);
    }
    assert!(results[1] > results[0]);
}

#[test]
fn an_xterm_starts_in_about_a_second_on_an_idle_disk() {
    let mut host = common::host_on("ide-2003", 1, None);
    let mut rng = Prng::new(5);
    let (_, ops) = xterm_startup(host.fs_mut(), FileId::ROOT, &mut rng, 1).unwrap();
    let bytes: u64 = ops.iter().map(|o| o.len).sum();
    let row = host.add_row("xterm", true);
    host.spawn(
        row,
        Box::new(AppStart::new(ops)),
        Duration::ZERO,
        IoPrio::default(),
    );
    let (summary, _) = common::run(&mut host, "deadline", "ide-2003", 600);
    let t = host.row_stats(row).extra["startup_s"];
    println!(
        "xterm-sized start-up on an idle disk: {t:.2} s ({:.1} MiB read)",
        bytes as f64 / 1048576.0
    );
    assert!((0.5..3.0).contains(&t));
    assert!((summary.end.as_secs_f64() - t).abs() < 0.01);
}

#[test]
fn cp_a_copies_a_tree_and_sync_leaves_nothing_dirty() {
    let mut host = common::host_on("ide-2003", 1, None);
    let mut rng = Prng::new(2);
    let shape = TreeShape::kernel_tree(&mut rng);
    let src = place_tree(host.fs_mut(), FileId::ROOT, &shape, 1).unwrap();
    let row = host.add_row("cp", true);
    host.spawn(
        row,
        Box::new(Cp::new(src, true, FileId::ROOT, BUFFER_2003, true)),
        Duration::ZERO,
        IoPrio::default(),
    );
    let (summary, _) = common::run(&mut host, "deadline", "ide-2003", 3600);
    let fs = host.fs();
    let copy = *fs.children(FileId::ROOT).last().unwrap();
    let a = files_under(fs, src);
    let b = files_under(fs, copy);
    assert_eq!(a.len(), b.len());
    assert!(a.iter().zip(&b).all(|(&x, &y)| fs.size(x) == fs.size(y)));
    assert_ne!(
        fs.inode(copy).group,
        fs.inode(src).group,
        "Orlov put the copy elsewhere"
    );
    println!(
        "cp -a of one kernel tree + sync: {:.1} s; dirty after sync: {} pages",
        summary.end.as_secs_f64(),
        host.cache().dirty()
    );
    assert_eq!(host.cache().dirty() + host.cache().writeback(), 0);
}
