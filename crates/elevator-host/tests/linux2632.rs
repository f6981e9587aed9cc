//! The 2.6.32 host and block layer, observed at the device: `READ_META` on
//! metadata reads, and writeback that backs off the queue's congestion bit.

mod common;

use elevator_core::{Duration, Instant, IoPrio, Op, QueueLimits, Request, TaskId};
use elevator_host::fs::gen::big_file;
use elevator_host::fs::FileId;
use elevator_host::process::{Cat, Dd, BUFFER_2003};
use elevator_host::syscall::{Ctx, Program, Syscall};
use elevator_host::{Host, HostParams};
use elevator_sched::{Dispatch, MayQueue, Scheduler};
use elevator_sim::{Engine, EngineConfig};
use std::sync::{Arc, Mutex};

/// Reads one directory, then exits.
#[derive(Debug)]
struct ReadDir(FileId, bool);

impl Program for ReadDir {
    fn next(&mut self, _cx: &mut Ctx<'_>) -> Syscall {
        if std::mem::replace(&mut self.1, true) {
            Syscall::Exit
        } else {
            Syscall::ReadDir(self.0)
        }
    }
}

/// `ls` of the root directory, then `cat` of an 8 MiB file.
fn metadata_reads(params: HostParams) -> (Host, Vec<common::Seen>) {
    let mut host = common::host_on("hdd-2009", 1, Some(params));
    let f = big_file(host.fs_mut(), FileId::ROOT, 8 << 20, 1).unwrap();
    let ls = host.add_row("ls", true);
    host.spawn(
        ls,
        Box::new(ReadDir(FileId::ROOT, false)),
        Duration::ZERO,
        IoPrio::default(),
    );
    let cat = host.add_row("cat", true);
    host.spawn(
        cat,
        Box::new(Cat::new(vec![f], BUFFER_2003, false)),
        Duration::from_millis(100),
        IoPrio::default(),
    );
    let (_, log) = common::run_on(
        &mut host,
        "cfq-2.6.32",
        "hdd-2009",
        60,
        EngineConfig::linux_2632(),
    );
    (host, log)
}

#[test]
fn read_meta_flags_inode_table_and_directory_reads_not_indirect_blocks() {
    let (host, log) = metadata_reads(HostParams::linux_2_6_32());
    let geo = &host.fs().geo;
    let spb = geo.sectors_per_block();
    let block_of = |sector: u64| (sector - geo.first_sector) / spb;
    let root_dir = host.fs().map(FileId::ROOT, 0).expect("the root's block");
    let reads: Vec<&common::Seen> = log.iter().filter(|s| s.op == Op::Read).collect();
    for s in &reads {
        println!(
            "read block {:>9} x{:<3} meta {}",
            block_of(s.sector),
            s.sectors / spb as u32,
            s.meta
        );
    }
    let meta: Vec<u64> = reads
        .iter()
        .filter(|s| s.meta)
        .map(|s| block_of(s.sector))
        .collect();
    // The root's inode-table block, the root's directory block and the
    // file's inode-table block, each a single block.
    assert!(
        meta.contains(&root_dir),
        "directory read not META: {meta:?}"
    );
    let itable: Vec<&u64> = meta.iter().filter(|b| geo.is_inode_table(**b)).collect();
    assert!(!itable.is_empty(), "no inode-table read flagged: {meta:?}");
    assert!(meta
        .iter()
        .all(|b| *b == root_dir || geo.is_inode_table(*b)));
    assert!(reads
        .iter()
        .filter(|s| s.meta)
        .all(|s| u64::from(s.sectors) == spb));
    // The cat's indirect block (its second single-block read) and every
    // data read go without the flag.
    let plain_single: Vec<&&common::Seen> = reads
        .iter()
        .filter(|s| u64::from(s.sectors) == spb && !s.meta)
        .collect();
    assert!(
        plain_single
            .iter()
            .any(|s| !geo.is_inode_table(block_of(s.sector)) && block_of(s.sector) != root_dir),
        "the indirect block read is missing or flagged"
    );
    assert!(reads
        .iter()
        .filter(|s| u64::from(s.sectors) > spb)
        .all(|s| !s.meta));
    // The 2.6.0 host had no READ_META.
    let (_, log26) = metadata_reads(HostParams::linux_2_6());
    assert!(log26.iter().all(|s| !s.meta));
    assert_eq!(
        log26.iter().filter(|s| s.op == Op::Read).count(),
        reads.len()
    );
}

/// Deadline, remembering the most requests it ever held queued or on the
/// disk: the async list's allocation.
#[derive(Debug)]
struct Peak(Box<dyn Scheduler>, Arc<Mutex<usize>>, usize);

impl Scheduler for Peak {
    fn name(&self) -> &'static str {
        "peak"
    }
    fn insert(&mut self, request: Request, now: Instant) {
        self.0.insert(request, now);
        let mut peak = self.1.lock().unwrap();
        *peak = (*peak).max(self.0.queued() + self.2);
    }
    fn dispatch(&mut self, now: Instant) -> Dispatch {
        let d = self.0.dispatch(now);
        if matches!(d, Dispatch::Request(_)) {
            self.2 += 1;
        }
        d
    }
    fn complete(&mut self, request: &Request, now: Instant) {
        self.2 -= 1;
        self.0.complete(request, now);
    }
    fn queued(&self) -> usize {
        self.0.queued()
    }
    fn would_merge(&self, request: &Request) -> bool {
        self.0.would_merge(request)
    }
    fn may_queue(&mut self, request: &Request, now: Instant) -> MayQueue {
        self.0.may_queue(request, now)
    }
    fn task_exited(&mut self, task: TaskId, now: Instant) {
        self.0.task_exited(task, now);
    }
}

/// A 60 MB `dd` into 256 MiB of memory (background writeback only, never
/// the dirty limit) on a queue of 16 requests per list; the most async
/// requests the queue held.
fn writeback_peak(congestion: bool) -> usize {
    let params = HostParams {
        memory: 256 << 20,
        ..HostParams::linux_2_6_32()
    };
    let mut host = common::host_on("hdd-2009", 1, Some(params));
    let f = host
        .fs_mut()
        .create(FileId::ROOT, elevator_host::fs::Kind::File, 1)
        .unwrap();
    let row = host.add_row("dd", true);
    host.spawn(
        row,
        Box::new(Dd::new(f, 1 << 20, 60, false)),
        Duration::ZERO,
        IoPrio::default(),
    );
    let dev = elevator_device::open("hdd-2009").unwrap();
    let limits: QueueLimits = dev.limits();
    let peak = Arc::new(Mutex::new(0));
    let sched = Peak(
        elevator_sched::find("deadline")
            .unwrap()
            .build_default(&limits),
        peak.clone(),
        0,
    );
    let config = EngineConfig {
        nr_requests: [16, 16],
        congestion,
        time_limit: Instant::ZERO + Duration::from_secs(40),
        ..EngineConfig::linux_2632()
    };
    let mut engine = Engine::new(Box::new(sched), dev, config);
    engine.run(&mut host);
    assert!(host.stats.pages_written > 0, "nothing was written back");
    let p = *peak.lock().unwrap();
    p
}

#[test]
fn writeback_backs_off_the_queues_congestion_bit() {
    // The async list congests at 16 - 2 + 1 = 15 requests: the flusher
    // stops there (`bdi_write_congested`) and the list never fills.
    let with_bit = writeback_peak(true);
    // Judging congestion from its own writes against nr_requests = 128,
    // the host keeps writing into a full list: the flusher becomes a
    // batcher and fills it to the hard cap of 3/2 x 16 = 24, and the rest
    // wait for a request.
    let own_estimate = writeback_peak(false);
    println!("async requests held: {with_bit} with the bit, {own_estimate} without");
    assert!(with_bit <= 15, "{with_bit}");
    assert!(own_estimate >= 20, "{own_estimate}");
}
