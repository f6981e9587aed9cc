//! Import a DiskSim 4.0 drive as an HDD profile.
//!
//! DiskSim describes a validated drive in four files
//! (../shared/reference/devices-workloads-traces.md §1.3): the `.parv`
//! (the simulated system: driver, buses, controller; `source`s the disk
//! spec and `instantiate`s the disk), the `.diskspecs` (`disksim_disk`:
//! overheads, queue, buffer and cache policy; `Model = source` the model),
//! the `.model` (`dm_disk`: surfaces, zones with their skews, the
//! mechanical model naming the `.seek` file) and the `.seek` file
//! (`Seek distances measured: N`, then `distance, ms` lines).
//!
//! [`import_disksim`] reads them all and writes a profile TOML whose every
//! number carries a comment naming the DiskSim parameter (file and line)
//! it came from. The parameters our HDD model has no place for are
//! returned as warnings, one per parameter, never dropped silently: the
//! per-direction "after write" overheads, completion overheads, spare and
//! slipped sectors, read-ahead rules and the like.
//!
//! The format is DiskSim's block-structured `key = value,` text: keys may
//! hold spaces and parentheses, `#` starts a comment, values end at a
//! comma. We read it as a flat list of assignments in file order, which is
//! all the single-disk validation setups need: the disk spec's keys, the
//! model's keys, the zones in order (each starts at `First cylinder
//! number`), and the largest block transfer time of any bus.
//!
//! Every form DiskSim 4.0's own loader takes is imported (its modspecs:
//! src/modules/disk.modspec, diskmodel/modules/mech_g1.modspec,
//! layout_g1.modspec, layout_g1_zone.modspec), each as exactly as the HDD
//! model allows; where the profile approximates DiskSim, a note says so
//! both in the profile's header and among the warnings:
//!
//! * **Seek types** (`Seek type`, `dm_mech_g1_seekfns` in
//!   mech_g1_seektime.c): `extracted` is the measured table; `hpl`
//!   (Ruemmler & Wilkes's six values), `hplplus10` (with the ten first
//!   seek times), `linear` and `curve` (Lee's three-point curve) are
//!   sampled into a table that linear interpolation follows within
//!   [`SAMPLE_TOLERANCE_MS`]; `constant` is a one-point table. Where
//!   DiskSim 4.0's code computes something other than its documented
//!   equation, the documented equation is imported and the note says what
//!   DiskSim does.
//! * **Write settling** may be negative (`Add. write settling delay` has
//!   no range test): writes then reposition that much faster than reads.
//! * **Slips** in any order, repeated or past the zone's end: DiskSim's
//!   `g1_ltop_sectperzonespare` walks the list in file order, so the
//!   blocks it leaves unmapped are computed by walking it the same way
//!   ([`disksim_slipped`]) and written sorted, as the profile wants them.
//! * **Skew units** in revolutions as well as sectors, skews and offsets
//!   of any sign or size (taken modulo the track, as an angle is).
//! * A model given inline (`Model = dm_disk NAME {` in the .diskspecs)
//!   as well as from a file; a seek file's optional third column (the
//!   standard deviation) and its lines DiskSim skips as bogus.

use std::fmt;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One `key = value` of a DiskSim file.
#[derive(Clone, Debug)]
struct Assign {
    file: String,
    line: usize,
    key: String,
    value: String,
}

/// A DiskSim file that cannot be imported: which file, line and parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportError {
    pub file: String,
    /// 1-based; 0 when the problem is the whole file.
    pub line: usize,
    pub key: String,
    pub message: String,
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: `{}`: {}", self.file, self.key, self.message)
        } else {
            write!(
                f,
                "{}:{}: `{}`: {}",
                self.file, self.line, self.key, self.message
            )
        }
    }
}

impl std::error::Error for ImportError {}

/// The imported profile and what it could not carry.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The profile TOML.
    pub profile: String,
    /// One line per DiskSim parameter the model does not support.
    pub warnings: Vec<String>,
}

/// A DiskSim file from disk, capped as a profile is (DiskSim's own files
/// are a few kilobytes; a FIFO or `/dev/zero` is refused).
fn read(path: &Path) -> Result<String, ImportError> {
    elevator_core::read_input(path, crate::MAX_PROFILE_BYTES).map_err(|e| ImportError {
        file: path.display().to_string(),
        line: 0,
        key: "file".into(),
        message: format!("cannot read: {e}"),
    })
}

/// Whether `s` is one or more numbers separated by commas (a line of a
/// list value: slips, seek equation values).
fn is_number_list(s: &str) -> bool {
    s.chars().any(|c| c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_digit() || ",.+-eE".contains(c) || c.is_whitespace())
}

/// Append the comma-separated numbers of `items` to the list `value`
/// (which starts with `[`).
fn push_items(value: &mut String, items: &str) {
    for n in items.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !value.ends_with('[') {
            value.push(',');
        }
        value.push_str(n);
    }
}

/// Every `key = value` of `text`, and the `source X` lines. A list value
/// (`slips = [`, `HPL seek equation values = [`) gathers the numbers of
/// the lines that follow up to its `]`, blank lines and comments
/// included, into `[a,b,c]`.
fn assignments(file: &str, text: &str) -> (Vec<Assign>, Vec<String>) {
    let mut out: Vec<Assign> = Vec::new();
    let mut sources = Vec::new();
    // A list value open on the last assignment.
    let mut open_list = false;
    for (i, raw) in text.lines().enumerate() {
        let mut line = raw.split('#').next().unwrap_or("").trim();
        if open_list {
            if line.is_empty() {
                continue;
            }
            let (items, rest) = match line.find(']') {
                Some(k) => (&line[..k], Some(&line[k + 1..])),
                None => (line, None),
            };
            if is_number_list(items) || (items.trim().is_empty() && rest.is_some()) {
                let last = out.last_mut().expect("a list opens on an assignment");
                push_items(&mut last.value, items);
                let Some(rest) = rest else { continue };
                last.value.push(']');
                open_list = false;
                line = rest.trim().trim_start_matches(',').trim();
                if line.is_empty() {
                    continue;
                }
            } else {
                // Not a list of numbers (`Zones = [` opens blocks).
                open_list = false;
            }
        }
        if let Some(rest) = line.strip_prefix("source ") {
            sources.push(rest.trim().to_string());
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim().trim_start_matches('{').trim();
        // A block opener (`Layout Model = dm_layout_g1 {`) names its type.
        let value = value.trim().trim_end_matches(',').trim();
        let value = value.trim_end_matches('{').trim();
        if key.is_empty() {
            continue;
        }
        let mut value = value.to_string();
        if let Some(items) = value.strip_prefix('[').map(str::to_string) {
            if !items.contains(']') {
                // A list that goes on over the next lines.
                open_list = true;
                value = "[".to_string();
                push_items(&mut value, &items);
            } else {
                // A list on one line: the same `[a,b,c]` form.
                let inner = items.split(']').next().unwrap_or("");
                value = "[".to_string();
                push_items(&mut value, inner);
                value.push(']');
            }
        }
        out.push(Assign {
            file: file.to_string(),
            line: i + 1,
            key: key.to_string(),
            value,
        });
    }
    (out, sources)
}

struct Spec {
    items: Vec<Assign>,
    used: Vec<bool>,
}

impl Spec {
    fn find(&self, key: &str) -> Option<usize> {
        self.items.iter().position(|a| a.key == key)
    }

    fn missing(&self, file: &str, key: &str) -> ImportError {
        ImportError {
            file: file.to_string(),
            line: 0,
            key: key.to_string(),
            message: "missing: the HDD model needs it".into(),
        }
    }

    fn number(&mut self, i: usize) -> Result<f64, ImportError> {
        self.used[i] = true;
        let a = &self.items[i];
        a.value
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| ImportError {
                file: a.file.clone(),
                line: a.line,
                key: a.key.clone(),
                message: format!("{:?} is not a number", a.value),
            })
    }

    /// The first `key`'s number, and where it was.
    fn get(&mut self, file: &str, key: &str) -> Result<(f64, String), ImportError> {
        let i = self.find(key).ok_or_else(|| self.missing(file, key))?;
        let v = self.number(i)?;
        let a = &self.items[i];
        Ok((
            v,
            format!("{}:{} \"{} = {}\"", a.file, a.line, a.key, a.value),
        ))
    }

    fn get_or(&mut self, key: &str, default: f64) -> Result<(f64, String), ImportError> {
        match self.find(key) {
            Some(i) => {
                let v = self.number(i)?;
                let a = &self.items[i];
                Ok((
                    v,
                    format!("{}:{} \"{} = {}\"", a.file, a.line, a.key, a.value),
                ))
            }
            None => Ok((default, format!("\"{key}\" not given: DiskSim's {default}"))),
        }
    }
}

/// Keys that say nothing about the drive's timing (statistics, names, the
/// host-side queue DiskSim's driver keeps) and so need no warning.
const NOT_TIMING: [&str; 11] = [
    "Print stats",
    "Zones",
    "Full seek curve",
    "Model",
    "Layout Model",
    "Mechanical Model",
    "Scheduler",
    "Avg sectors per cylinder",
    "Time scale for overheads",
    "Number of cylinders",
    "Percent error in rpms",
];

/// The keys of one `dm_layout_g1_zone`.
const ZONE_KEYS: [&str; 11] = [
    "First cylinder number",
    "Last cylinder number",
    "Blocks per track",
    "Offset of first block",
    "Empty space at zone front",
    "Skew for track switch",
    "Skew for cylinder switch",
    "Number of spares",
    "slips",
    "defects",
    "Skew units",
];

fn is_zero(v: &str) -> bool {
    v.parse::<f64>().is_ok_and(|x| x == 0.0) || v == "[]" || v.is_empty()
}

/// How far linear interpolation between the sampled points of a seek
/// equation may stray from the equation at any distance, in ms: far below
/// a sector's time (0.1 ms at 7200 rpm and 800 sectors a track).
pub const SAMPLE_TOLERANCE_MS: f64 = 0.005;

/// The longest seek a profile holds (`mechanics.seek_table`), in ms.
const MAX_SEEK_MS: f64 = 100.0;

/// Slips out of order in one zone beyond which walking DiskSim's list
/// for every level (quadratic in the count) gives way to sorting it.
const MAX_SLIPS_EMULATED: usize = 1024;

/// The numbers of a list value (`[a,b,c]`), or which item is not one.
fn list_numbers(a: &Assign) -> Result<Vec<f64>, ImportError> {
    let inner = a.value.trim_start_matches('[').trim_end_matches(']');
    inner
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|n| {
            n.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| ImportError {
                    file: a.file.clone(),
                    line: a.line,
                    key: a.key.clone(),
                    message: format!("{n:?} is not a number"),
                })
        })
        .collect()
}

fn source_of(a: &Assign) -> String {
    format!("{}:{} \"{} = {}\"", a.file, a.line, a.key, a.value)
}

/// DiskSim's logical-to-physical slip count for block `lbn` of a zone (its
/// number from the zone's first block, the empty front included), as
/// `g1_ltop_sectperzonespare` (layout_g1.c) counts it: the list in file
/// order, each slip at or before the block as moved so far moving it one
/// further.
fn slips_before(list: &[u64], lbn: u64) -> u64 {
    let mut moved = 0;
    for &b in list {
        if b <= lbn + moved {
            moved += 1;
        }
    }
    moved
}

/// The physical blocks DiskSim 4.0 leaves unmapped in a zone of `blocks`
/// blocks with `front` of them empty at its front and the `slips` list
/// `list` in file order ("Sparing scheme used = 7"): sorted, distinct,
/// each below `blocks`, as many as the list has entries (DiskSim's
/// `dm_layout_g1_compute_blksinband` takes one block per entry off the
/// zone). For a rising list these are the list itself. Otherwise
/// DiskSim's order-dependent count ([`slips_before`]) decides: the mapping
/// `lbn + slips_before(lbn)` rises strictly with `lbn`, the blocks it
/// skips are the slipped ones, and the entries it never reaches leave the
/// zone's last blocks unused. `None` when the slips leave no block, or
/// (`exact` false) a list too long to walk level by level was sorted
/// instead: rising lists with repeats are still exact then.
fn disksim_slipped(list: &[u64], front: u64, blocks: u64) -> Option<(Vec<u64>, bool)> {
    let n = list.len() as u64;
    let mapped = blocks
        .checked_sub(front)?
        .checked_sub(n)
        .filter(|&m| m > 0)?;
    let (first, last) = (front, front + mapped - 1);
    let rising = list.windows(2).all(|w| w[0] <= w[1]);
    let mut out = Vec::with_capacity(list.len());
    if rising || list.len() > MAX_SLIPS_EMULATED {
        // Walking a rising list stops at its first entry `j` past the
        // block as moved so far (`list[j] > l + j`), since every later
        // entry is past it too: block `l` is moved `k` places exactly when
        // `l >= max(list[j] - j, j < k)`. The thresholds rise with `k`,
        // so each level's first block comes from a running maximum.
        let exact = rising;
        let sorted: Vec<u64>;
        let list = if rising {
            list
        } else {
            let mut v = list.to_vec();
            v.sort_unstable();
            sorted = v;
            &sorted[..]
        };
        let mut threshold = i128::MIN;
        let mut level = 0u64;
        let mut k = 0usize;
        while k < list.len() {
            threshold = threshold.max(i128::from(list[k]) - k as i128);
            let at = threshold.max(i128::from(first));
            if at > i128::from(last) {
                break;
            }
            // Every further entry whose threshold is reached by `at` too.
            let mut here = k as u64 + 1;
            while (here as usize) < list.len()
                && (i128::from(list[here as usize]) - i128::from(here)).max(threshold) <= at
            {
                threshold = threshold.max(i128::from(list[here as usize]) - i128::from(here));
                here += 1;
            }
            let at = at as u64;
            out.extend(at + level..at + here);
            level = here;
            k = here as usize;
        }
        let unused = n - out.len() as u64;
        out.extend(blocks - unused..blocks);
        debug_assert!(out.windows(2).all(|w| w[0] < w[1]), "{out:?}");
        return Some((out, exact));
    }
    // Out of order: DiskSim's walk whole ([`slips_before`]). The mapping
    // `l + level(l)` rises strictly with `l`, and the level never falls
    // as `l` grows; where it steps up, the blocks the mapping jumps over
    // are the slipped ones. Each step is found by bisection.
    let level = |l: u64| slips_before(list, l);
    let top = level(last);
    let mut k = 1;
    while k <= top {
        let (mut lo, mut hi) = (first, last);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if level(mid) >= k {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        // From just after where the block before `lo` lands up to where
        // `lo` lands.
        let after = if lo > first {
            lo + level(lo - 1)
        } else {
            first
        };
        let here = level(lo);
        out.extend(after..lo + here);
        k = here + 1;
    }
    // Entries the mapping never reached: the zone's last blocks go unused.
    let unused = n - out.len() as u64;
    out.extend(blocks - unused..blocks);
    debug_assert!(out.windows(2).all(|w| w[0] < w[1]), "{out:?}");
    Some((out, true))
}

/// Sample the seek equation `f` (ms by distance) at the distances up to
/// `max` where linear interpolation, as the HDD model reads a seek table,
/// keeps within [`SAMPLE_TOLERANCE_MS`] of it: every distance up to 16,
/// then steps that double while the chord stays close. `breaks` are the
/// distances where a piece of the equation starts; no chord spans one.
fn sample_seek(f: &dyn Fn(u32) -> f64, max: u32, breaks: &[u32]) -> Vec<(u32, f64)> {
    let max = max.max(1);
    let mut points: Vec<(u32, f64)> = (1..=max.min(16)).map(|d| (d, f(d))).collect();
    let mut d0 = max.min(16);
    while d0 < max {
        // The next piece starts at `wall`: a chord may end just before it,
        // or at it when it starts right after `d0`.
        let wall = breaks
            .iter()
            .copied()
            .filter(|&b| b > d0)
            .min()
            .unwrap_or(u32::MAX);
        let reach = if wall == d0 + 1 {
            d0 + 1
        } else {
            max.min(wall.saturating_sub(1))
        };
        let chord_ok = |d1: u32| -> bool {
            let (y0, y1) = (f(d0), f(d1));
            let span = f64::from(d1 - d0);
            let probes: Vec<u32> = if d1 - d0 <= 8 {
                (d0 + 1..d1).collect()
            } else {
                (1..8u64)
                    .map(|q| d0 + (u64::from(d1 - d0) * q / 8) as u32)
                    .collect()
            };
            probes.iter().all(|&d| {
                let y = y0 + (y1 - y0) * f64::from(d - d0) / span;
                (y - f(d)).abs() <= SAMPLE_TOLERANCE_MS / 2.0
            })
        };
        let mut step = 1u32;
        while let Some(next) = step.checked_mul(2) {
            if d0.saturating_add(next) > reach || !chord_ok(d0 + next) {
                break;
            }
            step = next;
        }
        let d1 = (d0 + step).min(reach).max(d0 + 1);
        points.push((d1, f(d1)));
        d0 = d1;
    }
    points
}

/// DiskSim's seek model as `[distance, ms]` points, with the comment that
/// names where they came from.
struct SeekPoints {
    comment: String,
    points: Vec<(u32, f64)>,
    /// Decimals to print: a measured table's three, a sampled equation's
    /// four.
    decimals: usize,
}

type Reader<'a> = &'a dyn Fn(&Path) -> Result<String, ImportError>;

/// A DiskSim seek file (`dm_mech_g1_read_extracted_seek_curve`): an
/// optional `Seek distances measured: N` line, then `distance, ms` lines
/// with an optional third number (the standard deviation). DiskSim skips
/// a line that is not of this form with a complaint, and scans the rest in
/// file order assuming rising distances; here bogus lines are skipped with
/// a note, the points sorted by distance (the first of equal distances
/// kept, as DiskSim's scan finds it), distances below 1 dropped and
/// negative times taken as 0.
fn read_seek_file(
    name: &str,
    text: &str,
    notes: &mut Vec<String>,
) -> Result<Vec<(u32, f64)>, ImportError> {
    let mut points: Vec<(u32, f64)> = Vec::new();
    let (mut bogus, mut dropped, mut negative, mut disorder) = (Vec::new(), 0, 0, false);
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with("Seek distances measured") {
            continue;
        }
        let mut parts = line.split(',').map(str::trim);
        let d = parts.next().and_then(|d| d.parse::<i64>().ok());
        let ms = parts
            .next()
            .and_then(|m| m.parse::<f64>().ok())
            .filter(|m| m.is_finite());
        let extra_ok =
            parts.next().is_none_or(|s| s.parse::<f64>().is_ok()) && parts.next().is_none();
        let (Some(d), Some(ms), true) = (d, ms, extra_ok) else {
            bogus.push(i + 1);
            continue;
        };
        if ms > MAX_SEEK_MS {
            return Err(ImportError {
                file: name.to_string(),
                line: i + 1,
                key: "seek point".into(),
                message: format!("{ms} ms: no drive seeks longer than {MAX_SEEK_MS} ms"),
            });
        }
        let Ok(d) = u32::try_from(d) else {
            dropped += 1;
            continue;
        };
        if d == 0 {
            dropped += 1;
            continue;
        }
        if ms < 0.0 {
            negative += 1;
        }
        if points.last().is_some_and(|&(last, _)| d <= last) {
            disorder = true;
        }
        points.push((d, ms.max(0.0)));
    }
    if !bogus.is_empty() {
        let lines: Vec<String> = bogus.iter().take(8).map(usize::to_string).collect();
        notes.push(format!(
            "{name}: {} line(s) not of the form `distance, ms[, stdev]` skipped, as DiskSim \
             skips them (line {}{})",
            bogus.len(),
            lines.join(", "),
            if bogus.len() > 8 { ", ..." } else { "" }
        ));
    }
    if dropped > 0 {
        notes.push(format!(
            "{name}: {dropped} point(s) at a distance below 1 dropped (DiskSim seeks no time \
             over distance 0)"
        ));
    }
    if negative > 0 {
        notes.push(format!(
            "{name}: {negative} negative seek time(s) taken as 0 ms"
        ));
    }
    if disorder {
        // Stable: of equal distances the first in the file stays first.
        points.sort_by_key(|p| p.0);
        points.dedup_by_key(|p| p.0);
        notes.push(format!(
            "{name}: distances out of order or repeated: sorted, the first of each distance \
             kept (DiskSim scans the file in order and assumes rising distances)"
        ));
    }
    if points.is_empty() {
        // DiskSim's lookup finds no point and seeks in no time.
        notes.push(format!(
            "{name}: no seek points: every seek takes 0 ms, as in DiskSim's empty table"
        ));
        points.push((1, 0.0));
    }
    Ok(points)
}

/// The seek model `Seek type` names (mech_g1.modspec,
/// `dm_mech_g1_seekfns` in mech_g1_seektime.c), as points for the HDD
/// model's table. `cylinders` is the disk's cylinder count
/// (`dm_cyls`), which the three-point equations scale by.
fn seek_points(
    model: &mut Spec,
    model_name: &str,
    dir: &Path,
    read: Reader<'_>,
    cylinders: u32,
    notes: &mut Vec<String>,
) -> Result<SeekPoints, ImportError> {
    let type_at = model.find("Seek type");
    let curve_at = model.find("Full seek curve");
    let kind = match (type_at, curve_at) {
        (Some(i), _) => {
            model.used[i] = true;
            model.items[i].value.clone()
        }
        // DiskSim reads the curve whatever the type says; without a type
        // the curve is all there is.
        (None, Some(_)) => "extracted".to_string(),
        (None, None) => return Err(model.missing(model_name, "Seek type")),
    };
    let type_src = type_at.map_or_else(String::new, |i| source_of(&model.items[i]));
    let type_line = type_at.map_or(0, |i| model.items[i].line);
    let max = cylinders.saturating_sub(1).max(1);
    // The three figures, where an equation needs them.
    let figure = |model: &mut Spec, key: &str| -> Result<(f64, String), ImportError> {
        let i = model.find(key).ok_or_else(|| ImportError {
            file: model_name.to_string(),
            line: type_line,
            key: key.to_string(),
            message: format!(
                "`Seek type = {kind}` needs it (DiskSim would seek with an unset value)"
            ),
        })?;
        let v = model.number(i)?;
        Ok((v, source_of(&model.items[i])))
    };
    // An equation's points: clamped at 0, refused beyond what a profile
    // holds.
    let sampled = |f: &dyn Fn(u32) -> f64,
                   breaks: &[u32],
                   key: &str,
                   notes: &mut Vec<String>|
     -> Result<Vec<(u32, f64)>, ImportError> {
        let mut points = sample_seek(f, max, breaks);
        if let Some(&(d, ms)) = points.iter().find(|p| p.1 > MAX_SEEK_MS) {
            return Err(ImportError {
                file: model_name.to_string(),
                line: type_line,
                key: key.to_string(),
                message: format!(
                    "the equation gives {ms:.1} ms at {d} cylinders: no drive seeks longer than \
                     {MAX_SEEK_MS} ms"
                ),
            });
        }
        let negative = points.iter().filter(|p| p.1 < 0.0).count();
        if negative > 0 {
            notes.push(format!(
                "{model_name}: the seek equation falls below 0 ms at {negative} sampled \
                 distance(s): taken as 0 ms"
            ));
            for p in &mut points {
                p.1 = p.1.max(0.0);
            }
        }
        Ok(points)
    };
    let sampled_note = |n: usize| {
        format!(
            "sampled at {n} distances up to {max} cylinders; linear interpolation between them \
             stays within {SAMPLE_TOLERANCE_MS} ms of it"
        )
    };
    match kind.as_str() {
        "extracted" => {
            let i = curve_at.ok_or_else(|| ImportError {
                file: model_name.to_string(),
                line: type_line,
                key: "Full seek curve".into(),
                message: "`Seek type = extracted` needs the file of measured seeks".into(),
            })?;
            let a = model.items[i].clone();
            let path = dir.join(&a.value);
            let name = path.display().to_string();
            let points = read_seek_file(&name, &read(&path)?, notes)?;
            // DiskSim's extracted seek reads neither figure.
            for key in ["Average seek time", "Full strobe seek time"] {
                if let Some(i) = model.find(key) {
                    model.used[i] = true;
                }
            }
            Ok(SeekPoints {
                comment: format!(
                    "{}:{} \"Full seek curve = {}\": {} measured [cylinders, ms] points.",
                    a.file,
                    a.line,
                    a.value,
                    points.len()
                ),
                points,
                decimals: 3,
            })
        }
        "hpl" | "hplplus10" => {
            let plus10 = kind == "hplplus10";
            let at = model
                .find("HPL seek equation values")
                .ok_or_else(|| ImportError {
                    file: model_name.to_string(),
                    line: type_line,
                    key: "HPL seek equation values".into(),
                    message: format!(
                    "`Seek type = {kind}` needs the six values (DiskSim would seek with unset ones)"
                ),
                })?;
            model.used[at] = true;
            let hpl_a = model.items[at].clone();
            let v = list_numbers(&hpl_a)?;
            let bad = |message: String| ImportError {
                file: hpl_a.file.clone(),
                line: hpl_a.line,
                key: hpl_a.key.clone(),
                message,
            };
            // do_hpl_seek (mech_g1_load.c): six values, V1 whole
            // cylinders, V2..V5 not negative, V6 a time or -1 (none).
            if v.len() < 6 {
                return Err(bad(format!("wants six values, has {}", v.len())));
            }
            if v[0] < 0.0 || v[0].fract() != 0.0 || v[0] > f64::from(u32::MAX) {
                return Err(bad(format!("V1 = {} must be whole cylinders", v[0])));
            }
            if let Some(x) = v[1..5].iter().find(|x| **x < 0.0) {
                return Err(bad(format!("V2..V5 must not be negative: {x}")));
            }
            let boundary = v[0] as u32;
            let (root0, root, lin0, lin) = (v[1], v[2], v[3], v[4]);
            let single = (v[5] != -1.0).then_some(v[5]);
            let first_ten = if plus10 {
                let at = model
                    .find("First ten seek times")
                    .ok_or_else(|| ImportError {
                        file: model_name.to_string(),
                        line: type_line,
                        key: "First ten seek times".into(),
                        message: "`Seek type = hplplus10` needs them".into(),
                    })?;
                model.used[at] = true;
                let a = model.items[at].clone();
                let t = list_numbers(&a)?;
                if t.len() < 10 || t.iter().any(|x| *x < 0.0) {
                    return Err(ImportError {
                        file: a.file.clone(),
                        line: a.line,
                        key: a.key.clone(),
                        message: "wants ten times, none negative (do_1st10_seeks)".into(),
                    });
                }
                Some((t, source_of(&a)))
            } else {
                if let Some(i) = model.find("First ten seek times") {
                    model.used[i] = true;
                    notes.push(format!(
                        "{}: unused with `Seek type = hpl`, as in DiskSim (do_1st10_seeks ignores \
                         it)",
                        source_of(&model.items[i])
                    ));
                }
                None
            };
            let first = first_ten.as_ref().map(|(t, _)| t.clone());
            let f = move |d: u32| -> f64 {
                let x = f64::from(d);
                match (&first, single) {
                    (Some(t), _) if d <= 10 => t[d as usize - 1],
                    (None, Some(one)) if d == 1 => one,
                    _ if d < boundary => root0 + root * x.sqrt(),
                    _ => lin0 + lin * x,
                }
            };
            let breaks: Vec<u32> = if plus10 {
                vec![11, boundary]
            } else {
                vec![2, boundary]
            };
            let points = sampled(&f, &breaks, "HPL seek equation values", notes)?;
            if !plus10 {
                notes.push(format!(
                    "{}: DiskSim 4.0's dm_mech_g1_seek_hpl compares the distance with \
                     hpseek[0], which do_hpl_seek never sets (V1 goes to hpseek_v1, which \
                     hplplus10 reads), so DiskSim's own hpl times rest on unset memory; \
                     imported as Ruemmler & Wilkes's equation with V1 as the boundary",
                    source_of(&hpl_a)
                ));
            }
            if let Some(i) = curve_at {
                model.used[i] = true;
                notes.push(format!(
                    "{}: not used: `Seek type = {kind}` chooses the seek function",
                    source_of(&model.items[i])
                ));
            }
            let mut comment = format!(
                "{type_src}: Ruemmler & Wilkes's seek equation ({}), t(d) = V2 + V3·√d for d < \
                 V1, V4 + V5·d from V1 on",
                source_of(&hpl_a)
            );
            match (&first_ten, single) {
                (Some((_, src)), _) => {
                    let _ = write!(comment, ", the first ten distances from {src}");
                }
                (None, Some(one)) => {
                    let _ = write!(comment, ", V6 = {one} ms for one cylinder");
                }
                (None, None) => {}
            }
            let _ = write!(comment, ";\n# {}.", sampled_note(points.len()));
            Ok(SeekPoints {
                comment,
                points,
                decimals: 4,
            })
        }
        "linear" | "curve" => {
            let (one, one_src) = figure(model, "Single cylinder seek time")?;
            let (avg, avg_src) = figure(model, "Average seek time")?;
            let (full, full_src) = figure(model, "Full strobe seek time")?;
            let n = f64::from(cylinders.max(2));
            let (points, equation, note) = if kind == "linear" {
                // dm_mech_g1_seek_3pt_line as documented: from the
                // one-cylinder time to the average at a third of the
                // cylinders, then to the full strobe at all of them.
                let third = (cylinders / 3).max(2);
                let f = |d: u32| -> f64 {
                    let x = f64::from(d);
                    if d <= 1 {
                        one
                    } else if d <= third {
                        one + 3.0 * (x - 1.0) / n * (avg - one)
                    } else {
                        avg + (3.0 * x - n) / (2.0 * n) * (full - avg)
                    }
                };
                let mut ds = vec![1, third, third + 1, max];
                ds.sort_unstable();
                ds.dedup();
                let points: Vec<(u32, f64)> = ds.into_iter().map(|d| (d, f(d).max(0.0))).collect();
                (
                    points,
                    "linear interpolation from the one-cylinder time to the average at a third of \
                     the cylinders, then to the full strobe"
                        .to_string(),
                    "DiskSim 4.0's dm_mech_g1_seek_3pt_line sets numcyls to the seek distance \
                     itself, so there every seek over one cylinder takes the full-strobe time; \
                     imported as its documented linear interpolation",
                )
            } else {
                // Lee's three-point curve (Lee & Katz 1993, as DiskSim's
                // manual cites it): t(d) = one + b·(d-1) + a·√(d-1).
                let a = (-10.0 * one + 15.0 * avg - 5.0 * full) / (3.0 * n.sqrt());
                let b = (7.0 * one - 15.0 * avg + 8.0 * full) / (3.0 * n);
                let f = move |d: u32| -> f64 {
                    let x = f64::from(d) - 1.0;
                    one + b * x + a * x.sqrt()
                };
                let points = sampled(&f, &[], "Average seek time", notes)?;
                let note = sampled_note(points.len());
                (
                    points,
                    format!(
                        "Lee's three-point curve t(d) = one + b·(d-1) + a·√(d-1), a = {a:.6}, \
                         b = {b:.8};\n# {note}"
                    ),
                    "DiskSim 4.0's dm_mech_g1_seek_3pt_curve uses the three figures as the \
                     curve's coefficients unconverted (dm_mech_g1_seek_init, which converted \
                     them, asserts it is deprecated); imported as Lee's curve through them",
                )
            };
            notes.push(format!("{type_src}: {note}"));
            if let Some(i) = curve_at {
                model.used[i] = true;
                notes.push(format!(
                    "{}: not used: `Seek type = {kind}` chooses the seek function",
                    source_of(&model.items[i])
                ));
            }
            Ok(SeekPoints {
                comment: format!(
                    "{type_src}: {equation}, from {one_src}, {avg_src}, {full_src} and {cylinders} \
                     cylinders."
                ),
                points,
                decimals: 4,
            })
        }
        "constant" => {
            let (c, c_src) = figure(model, "Constant seek time")?;
            if !(0.0..=MAX_SEEK_MS).contains(&c) {
                let i = model.find("Constant seek time").unwrap_or(0);
                return Err(ImportError {
                    file: model_name.to_string(),
                    line: model.items[i].line,
                    key: "Constant seek time".into(),
                    message: format!("{c} ms: want 0 to {MAX_SEEK_MS} ms"),
                });
            }
            notes.push(format!(
                "{c_src}: DiskSim 4.0 stores it in the seek-type field unconverted from ms \
                 (mech_g1.modspec), so its own constant seeks last picoseconds, and pays it on \
                 every access; imported as the documented constant, paid when the cylinder \
                 changes"
            ));
            for key in ["Average seek time", "Full strobe seek time"] {
                if let Some(i) = model.find(key) {
                    model.used[i] = true;
                }
            }
            Ok(SeekPoints {
                comment: format!("{type_src}: every seek takes {c_src}."),
                points: vec![(1, c)],
                decimals: 4,
            })
        }
        other => Err(ImportError {
            file: model_name.to_string(),
            line: type_line,
            key: "Seek type".into(),
            message: format!(
                "{other:?} is not a DiskSim seek type (constant, linear, curve, hpl, hplplus10, \
                 extracted)"
            ),
        }),
    }
}

/// A skew or first-block offset in sectors of a `spt`-sector track: in
/// DiskSim's "Skew units" (`sectors`: the value truncated, `(int)d`;
/// `revolutions`: that part of a turn, rounded to a sector here), taken
/// modulo the track as the angle it is. Returns the sectors and whether
/// rounding or the modulo changed the value.
fn skew_sectors(v: f64, revolutions: bool, spt: u32) -> (u32, bool) {
    let raw = if revolutions {
        v * f64::from(spt)
    } else {
        v.trunc()
    };
    let whole = raw.round();
    let spt = i128::from(spt.max(1));
    let k = (whole.clamp(-1e30, 1e30) as i128).rem_euclid(spt);
    let changed =
        (revolutions && (raw - whole).abs() > 1e-9) || i128::from(k as u32) != whole as i128;
    (k as u32, changed)
}

/// Import the drive that `parv` instantiates.
pub fn import_disksim(parv: &Path) -> Result<Imported, ImportError> {
    import_disksim_with(parv, &read)
}

/// As [`import_disksim`], reading the `.parv` and the files it names
/// (`.diskspecs`, `.model`, `.seek`, in that order) through `read`: the
/// fuzz target feeds them from memory.
pub fn import_disksim_with(
    parv: &Path,
    read: &dyn Fn(&Path) -> Result<String, ImportError>,
) -> Result<Imported, ImportError> {
    let dir = parv
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let parv_name = parv.display().to_string();
    let (parv_items, sources) = assignments(&parv_name, &read(parv)?);
    // The largest block transfer time of the parv's buses and controller.
    let mut bus_ms = (0.0_f64, String::new());
    for a in &parv_items {
        if matches!(
            a.key.as_str(),
            "Read block transfer time" | "Bulk sector transfer time"
        ) {
            if let Ok(v) = a.value.parse::<f64>() {
                if v > bus_ms.0 {
                    bus_ms = (v, source_of(a));
                }
            }
        }
    }
    let spec_path = sources
        .first()
        .map(|s| dir.join(s))
        .ok_or_else(|| ImportError {
            file: parv_name.clone(),
            line: 0,
            key: "source".into(),
            message: "no `source X.diskspecs` line: which drive?".into(),
        })?;
    let spec_name = spec_path.display().to_string();
    let spec_text = read(&spec_path)?;
    // The disk spec's block name (`disksim_disk IBM_DNES-309170W_validate {`).
    let spec_block = spec_text
        .lines()
        .find_map(|l| l.trim().strip_prefix("disksim_disk "))
        .and_then(|rest| rest.split_whitespace().next())
        .filter(|b| {
            b.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        })
        .map(|b| format!(" {b}"))
        .unwrap_or_default();
    let (disk_items, _) = assignments(&spec_name, &spec_text);
    // The model: a file (`Model = source X.model`), or inline in the disk
    // spec (`Model = dm_disk NAME {`), where its keys are the spec's own.
    let model_value = disk_items
        .iter()
        .find(|a| a.key == "Model")
        .map(|a| a.value.clone());
    let (model_name, model_items, inline) = match model_value.as_deref() {
        Some(v) if v.starts_with("source ") => {
            let file = dir.join(v.trim_start_matches("source ").trim());
            let name = file.display().to_string();
            let (items, _) = assignments(&name, &read(&file)?);
            (name, items, false)
        }
        Some(v) if v.starts_with("dm_disk") => (spec_name.clone(), disk_items.clone(), true),
        _ => {
            return Err(ImportError {
                file: spec_name.clone(),
                line: 0,
                key: "Model".into(),
                message: "no `Model = source X.model` nor an inline `Model = dm_disk NAME {`"
                    .into(),
            })
        }
    };
    let mut disk = Spec {
        used: vec![false; disk_items.len()],
        items: disk_items,
    };
    let mut model = Spec {
        used: vec![false; model_items.len()],
        items: model_items,
    };
    // What the profile approximates: in its header and among the warnings.
    let mut notes: Vec<String> = Vec::new();
    let name = parv
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("disk")
        .to_string();

    // Interface.
    let mut t = String::new();
    let (qd, qd_src) = disk.get(&spec_name, "Max queue length")?;
    let (bulk, bulk_src) = disk.get_or("Bulk sector transfer time", 0.0)?;
    let (per_sector, per_sector_src) = if bulk >= bus_ms.0 {
        (bulk, bulk_src)
    } else {
        bus_ms.clone()
    };
    if per_sector <= 0.0 {
        return Err(ImportError {
            file: spec_name,
            line: 0,
            key: "Bulk sector transfer time".into(),
            message: "neither the disk nor a bus gives a transfer time per sector".into(),
        });
    }
    if qd > 256.0 {
        notes.push(format!(
            "{qd_src}: the HDD model queues at most 256 commands"
        ));
    }
    let _ = writeln!(
        t,
        "[interface]\n# {qd_src}.\nqueue_depth = {}",
        qd.clamp(1.0, 256.0) as u32
    );
    let _ = writeln!(
        t,
        "# Not a DiskSim parameter: the block layer's 128 KiB default.\nmax_sectors = 256"
    );
    let _ = writeln!(
        t,
        "# {per_sector_src} ms per 512-byte sector (the larger of the disk's and the buses').\n\
         transfer_mb_per_s = {:.4}\n",
        512.0 / (per_sector * 1e3)
    );

    // Mechanics.
    let (rpm, rpm_src) = model.get(&model_name, "Rotation speed (in rpms)")?;
    let (surfaces, surf_src) = model.get(&model_name, "Number of data surfaces")?;
    let (hs, hs_src) = model.get(&model_name, "Head switch time")?;
    let (settle, settle_src) = model.get_or("Add. write settling delay", 0.0)?;
    if let Some(i) = model.find("Access time type") {
        model.used[i] = true;
        let a = model.items[i].clone();
        match a.value.as_str() {
            "trackSwitchPlusRotation" => {}
            "averageRotation" | "constant" => notes.push(format!(
                "{}: not modelled: the HDD model times every seek and every rotation, as \
                 trackSwitchPlusRotation does",
                source_of(&a)
            )),
            other => {
                return Err(ImportError {
                    file: a.file,
                    line: a.line,
                    key: a.key,
                    message: format!(
                        "{other:?} is not a DiskSim access time type (constant, averageRotation, \
                         trackSwitchPlusRotation)"
                    ),
                })
            }
        }
    }

    // Layout: one row per zone (read before the seek, whose equations
    // scale by the cylinders).
    let mut rows = Vec::new();
    let mut zone_warnings: Vec<(String, usize)> = Vec::new();
    let starts: Vec<usize> = model
        .items
        .iter()
        .enumerate()
        .filter(|(_, a)| a.key == "First cylinder number")
        .map(|(i, _)| i)
        .collect();
    if starts.is_empty() {
        return Err(model.missing(&model_name, "First cylinder number"));
    }
    // DiskSim's sparing scheme (layout_g1.h): the model lays out slips as
    // scheme 7 does (`SECTATEND_SPARING`: slipped blocks pushed to the
    // zone's end, no spare blocks per cylinder); with no sparing (0) there
    // is nothing to lay out. Other schemes stay a warning.
    let scheme_at = model.find("Sparing scheme used");
    let scheme = match scheme_at {
        Some(i) => model.items[i].value.parse::<f64>().unwrap_or(-1.0),
        None => 0.0,
    };
    let slips_laid_out = scheme == 7.0;
    // Scheme 1 (`TRACK_SPARING`): each zone's "Number of spares" tracks at
    // its end are not mapped (`g1_ltop_trackspare`,
    // `dm_layout_g1_compute_blksinband`); its slips (whole tracks) are
    // not laid out.
    let track_sparing = scheme == 1.0;
    if let Some(i) = scheme_at {
        model.used[i] = scheme == 0.0 || slips_laid_out || track_sparing;
    }
    if let Some(i) = model.find("Rangesize for sparing") {
        // Only SECTPERRANGE_SPARING (8) reads it (layout_g1_load.c).
        model.used[i] = scheme != 8.0;
    }
    // "Skew units" for the whole layout (a zone's own overrides it):
    // sectors unless it says revolutions (layout_g1.modspec).
    let in_zone = |i: usize| starts.first().is_some_and(|&s| i > s);
    let units_of = |model: &mut Spec, i: usize| -> Result<bool, ImportError> {
        model.used[i] = true;
        let a = &model.items[i];
        match a.value.as_str() {
            "revolutions" => Ok(true),
            "sectors" => Ok(false),
            other => Err(ImportError {
                file: a.file.clone(),
                line: a.line,
                key: a.key.clone(),
                message: format!("{other:?}: want revolutions or sectors"),
            }),
        }
    };
    let layout_units_at =
        (0..model.items.len()).find(|&i| model.items[i].key == "Skew units" && !in_zone(i));
    let layout_revolutions = match layout_units_at {
        Some(i) => units_of(&mut model, i)?,
        None => false,
    };
    let mut firsts = Vec::new();
    let mut fronts: Vec<(usize, u64, String)> = Vec::new();
    let mut slips: Vec<(usize, u64)> = Vec::new();
    let mut spares: Vec<(usize, u64)> = Vec::new();
    let mut offsets: Vec<(usize, u64)> = Vec::new();
    let (mut skews_adjusted, mut slips_reordered, mut slips_sorted) = (0, Vec::new(), Vec::new());
    for (z, &start) in starts.iter().enumerate() {
        let next_zone = starts.get(z + 1).copied().unwrap_or(model.items.len());
        let end = (start + 1..next_zone)
            .find(|&i| !ZONE_KEYS.contains(&model.items[i].key.as_str()))
            .unwrap_or(next_zone);
        let zone_units_at = (start..end).find(|&i| model.items[i].key == "Skew units");
        let revolutions = match zone_units_at {
            Some(i) => units_of(&mut model, i)?,
            None => layout_revolutions,
        };
        let mut field = |key: &str| -> Result<f64, ImportError> {
            let i = (start..end)
                .find(|&i| model.items[i].key == key)
                .ok_or_else(|| ImportError {
                    file: model_name.clone(),
                    line: model.items[start].line,
                    key: key.to_string(),
                    message: format!("missing in zone {z}"),
                })?;
            model.number(i)
        };
        let first = field("First cylinder number")?;
        let last = field("Last cylinder number")?;
        let spt = field("Blocks per track")?;
        // Optional in DiskSim (mech... layout_g1_zone.modspec): 0 then.
        let ts = field("Skew for track switch").unwrap_or(0.0);
        let cs = field("Skew for cylinder switch").unwrap_or(0.0);
        let whole = |v: f64| v >= 0.0 && v.fract() == 0.0 && v <= f64::from(u32::MAX);
        if !whole(first) || !whole(last) || !whole(spt) || spt < 1.0 {
            return Err(ImportError {
                file: model_name.clone(),
                line: model.items[start].line,
                key: "Blocks per track".into(),
                message: format!(
                    "zone {z}: cylinders and blocks per track must be whole numbers, at least 1 \
                     block"
                ),
            });
        }
        if last < first {
            return Err(ImportError {
                file: model_name.clone(),
                line: model.items[start].line,
                key: "Last cylinder number".into(),
                message: format!("zone {z} ends before it starts"),
            });
        }
        let spt = spt as u32;
        let (ts, ts_changed) = skew_sectors(ts, revolutions, spt);
        let (cs, cs_changed) = skew_sectors(cs, revolutions, spt);
        skews_adjusted += usize::from(ts_changed) + usize::from(cs_changed);
        rows.push([(last - first + 1.0) as u32, spt, ts, cs]);
        firsts.push(first as u32);
        let blocks = (last - first + 1.0) * f64::from(spt) * surfaces.max(1.0);
        let mut front = 0u64;
        if let Some(i) = (start..end).find(|&i| model.items[i].key == "Empty space at zone front") {
            let v = model.number(i)?;
            if v > 0.0 {
                let a = &model.items[i];
                front = v as u64;
                fronts.push((z, front, format!("{}:{}", a.file, a.line)));
            }
        }
        if let Some(i) = (start..end).find(|&i| model.items[i].key == "Offset of first block") {
            let v = model.number(i)?;
            let (k, changed) = skew_sectors(v, revolutions, spt);
            skews_adjusted += usize::from(changed);
            if k > 0 {
                offsets.push((z, u64::from(k)));
            }
        }
        if track_sparing {
            if let Some(i) = (start..end).find(|&i| model.items[i].key == "Number of spares") {
                let v = model.number(i)?;
                if v > 0.0 {
                    spares.push((z, v as u64));
                }
            }
        }
        if slips_laid_out {
            if let Some(i) = (start..end).find(|&i| model.items[i].key == "slips") {
                model.used[i] = true;
                let a = model.items[i].clone();
                let mut list = Vec::new();
                for v in list_numbers(&a)? {
                    // getslips (layout_g1_load.c): whole, not negative.
                    if v < 0.0 || v.fract() != 0.0 {
                        return Err(ImportError {
                            file: a.file.clone(),
                            line: a.line,
                            key: "slips".into(),
                            message: format!("{v} in zone {z} is not a block number"),
                        });
                    }
                    list.push(v as u64);
                }
                let (laid, exact) = disksim_slipped(&list, front, blocks.min(1e18) as u64)
                    .ok_or_else(|| ImportError {
                        file: a.file.clone(),
                        line: a.line,
                        key: "slips".into(),
                        message: format!(
                            "zone {z}: {} slips and {front} empty blocks leave none of its \
                             {blocks} blocks mapped",
                            list.len()
                        ),
                    })?;
                if laid != list {
                    if exact {
                        slips_reordered.push(z);
                    } else {
                        slips_sorted.push(z);
                    }
                }
                slips.extend(laid.into_iter().map(|b| (z, b)));
            }
        }
        for i in start..end {
            let a = &model.items[i];
            if !model.used[i] && !is_zero(&a.value) {
                match zone_warnings.iter_mut().find(|(k, _)| *k == a.key) {
                    Some((_, n)) => *n += 1,
                    None => zone_warnings.push((a.key.clone(), 1)),
                }
            }
            model.used[i] = true;
        }
    }
    if skews_adjusted > 0 {
        notes.push(format!(
            "{model_name}: {skews_adjusted} skew(s) or first-block offset(s) rounded to a whole \
             sector or taken modulo the track (DiskSim keeps the exact angle)"
        ));
    }
    let zone_list = |zs: &[usize]| {
        let v: Vec<String> = zs.iter().take(12).map(usize::to_string).collect();
        format!(
            "{}{}",
            v.join(", "),
            if zs.len() > 12 { ", ..." } else { "" }
        )
    };
    if !slips_reordered.is_empty() {
        notes.push(format!(
            "{model_name}: slips out of order, repeated or past the zone's end (zones {}): laid \
             out as DiskSim's g1_ltop_sectperzonespare maps them, walking each list in file \
             order, and written as the blocks that leaves unmapped",
            zone_list(&slips_reordered)
        ));
    }
    if !slips_sorted.is_empty() {
        notes.push(format!(
            "{model_name}: more than {MAX_SLIPS_EMULATED} slips out of order (zones {}): sorted \
             before laying out, where DiskSim walks them in file order",
            zone_list(&slips_sorted)
        ));
    }
    // Cylinders × blocks per track × surfaces, summed over zones: numbers
    // no drive has can overflow it, and then the file is wrong, not us.
    let sectors = rows
        .iter()
        .try_fold(0u64, |sum, r| {
            u64::from(r[0])
                .checked_mul(u64::from(r[1]))?
                .checked_mul(surfaces as u64)?
                .checked_add(sum)
        })
        .ok_or_else(|| ImportError {
            file: model_name.clone(),
            line: 0,
            key: "Blocks per track".into(),
            message: "the zones hold more than 2^64 sectors".into(),
        })?;
    // The disk's cylinders (DiskSim's `dm_cyls`, "Number of cylinders"),
    // or where the zones end.
    let zone_end = firsts
        .iter()
        .zip(&rows)
        .map(|(&f, r)| f.saturating_add(r[0]))
        .max()
        .unwrap_or(1);
    let cylinders = match model.find("Number of cylinders") {
        Some(i) => match model.number(i) {
            Ok(v) if v >= 1.0 && v <= f64::from(u32::MAX) => v as u32,
            _ => zone_end,
        },
        None => zone_end,
    };

    // The seek model.
    let seek = seek_points(&mut model, &model_name, &dir, read, cylinders, &mut notes)?;
    let seek_at = |d: u32| -> f64 {
        let p = &seek.points;
        let i = p.partition_point(|q| q.0 < d);
        match i {
            0 => p[0].1,
            i if i < p.len() => {
                let (lo, hi) = (p[i - 1], p[i]);
                lo.1 + (hi.1 - lo.1) * f64::from(d - lo.0) / f64::from(hi.0 - lo.0)
            }
            _ => p[p.len() - 1].1,
        }
    };
    // A cylinder switch is a one-cylinder seek: DiskSim's figure where it
    // gives one (optional in mech_g1.modspec), else the seek model's.
    let (single, single_src) = match model.find("Single cylinder seek time") {
        Some(i) => {
            let v = model.number(i)?;
            (v, source_of(&model.items[i]))
        }
        None => (
            seek_at(1),
            "\"Single cylinder seek time\" not given: the seek model's one-cylinder time".into(),
        ),
    };
    let _ = writeln!(t, "[mechanics]\n# {rpm_src}.\nrpm = {}", rpm.round() as u32);
    let _ = writeln!(t, "# {surf_src}.\nsurfaces = {}", surfaces as u32);
    let _ = writeln!(t, "# {}\nseek_table = [", seek.comment);
    for chunk in seek.points.chunks(6) {
        let row: Vec<String> = chunk
            .iter()
            .map(|(d, ms)| format!("[{d}, {ms:.prec$}]", prec = seek.decimals))
            .collect();
        let _ = writeln!(t, "  {},", row.join(", "));
    }
    let _ = writeln!(t, "]");
    let _ = writeln!(t, "# {hs_src}.\nhead_switch_ms = {hs}");
    let _ = writeln!(
        t,
        "# A cylinder switch is a one-cylinder seek: {single_src}.\ncylinder_switch_ms = {single}"
    );
    let settle_note = if settle < 0.0 {
        " Negative: writes settle sooner than reads (DiskSim adds it to the seek, \
         dm_seek_time_g1)."
    } else {
        ""
    };
    let _ = writeln!(
        t,
        "# {settle_src}.{settle_note}\nwrite_settle_ms = {settle}\n"
    );

    // DiskSim's own capacity check (`dm_layout_g1_compute_blksinband`):
    // the zones less their empty fronts and slips hold "Block count"
    // blocks exactly when the layout was read as DiskSim lays it out.
    let spare_blocks: u64 = spares.iter().map(|&(z, n)| n * u64::from(rows[z][1])).sum();
    let laid_out = sectors
        .saturating_sub(fronts.iter().map(|f| f.1).sum::<u64>())
        .saturating_sub(slips.len() as u64)
        .saturating_sub(spare_blocks);
    // DiskSim itself replaces "Block count" by the zones' count
    // (`checknumblocks` in layout_g1_load.c), so a mismatch is only noted.
    let block_count = model.find("Block count").map(|i| {
        model.used[i] = true;
        model.items[i].value.clone()
    });
    let _ = writeln!(
        t,
        "[layout]\n# {}'s {} zones (dm_layout_g1), outer first: [cylinders (last - first + 1), \
         \"Blocks per track\",\n# \"Skew for track switch\", \"Skew for cylinder switch\"]; \
         {sectors} blocks,\n# {laid_out} mapped once spares and slips are laid out{}.\nzone_table = [",
        model_name,
        rows.len(),
        match block_count {
            Some(n) if n != laid_out.to_string() => format!(
                " (the model's \"Block count = {n}\" differs; DiskSim,\n# too, takes the zones' \
                 count: layout_g1_load.c, checknumblocks)"
            ),
            _ => String::new(),
        }
    );
    for chunk in rows.chunks(4) {
        let row: Vec<String> = chunk
            .iter()
            .map(|r| format!("[{}, {}, {}, {}]", r[0], r[1], r[2], r[3]))
            .collect();
        let _ = writeln!(t, "  {},", row.join(", "));
    }
    let _ = writeln!(
        t,
        "]\n# Each zone's \"First cylinder number\" ({model_name}); the cylinders \
         between zones are spares.\nzone_first_cylinders = ["
    );
    for chunk in firsts.chunks(12) {
        let row: Vec<String> = chunk.iter().map(u32::to_string).collect();
        let _ = writeln!(t, "  {},", row.join(", "));
    }
    if !fronts.is_empty() {
        let _ = writeln!(
            t,
            "]\n# [zone, \"Empty space at zone front\"] ({}).",
            fronts[0].2
        );
        let rows: Vec<String> = fronts
            .iter()
            .map(|(z, v, _)| format!("[{z}, {v}]"))
            .collect();
        let _ = write!(t, "zone_front_empty = [{}", rows.join(", "));
    }
    if !offsets.is_empty() {
        let _ = writeln!(
            t,
            "]\n# [zone, \"Offset of first block\"] in sectors ({model_name}).\n\
             zone_first_block_offset = ["
        );
        for chunk in offsets.chunks(6) {
            let row: Vec<String> = chunk.iter().map(|(z, n)| format!("[{z}, {n}]")).collect();
            let _ = writeln!(t, "  {},", row.join(", "));
        }
    }
    if !spares.is_empty() {
        let _ = writeln!(
            t,
            "]\n# [zone, \"Number of spares\"] ({model_name}),\n# \"Sparing scheme used = 1\": \
             spare tracks at the zone's end.\nzone_spare_tracks = ["
        );
        for chunk in spares.chunks(6) {
            let row: Vec<String> = chunk.iter().map(|(z, n)| format!("[{z}, {n}]")).collect();
            let _ = writeln!(t, "  {},", row.join(", "));
        }
    }
    if !slips.is_empty() {
        let _ = writeln!(
            t,
            "]\n# [zone, block] for each of the zones' `slips` ({model_name}),\n# \
             \"Sparing scheme used = 7\": slipped blocks slip to the zone's end.\nzone_slips = ["
        );
        for chunk in slips.chunks(6) {
            let row: Vec<String> = chunk.iter().map(|(z, b)| format!("[{z}, {b}]")).collect();
            let _ = writeln!(t, "  {},", row.join(", "));
        }
    }
    let _ = writeln!(t, "]\n");

    // Controller overheads (disksim_diskctlr.c): per command kind, after
    // a read and after a write; writes pay the "hit" ones when buffered
    // (`Fast write level` > 0), the "miss" ones when not.
    let (fast_write, fw_src) = disk.get_or("Fast write level", 0.0)?;
    let write_cache = fast_write > 0.0;
    let write_kind = if write_cache { "hit" } else { "miss" };
    let _ = writeln!(
        t,
        "[controller]\n# Writes {}.",
        if write_cache {
            "are buffered, so they pay the write-hit overheads"
        } else {
            "are not cached, so they pay the write-miss overheads"
        }
    );
    for (key, disksim) in [
        (
            "read_miss_overhead_ms",
            "Read miss over. after read".to_string(),
        ),
        (
            "read_miss_overhead_after_write_ms",
            "Read miss over. after write".into(),
        ),
        ("read_hit_overhead_ms", "Read hit over. after read".into()),
        (
            "read_hit_overhead_after_write_ms",
            "Read hit over. after write".into(),
        ),
        (
            "write_overhead_ms",
            format!("Write {write_kind} over. after read"),
        ),
        (
            "write_overhead_after_write_ms",
            format!("Write {write_kind} over. after write"),
        ),
    ] {
        let (v, src) = disk.get(&spec_name, &disksim)?;
        let _ = writeln!(t, "# {src}.\n{key} = {v}");
    }
    for (key, disksim) in [
        ("read_completion_ms", "Read completion overhead"),
        ("write_completion_ms", "Write completion overhead"),
    ] {
        let (v, src) = disk.get_or(disksim, 0.0)?;
        let _ = writeln!(t, "# {src}.\n{key} = {v}");
    }
    let _ = writeln!(t);

    // Cache.
    let (segments, seg_src) = disk.get(&spec_name, "Number of buffer segments")?;
    let (seg_size, size_src) = disk.get(&spec_name, "Segment size (in blks)")?;
    let (write_segs, ws_src) = disk.get_or("Maximum number of write segments", 1.0)?;
    let _ = writeln!(
        t,
        "[cache]\n# {seg_src}.\nsegments = {}",
        segments.max(1.0) as u32
    );
    let _ = writeln!(
        t,
        "# {size_src}.\nsegment_sectors = {}",
        seg_size.max(1.0) as u32
    );
    let _ = writeln!(
        t,
        "# {fw_src}: {}.\nwrite_cache = {write_cache}",
        if write_cache {
            "writes are reported done once in the buffer"
        } else {
            "writes are done when on the media"
        }
    );
    let wb = (seg_size.max(1.0) as u32).max(256);
    let _ = writeln!(
        t,
        "# One segment ({size_src}; at least max_sectors).\n\
         write_buffer_sectors = {wb}\n# {ws_src}.\nwrite_buffer_runs = {}",
        write_segs.max(1.0) as u32
    );

    let _ = writeln!(
        t,
        "# disksim_diskcache.c, disk_buffer_set_segment: a write empties every clean segment \
         it overlaps.\nwrite_empties_segment = true"
    );

    // When read data may start across the bus (disksim_diskctlr.c,
    // `readwater`, `reqwater`).
    let (water, water_src) = disk.get_or("High (read) water mark", 0.0)?;
    let (by_size, by_size_src) = disk.get_or("Set watermark by reqsize", 1.0)?;
    let _ = writeln!(
        t,
        "# {water_src}.\nread_watermark = {water}\n# {by_size_src}.\n\
         watermark_by_request_size = {}",
        by_size != 0.0
    );

    // How far the drive reads ahead after a miss before another command
    // may take the heads (`minreadahead`, disksim_diskctlr.c's
    // `disk_buffer_stopable_access`).
    let (min_ra, min_ra_src) = disk.get_or("Minimum read-ahead (blks)", 0.0)?;
    let _ = writeln!(
        t,
        "# {min_ra_src}.\nmin_read_ahead_sectors = {}",
        (min_ra.max(0.0) as u32).min(seg_size.max(1.0) as u32)
    );

    // Everything else that is set is a warning; an inline model's keys
    // are the disk spec's own, used by either reading.
    if inline {
        for (d, m) in disk.used.iter_mut().zip(&model.used) {
            *d |= *m;
        }
    }
    let mut warnings = Vec::new();
    let specs: &[&Spec] = if inline { &[&disk] } else { &[&disk, &model] };
    for spec in specs {
        for (i, a) in spec.items.iter().enumerate() {
            if spec.used[i] || is_zero(&a.value) || NOT_TIMING.contains(&a.key.as_str()) {
                continue;
            }
            warnings.push(format!(
                "{}:{}: \"{} = {}\" is not modelled",
                a.file, a.line, a.key, a.value
            ));
        }
    }
    for (key, n) in zone_warnings {
        warnings.push(format!(
            "{model_name}: \"{key}\" set in {n} zones is not modelled"
        ));
    }
    for n in &notes {
        warnings.push(format!("approximated: {n}"));
    }

    let mut profile = String::new();
    let _ = writeln!(
        profile,
        "# Imported from DiskSim's {} by `elevator device import-disksim`.\n\
         # Every number names the DiskSim parameter it came from.",
        parv.display()
    );
    if !notes.is_empty() {
        let _ = writeln!(profile, "# Where this profile approximates DiskSim 4.0:");
        for n in &notes {
            let mut line = String::from("#  -");
            for word in n.split_whitespace() {
                if line.len() + 1 + word.len() > 99 {
                    let _ = writeln!(profile, "{line}");
                    line = String::from("#   ");
                }
                line.push(' ');
                line.push_str(word);
            }
            let _ = writeln!(profile, "{line}");
        }
    }
    let _ = writeln!(profile, "kind = \"hdd\"");
    let _ = writeln!(
        profile,
        "description = \"{name}, imported from DiskSim's validated model{spec_block}\"\n"
    );
    profile.push_str(&t);
    Ok(Imported { profile, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocks DiskSim leaves unmapped, by brute force: map every
    /// logical block of the zone as `g1_ltop_sectperzonespare` does and
    /// take the physical blocks nothing maps to.
    fn brute_slipped(list: &[u64], front: u64, blocks: u64) -> Vec<u64> {
        let mapped = blocks - front - list.len() as u64;
        let mut used = vec![false; blocks as usize];
        for l in front..front + mapped {
            used[(l + slips_before(list, l)) as usize] = true;
        }
        (front..blocks).filter(|&p| !used[p as usize]).collect()
    }

    /// A small deterministic generator (no dependency for a test).
    fn lcg(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *state >> 33
    }

    #[test]
    fn slips_in_any_order_are_laid_out_as_disksim_maps_them() {
        // Rising lists are themselves.
        let (laid, exact) = disksim_slipped(&[3, 9, 40], 2, 100).unwrap();
        assert_eq!((laid, exact), (vec![3, 9, 40], true));
        // Out of order, DiskSim's walk in file order decides: with [61,
        // 50] block 60 is moved by 50 only and lands on 61, the listed
        // slip, so 62 is the block left unmapped.
        assert_eq!(disksim_slipped(&[61, 50], 0, 100).unwrap().0, vec![50, 62]);
        assert_eq!(brute_slipped(&[61, 50], 0, 100), vec![50, 62]);
        // A repeat slips the block after it; past the zone's end, its
        // last block goes unused.
        assert_eq!(disksim_slipped(&[50, 50], 0, 100).unwrap().0, vec![50, 51]);
        assert_eq!(disksim_slipped(&[500], 0, 100).unwrap().0, vec![99]);
        // No block left: refused.
        assert!(disksim_slipped(&[1, 2], 98, 100).is_none());
        // A long list out of order is sorted, and says so.
        let long: Vec<u64> = (0..2_000).rev().map(|i| i * 3).collect();
        let (laid, exact) = disksim_slipped(&long, 0, 100_000).unwrap();
        assert!(!exact);
        assert_eq!(laid.len(), 2_000);
        assert_eq!(&laid[..3], &[0, 3, 6]);
        // Against brute force, for lists of every kind.
        let mut s = 7;
        for case in 0..2_000 {
            let blocks = 50 + lcg(&mut s) % 400;
            let front = lcg(&mut s) % 20;
            let n = (lcg(&mut s) % 12) as usize;
            let mut list: Vec<u64> = (0..n).map(|_| lcg(&mut s) % (blocks + 30)).collect();
            if case % 2 == 0 {
                list.sort_unstable();
                // Repeats, and entries in the empty front.
                if case % 4 == 0 && n > 1 {
                    list[1] = list[0];
                    list[0] = lcg(&mut s) % (front + 1);
                    list.sort_unstable();
                }
            }
            if front + n as u64 >= blocks {
                continue;
            }
            let (laid, exact) = disksim_slipped(&list, front, blocks).unwrap();
            assert!(exact);
            assert_eq!(
                laid,
                brute_slipped(&list, front, blocks),
                "{list:?} {front} {blocks}"
            );
        }
    }

    #[test]
    fn seek_equations_are_sampled_within_the_tolerance() {
        // The HP C3323A's HPL values (commented out in its DiskSim model):
        // V1 = 300 cylinders, 3.75 + 0.33·√d ms below, 7.69 + 0.0059·d ms
        // from there.
        let f = |d: u32| {
            let x = f64::from(d);
            if d < 300 {
                3.75 + 0.33 * x.sqrt()
            } else {
                7.69 + 0.0059 * x
            }
        };
        let points = sample_seek(&f, 2_000, &[300]);
        assert!(points.len() < 120, "{}", points.len());
        let table = crate::hdd::seek::Seek::Table(points.clone());
        for d in 1..2_000 {
            let err = (table.time_ms(d) - f(d)).abs();
            assert!(err <= SAMPLE_TOLERANCE_MS, "{d}: {err}");
        }
        // The jump at V1 is kept sharp: 299 and 300 are both points.
        assert!(points.iter().any(|p| p.0 == 299) && points.iter().any(|p| p.0 == 300));
    }

    #[test]
    fn skews_follow_their_units_modulo_the_track() {
        assert_eq!(skew_sectors(20.7, false, 100), (20, false));
        assert_eq!(skew_sectors(0.25, true, 100), (25, false));
        assert_eq!(skew_sectors(0.255, true, 100), (26, true));
        assert_eq!(skew_sectors(-5.0, false, 100), (95, true));
        assert_eq!(skew_sectors(130.0, false, 100), (30, true));
    }

    #[test]
    fn lists_over_several_lines_and_one_line_read_alike() {
        let text = "HPL seek equation values = [\n 300,\n\n 3.75, # root\n 0.33, 7.69,\n \
                    0.0059, -1.0\n],\nslips = [ 4, 8 ],\nslips = [\n 1,\n 2 ],\nx = 1,\n";
        let (items, _) = assignments("t", text);
        let values: Vec<(&str, &str)> = items
            .iter()
            .map(|a| (a.key.as_str(), a.value.as_str()))
            .collect();
        assert_eq!(
            values,
            vec![
                (
                    "HPL seek equation values",
                    "[300,3.75,0.33,7.69,0.0059,-1.0]"
                ),
                ("slips", "[4,8]"),
                ("slips", "[1,2]"),
                ("x", "1"),
            ]
        );
    }
}
