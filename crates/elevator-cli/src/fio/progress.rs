//! fio's status line on stderr while a job file runs: after a few seconds
//! of wall time, once a second, the jobs running, the bandwidth and IOPS
//! of the last second, how far the run is and an estimate of what is
//! left (fio's `eta.c` line, `Jobs: 1 (f=1): [r(1)][45.2%][r=120MiB/s]
//! [r=30.7k IOPS][eta 00m:12s]`). `--eta auto` shows it on a terminal
//! only, `always` everywhere (a line per second when stderr is not a
//! terminal), `never` not at all. The line reads counters the run keeps
//! for it; nothing it reads reaches a result.

use elevator_workload::fio::Progress;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// When to show the line (fio's `--eta`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Eta {
    #[default]
    Auto,
    Always,
    Never,
}

/// Seconds of wall time before the line appears.
const QUIET_SECS: f64 = 2.0;

/// What the line measures progress in.
pub enum Clock {
    /// Simulated nanoseconds, published by the engine; the run ends
    /// around `end_ns` if known.
    Simulated {
        now_ns: Arc<AtomicU64>,
        end_ns: Option<u64>,
    },
    /// Wall time; the run ends after `end_s` if known.
    Wall { end_s: Option<f64> },
}

/// Run `f` with the status line on a helper thread.
pub fn with_line<R>(
    eta: Eta,
    threads: usize,
    progress: Arc<Progress>,
    clock: Clock,
    f: impl FnOnce() -> R,
) -> R {
    let tty = std::io::stderr().is_terminal();
    let show = match eta {
        Eta::Never => false,
        Eta::Always => true,
        Eta::Auto => tty,
    };
    if !show {
        return f();
    }
    let finished = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // Wall time only decides when to draw the line.
            #[allow(clippy::disallowed_methods)]
            let started = std::time::Instant::now();
            let mut last = (0.0f64, [0u64; 2], [0u64; 2], 0u64);
            let mut next_draw = QUIET_SECS;
            let mut drawn = false;
            while !finished.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(100));
                let wall = started.elapsed().as_secs_f64();
                if wall < next_draw {
                    continue;
                }
                next_draw = wall + 1.0;
                let bytes = [0, 1].map(|d| progress.bytes[d].load(Ordering::Relaxed));
                let ios = [0, 1].map(|d| progress.ios[d].load(Ordering::Relaxed));
                let done = progress.done.load(Ordering::Relaxed) as usize;
                let (now, total, unit_secs) = match &clock {
                    Clock::Simulated { now_ns, end_ns } => (
                        now_ns.load(Ordering::Relaxed) as f64 / 1e9,
                        end_ns.map(|e| e as f64 / 1e9),
                        true,
                    ),
                    Clock::Wall { end_s } => (wall, *end_s, false),
                };
                let span = (now - last.0).max(1e-9);
                let rate = |d: usize| (bytes[d] - last.1[d]) as f64 / span;
                let iops = |d: usize| (ios[d] - last.2[d]) as f64 / span;
                let mut line = format!(
                    "Jobs: {} [{}]",
                    threads.saturating_sub(done).max(1),
                    match total {
                        Some(t) if t > 0.0 => format!("{:.1}%", (now / t * 100.0).min(100.0)),
                        _ => "-.-%".into(),
                    }
                );
                line.push_str(&format!(
                    "[r={},w={}][r={},w={} IOPS]",
                    human(rate(0), "B/s"),
                    human(rate(1), "B/s"),
                    human(iops(0), ""),
                    human(iops(1), ""),
                ));
                if unit_secs {
                    let wall_per_sim = if now > 0.0 { wall / now } else { 0.0 };
                    let left = total.map(|t| (t - now).max(0.0) * wall_per_sim);
                    line.push_str(&format!("[{now:.1} s simulated]"));
                    if let Some(l) = left {
                        line.push_str(&format!("[eta {}]", mmss(l)));
                    }
                } else if let Some(t) = total {
                    line.push_str(&format!("[eta {}]", mmss((t - now).max(0.0))));
                }
                let mut err = std::io::stderr().lock();
                let _ = if tty {
                    write!(err, "\r{line:<99}")
                } else {
                    writeln!(err, "{line}")
                };
                let _ = err.flush();
                drawn = true;
                last = (now, bytes, ios, 0);
            }
            if drawn && tty {
                let _ = writeln!(std::io::stderr());
            }
        });
        let r = f();
        finished.store(true, Ordering::Relaxed);
        r
    })
}

/// `00m:12s`, as fio prints its ETA.
fn mmss(secs: f64) -> String {
    let s = secs.round() as u64;
    if s >= 3600 {
        format!("{}h:{:02}m:{:02}s", s / 3600, s % 3600 / 60, s % 60)
    } else {
        format!("{:02}m:{:02}s", s / 60, s % 60)
    }
}

/// 120MiB/s, 30.7k: fio's compact numbers.
fn human(v: f64, unit: &str) -> String {
    if unit == "B/s" {
        let (n, u) = if v >= 1024.0 * 1024.0 * 1024.0 {
            (v / (1024.0 * 1024.0 * 1024.0), "GiB/s")
        } else if v >= 1024.0 * 1024.0 {
            (v / (1024.0 * 1024.0), "MiB/s")
        } else {
            (v / 1024.0, "KiB/s")
        };
        format!("{n:.0}{u}")
    } else if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else {
        format!("{v:.0}")
    }
}
