//! `elevator device probe TARGET`: the probe's phases on a real file or
//! block device through io_uring, fitted to a device model and written as
//! a profile (crates/elevator-tune's `probe` and `fit`; the real clock is
//! elevator-uring's).

use anyhow::{anyhow, Result};
use elevator_core::Duration;
use elevator_sched::stack::{Origin, StackBuilder};
use elevator_tune::fit::{self, Facts};
use elevator_tune::probe::{ProbePlan, ProbeWorkload};
use std::io::{IsTerminal, Write};
use std::path::Path;

/// Largest request the runtime builds when sysfs says nothing (a file):
/// the kernel's `BLK_DEF_MAX_SECTORS`, 2560 sectors.
const DEFAULT_MAX_SECTORS: u32 = 2560;

#[derive(Debug)]
pub struct ProbeOptions {
    pub target: std::path::PathBuf,
    pub allow_write: bool,
    /// Seconds per phase.
    pub phase_time: f64,
    /// Rounds each phase is split into (medians over them).
    pub rounds: u32,
    pub rpm: u32,
    pub output: Option<std::path::PathBuf>,
}

pub fn probe(o: &ProbeOptions, out: &mut Vec<u8>) -> Result<()> {
    if !(o.phase_time.is_finite() && (0.01..=60.0).contains(&o.phase_time)) {
        return Err(anyhow!(
            "--phase-time {}: want 0.01 to 60 seconds",
            o.phase_time
        ));
    }
    if !(1..=20).contains(&o.rounds) {
        return Err(anyhow!("--rounds {}: want 1 to 20", o.rounds));
    }
    let sys = elevator_uring::probe::sysfs(&o.target);
    let target = elevator_uring::probe::open_target(&o.target, o.allow_write, o.allow_write)?;
    let span = target.bytes;
    if span < 8 << 20 {
        return Err(anyhow!(
            "{}: {span} bytes; the probe needs at least 8 MiB",
            o.target.display()
        ));
    }
    let plan = ProbePlan::standard(
        span,
        o.allow_write,
        Duration::from_secs_f64(o.phase_time),
        u64::MAX,
    );
    let per_round = plan.phases.len();
    let rounds = o.rounds as usize;
    let plan = plan.repeated(o.rounds);
    eprintln!(
        "probe: {} ({} bytes{}), {per_round} phases x {rounds} rounds, at most {:.0} s{}",
        o.target.display(),
        span,
        if target.block_device {
            ", block device"
        } else {
            ", file"
        },
        plan.time_bound().as_secs_f64(),
        if o.allow_write {
            ", writes allowed"
        } else {
            ", reads only (--allow-write adds the write phases)"
        }
    );
    let interactive = std::io::stderr().is_terminal();
    let mut workload = ProbeWorkload::new(plan.clone()).on_phase(move |r, i, n| {
        let line = format!(
            "probe: round {}/{rounds} {:>3}/{n} {:<18} {:>9.0} IOPS {:>8.1} MB/s p50 {:>8.1} us",
            i / per_round + 1,
            i + 1,
            r.phase.label(),
            r.iops(),
            r.mb_s(),
            r.lat_us(0.5)
        );
        if interactive {
            eprint!("\r{line}\x1b[K");
            if i + 1 == n {
                eprintln!();
            }
        } else {
            eprintln!("{line}");
        }
    });
    let noop = StackBuilder::new("noop", Origin::command_line())?;
    let depth = plan.max_depth() as usize;
    let limits = elevator_core::QueueLimits {
        rotational: sys.rotational.unwrap_or(false),
        queue_depth: depth as u32,
        max_sectors: DEFAULT_MAX_SECTORS,
        capacity: span / 512,
    };
    elevator_uring::probe::run(target, noop, &limits, depth, &mut workload)?;
    let results = workload.into_results();
    let facts = Facts {
        target: o.target.display().to_string(),
        span_bytes: span,
        max_sectors: sys
            .max_sectors_kb
            .map_or(DEFAULT_MAX_SECTORS, |kb| (kb * 2).clamp(8, 65_535)),
        queue_depth: depth as u32,
        sysfs_rotational: sys.rotational,
        rpm: o.rpm,
    };
    let fitted = fit::fit(&results, &facts)?;
    // The profile must load before it is handed out.
    elevator_device::parse("probed", &fitted.profile)
        .map_err(|e| anyhow!("the fitted profile does not load: {e}\n{}", fitted.profile))?;
    match &o.output {
        Some(path) => {
            write_profile(path, &fitted.profile)?;
            eprintln!(
                "probe: wrote {} ({} model); use it as --device {}",
                path.display(),
                if fitted.rotational { "hdd" } else { "ssd" },
                path.display()
            );
        }
        None => out.write_all(fitted.profile.as_bytes())?,
    }
    Ok(())
}

fn write_profile(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| anyhow!("writing {}: {e}", path.display()))
}
