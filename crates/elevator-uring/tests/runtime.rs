//! The runtime on a temporary file (no root needed): every request comes
//! back exactly once under every policy, injected device faults reach the
//! submitter, `Dispatch::Wait` sleeps on a real timer, and the target rules
//! refuse what they must.

use elevator_core::{
    Duration, GroupId, Instant, IoPrio, Op, QueueLimits, Request, RequestId, TaskId,
};
use elevator_sched::{registry, Dispatch, Scheduler};
use elevator_uring::target::{self, Access, TargetError};
use elevator_uring::{Backend, Done, FaultPlan, Faulty, Runtime, Submission, Submit, Uring};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const FILE_BYTES: u64 = 8 << 20;
const DEPTH: usize = 8;

fn limits() -> QueueLimits {
    QueueLimits {
        rotational: false,
        queue_depth: DEPTH as u32,
        max_sectors: 256,
        capacity: FILE_BYTES / 512,
    }
}

/// A temporary file opened for the runtime: O_DIRECT where the file
/// system allows it (the target directory usually does), buffered where
/// it does not (tmpfs), which is said on stderr.
fn temp_target(dir: &Path) -> target::Target {
    let path = dir.join("target.bin");
    let access = Access {
        direct: true,
        writes: true,
        allow_write: true,
        size: FILE_BYTES,
    };
    match target::open(&path, access) {
        Ok(t) => t,
        Err(TargetError::Io { error, .. }) if error.raw_os_error() == Some(libc::EINVAL) => {
            eprintln!("O_DIRECT refused by the file system of {dir:?}: buffered I/O");
            let _ = std::fs::remove_file(&path);
            target::open(
                &path,
                Access {
                    direct: false,
                    ..access
                },
            )
            .expect("open the temporary file")
        }
        Err(e) => panic!("open the temporary file: {e}"),
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a temporary directory")
}

/// Checks the depth limit from below the runtime.
#[derive(Debug)]
struct DepthCheck<B> {
    inner: B,
    max_seen: usize,
}

impl<B: Backend> Backend for DepthCheck<B> {
    fn push(&mut self, sub: Submission) -> std::io::Result<()> {
        self.inner.push(sub)?;
        self.max_seen = self.max_seen.max(self.inner.in_flight());
        Ok(())
    }
    fn arm_timer(&mut self, after: std::time::Duration) -> std::io::Result<()> {
        self.inner.arm_timer(after)
    }
    fn wait(&mut self, out: &mut Vec<(u64, i32)>) -> std::io::Result<()> {
        self.inner.wait(out)
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
}

/// A mix that exercises merging, classes and groups: four tasks (RT, BE,
/// BE, IDLE) in two groups; task 0 reads sequentially in 4 KiB pieces
/// (back merges), the others read and write at scattered 4 KiB offsets.
fn mixed_requests(n: u32) -> Vec<Submit> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let task = i % 4;
            let prio = match task {
                0 => IoPrio::rt(4),
                3 => IoPrio::idle(),
                _ => IoPrio::be(task as u8 * 2),
            };
            let offset = if task == 0 {
                u64::from(i / 4) * 4096
            } else {
                (state % (FILE_BYTES / 4096)) * 4096
            };
            Submit {
                op: if task == 2 && i % 3 == 0 {
                    Op::Write
                } else {
                    Op::Read
                },
                offset,
                len: 4096,
                task: TaskId(task),
                prio,
                group: GroupId(task % 2),
            }
        })
        .collect()
}

/// Submit in bursts while polling, then drain; each id must return once.
fn run_to_completion<B: Backend>(
    rt: &mut Runtime<B>,
    subs: &[Submit],
) -> BTreeMap<RequestId, Done> {
    let mut returned: BTreeMap<RequestId, Done> = BTreeMap::new();
    let mut ids = Vec::new();
    let mut out = Vec::new();
    for burst in subs.chunks(24) {
        for s in burst {
            ids.push(rt.submit(*s).expect("aligned"));
        }
        out.clear();
        rt.poll(None, &mut out).expect("poll");
        for d in &out {
            assert!(
                returned.insert(d.id, *d).is_none(),
                "{:?} returned twice",
                d.id
            );
        }
    }
    out.clear();
    rt.drain(&mut out).expect("drain");
    for d in &out {
        assert!(
            returned.insert(d.id, *d).is_none(),
            "{:?} returned twice",
            d.id
        );
    }
    assert_eq!(returned.len(), ids.len(), "every submitted request returns");
    for id in &ids {
        assert!(returned.contains_key(id), "{id:?} never returned");
    }
    assert_eq!(rt.outstanding(), 0);
    returned
}

#[test]
fn every_request_returns_exactly_once_under_every_policy() {
    let dir = tempdir();
    let subs = mixed_requests(600);
    for t in registry() {
        let target = temp_target(dir.path());
        let backend = DepthCheck {
            inner: Uring::new(target.file, 64).expect("io_uring"),
            max_seen: 0,
        };
        let mut rt = Runtime::new(backend, t.build_default(&limits()), DEPTH);
        let returned = run_to_completion(&mut rt, &subs);
        for d in returned.values() {
            assert_eq!(d.result, Ok(d.len), "{} {:?}", t.name, d);
            assert!(d.submitted <= d.dispatched && d.dispatched <= d.completed);
        }
        let stats = rt.stats();
        assert_eq!(stats.submitted, 600);
        assert_eq!(stats.returned, 600);
        assert!(stats.dispatched <= 600);
        assert!(
            rt.backend().max_seen <= DEPTH,
            "{}: {} in flight, depth {DEPTH}",
            t.name,
            rt.backend().max_seen
        );
        drop(rt);
        std::fs::remove_file(dir.path().join("target.bin")).unwrap();
    }
}

#[test]
fn eio_short_reads_and_enospc_reach_the_submitter() {
    let dir = tempdir();
    let target = temp_target(dir.path());
    let plan = FaultPlan {
        read_eio_every: 7,
        short_read_every: 5,
        write_enospc_every: 4,
    };
    let backend = Faulty::new(Uring::new(target.file, 64).expect("io_uring"), plan);
    let policy = elevator_sched::find("deadline")
        .unwrap()
        .build_default(&limits());
    let mut rt = Runtime::new(backend, policy, DEPTH);
    // 8 KiB apart: nothing merges, so one operation is one request.
    let subs: Vec<Submit> = (0..300u64)
        .map(|i| {
            let offset = (i * 7919 % 1000) * 8192;
            if i % 3 == 0 {
                Submit::write(i as u32 % 5, offset, 4096)
            } else {
                Submit::read(i as u32 % 5, offset, 4096)
            }
        })
        .collect();
    let returned = run_to_completion(&mut rt, &subs);
    let eio = returned
        .values()
        .filter(|d| d.result.is_err_and(|e| e.errno == libc::EIO))
        .count() as u64;
    let enospc = returned
        .values()
        .filter(|d| d.result.is_err_and(|e| e.errno == libc::ENOSPC))
        .count() as u64;
    let short: Vec<&Done> = returned.values().filter(|d| d.is_short()).collect();
    let (inj_eio, inj_short, inj_enospc) = rt.backend().injected;
    assert_eq!(inj_eio, 200 / 7, "every 7th of 200 reads");
    assert_eq!(eio, inj_eio);
    assert_eq!(short.len() as u64, inj_short);
    assert!(inj_short > 20);
    assert_eq!(enospc, inj_enospc);
    assert_eq!(inj_enospc, 100 / 4, "every 4th of 100 writes");
    for d in short {
        assert_eq!(d.op, Op::Read);
        assert_eq!(d.result, Ok(2048), "half of 4 KiB");
    }
    let stats = rt.stats();
    assert_eq!(stats.errors, eio + enospc);
    assert_eq!(stats.returned, 300);
}

/// Noop, except that after each completion it holds the device idle for
/// `IDLE` before dispatching again: anticipation reduced to its timer.
#[derive(Debug, Default)]
struct Idler {
    queue: std::collections::VecDeque<Request>,
    idle_until: Option<Instant>,
}

const IDLE: Duration = Duration::from_millis(20);

impl Scheduler for Idler {
    fn name(&self) -> &'static str {
        "idler"
    }
    fn insert(&mut self, request: Request, _now: Instant) {
        self.queue.push_back(request);
    }
    fn dispatch(&mut self, now: Instant) -> Dispatch {
        if let Some(until) = self.idle_until {
            if now < until {
                return Dispatch::Wait { until };
            }
            self.idle_until = None;
        }
        match self.queue.pop_front() {
            Some(r) => Dispatch::Request(r),
            None => Dispatch::Empty,
        }
    }
    fn complete(&mut self, _request: &Request, now: Instant) {
        self.idle_until = Some(now + IDLE);
    }
    fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[test]
fn dispatch_wait_sleeps_on_a_real_timer() {
    let dir = tempdir();
    let target = temp_target(dir.path());
    let backend = Uring::new(target.file, 16).expect("io_uring");
    let mut rt = Runtime::new(backend, Box::new(Idler::default()), 1);
    for i in 0..6 {
        rt.submit(Submit::read(1, i * 4096, 4096)).unwrap();
    }
    let mut out = Vec::new();
    rt.drain(&mut out).unwrap();
    assert_eq!(out.len(), 6);
    out.sort_by_key(|d| d.dispatched);
    for pair in out.windows(2) {
        let gap = pair[1].dispatched.since(pair[0].completed);
        assert!(
            gap >= IDLE,
            "dispatched {gap} after the previous completion"
        );
        // Woken by the timer, not by a poll loop or a much later event.
        assert!(gap < IDLE + Duration::from_millis(200), "woke {gap} late");
    }
    assert!(rt.stats().timers >= 5, "{:?}", rt.stats());
}

#[test]
fn a_caller_deadline_is_a_real_sleep() {
    let dir = tempdir();
    let target = temp_target(dir.path());
    let backend = Uring::new(target.file, 16).expect("io_uring");
    let mut rt = Runtime::new(backend, Box::new(Idler::default()), 1);
    let mut out = Vec::new();
    let start = rt.now();
    rt.poll(Some(start + Duration::from_millis(15)), &mut out)
        .unwrap();
    assert!(out.is_empty());
    let slept = rt.now().since(start);
    assert!(slept >= Duration::from_millis(15), "{slept}");
    assert!(slept < Duration::from_millis(215), "{slept}");
    // Nothing queued and no deadline: poll returns at once.
    rt.poll(None, &mut out).unwrap();
    assert!(out.is_empty());
}

#[test]
fn unaligned_requests_are_refused() {
    let dir = tempdir();
    let target = temp_target(dir.path());
    let backend = Uring::new(target.file, 16).expect("io_uring");
    let policy = elevator_sched::find("noop")
        .unwrap()
        .build_default(&limits());
    let mut rt = Runtime::new(backend, policy, 1);
    assert!(rt.submit(Submit::read(1, 100, 4096)).is_err());
    assert!(rt.submit(Submit::read(1, 0, 1000)).is_err());
    assert!(rt.submit(Submit::read(1, 0, 0)).is_err());
    assert_eq!(rt.outstanding(), 0);
}

#[test]
fn a_write_without_allow_write_is_refused_and_the_file_untouched() {
    let dir = tempdir();
    let path = dir.path().join("precious.bin");
    std::fs::write(&path, b"precious").unwrap();
    let err = target::open(
        &path,
        Access {
            direct: false,
            writes: true,
            allow_write: false,
            size: 4096,
        },
    )
    .unwrap_err();
    assert!(matches!(err, TargetError::WriteNotAllowed { .. }), "{err}");
    assert!(err.to_string().contains("--allow-write"), "{err}");
    // Reading needs more than the file holds: not grown without leave.
    let err = target::open(
        &path,
        Access {
            direct: false,
            writes: false,
            allow_write: false,
            size: 4096,
        },
    )
    .unwrap_err();
    assert!(matches!(err, TargetError::TooSmall { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
}

#[test]
fn a_missing_file_target_is_created_only_with_allow_write_and_never_under_dev() {
    let dir = tempdir();
    let path = dir.path().join("new.bin");
    let read = Access {
        direct: false,
        writes: false,
        allow_write: false,
        size: 3 << 20,
    };
    let err = target::open(&path, read).unwrap_err();
    assert!(matches!(err, TargetError::Missing { .. }), "{err}");
    assert!(err.to_string().contains("--allow-write"), "{err}");
    assert!(!path.exists(), "nothing created without --allow-write");
    let t = target::open(
        &path,
        Access {
            allow_write: true,
            ..read
        },
    )
    .unwrap();
    assert_eq!(t.bytes, 3 << 20);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 << 20);
    assert!(!t.block_device);
    let dev = Path::new("/dev/elevator-no-such-device");
    let err = target::open(
        dev,
        Access {
            allow_write: true,
            ..read
        },
    )
    .unwrap_err();
    assert!(matches!(err, TargetError::UnderDev { .. }), "{err}");
    assert!(!dev.exists());
}

#[test]
fn a_mounted_device_is_refused() {
    // The device holding `/` is mounted at `/` by definition; treat its
    // number as the target's. Works without root and without a real disk.
    let root_dev = std::fs::metadata("/").unwrap().dev();
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let err =
        target::check_block_device(Path::new("/dev/fake"), root_dev, &mounts, "").unwrap_err();
    match &err {
        TargetError::Mounted { at, .. } => {
            assert_eq!(std::fs::metadata(at).unwrap().dev(), root_dev, "{err}")
        }
        other => panic!("expected Mounted, got {other}"),
    }
    assert!(err.to_string().contains("mounted at"), "{err}");
    // A device number nothing is mounted from passes.
    assert!(target::check_block_device(Path::new("/dev/fake"), u64::MAX - 7, &mounts, "").is_ok());
}

#[test]
fn a_file_that_is_neither_regular_nor_a_block_device_is_refused() {
    let err = target::open(
        Path::new("/dev/null"),
        Access {
            direct: false,
            writes: false,
            allow_write: false,
            size: 0,
        },
    )
    .unwrap_err();
    assert!(matches!(err, TargetError::NotFileOrDevice { .. }), "{err}");
}

#[test]
fn client_threads_get_each_answer_once_under_idling_policies() {
    use elevator_uring::Service;
    let dir = tempdir();
    for name in ["noop", "cfq", "bfq", "anticipatory"] {
        let target = temp_target(dir.path());
        let backend = Uring::new(target.file, 64).expect("io_uring");
        let policy = elevator_sched::find(name).unwrap().build_default(&limits());
        let service = Service::start(Runtime::new(backend, policy, DEPTH)).expect("start");
        let threads: Vec<_> = (0..4u32)
            .map(|task| {
                let client = service.client();
                std::thread::spawn(move || {
                    let mut ok = 0;
                    for i in 0..100u64 {
                        // Dependent reads, one at a time: what idling is for.
                        let offset = (u64::from(task) * 512 + i) * 4096;
                        let done = client
                            .submit(Submit::read(task, offset, 4096))
                            .wait()
                            .unwrap();
                        assert_eq!(done.task, TaskId(task));
                        assert_eq!(done.offset, offset);
                        assert_eq!(done.result, Ok(4096));
                        ok += 1;
                    }
                    // Misaligned: refused, answered, nothing queued.
                    assert!(client.submit(Submit::read(task, 1, 4096)).wait().is_err());
                    client.task_exited(TaskId(task));
                    ok
                })
            })
            .collect();
        let total: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(total, 400);
        let stats = service.shutdown().expect("clean shutdown");
        assert_eq!(stats.submitted, 400, "{name}");
        assert_eq!(stats.returned, 400, "{name}");
        std::fs::remove_file(dir.path().join("target.bin")).unwrap();
    }
}

/// The stack builder gives the runtime what it gives the simulator: every
/// policy with the run's control groups and the group layers they ask for
/// (here io.max on one group), inside the invariant checker (asked here; on
/// anyway under debug assertions); and it refuses block-layer settings.
#[test]
fn the_builder_gives_the_runtime_groups_layers_and_the_checker() {
    use elevator_core::{GroupTree, IoMax};
    use elevator_sched::stack::{Origin, StackBuilder};
    let dir = tempdir();
    let mut tree = GroupTree::default();
    let slow = tree.add(
        "slow",
        GroupId::ROOT,
        100,
        "riops=100".parse::<IoMax>().unwrap(),
    );
    let fast = tree.add("fast", GroupId::ROOT, 300, IoMax::default());
    let subs: Vec<Submit> = mixed_requests(120)
        .into_iter()
        .enumerate()
        .map(|(i, s)| Submit {
            op: Op::Read,
            group: if i % 4 == 0 { slow } else { fast },
            ..s
        })
        .collect();
    for t in registry() {
        let target = temp_target(dir.path());
        let backend = Uring::new(target.file, 64).expect("io_uring");
        let builder = StackBuilder::new(t.name, Origin::command_line())
            .expect("registered")
            .groups(&tree)
            .check(true);
        let (mut rt, info) = Runtime::build(builder, backend, &limits(), DEPTH).expect("builds");
        assert_eq!(info.policy.name, t.name);
        let started = rt.now();
        let returned = run_to_completion(&mut rt, &subs);
        assert_eq!(returned.len(), subs.len());
        // 30 reads of the slow group at 100 IOPS, in 100 ms slices of 10:
        // io.max held them for at least two slices.
        let last_slow = returned
            .values()
            .zip(&subs)
            .filter(|(_, s)| s.group == slow)
            .map(|(d, _)| d.completed)
            .max()
            .expect("slow reads");
        assert!(
            last_slow.since(started) >= Duration::from_millis(190),
            "{}: io.max let 30 reads at 100 IOPS finish in {}",
            t.name,
            last_slow.since(started)
        );
        let report = rt.check_report().expect("the checker was asked for");
        assert_eq!(report.inserted, subs.len() as u64, "{}", t.name);
        assert_eq!(report.dispatches + report.merged_ids, subs.len() as u64);
        assert_eq!(report.completions, report.dispatches);
        drop(rt);
        std::fs::remove_file(dir.path().join("target.bin")).unwrap();
    }
    let target = temp_target(dir.path());
    let backend = Uring::new(target.file, 64).expect("io_uring");
    let builder = StackBuilder::new("noop", Origin::command_line())
        .unwrap()
        .overrides(&[("block".into(), "nr_requests".into(), 16)])
        .unwrap();
    let err = Runtime::build(builder, backend, &limits(), DEPTH).unwrap_err();
    assert!(err.to_string().contains("apply to the simulator"), "{err}");
}
