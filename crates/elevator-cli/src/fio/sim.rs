//! A job file on the simulator: a device model for the target, the
//! simulated host (its page cache, file system and writeback) for jobs
//! with `direct=0`.
//!
//! Every `/dev/...` path a job names is the simulated device itself;
//! `/dev/null` and `/dev/zero` reach no device. Files do not exist before
//! the run (fio lays them out before its jobs start, untimed): they are
//! regions of the device, or files of the host's file system when some job
//! reads or writes through the page cache, in which case direct jobs use
//! the same files' blocks.

use super::progress::{self, Clock};
use super::{FioOptions, Outcome};
use anyhow::{anyhow, bail, Result};
use elevator_core::{GroupId, GroupTree, Instant, IoMax, IoPrio, QueueLimits, SECTOR_SIZE};
use elevator_device::Device;
use elevator_host::HostParams;
use elevator_metrics::fio::DiskUtil;
use elevator_sched::Scheduler;
use elevator_workload::fio::{parse::Keywords, Existing, FioRun, JobFile, Place, Progress, Setup};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// The device a job file runs on under `--engine sim` by default.
const DEFAULT_SIM_DEVICE: &str = "nvme";

/// Files on a device without a host start on 1 MiB boundaries.
const FILE_ALIGN: u64 = 1 << 20;

/// The simulated host of a job file's buffered jobs: 2.6.32's (the most
/// recent host modelled), with its memory and CPUs.
pub fn host_params() -> HostParams {
    HostParams::linux_2_6_32()
}

/// `$pagesize`, `$mb_memory`, `$ncpus` of the simulated host.
pub fn keywords() -> Keywords {
    let h = host_params();
    Keywords {
        pagesize: elevator_host::params::PAGE_SIZE,
        mb_memory: h.memory >> 20,
        ncpus: u64::from(h.cpus),
    }
}

/// A device whose queue takes at most `depth` requests (`--depth`).
#[derive(Debug)]
struct DepthCapped {
    inner: Box<dyn Device>,
    depth: u32,
}

impl Device for DepthCapped {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn limits(&self) -> QueueLimits {
        let mut l = self.inner.limits();
        l.queue_depth = l.queue_depth.min(self.depth).max(1);
        l
    }
    fn submit(&mut self, request: &elevator_core::Request, now: Instant) {
        self.inner.submit(request, now)
    }
    fn next_completion(&self) -> Option<Instant> {
        self.inner.next_completion()
    }
    fn complete(&mut self, now: Instant) -> Option<elevator_core::RequestId> {
        self.inner.complete(now)
    }
    fn complete_status(
        &mut self,
        now: Instant,
    ) -> Option<(elevator_core::RequestId, Option<elevator_core::IoError>)> {
        self.inner.complete_status(now)
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
    fn stats(&self) -> elevator_device::DeviceStats {
        self.inner.stats()
    }
}

fn is_null(path: &str) -> bool {
    path == "/dev/null" || path == "/dev/zero"
}

pub(super) fn run(
    file: &JobFile,
    options: &FioOptions,
    sched_name: &str,
    build: &dyn Fn(&QueueLimits) -> Box<dyn Scheduler>,
) -> Result<Outcome> {
    let device_name = options.device.as_deref().unwrap_or(DEFAULT_SIM_DEVICE);
    let mut device = elevator_device::open(device_name)?;
    if let Some(d) = options.depth {
        device = Box::new(DepthCapped {
            inner: device,
            depth: d.max(1) as u32,
        });
    }
    let mut limits = device.limits();
    let capacity = limits.capacity * SECTOR_SIZE;
    let device_name = device.name().to_string();
    let device_name = device_name.as_str();
    let existing = |p: &str| {
        if is_null(p) {
            Existing::Null
        } else if p.starts_with("/dev/") {
            Existing::Device(capacity)
        } else {
            Existing::Missing
        }
    };
    let plan = file.plan(&existing, capacity).map_err(|e| anyhow!("{e}"))?;
    // Which threads go through the page cache.
    let hosted: Vec<bool> = plan
        .threads
        .iter()
        .map(|t| {
            let j = &file.jobs[t.job];
            !j.o.direct
                && j.o.engine != elevator_workload::fio::options::Engine::Null
                && t.files.iter().all(|f| !is_null(&plan.files[f.file].path))
        })
        .collect();
    for (t, h) in plan.threads.iter().zip(&hosted) {
        if !h {
            continue;
        }
        for f in &t.files {
            let p = &plan.files[f.file].path;
            if p.starts_with("/dev/") {
                let j = &file.jobs[t.job];
                bail!(
                    "{}:{}: [{}] direct=0 on {p}: buffered I/O to the block device itself is not \
                     modelled (the simulated host caches file pages); use direct=1 or a file",
                    j.file.display(),
                    j.line,
                    j.section
                );
            }
        }
    }
    let any_hosted = hosted.iter().any(|h| *h);
    let mut setup_notes = Vec::new();
    for (t, h) in plan.threads.iter().zip(&hosted) {
        let j = &file.jobs[t.job];
        if *h && j.depth > 1 && t.clone == 0 {
            setup_notes.push(format!(
                "{}: direct=0 runs through the simulated page cache one system call at a time \
                 (as libaio's io_submit blocks for buffered I/O; io_uring would run {} at once \
                 in its workers)",
                j.name, j.depth
            ));
        }
    }
    let params = host_params();
    let n_threads = plan.threads.len();
    let mut host = None;
    let mut host_files = Vec::new();
    let places: Vec<Place> = if any_hosted {
        let sizes: Vec<u64> = plan
            .files
            .iter()
            .map(|f| if matches!(f.existing, Existing::Missing) { f.size } else { 0 })
            .collect();
        let (h, files) = elevator_host::fio::host_with_files(
            params.clone(),
            limits.capacity,
            &sizes,
            options.seed,
            n_threads as u32 + 1,
        )
        .map_err(|_| {
            anyhow!(
                "{}: the job files' files ({} bytes) do not fit the simulated host's file \
                 system on {device_name} ({capacity} bytes)",
                file.path.display(),
                sizes.iter().sum::<u64>()
            )
        })?;
        let places = plan
            .files
            .iter()
            .zip(&files)
            .map(|(f, id)| match f.existing {
                Existing::Null => Place::null(),
                Existing::Device(b) => Place::at(0, b),
                _ => Place {
                    extents: elevator_host::fio::extents(&h, *id, f.size),
                    null: false,
                },
            })
            .collect();
        host_files = files;
        host = Some(h);
        places
    } else {
        let mut next = 0u64;
        let mut places = Vec::new();
        for f in &plan.files {
            places.push(match f.existing {
                Existing::Null => Place::null(),
                Existing::Device(b) => Place::at(0, b),
                _ => {
                    let at = next.div_ceil(FILE_ALIGN) * FILE_ALIGN;
                    if at + f.size > capacity {
                        bail!(
                            "{}: {} ({} bytes) does not fit on the simulated {device_name} \
                             ({capacity} bytes) after the job file's other files",
                            file.path.display(),
                            f.path,
                            f.size
                        );
                    }
                    next = at + f.size;
                    Place::at(at / SECTOR_SIZE, f.size)
                }
            });
        }
        places
    };
    // Control groups from cgroup= and cgroup_weight=.
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
    let mut config = elevator_sim::EngineConfig {
        check: options.check,
        ..elevator_sim::EngineConfig::default()
    };
    for (p, t, v) in &options.tunables {
        if p == "block" {
            elevator_scenario::apply_block(&mut config, t, *v)
                .map_err(|e| anyhow!("--set block.{t}={v}: {e}"))?;
        }
    }
    if let Some(m) = config.max_sectors {
        limits.max_sectors = limits.max_sectors.min(m);
    }
    let mut run = FioRun::new(Setup {
        jobs: &file.jobs,
        plan: &plan,
        places,
        seed: options.seed,
        groups: group_of.clone(),
        hosted: hosted.clone(),
        first_task: 1,
    });
    run.max_request = limits.max_sectors;
    run.null_cost = params.syscall_cpu;
    if let Some(mut h) = host {
        let shared = run.shared();
        for (i, t) in plan.threads.iter().enumerate() {
            if !hosted[i] {
                continue;
            }
            let j = &file.jobs[t.job];
            let prio = thread_prio(j);
            elevator_host::fio::spawn(&mut h, shared.clone(), i, &j.name, host_files.clone(), prio);
            if group_of[t.job] != GroupId::ROOT {
                h.set_group(h.process_count() - 1, group_of[t.job]);
            }
        }
        run.set_host(Box::new(h));
    }
    let flag = elevator_uring::interrupt::install()?;
    run.set_stop(flag);
    let progress = Arc::new(Progress::default());
    run.set_progress(progress.clone());
    super::attach_logs(&mut run);
    let mut policy = build(&limits);
    if groups.len() > 1 {
        policy.set_groups(&groups);
    }
    let mut engine = elevator_sim::Engine::new(policy, device, config);
    engine.set_context(format!(
        "{} under {sched_name}, seed {}",
        file.path.display(),
        options.seed
    ));
    if options.trace.is_some() {
        engine.enable_trace();
    }
    let clock = Arc::new(AtomicU64::new(0));
    engine.publish_time(clock.clone());
    let end_ns = expected_end(file).map(|d| d.nanos());
    let summary = progress::with_line(
        options.eta,
        n_threads,
        progress,
        Clock::Simulated {
            now_ns: clock,
            end_ns,
        },
        || engine.run(&mut run),
    );
    if let (Some(path), Some(trace)) = (&options.trace, engine.take_trace()) {
        std::fs::write(path, trace)
            .map_err(|e| anyhow!("--trace: writing {}: {e}", path.display()))?;
    }
    let checked = summary.check.is_some();
    let stats = run.report(summary.end);
    let dev = summary.device;
    let elapsed = summary.end.nanos().max(1);
    let [reads, writes] = run.device_ios();
    let mut notes = setup_notes;
    notes.extend(run.notes());
    super::finish_logs(&mut run, summary.end, &mut notes)?;
    if checked && options.check {
        notes.push("--check: the invariant checker held (conservation, merges, waits)".into());
    }
    if run.zone_resets() > 0 {
        notes.push(format!("zonemode=zbd: {} zone resets", run.zone_resets()));
    }
    Ok(Outcome {
        scheduler: String::new(),
        disks: vec![DiskUtil {
            name: device_name.to_string(),
            read_ios: reads,
            write_ios: writes,
            util: (dev.busy_ns as f64 / elapsed as f64 * 100.0).min(100.0),
            ..DiskUtil::default()
        }],
        settings: format!(
            "engine sim, device {device_name}, queue depth {}, {}seed {} (simulated time)",
            limits.queue_depth,
            if any_hosted {
                format!(
                    "host {} ({} MiB page cache) for direct=0, ",
                    params.preset,
                    params.cache_pages() * elevator_host::params::PAGE_SIZE >> 20
                )
            } else {
                String::new()
            },
            options.seed
        ),
        notes,
        interrupted: run.interrupted(),
        stats,
    })
}

/// The priority a job's threads run at (host processes).
fn thread_prio(j: &elevator_workload::fio::Job) -> IoPrio {
    use elevator_core::IoClass;
    match (j.o.prioclass, j.o.prio) {
        (None, None) => IoPrio::from_nice(j.o.nice.clamp(-20, 19) as i8),
        (c, l) => IoPrio::new(
            match c.unwrap_or(2) {
                1 => IoClass::RealTime,
                3 => IoClass::Idle,
                _ => IoClass::BestEffort,
            },
            l.unwrap_or(4) as u8,
        ),
    }
}

/// When a time-based file should end (for the progress line).
pub fn expected_end(file: &JobFile) -> Option<elevator_core::Duration> {
    let mut end = 0u64;
    for j in &file.jobs {
        if !j.o.time_based || j.o.runtime_us == 0 {
            return None;
        }
        end = end.max(j.o.startdelay.1 + j.o.ramp_time_us + j.o.runtime_us);
    }
    Some(elevator_core::Duration::from_micros(end))
}
