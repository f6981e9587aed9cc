//! The program registry and what the 2009 tools print: every registered
//! kind builds from its keys; tiotest runs its phases in order with the
//! documented sizes and prints its two tables; per-call samples are the
//! calls made.

mod common;

use elevator_core::{Duration, GroupId, IoPrio, Prng};
use elevator_host::fs::gen::files_under;
use elevator_host::fs::FileId;
use elevator_host::params::Allocator;
use elevator_host::process::registry::{self, Args, KeyType, SetKind, Value};
use elevator_host::process::tiotest::{self, TiotestThread, PHASES};
use elevator_host::process::{FsyncTester, PROGRAMS};
use elevator_host::setup::{self, FileKind, FileSet, ProcessSet};
use registry::Default as Given;

/// One file set of each kind a program may ask for.
fn sets() -> Vec<FileSet> {
    let set = |name: &str, kind: FileKind| FileSet {
        name: name.into(),
        line: 1,
        kind,
        count: 1,
        within: None,
        allocator: None,
    };
    vec![
        set("file", FileKind::File { size: 8 << 20 }),
        set("empty", FileKind::Empty),
        set("dir", FileKind::Dir),
        set("app", FileKind::App),
    ]
}

/// The set standing in for `kind` (a directory stands in for a tree).
fn set_for(kind: SetKind) -> &'static str {
    match kind {
        SetKind::File => "file",
        SetKind::Empty => "empty",
        SetKind::Dir | SetKind::Tree => "dir",
        SetKind::App => "app",
    }
}

/// A program's arguments from its keys alone: defaults, a file set of the
/// first accepted kind, 1 MiB for a required size.
fn args_from_keys(t: &registry::ProgramType) -> Args {
    let mut args = Args::default();
    for k in t.keys {
        let v = match (&k.ty, &k.default) {
            (KeyType::Files { kinds, .. }, _) => Value::Files(set_for(kinds[0]).into()),
            (_, Given::Size(n)) => Value::Size(*n),
            (_, Given::Int(n)) => Value::Int(*n),
            (_, Given::Bool(b)) => Value::Bool(*b),
            (_, Given::Time(d)) => Value::Time(*d),
            (KeyType::Size { min, .. }, Given::Required) => Value::Size((1 << 20).max(*min)),
            (ty, d) => panic!("{}: no stand-in for key {} ({ty:?}, {d:?})", t.name, k.name),
        };
        args.insert(k.name, v);
    }
    args
}

#[test]
fn every_registered_program_kind_builds_from_its_keys() {
    assert_eq!(PROGRAMS.len(), 9);
    for t in PROGRAMS {
        assert_eq!(
            elevator_host::process::programs::find(t.name).unwrap().name,
            t.name
        );
        let args = args_from_keys(t);
        if let Some(p) = t.period {
            assert!(matches!(t.key(p).unwrap().ty, KeyType::Time), "{}", t.name);
        }
        let process = ProcessSet {
            name: t.name.into(),
            line: 1,
            count: 2,
            program: t,
            args: args.clone(),
            start: Duration::ZERO,
            prio: IoPrio::default(),
            background: false,
            group: GroupId::ROOT,
        };
        let dev = elevator_device::open("ide-2003").unwrap();
        let params = elevator_host::HostParams {
            max_sectors: dev.limits().max_sectors,
            ..Default::default()
        };
        let host = setup::build(
            params,
            dev.limits().capacity,
            &sets(),
            &[process],
            1,
            1,
            Allocator::Orlov,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", t.name));
        assert_eq!(
            host.process_count() as u64,
            2 * (t.tasks)(&args),
            "{}: two instances spawn what `tasks` says",
            t.name
        );
        println!(
            "{}: builds, {} tasks per instance",
            t.name,
            (t.tasks)(&args)
        );
    }
    assert!(elevator_host::process::programs::find("rsync").is_none());
}

#[test]
fn tiotest_runs_its_phases_in_order_with_the_documented_sizes() {
    let (threads, size, bs, random_ops) = (2u32, 2u64 << 20, 4096u64, 256u64);
    let mut host = common::host_on("ide-2003", 1, None);
    let row = host.add_row("tiotest", true);
    let barrier = host.new_barrier(threads as usize);
    for t in 0..threads {
        let rng = Prng::derive(1, &format!("t{t}"));
        let program = TiotestThread::new(FileId::ROOT, size, bs, random_ops, threads, barrier, rng);
        host.spawn(row, Box::new(program), Duration::ZERO, IoPrio::default());
    }
    let (summary, _) = common::run(&mut host, "deadline", "ide-2003", 600);
    assert!(!summary.timed_out);
    let stats = host.row_stats(row);
    let x = &stats.extra;
    let blocks = size / bs;
    // Sizes: sequential phases move each thread's whole file in `bs` calls,
    // random phases make `random_ops` calls per thread; write phases end
    // with one fsync per thread.
    for (p, phase) in PHASES.iter().enumerate() {
        let want = u64::from(threads) * if p % 2 == 0 { blocks } else { random_ops };
        assert_eq!(
            stats.calls.samples(&tiotest::call(p)).len() as u64,
            want,
            "{phase}"
        );
        let fsyncs = stats.calls.samples(&format!("{phase}.fsync")).len() as u64;
        assert_eq!(
            fsyncs,
            if p < 2 { u64::from(threads) } else { 0 },
            "{phase}"
        );
        let mb = u64::from(threads) * if p % 2 == 0 { size } else { random_ops * bs };
        assert_eq!(
            x[&format!("{phase}_mb")],
            mb as f64 / (1 << 20) as f64,
            "{phase}"
        );
    }
    // Order: a phase starts when the last thread has ended the one before.
    for p in 0..PHASES.len() - 1 {
        let end = x[&format!("{}_end_s", PHASES[p])];
        let next = x[&format!("{}_start_s", PHASES[p + 1])];
        assert!(x[&format!("{}_start_s", PHASES[p])] < end, "{}", PHASES[p]);
        assert!(
            end <= next,
            "{} ends at {end} s, {} starts at {next} s",
            PHASES[p],
            PHASES[p + 1]
        );
    }
    // One file per thread, of `size` bytes.
    let files = files_under(host.fs(), FileId::ROOT);
    assert_eq!(files.len(), threads as usize);
    for f in files {
        assert_eq!(host.fs().size(f), size);
    }
    // tiotest's two tables, its phases in its order, within 100 columns.
    let out = &host.row_stats(row).output;
    for line in out {
        println!("{line}");
        assert!(line.chars().count() <= 100, "{line}");
    }
    assert_eq!(out[0], "Tiotest results for 2 concurrent io threads:");
    let items: Vec<String> = out
        .iter()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Item"))
        .map(|l| {
            l[2..]
                .split(" |")
                .next()
                .unwrap()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        items,
        [
            "Write 4 MBs",
            "Random Write 2 MBs",
            "Read 4 MBs",
            "Random Read 2 MBs",
            "Write",
            "Random Write",
            "Read",
            "Random Read",
            "Total"
        ]
    );
}

#[test]
fn per_call_samples_are_the_calls_made() {
    let mut host = common::host_on("ide-2003", 1, None);
    let f = host
        .fs_mut()
        .create(FileId::ROOT, elevator_host::fs::Kind::File, 1)
        .unwrap();
    let row = host.add_row("fsync-tester", true);
    let program = FsyncTester::new(f, 1 << 20, Duration::from_secs(4), Duration::from_secs(20));
    host.spawn(row, Box::new(program), Duration::ZERO, IoPrio::default());
    common::run(&mut host, "deadline", "ide-2003", 600);
    let stats = host.row_stats(row);
    let fsyncs = stats.calls.samples("fsync");
    // 0, 4, ..., 20 s: six rounds, each a write and an fsync.
    assert_eq!(fsyncs.len(), 6);
    assert_eq!(stats.calls.samples("write").len(), 6);
    assert_eq!(stats.extra["fsyncs"], 6.0);
    for call in ["write", "fsync"] {
        let samples = stats.calls.samples(call);
        let s = stats.calls.summary(call).unwrap();
        let max = samples.iter().max().unwrap().as_millis_f64();
        assert_eq!(s.count, samples.len() as u64, "{call}");
        assert_eq!(s.max_ms, max, "{call}");
        assert!(s.median_ms <= s.p90_ms && s.p90_ms <= s.max_ms, "{call}");
        assert!(
            samples.iter().any(|d| d.as_millis_f64() == s.median_ms),
            "{call}"
        );
    }
    assert_eq!(
        stats.extra["fsync_max_s"],
        fsyncs.iter().max().unwrap().as_secs_f64()
    );
    // Every fsync printed as the tool prints it, in order.
    let printed: Vec<String> = fsyncs
        .iter()
        .map(|d| format!("fsync time: {:.4}", d.as_secs_f64()))
        .collect();
    assert_eq!(stats.output, printed);
    for line in &stats.output {
        println!("{line}");
    }
}
