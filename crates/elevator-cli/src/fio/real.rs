//! A job file on real files and block devices through the io_uring
//! runtime.
//!
//! Safety first: every file is looked at before anything is opened for
//! writing. A job that writes, a file that does not exist, a file shorter
//! than its jobs' range: each needs `--allow-write` (fio creates and lays
//! out files itself); a missing `/dev` path is an error, never a file; a
//! block device is refused while mounted, swap or held. Files a job reads
//! are laid out with data before the run, as fio writes them ("Laying out
//! IO file"), then synced and dropped from the page cache.
//!
//! The files sit side by side in one byte space for the policy (the
//! runtime's [`elevator_uring::Uring::with_files`]); each job's I/O goes to
//! its file. Writes carry the job's buffer contents and reads of the verify
//! pass are checked ([`elevator_workload::fio::DataBook`]).

use super::progress::{self, Clock};
use super::{FioOptions, Outcome};
use anyhow::{anyhow, bail, Context, Result};
use elevator_core::{GroupId, GroupTree, IoMax, QueueLimits, RequestId, SECTOR_SIZE};
use elevator_metrics::fio::DiskUtil;
use elevator_sched::stack::StackBuilder;
use elevator_uring::target::{self, Access};
use elevator_uring::{sys, Slot};
use elevator_workload::fio::{
    parse::Keywords, DataBook, Existing, FioRun, JobFile, Place, Progress, Setup,
};
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The largest request the runtime's policies may build by merging, in
/// sectors: the kernel's `BLK_DEF_MAX_SECTORS` (2560 sectors, 1.25 MiB,
/// include/linux/blkdev.h since 6.10).
const RUNTIME_MAX_SECTORS: u32 = 2560;

/// Files start on 1 GiB boundaries of the runtime's byte space.
const SLOT_ALIGN: u64 = 1 << 30;

/// `$pagesize`, `$mb_memory`, `$ncpus` of this machine.
pub fn keywords() -> Keywords {
    let mb_memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(1024, |kb| kb / 1024);
    Keywords {
        pagesize: 4096,
        mb_memory,
        ncpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
    }
}

/// What a path is on this machine.
fn existing(path: &str) -> Existing {
    let p = Path::new(path);
    let Ok(m) = std::fs::metadata(p) else {
        return Existing::Missing;
    };
    let ft = m.file_type();
    if ft.is_file() {
        Existing::File(m.len())
    } else if ft.is_block_device() {
        let size = std::fs::File::open(p)
            .and_then(|f| {
                use std::io::Seek;
                let mut f = f;
                f.seek(std::io::SeekFrom::End(0))
            })
            .unwrap_or(0);
        Existing::Device(size)
    } else if ft.is_char_device() && (path == "/dev/null" || path == "/dev/zero") {
        Existing::Null
    } else {
        // Anything else (a directory, a FIFO) is refused when opened.
        Existing::Missing
    }
}

/// Fills writes and checks reads for the runtime from the run's book.
#[derive(Debug)]
struct BookPayload(Arc<Mutex<DataBook>>);

impl elevator_uring::Payload for BookPayload {
    fn fill(&mut self, id: RequestId, buf: &mut [u8]) {
        self.0.lock().expect("not poisoned").fill(id, buf);
    }
    fn check(&mut self, id: RequestId, buf: &[u8]) -> bool {
        self.0.lock().expect("not poisoned").check(id, buf)
    }
}

pub(super) fn run(file: &JobFile, options: &FioOptions, builder: StackBuilder) -> Result<Outcome> {
    // A mounted, swapped-on or held block device is refused before anything
    // opens it (the plan reads device sizes).
    let in_use: Vec<String> = file
        .paths()
        .iter()
        .filter_map(|p| target::refuse_in_use(Path::new(p)).err())
        .map(|e| e.to_string())
        .collect();
    if !in_use.is_empty() {
        bail!("{}", in_use.join("\n"));
    }
    let free = file
        .paths()
        .first()
        .map(|p| free_bytes(Path::new(p)))
        .unwrap_or(0);
    let plan = file.plan(&existing, free).map_err(|e| anyhow!("{e}"))?;
    // Look before touching anything: every refusal first.
    let mut refusals = Vec::new();
    for f in &plan.files {
        let p = Path::new(&f.path);
        if f.existing == Existing::Missing && target::under_dev(p) {
            refusals.push(format!(
                "{}: no such device; nothing is ever created under /dev",
                f.path
            ));
            continue;
        }
        if options.allow_write {
            continue;
        }
        if f.written {
            refusals.push(format!(
                "{}: a job writes to it; refusing without --allow-write",
                f.path
            ));
        } else if f.existing == Existing::Missing {
            refusals.push(format!(
                "{}: does not exist; fio creates and lays it out ({} bytes of data written): \
                 refusing without --allow-write",
                f.path, f.size
            ));
        } else if f.layout.is_some() {
            refusals.push(format!(
                "{}: shorter than its jobs' range ({} bytes); laying it out writes: refusing \
                 without --allow-write",
                f.path, f.size
            ));
        }
        if f.direct && f.buffered {
            refusals.push(format!(
                "{}: jobs use it with direct=1 and direct=0; give each its own file",
                f.path
            ));
        }
    }
    if !refusals.is_empty() {
        bail!("{}", refusals.join("\n"));
    }
    // Open, create and lay out.
    let mut slots = Vec::new();
    let mut places = Vec::new();
    let mut base = 0u64;
    let mut descr = Vec::new();
    let mut disks: Vec<(String, std::path::PathBuf)> = Vec::new();
    for (fi, f) in plan.files.iter().enumerate() {
        let p = Path::new(&f.path);
        let users: Vec<&elevator_workload::fio::Job> = plan
            .threads
            .iter()
            .filter(|t| t.files.iter().any(|tf| tf.file == fi))
            .map(|t| &file.jobs[t.job])
            .collect();
        let atomic = users.iter().any(|j| j.o.atomic);
        if f.existing == Existing::Missing && options.allow_write {
            // fio makes the directories a file's path needs
            // (create_work_dirs).
            if let Some(dir) = p
                .parent()
                .filter(|d| !d.as_os_str().is_empty() && !d.exists())
            {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("{}: creating {}", f.path, dir.display()))?;
            }
        }
        let is_dev_null = f.path == "/dev/null" || f.path == "/dev/zero";
        if f.existing == Existing::Null && !is_dev_null {
            // The null engine's files: opened by nothing.
            descr.push(format!("{} (null engine)", f.path));
            places.push(Place::null());
            continue;
        }
        let t = if f.existing == Existing::Null {
            target::open_null(p, f.written)?
        } else {
            let old = match f.existing {
                Existing::File(b) => b,
                _ => 0,
            };
            let t = target::open(
                p,
                Access {
                    direct: f.direct,
                    writes: f.written || f.layout.is_some(),
                    allow_write: options.allow_write,
                    size: f.size,
                },
            )?;
            if let Some(data) = f.layout {
                lay_out(p, old, f.size, data, users.first().copied())
                    .with_context(|| format!("{}: laying out", f.path))?;
            }
            t
        };
        if let Some(d) = sys::disk_of(p) {
            let name = d
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !disks.iter().any(|(n, _)| *n == name) {
                disks.push((name, d));
            }
        }
        let bytes = t.bytes.min(f.size.max(1));
        descr.push(format!(
            "{} ({}{} bytes)",
            f.path,
            if f.direct { "O_DIRECT, " } else { "buffered, " },
            t.bytes
        ));
        places.push(Place::at(base / SECTOR_SIZE, bytes));
        slots.push(Slot {
            file: t.file,
            base,
            len: bytes,
            atomic,
        });
        base = (base + bytes).div_ceil(SLOT_ALIGN) * SLOT_ALIGN;
    }
    let issued: usize = plan
        .threads
        .iter()
        .map(|t| file.jobs[t.job].depth as usize)
        .sum();
    let depth = options.depth.unwrap_or(issued).max(1);
    let limits = QueueLimits {
        rotational: disks.first().is_some_and(|(_, d)| {
            std::fs::read_to_string(d.join("queue/rotational")).is_ok_and(|s| s.trim() == "1")
        }),
        queue_depth: depth as u32,
        max_sectors: RUNTIME_MAX_SECTORS,
        capacity: base.max(1) / SECTOR_SIZE,
    };
    let mut groups = GroupTree::default();
    let group_of: Vec<GroupId> = file
        .jobs
        .iter()
        .map(|j| match &j.o.cgroup {
            None => GroupId::ROOT,
            Some(name) => groups.find(name).unwrap_or_else(|| {
                groups.add(
                    name,
                    GroupId::ROOT,
                    j.o.cgroup_weight.unwrap_or(elevator_core::DEFAULT_WEIGHT),
                    IoMax::default(),
                )
            }),
        })
        .collect();
    let mut run = FioRun::new(Setup {
        jobs: &file.jobs,
        plan: &plan,
        places,
        seed: options.seed,
        groups: group_of,
        hosted: vec![false; plan.threads.len()],
        first_task: 1,
    });
    run.max_request = RUNTIME_MAX_SECTORS;
    run.null_cost = elevator_core::Duration::ZERO;
    let book = Arc::new(Mutex::new(DataBook::new(
        file.jobs
            .iter()
            .map(elevator_workload::fio::run::contents)
            .collect(),
    )));
    run.set_data(book.clone());
    let flag = elevator_uring::interrupt::install()?;
    run.set_stop(flag);
    let progress = Arc::new(Progress::default());
    run.set_progress(progress.clone());
    super::attach_logs(&mut run);
    let builder = if groups.len() > 1 {
        builder.groups(&groups)
    } else {
        builder
    };
    let backend = elevator_uring::Uring::with_files(slots, (depth * 2 + 16) as u32)
        .context("setting up io_uring")?;
    let (mut rt, _) = elevator_uring::Runtime::build(builder, backend, &limits, depth)?;
    rt.set_payload(Box::new(BookPayload(book)));
    let before_disk: Vec<Option<sys::DiskStat>> =
        disks.iter().map(|(_, d)| sys::disk_stat(d)).collect();
    let before = sys::usage();
    let end_s = super::sim::expected_end(file).map(|d| d.as_secs_f64());
    let n = plan.threads.len();
    let end = progress::with_line(options.eta, n, progress, Clock::Wall { end_s }, || {
        rt.run(&mut run, None)
    })?;
    let used = sys::usage().since(&before);
    let stats_rt = rt.stats();
    let mut stats = run.report(end);
    // One thread ran every job: its CPU time and switches are shared out.
    let share = stats.len().max(1) as u64;
    for s in &mut stats {
        s.usr_us = used.user_us / share;
        s.sys_us = used.sys_us / share;
        s.ctx = used.ctx / share;
        s.majf = used.majflt / share;
        s.minf = used.minflt / share;
    }
    let elapsed_ms = end.nanos() / 1_000_000;
    let disk_util: Vec<DiskUtil> = disks
        .iter()
        .zip(before_disk)
        .filter_map(|((name, d), b)| {
            let (b, a) = (b?, sys::disk_stat(d)?);
            Some(DiskUtil {
                name: name.clone(),
                read_ios: a.read_ios.saturating_sub(b.read_ios),
                write_ios: a.write_ios.saturating_sub(b.write_ios),
                read_merges: a.read_merges.saturating_sub(b.read_merges),
                write_merges: a.write_merges.saturating_sub(b.write_merges),
                read_ticks: a.read_ticks.saturating_sub(b.read_ticks),
                write_ticks: a.write_ticks.saturating_sub(b.write_ticks),
                in_queue: a.in_queue.saturating_sub(b.in_queue),
                util: if elapsed_ms > 0 {
                    (a.io_ticks.saturating_sub(b.io_ticks) as f64 * 100.0 / elapsed_ms as f64)
                        .min(100.0)
                } else {
                    0.0
                },
            })
        })
        .collect();
    let mut notes = run.notes();
    super::finish_logs(&mut run, end, &mut notes)?;
    Ok(Outcome {
        scheduler: String::new(),
        stats,
        disks: disk_util,
        settings: format!(
            "engine uring, {}, depth {depth}, seed {}; {} operations, {} merged",
            descr.join(", "),
            options.seed,
            stats_rt.dispatched,
            stats_rt.merged[0] + stats_rt.merged[1]
        ),
        notes,
        interrupted: run.interrupted(),
    })
}

/// Free bytes of the file system holding `path` (`fill_device`).
fn free_bytes(path: &Path) -> u64 {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    sys::free_bytes(dir).unwrap_or(0)
}

/// Write `[from, to)` of the file at `path` with the job's buffer
/// contents (`data`), or only extend it with allocated blocks, as fio's
/// `extend_file` does; then sync and drop the cache (`invalidate=1`).
fn lay_out(
    path: &Path,
    from: u64,
    to: u64,
    data: bool,
    job: Option<&elevator_workload::fio::Job>,
) -> Result<()> {
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    if !data {
        sys::allocate(&f, to)?;
        return Ok(());
    }
    let contents = job.map(elevator_workload::fio::run::contents);
    let bs = job.map_or(1 << 20, |j| j.rw_max_bs()).clamp(4096, 4 << 20) as usize;
    let mut buf = vec![0u8; bs];
    let mut at = from;
    let mut seed = 0x9e37_79b9_u64;
    while at < to {
        let n = ((to - at) as usize).min(bs);
        if let Some(c) = &contents {
            seed = elevator_workload::fio::data::mix(seed);
            elevator_workload::fio::data::fill(
                c,
                elevator_workload::fio::data::Stamp { seed, numberio: 0 },
                at,
                &mut buf[..n],
            );
        }
        f.write_all_at(&buf[..n], at)?;
        at += n as u64;
    }
    f.sync_all()?;
    let _ = sys::drop_cache(&f);
    Ok(())
}
