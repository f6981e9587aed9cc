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
use anyhow::{anyhow, Result};
use elevator_core::{Instant, QueueLimits};
use elevator_device::Device;
use elevator_metrics::fio::DiskUtil;
use elevator_scenario::fio_sim::SimFio;
use elevator_sched::stack::StackBuilder;
use elevator_workload::fio::{parse::Keywords, JobFile, Progress};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// The device a job file runs on under `--engine sim` by default.
const DEFAULT_SIM_DEVICE: &str = "nvme";

/// `$pagesize`, `$mb_memory`, `$ncpus` of the simulated host.
pub fn keywords() -> Keywords {
    elevator_scenario::fio_sim::keywords()
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
    fn reseed(&mut self, seed: u64) {
        self.inner.reseed(seed);
    }
}

pub(super) fn run(file: &JobFile, options: &FioOptions, builder: StackBuilder) -> Result<Outcome> {
    let sched_name = builder.policy().name;
    let device_arg = options.device.as_deref().unwrap_or(DEFAULT_SIM_DEVICE);
    let mut device = elevator_device::open(device_arg)?;
    if let Some(d) = options.depth {
        device = Box::new(DepthCapped {
            inner: device,
            depth: d.max(1) as u32,
        });
    }
    device.reseed(options.seed);
    let mut config = elevator_sim::EngineConfig::default();
    for setting in builder.block_settings() {
        config.apply(*setting);
    }
    let limits = config.limits(device.limits());
    let device_name = device.name().to_string();
    let device_name = device_name.as_str();
    let n_threads: usize = file.jobs.iter().map(|j| j.o.numjobs as usize).sum();
    let SimFio {
        mut run,
        groups,
        hosted,
        host,
        notes: setup_notes,
    } = elevator_scenario::fio_sim::setup(file, &limits, device_name, options.seed)
        .map_err(|e| anyhow!("{e}"))?;
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
    let (mut engine, _) = elevator_sim::Engine::build(builder, device, config);
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
            if hosted {
                format!(
                    "host {} ({} MiB page cache) for direct=0, ",
                    host.preset,
                    (host.cache_pages() * elevator_host::params::PAGE_SIZE) >> 20
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
