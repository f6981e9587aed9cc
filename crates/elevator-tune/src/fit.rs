//! Fitting a device model to what the probe measured.
//!
//! **Flash (and anything whose latency does not grow with distance).** The
//! probe's figures are fitted to the `ssd` model (MQSim's vocabulary, see
//! `elevator-device/src/ssd.rs`) in a fixed shape whose free parameters
//! are the ones a host can observe:
//!
//! * 256 parallel units (8 channels x 8 dies x 4 planes) of 4 KiB pages,
//!   so that every request up to 1 MiB senses each of its pages once, in
//!   parallel, and 4 KiB random reads at depth 128 load a unit well under
//!   a tenth of the time: the units never limit what the probe sees.
//!   Each channel bus runs at [`CHANNEL_FACTOR`] x the link rate.
//! * `link_mb_per_s` from the slope of sequential-read latency over
//!   request size at depth 1 (least squares over the six sizes, the
//!   channel's share of each size included exactly);
//! * `command_overhead_us` from the saturated 4 KiB random-read rate: the
//!   link is the one serial resource of the model, so its time per 4 KiB
//!   command is the inverse of the highest rate over the depths;
//! * `firmware_latency_us` (overlapped, before the data moves) from the
//!   4 KiB write latency at depth 1 (a write is acknowledged from the
//!   buffer: firmware, command and link), or 0 when writes were not
//!   measured;
//! * `read_us` (tR) from the 4 KiB random-read latency at depth 1, less
//!   everything above;
//! * `program_us` (tPROG) from the 1 MiB sequential-write rate once the
//!   buffer is full, when that rate is below what the link allows (else
//!   set so that the flash writes at twice the link rate and never
//!   limits, which is also what a read-only probe writes).
//!
//! Medians (p50) are fitted, not means, so that a few slow completions
//! (an interrupt, a busy neighbour) do not move the fixed parameters, and
//! every figure is the median over the plan's rounds
//! ([`crate::probe::summarize`]), so that one stalled round does not
//! either. The tail is fitted separately: the 4 KiB depth-1 reads' p10,
//! p50 and p99 (over every round's completions) are taken as a fixed part
//! plus a lognormal extra delay per command (a shifted lognormal through
//! three quantiles, [`lognormal_extra`]); the extra's median and 99th
//! percentile go to the profile's `[variability]` (the ssd model draws it
//! from the run's seed), and its median is taken off the fixed part before
//! `read_us` and `firmware_latency_us` are fitted. A tail no heavier than
//! a normal's leaves the model deterministic. The lognormal's mean may not
//! exceed what the reads took on average (QD1 IOPS are one over it):
//! where it would, its sigma is lowered to meet the mean, at the cost of
//! the p99; where it falls short, the rest is rare stalls
//! (`stall_fraction` of the commands wait `stall_us`, the pooled p99.9),
//! since every rate at depth 1 is one over the mean.
//!
//! What the latencies are: from the workload's submission to the
//! completion, so they include the submit system call (on a loop device
//! the block layer's submission runs inside it, about 3.6 us). That is
//! fio's `lat`, not its `clat` (which starts after the submit call
//! returned, `fio_ioring_queued` in fio's engines/io_uring.c); the
//! simulator reports the same span, so the fitted model predicts fio's
//! `lat` percentiles and, at depth 1, its IOPS (one over the mean `lat`).
//!
//! **Rotational check.** The distance phases read pairs of blocks 1 MiB to
//! half the span apart; a disk's latency grows with the distance (seek and
//! rotation), flash's does not. A latency at the longest distance over
//! 1.5x the shortest's and at least 1 ms above it means rotational.
//! **Disks** are fitted to the `hdd` model from the same figures:
//! `seek_table` from the distance latencies less half a revolution and the
//! transfer of 4 KiB, the media rate from the 1 MiB sequential read. The
//! spindle speed comes from the backward phase: each read is of the block
//! just before the last one, which the head has just passed, so it waits
//! one revolution less a block's transfer (plus the controller overhead,
//! assumed as [`HDD_READ_OVERHEAD_MS`]); the median over its reads and
//! rounds, with `--rpm` only as a fallback when no backward read
//! completed. The average seek comes from the 4 KiB random reads at
//! depth 1: their mean less half a revolution, the overhead and the
//! transfer (Ruemmler & Wilkes' decomposition of an access; the mean over
//! uniformly random blocks is what a datasheet's average seek means). What a probe cannot see
//! (firmware garbage collection, thermal throttling, the host's and the
//! device's caches beyond what one pass shows, an SLC cache running out)
//! is not in the profile.

use crate::probe::{summarize, Pattern, PhaseResult, Summary};
use elevator_device::Z99;
use std::fmt::Write as _;

/// The most of the depth-1 reads that may be stalls: below the 1 % whose
/// latency is above the measured p99 (see `fit`).
const MAX_STALL_FRACTION: f64 = 0.0099;

/// Channels x dies x planes of the fitted shape.
pub const CHANNELS: u32 = 8;
pub const DIES: u32 = 8;
pub const PLANES: u32 = 4;
/// Page size of the fitted shape, bytes.
pub const PAGE: f64 = 4096.0;
/// Channel bus rate as a multiple of the link rate.
pub const CHANNEL_FACTOR: f64 = 8.0;
/// Write buffer of the fitted shape (not measurable in a short probe).
pub const WRITE_BUFFER_MIB: u32 = 64;
/// The smallest time the profile loader takes, microseconds.
const MIN_US: f64 = 0.1;

/// What the caller knows of the target besides the measurements.
#[derive(Clone, Debug)]
pub struct Facts {
    /// Names the profile (`description`).
    pub target: String,
    pub span_bytes: u64,
    /// Largest request, sectors (`max_sectors_kb` x 2).
    pub max_sectors: u32,
    /// Deepest queue the probe used (the model's queue depth).
    pub queue_depth: u32,
    /// `queue/rotational` from sysfs, if known (reported beside ours).
    pub sysfs_rotational: Option<bool>,
    /// Spindle speed to assume for a disk.
    pub rpm: u32,
}

/// The fitted flash parameters, in the profile's units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SsdFit {
    pub link_mb_per_s: f64,
    pub command_overhead_us: f64,
    pub firmware_latency_us: f64,
    pub read_us: f64,
    pub program_us: f64,
    pub channel_mb_per_s: f64,
    /// Whether writes were measured (else `firmware_latency_us` and
    /// `program_us` are assumptions).
    pub writes_measured: bool,
    /// Whether the sequential writes were slower than the link allows.
    pub flash_limits_writes: bool,
    /// The extra per-command delay's median and 99th percentile, if the
    /// 4 KiB depth-1 reads had a tail heavier than a normal's.
    pub extra_p50_us: Option<f64>,
    pub extra_p99_us: Option<f64>,
    /// Rare stalls beside the lognormal: the fraction of commands and
    /// how long (0 when the lognormal's mean is the reads' mean).
    pub stall_fraction: f64,
    pub stall_us: f64,
}

/// The fitted disk parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct HddFit {
    pub rpm: u32,
    /// Whether `rpm` was measured (the backward phase), not assumed.
    pub rpm_measured: bool,
    /// Average seek from the 4 KiB random reads at depth 1, ms.
    pub average_seek_ms: Option<f64>,
    pub media_mb_per_s: f64,
    /// `[distance in cylinders, ms]` points.
    pub seek_table: Vec<(u32, f64)>,
    pub cylinders: u32,
    pub sectors_per_track: u32,
}

/// The model a probe was fitted to.
#[derive(Clone, Debug, PartialEq)]
pub enum Fitted {
    Ssd(SsdFit),
    Hdd(HddFit),
}

/// A fitted profile: the parameters and the TOML text.
#[derive(Clone, Debug)]
pub struct Fit {
    pub model: Fitted,
    pub rotational: bool,
    /// Latency at the longest distance over the shortest's.
    pub distance_ratio: f64,
    pub profile: String,
}

/// Why the measurements cannot be fitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FitError(pub String);

impl std::fmt::Display for FitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "probe fit: {}", self.0)
    }
}

impl std::error::Error for FitError {}

fn find(results: &[Summary], pred: impl Fn(&Summary) -> bool) -> Option<&Summary> {
    results.iter().find(|r| pred(r))
}

/// The median over rounds of a phase's p50, seconds.
fn median_s(r: &Summary) -> f64 {
    r.p50_us / 1e6
}

/// The standard normal's 10th percentile, negated.
const Z10: f64 = 1.281_551_566;

/// A shifted lognormal through three quantiles of a latency: `base +
/// m exp(sigma Z)` has p10, p50 and p99 `base + m e^(-Z10 s)`, `base + m`
/// and `base + m e^(Z99 s)`, so the ratio of the upper spread to the lower,
/// `(e^(Z99 s) - 1) / (1 - e^(-Z10 s))`, fixes `s` (it grows with `s`
/// from `Z99 / Z10` = 1.82) and then the lower spread fixes `m`. Returns
/// the extra delay's median and 99th percentile, seconds; `None` when the
/// tail is no heavier than a normal's (ratio under 2): the device is then
/// taken as deterministic.
pub fn lognormal_extra(p10: f64, p50: f64, p99: f64) -> Option<(f64, f64)> {
    let (a, b) = (p50 - p10, p99 - p50);
    if !(a > 0.0 && b > 0.0 && b / a >= 2.0) {
        return None;
    }
    let ratio = |s: f64| ((Z99 * s).exp() - 1.0) / (1.0 - (-Z10 * s).exp());
    let (mut lo, mut hi) = (1e-3, 20.0);
    if ratio(hi) < b / a {
        lo = hi;
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if ratio(mid) < b / a {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let sigma = (lo + hi) / 2.0;
    let m = a / (1.0 - (-Z10 * sigma).exp());
    Some((m, m * (Z99 * sigma).exp()))
}

/// Least squares `y = a + b x`.
fn line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let b = sxy / sxx;
    Some((my - b * mx, b))
}

/// The channel's and the link's share of a `bs`-byte read, in units of
/// the link's time per byte: pages spread over the channels, each channel
/// moving its pages one after another at `CHANNEL_FACTOR` x the link rate.
fn size_weight(bs: f64) -> f64 {
    let pages = (bs / PAGE).ceil();
    let per_channel = (pages / f64::from(CHANNELS)).ceil();
    per_channel * PAGE / CHANNEL_FACTOR + bs
}

/// Fit the probe's `results` (every round of every phase) on the target
/// described by `facts`.
pub fn fit(results: &[PhaseResult], facts: &Facts) -> Result<Fit, FitError> {
    let results = summarize(results);
    let (rotational, ratio) = rotational(&results);
    if rotational {
        return fit_hdd(&results, facts, ratio);
    }
    let ssd = fit_ssd(&results)?;
    let profile = ssd_profile(&ssd, &results, facts, ratio);
    Ok(Fit {
        model: Fitted::Ssd(ssd),
        rotational,
        distance_ratio: ratio,
        profile,
    })
}

/// Whether latency grows with distance, and the ratio it grew by.
fn rotational(results: &[Summary]) -> (bool, f64) {
    let dist: Vec<(u64, f64)> = results
        .iter()
        .filter_map(|r| match r.phase.pattern {
            Pattern::Distance { distance_bytes } => Some((distance_bytes, r.mean_us / 1e6)),
            _ => None,
        })
        .collect();
    match (dist.first(), dist.last()) {
        (Some(&(_, near)), Some(&(_, far))) if near > 0.0 && dist.len() >= 2 => {
            let ratio = far / near;
            (ratio > 1.5 && far - near > 1e-3, ratio)
        }
        _ => (false, 1.0),
    }
}

fn is_random_read(r: &Summary) -> bool {
    r.phase.pattern == Pattern::Random && r.phase.read_percent == 100
}

fn is_seq(r: &Summary, read_percent: u8) -> bool {
    r.phase.pattern == Pattern::Sequential
        && r.phase.read_percent == read_percent
        && r.phase.depth == 1
}

/// The flash fit (see the module docs).
pub fn fit_ssd(results: &[Summary]) -> Result<SsdFit, FitError> {
    let missing = |what: &str| FitError(format!("no {what} phase completed any I/O"));
    let qd1 = find(results, |r| is_random_read(r) && r.phase.depth == 1)
        .ok_or_else(|| missing("4 KiB random read at depth 1"))?;
    let l1 = median_s(qd1);
    let seq: Vec<(f64, f64)> = results
        .iter()
        .filter(|r| is_seq(r, 100))
        .map(|r| (size_weight(f64::from(r.phase.bs)), median_s(r)))
        .collect();
    let (_, per_byte) = line(&seq).ok_or_else(|| missing("sequential read (two sizes)"))?;
    // Latency that does not grow with size (a noisy host, a device far
    // faster than its per-command cost): the fastest rate any size reached.
    let link = if per_byte > 0.0 {
        1.0 / per_byte
    } else {
        results
            .iter()
            .filter(|r| is_seq(r, 100))
            .map(|r| f64::from(r.phase.bs) / median_s(r))
            .fold(0.0, f64::max)
    }; // bytes per second
    let imax = results
        .iter()
        .filter(|r| is_random_read(r))
        .map(|r| r.iops)
        .fold(0.0_f64, f64::max);
    if imax <= 0.0 {
        return Err(missing("4 KiB random read"));
    }
    let link_4k = PAGE / link;
    let cmd = (1.0 / imax - link_4k).max(0.0);
    let chan_4k = PAGE / (CHANNEL_FACTOR * link);
    // The tail of the depth-1 reads: an extra delay per command on top of
    // a fixed part (p50 and the tail over every round; see
    // `lognormal_extra`), kept below what the fixed costs leave.
    let fixed_floor = cmd + link_4k + chan_4k + MIN_US / 1e6;
    let extra = lognormal_extra(qd1.q_us(0.10) / 1e6, l1, qd1.q_us(0.99) / 1e6).map(|(m, p99)| {
        let cap = (l1 - fixed_floor).max(0.0);
        let scale = if m > cap { cap / m } else { 1.0 };
        (m * scale, p99 * scale)
    });
    // The tail may not cost more time on average than the device took:
    // a lognormal's mean is `m e^(sigma^2 / 2)`, and a host's tail (rare
    // stalls of milliseconds beside a narrow body) has a p99 far out but
    // a mean a lognormal through that p99 would overstate, and with it
    // understate the rate at every depth. Past the measured mean excess
    // (the QD1 mean, median over rounds, less the fixed part) sigma is
    // lowered until the means agree, which lowers the p99.
    let mean_excess = qd1.mean_us / 1e6 - (l1 - extra.map_or(0.0, |(m, _)| m));
    let extra = extra.map(|(m, p99)| {
        let sigma = (p99 / m).ln() / Z99;
        if m * (sigma * sigma / 2.0).exp() <= mean_excess {
            (m, p99)
        } else {
            let sigma = (2.0 * (mean_excess / m).max(1.0).ln()).sqrt();
            (m, m * (Z99 * sigma).exp())
        }
    });
    let extra = extra.filter(|&(m, _)| m * 1e6 >= 0.001);
    // What the lognormal leaves of the mean excess is rare stalls: each
    // as long as the pooled p99.9 less the fixed part, as many as make up
    // the rest of the mean (QD1 IOPS and every depth-1 rate follow the
    // mean, the percentiles hardly move while they stay under 1 %).
    let (stall_fraction, stall) = match extra {
        Some((m, p99)) => {
            let sigma = (p99 / m).ln() / Z99;
            let rest = mean_excess - m * (sigma * sigma / 2.0).exp();
            let stall = qd1.q_us(0.999) / 1e6 - (l1 - m);
            // The measured p99 sits below a stall, so fewer than 1 % of
            // the reads stalled: a fraction of 1 % or more would put the
            // model's p99 inside the stalls (one probe fitted 1.06 % and
            // predicted a p99 of 3.6 ms against fio's 0.12 ms). Whatever
            // mean is left beyond that stays unexplained.
            if rest > 0.0 && stall > 0.0 {
                ((rest / stall).min(MAX_STALL_FRACTION), stall)
            } else {
                (0.0, 0.0)
            }
        }
        None => (0.0, 0.0),
    };
    let m = extra.map_or(0.0, |(m, _)| m);
    let write_4k = find(results, |r| {
        r.phase.read_percent == 0 && r.phase.bs == 4096 && r.phase.depth == 1
    });
    let fw = write_4k.map_or(0.0, |w| (median_s(w) - m - cmd - link_4k).max(0.0));
    let read = (l1 - m - fw - chan_4k - cmd - link_4k).max(MIN_US / 1e6);
    let units = f64::from(CHANNELS * DIES * PLANES);
    let free_program =
        (units * PAGE / (2.0 * link) - PAGE / (CHANNEL_FACTOR * link)).max(MIN_US / 1e6);
    let big_write = results
        .iter()
        .filter(|r| r.phase.pattern == Pattern::Sequential && r.phase.read_percent == 0)
        .max_by_key(|r| r.phase.bs);
    let (program, limited) = match big_write {
        Some(w) => {
            let bs = f64::from(w.phase.bs);
            let rate = bs / median_s(w);
            let link_rate = bs / (fw + m + cmd + bs / link);
            if rate < 0.9 * link_rate {
                let p = units * PAGE / rate - PAGE / (CHANNEL_FACTOR * link);
                (p.max(MIN_US / 1e6), true)
            } else {
                (free_program, false)
            }
        }
        None => (free_program, false),
    };
    Ok(SsdFit {
        link_mb_per_s: link / 1e6,
        command_overhead_us: cmd * 1e6,
        firmware_latency_us: fw * 1e6,
        read_us: read * 1e6,
        program_us: program * 1e6,
        channel_mb_per_s: CHANNEL_FACTOR * link / 1e6,
        writes_measured: write_4k.is_some(),
        flash_limits_writes: limited,
        extra_p50_us: extra.map(|(m, _)| m * 1e6),
        extra_p99_us: extra.map(|(_, p)| p * 1e6),
        stall_fraction,
        stall_us: stall * 1e6,
    })
}

/// The measurements as comment lines.
fn measurements(results: &[Summary]) -> String {
    let rounds = results.iter().map(|r| r.rounds).max().unwrap_or(0);
    let mut s = format!(
        "# Measured from submission to completion at the queue depth shown; IOPS, MB/s\n\
         # and p50 are medians over up to {rounds} rounds of each phase, p10 and p99 over\n\
         # every round's completions together:\n\
         #   phase              rounds      IOPS      MB/s    p10 us    p50 us    p99 us\n"
    );
    for r in results {
        let _ = writeln!(
            s,
            "#   {:<18} {:>6} {:>9.0} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            r.phase.label(),
            r.rounds,
            r.iops,
            r.mb_s,
            r.q_us(0.10),
            r.p50_us,
            r.q_us(0.99)
        );
    }
    s
}

/// Round to 4 significant digits, as written in the profile.
fn sig(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return 0.0;
    }
    let mag = 10f64.powi(3 - v.abs().log10().floor() as i32);
    (v * mag).round() / mag
}

fn ssd_profile(f: &SsdFit, results: &[Summary], facts: &Facts, ratio: f64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Probed by `elevator device probe` on {}: fitted to the ssd model's fixed\n\
         # shape (crates/elevator-tune/src/fit.rs). The rotational check found latency\n\
         # {:.2}x as long at the longest distance as at the shortest: not a disk{}.",
        facts.target,
        ratio,
        match facts.sysfs_rotational {
            Some(true) => " (sysfs says rotational)",
            Some(false) => " (sysfs agrees)",
            None => "",
        }
    );
    s.push_str(&measurements(results));
    let _ = writeln!(
        s,
        "kind = \"ssd\"\ndescription = \"probed: {}\"\n\n[interface]",
        facts.target.replace('"', "'")
    );
    let mb = facts.span_bytes.div_ceil(1_000_000).max(1);
    let _ = writeln!(
        s,
        "# The probed span, {} bytes, in whole MB rounded up.\ncapacity_mb = {mb}",
        facts.span_bytes
    );
    let _ = writeln!(
        s,
        "# The deepest queue the probe used.\nqueue_depth = {}",
        facts.queue_depth
    );
    let _ = writeln!(
        s,
        "# The target's max_sectors_kb x 2.\nmax_sectors = {}",
        facts.max_sectors
    );
    let _ = writeln!(
        s,
        "# Slope of sequential-read latency over request size at depth 1.\nlink_mb_per_s = {}",
        sig(f.link_mb_per_s)
    );
    let _ = writeln!(
        s,
        "# 1 / the highest 4 KiB random-read rate, less 4 KiB over the link.\n\
         command_overhead_us = {}",
        sig(f.command_overhead_us)
    );
    let _ = writeln!(
        s,
        "# {}\nfirmware_latency_us = {}",
        if f.writes_measured {
            "4 KiB write p50 at depth 1, less the extra delay's median, the command and the link."
        } else {
            "Not measured (no --allow-write): 0, every fixed read latency is in read_us."
        },
        sig(f.firmware_latency_us)
    );
    let _ = writeln!(
        s,
        "\n[flash]\n# Fixed shape: 256 units, so that no request up to 1 MiB waits for one.\n\
         channels = {CHANNELS}\ndies_per_channel = {DIES}\nplanes_per_die = {PLANES}\npage_kib = 4"
    );
    let _ = writeln!(
        s,
        "# 4 KiB random-read p50 at depth 1, less the extra delay's median, firmware,\n\
         # command and transfers.\nread_us = {}",
        sig(f.read_us)
    );
    let _ = writeln!(
        s,
        "# {}\nprogram_us = {}",
        if f.flash_limits_writes {
            "From the 1 MiB sequential-write rate (below the link's): 256 x 4 KiB per tPROG."
        } else if f.writes_measured {
            "Writes ran at the link's rate: flash set to twice it, never the limit."
        } else {
            "Not measured (no --allow-write): flash set to twice the link rate."
        },
        sig(f.program_us)
    );
    let _ = writeln!(
        s,
        "# {CHANNEL_FACTOR} x the link rate.\nchannel_mb_per_s = {}",
        sig(f.channel_mb_per_s)
    );
    let _ = writeln!(
        s,
        "\n[buffer]\n# Not measurable in a short probe; a typical DRAM buffer.\n\
         write_buffer_mib = {WRITE_BUFFER_MIB}"
    );
    match (f.extra_p50_us, f.extra_p99_us) {
        (Some(p50), Some(p99)) => {
            let _ = writeln!(
                s,
                "\n[variability]\n# A lognormal extra delay per command through the 4 KiB depth-1 reads'\n\
                 # p10, p50 and p99 (a shifted lognormal through three quantiles).\n\
                 extra_p50_us = {}\nextra_p99_us = {}\n\
                 # Rare stalls that make up the rest of the depth-1 reads' mean: each the\n\
                 # pooled p99.9 less the fixed part.\n\
                 stall_fraction = {}\nstall_us = {}",
                sig(p50.max(0.001)),
                sig(p99.max(p50).max(0.001)),
                sig(f.stall_fraction),
                sig(f.stall_us)
            );
        }
        _ => {
            let _ = writeln!(
                s,
                "\n# No [variability]: the 4 KiB depth-1 reads' tail was no heavier than a\n\
                 # normal's, so the device is taken as deterministic."
            );
        }
    }
    s
}

/// The disk's controller overhead per read that misses its cache, as the
/// fitted profile writes it (`read_miss_overhead_ms`): a probe cannot
/// separate it from the seek, so it is assumed (0.1-0.2 ms on current
/// drives, see profiles/sata-hdd.toml) and taken off every latency.
pub const HDD_READ_OVERHEAD_MS: f64 = 0.1;

/// The disk fit (see the module docs).
fn fit_hdd(results: &[Summary], facts: &Facts, ratio: f64) -> Result<Fit, FitError> {
    let overhead_s = HDD_READ_OVERHEAD_MS / 1e3;
    let seq = results
        .iter()
        .filter(|r| is_seq(r, 100))
        .max_by_key(|r| r.phase.bs)
        .ok_or_else(|| FitError("no sequential read phase completed any I/O".into()))?;
    let media = seq.mb_s * 1e6;
    if media <= 0.0 {
        return Err(FitError("the sequential read phase moved no data".into()));
    }
    let transfer_4k = 4096.0 / media;
    // The spindle: reading the block just behind the last waits one
    // revolution, less the 4 KiB that passed under the head, plus the
    // overhead; the median over rounds of each round's median.
    let back = find(results, |r| r.phase.pattern == Pattern::Backward);
    let (rpm, rpm_measured) = match back {
        Some(b) => {
            let rev = b.p50_us / 1e6 - overhead_s;
            if rev > 1e-3 {
                (((60.0 / rev).round() as u32).clamp(1000, 30_000), true)
            } else {
                (facts.rpm, false)
            }
        }
        None => (facts.rpm, false),
    };
    let rev_s = 60.0 / f64::from(rpm);
    // Average seek: a 4 KiB random read at depth 1 waits the seek, half a
    // revolution on average, the overhead and its transfer.
    let average_seek_ms = find(results, |r| is_random_read(r) && r.phase.depth == 1)
        .map(|r| (r.mean_us / 1e6 - rev_s / 2.0 - overhead_s - transfer_4k) * 1e3)
        .filter(|ms| *ms > 0.0);
    // Sectors per track from the media rate and the spindle speed.
    let spt = ((media * rev_s / 512.0).round() as u32).clamp(16, 100_000);
    // Two surfaces per platter, four surfaces.
    let surfaces = 4u64;
    let cylinders =
        (facts.span_bytes / 512 / (u64::from(spt) * surfaces)).clamp(3, 10_000_000) as u32;
    let bytes_per_cyl = f64::from(spt) * surfaces as f64 * 512.0;
    let mut table: Vec<(u32, f64)> = Vec::new();
    for r in results {
        if let Pattern::Distance { distance_bytes } = r.phase.pattern {
            let moved = distance_bytes + crate::probe::DISTANCE_STEP;
            let d = ((moved as f64 / bytes_per_cyl).round() as u32).max(1);
            let ms = ((r.mean_us / 1e6 - rev_s / 2.0 - overhead_s - transfer_4k) * 1e3).max(0.05);
            if table.last().is_none_or(|&(last, t)| d > last && ms >= t) {
                table.push((d, ms));
            }
        }
    }
    if table.is_empty() {
        return Err(FitError("no distance phase completed any I/O".into()));
    }
    let fit = HddFit {
        rpm,
        rpm_measured,
        average_seek_ms,
        media_mb_per_s: media / 1e6,
        seek_table: table,
        cylinders,
        sectors_per_track: spt,
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Probed by `elevator device probe` on {}: latency grew {ratio:.2}x from the\n\
         # shortest distance to the longest, so a disk; fitted to the hdd model\n\
         # (crates/elevator-tune/src/fit.rs). {rpm} rpm {}.{}",
        facts.target,
        if rpm_measured {
            "from the backward reads (one revolution each)"
        } else {
            "is assumed, not measured"
        },
        match average_seek_ms {
            Some(ms) => format!(
                "\n# Average seek from the 4 KiB random reads at depth 1: {:.2} ms.",
                ms
            ),
            None => String::new(),
        }
    );
    s.push_str(&measurements(results));
    let table_text: Vec<String> = fit
        .seek_table
        .iter()
        .map(|(d, ms)| format!("[{d}, {}]", sig(*ms)))
        .collect();
    let _ = write!(
        s,
        "kind = \"hdd\"\ndescription = \"probed: {}\"\n\n[interface]\n\
         queue_depth = {}\nmax_sectors = {}\n# The 1 MiB sequential read's rate, doubled: the bus is not the limit.\n\
         transfer_mb_per_s = {}\n\n[mechanics]\nrpm = {rpm}\nsurfaces = {surfaces}\n\
         # Distance-phase mean latency less half a revolution, the overhead and the\n\
         # 4 KiB transfer.\n\
         seek_table = [{}]\nhead_switch_ms = 0.8\ncylinder_switch_ms = 1.0\nwrite_settle_ms = 0.3\n\n\
         [layout]\n# One zone at the sequential read's rate.\ncylinders = {cylinders}\nzones = 1\n\
         outer_sectors_per_track = {spt}\ninner_sectors_per_track = {spt}\n\n\
         [controller]\n# Assumed: a probe cannot tell it from the seek.\n\
         read_miss_overhead_ms = {HDD_READ_OVERHEAD_MS}\nread_hit_overhead_ms = 0.05\nwrite_overhead_ms = 0.1\n\n\
         [cache]\nsegments = 16\nsegment_sectors = 2048\nwrite_cache = false\n\
         write_buffer_sectors = 0\nwrite_buffer_runs = 1\n",
        facts.target.replace('"', "'"),
        facts.queue_depth.min(256),
        facts.max_sectors,
        sig(2.0 * media / 1e6),
        table_text.join(", "),
    );
    Ok(Fit {
        model: Fitted::Hdd(fit),
        rotational: true,
        distance_ratio: ratio,
        profile: s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three quantiles of a known shifted lognormal give back its median
    /// and 99th percentile; a tail no heavier than a normal's gives none.
    #[test]
    fn a_shifted_lognormal_is_recovered_from_three_quantiles() {
        let (base, m, sigma) = (7.0, 2.0, 1.5);
        let q = |z: f64| base + m * (sigma * z).exp();
        let (p50, p99) = lognormal_extra(q(-Z10), q(0.0), q(Z99)).unwrap();
        assert!((p50 - m).abs() < 1e-9 * m, "{p50}");
        assert!((p99 - m * (sigma * Z99).exp()).abs() < 1e-6, "{p99}");
        // Symmetric spread (a normal's, ratio 1.82): no lognormal tail.
        assert_eq!(lognormal_extra(9.0, 10.0, 10.0 + Z99 / Z10), None);
        // No spread at all, or a quantile out of order.
        assert_eq!(lognormal_extra(10.0, 10.0, 10.0), None);
        assert_eq!(lognormal_extra(11.0, 10.0, 30.0), None);
    }
}
