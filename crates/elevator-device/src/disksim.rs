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
//!   (`disksim_slipped`) and written sorted, as the profile wants them.
//! * **Skew units** in revolutions as well as sectors, skews and offsets
//!   of any sign or size (taken modulo the track, as an angle is).
//! * A model given inline (`Model = dm_disk NAME {` in the .diskspecs)
//!   as well as from a file; a seek file's optional third column (the
//!   standard deviation) and its lines DiskSim skips as bogus.

mod seek;

use seek::seek_points;
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
mod tests;
