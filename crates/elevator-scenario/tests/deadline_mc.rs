//! deadline-mc's defining behaviour on a simulated disk, against classic
//! deadline: under a flood of buffered writes from 32 tasks (Zoccolo's
//! tiotest setting), a real-time reader meets its short deadline and an
//! fsync-like burst of sync writes is not stuck behind the writeback.

use elevator_core::{BlockIo, Completion, Io, Workload};
use elevator_core::{Duration, GroupId, Instant, IoPrio, Op, TaskId, SECTOR_SIZE};
use elevator_metrics::{JobReport, JobStats};
use elevator_sim::{Engine, EngineConfig};
use elevator_workload::{DirectJob, Mix, Part, Pattern};

/// A task that writes `burst` 4 KiB blocks synchronously and waits for
/// all of them (a write followed by fsync), `bursts` times, `pause` apart.
/// Each burst is recorded as one I/O whose latency is the burst's time.
struct FsyncBursts {
    task: TaskId,
    start: Duration,
    pause: Duration,
    bursts: u32,
    burst: u32,
    next_sector: u64,
    outstanding: u32,
    burst_started: Instant,
    done: u32,
    stats: JobStats,
}

impl FsyncBursts {
    fn new(task: u32, sector: u64) -> Self {
        FsyncBursts {
            task: TaskId(task),
            start: Duration::from_secs(1),
            pause: Duration::from_millis(200),
            bursts: 20,
            burst: 16,
            next_sector: sector,
            outstanding: 0,
            burst_started: Instant::ZERO,
            done: 0,
            stats: JobStats::new("fsync"),
        }
    }
}

impl Workload for FsyncBursts {
    fn start(&mut self, io: &mut Io<'_>) {
        io.wake_at(Instant::ZERO + self.start, 0);
    }

    fn wake(&mut self, _token: u64, io: &mut Io<'_>) {
        if self.stats.started.is_none() {
            self.stats.started = Some(io.now());
        }
        self.burst_started = io.now();
        for _ in 0..self.burst {
            io.submit(BlockIo {
                op: Op::Write,
                sync: true,
                sector: self.next_sector,
                sectors: 8,
                task: self.task,
                prio: IoPrio::be(4),
                group: GroupId::ROOT,
                meta: false,
                noidle: false,
            });
            // A file's blocks, not quite contiguous (no merging away).
            self.next_sector += 16;
        }
        self.outstanding = self.burst;
    }

    fn completed(&mut self, _done: &Completion, io: &mut Io<'_>) {
        self.outstanding -= 1;
        if self.outstanding > 0 {
            return;
        }
        let took = io.now().since(self.burst_started);
        self.stats.record(
            io.now(),
            false,
            u64::from(self.burst) * 8 * SECTOR_SIZE,
            took,
        );
        self.done += 1;
        if self.done < self.bursts {
            io.wake_at(io.now() + self.pause, 0);
        } else {
            self.stats.finished = Some(io.now());
            io.task_exited(self.task);
        }
    }

    fn finished(&self) -> bool {
        self.done >= self.bursts
    }
}

impl Part for FsyncBursts {
    fn tasks(&self) -> Vec<TaskId> {
        vec![self.task]
    }
    fn measured(&self) -> bool {
        true
    }
    fn stats(&self) -> Vec<JobStats> {
        vec![self.stats.clone()]
    }
    fn stats_mut(&mut self) -> Vec<&mut JobStats> {
        vec![&mut self.stats]
    }
}

const GIB: u64 = 1 << 30;

/// Run the flood, the RT reader and the fsync task under `policy` on
/// `device`; the reports of the reader and the fsync task.
fn run(policy: &str, device: &str) -> (JobReport, JobReport) {
    let dev = elevator_device::open(device).expect("profile");
    let limits = dev.limits();
    let sched = elevator_sched::find(policy)
        .expect("registered")
        .build_default(&limits);
    let mut mix = Mix::new();
    // 32 tasks each streaming buffered writes into its own 80 MB file,
    // keeping 16 requests queued (writeback keeps the queue full).
    for i in 0..32u32 {
        let mut w = DirectJob::new(&format!("writer.{i}"), 10 + i, 1);
        w.read_percent = 0;
        w.sync_writes = false;
        w.bs = 256;
        w.region_start = (2 * GIB + u64::from(i) * 100 * (1 << 20)) / SECTOR_SIZE;
        w.region_sectors = 80 * (1 << 20) / SECTOR_SIZE;
        w.iodepth = 16;
        w.looping = true;
        mix.push(Box::new(w));
    }
    // A real-time reader: 64 KiB random reads over 1 GiB, 50 ms apart
    // (a player fetching its next chunk).
    let mut r = DirectJob::new("rt-reader", 1, 1);
    r.prio = IoPrio::rt(4);
    r.pattern = Pattern::Random;
    r.bs = 128;
    r.region_start = 8 * GIB / SECTOR_SIZE;
    r.region_sectors = GIB / SECTOR_SIZE;
    r.size = Some(8 << 20);
    r.think = Duration::from_millis(50);
    r.start = Duration::from_secs(1);
    mix.push(Box::new(r));
    mix.push(Box::new(FsyncBursts::new(2, 12 * GIB / SECTOR_SIZE)));
    let config = EngineConfig {
        nr_requests: [1024, 1024],
        time_limit: Instant::ZERO + Duration::from_secs(600),
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(sched, dev, config);
    let summary = engine.run(&mut mix);
    assert!(!summary.timed_out, "{policy} on {device} did not finish");
    let stats = mix.stats();
    let report = |name: &str| {
        stats
            .iter()
            .find(|s| s.name == name)
            .expect("job")
            .report(summary.end)
    };
    (report("rt-reader"), report("fsync"))
}

#[test]
fn rt_reads_and_fsync_bursts_under_a_32_task_write_flood() {
    let device = "ide-2003";
    let (dl_reader, dl_fsync) = run("deadline", device);
    let (mc_reader, mc_fsync) = run("deadline-mc", device);
    println!("32-task buffered write flood on {device}:");
    println!("  policy       rt read mean/max (ms)   fsync burst mean/max (ms)");
    for (name, r, f) in [
        ("deadline", &dl_reader, &dl_fsync),
        ("deadline-mc", &mc_reader, &mc_fsync),
    ] {
        println!(
            "  {name:<12} {:>8.1} / {:>7.1}        {:>8.1} / {:>7.1}",
            r.lat_mean_ms, r.lat_max_ms, f.lat_mean_ms, f.lat_max_ms
        );
    }
    // The RT reader's reads meet rt_read_expire (125 ms) with room to spare
    // for their own service.
    let rt_read_expire = elevator_sched::policy::deadline_mc::RT_READ_EXPIRE_MS as f64;
    assert!(
        mc_reader.lat_max_ms <= rt_read_expire,
        "RT read took {:.1} ms > rt_read_expire {rt_read_expire} ms",
        mc_reader.lat_max_ms
    );
    // Sync writes no longer queue behind the writeback.
    assert!(
        mc_fsync.lat_mean_ms * 5.0 < dl_fsync.lat_mean_ms,
        "fsync bursts: deadline-mc {:.1} ms vs deadline {:.1} ms",
        mc_fsync.lat_mean_ms,
        dl_fsync.lat_mean_ms
    );
    assert!(mc_fsync.lat_max_ms < dl_fsync.lat_max_ms);
}
