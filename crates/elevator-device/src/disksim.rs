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

/// Every `key = value` of `text`, and the `source X` lines.
fn assignments(file: &str, text: &str) -> (Vec<Assign>, Vec<String>) {
    let mut out: Vec<Assign> = Vec::new();
    let mut sources = Vec::new();
    // A list value (`slips = [` and its numbers on the lines that follow,
    // up to `]`) open on the last assignment.
    let mut open_list = false;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if open_list {
            let last = out.last_mut().expect("a list opens on an assignment");
            if let Some(rest) = line.strip_prefix(']') {
                last.value.push(']');
                open_list = false;
                if rest.trim().trim_start_matches(',').trim().is_empty() {
                    continue;
                }
            } else if !line.is_empty()
                && line
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == ',' || c.is_whitespace())
            {
                for n in line.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    if !last.value.ends_with('[') {
                        last.value.push(',');
                    }
                    last.value.push_str(n);
                }
                continue;
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
        open_list = value == "[";
        out.push(Assign {
            file: file.to_string(),
            line: i + 1,
            key: key.to_string(),
            value: value.to_string(),
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
const ZONE_KEYS: [&str; 10] = [
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
];

fn is_zero(v: &str) -> bool {
    v.parse::<f64>().is_ok_and(|x| x == 0.0) || v == "[]" || v.is_empty()
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
                    bus_ms = (
                        v,
                        format!("{}:{} \"{} = {}\"", a.file, a.line, a.key, a.value),
                    );
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
    let model_file = disk_items
        .iter()
        .find(|a| a.key == "Model")
        .and_then(|a| a.value.strip_prefix("source "))
        .map(|m| dir.join(m.trim()))
        .ok_or_else(|| ImportError {
            file: spec_name.clone(),
            line: 0,
            key: "Model".into(),
            message: "no `Model = source X.model`".into(),
        })?;
    let model_name = model_file.display().to_string();
    let (model_items, _) = assignments(&model_name, &read(&model_file)?);
    let seek_file = model_items
        .iter()
        .find(|a| a.key == "Full seek curve")
        .map(|a| (dir.join(&a.value), a.clone()))
        .ok_or_else(|| ImportError {
            file: model_name.clone(),
            line: 0,
            key: "Full seek curve".into(),
            message: "the HDD model needs DiskSim's extracted seek curve (`Seek type = \
                      extracted`); the HPL equation is not imported"
                .into(),
        })?;
    let seek_name = seek_file.0.display().to_string();
    let seek_text = read(&seek_file.0)?;

    let mut disk = Spec {
        used: vec![false; disk_items.len()],
        items: disk_items,
    };
    let mut model = Spec {
        used: vec![false; model_items.len()],
        items: model_items,
    };
    let name = parv
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("disk")
        .to_string();
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Imported from DiskSim's {} by `elevator device import-disksim`.\n\
         # Every number names the DiskSim parameter it came from.",
        parv.display()
    );
    let _ = writeln!(t, "kind = \"hdd\"");
    let _ = writeln!(
        t,
        "description = \"{name}, imported from DiskSim's validated model{spec_block}\"\n"
    );

    // Interface.
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
    let _ = writeln!(
        t,
        "[interface]\n# {qd_src}.\nqueue_depth = {}",
        qd.max(1.0) as u32
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
    let (single, single_src) = model.get(&model_name, "Single cylinder seek time")?;
    let (settle, settle_src) = model.get_or("Add. write settling delay", 0.0)?;
    let _ = writeln!(t, "[mechanics]\n# {rpm_src}.\nrpm = {}", rpm.round() as u32);
    let _ = writeln!(t, "# {surf_src}.\nsurfaces = {}", surfaces as u32);
    let mut points = Vec::new();
    for (i, raw) in seek_text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with("Seek distances") || line.starts_with('#') {
            continue;
        }
        let bad = || ImportError {
            file: seek_name.clone(),
            line: i + 1,
            key: "seek point".into(),
            message: format!("{line:?}: want `distance, ms`"),
        };
        let (d, ms) = line.split_once(',').ok_or_else(bad)?;
        let d: u32 = d.trim().parse().map_err(|_| bad())?;
        let ms: f64 = ms.trim().parse().map_err(|_| bad())?;
        if points.last().is_some_and(|&(last, _)| d <= last) || d == 0 {
            return Err(ImportError {
                message: format!("distance {d} does not follow the previous one"),
                ..bad()
            });
        }
        points.push((d, ms));
    }
    if points.is_empty() {
        return Err(ImportError {
            file: seek_name,
            line: 0,
            key: "seek point".into(),
            message: "no seek points".into(),
        });
    }
    let _ = writeln!(
        t,
        "# {}:{} \"Full seek curve = {}\": {} measured [cylinders, ms] points.\nseek_table = [",
        seek_file.1.file,
        seek_file.1.line,
        seek_file.1.value,
        points.len()
    );
    for chunk in points.chunks(6) {
        let row: Vec<String> = chunk
            .iter()
            .map(|(d, ms)| format!("[{d}, {ms:.3}]"))
            .collect();
        let _ = writeln!(t, "  {},", row.join(", "));
    }
    let _ = writeln!(t, "]");
    let _ = writeln!(t, "# {hs_src}.\nhead_switch_ms = {hs}");
    let _ = writeln!(
        t,
        "# A cylinder switch is a one-cylinder seek: {single_src}.\ncylinder_switch_ms = {single}"
    );
    let _ = writeln!(t, "# {settle_src}.\nwrite_settle_ms = {settle}\n");

    // Layout: one row per zone.
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
    let mut firsts = Vec::new();
    let mut fronts: Vec<(usize, u64, String)> = Vec::new();
    let mut slips: Vec<(usize, u64)> = Vec::new();
    let mut spares: Vec<(usize, u64)> = Vec::new();
    let mut offsets: Vec<(usize, u64)> = Vec::new();
    // "Offset of first block" is in sectors unless "Skew units" says
    // revolutions (layout_g1_zone.modspec); only sectors are read.
    let offsets_in_sectors = model.find("Skew units").is_none();
    for (z, &start) in starts.iter().enumerate() {
        let next_zone = starts.get(z + 1).copied().unwrap_or(model.items.len());
        let end = (start + 1..next_zone)
            .find(|&i| !ZONE_KEYS.contains(&model.items[i].key.as_str()))
            .unwrap_or(next_zone);
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
        let ts = field("Skew for track switch")?;
        let cs = field("Skew for cylinder switch")?;
        if last < first {
            return Err(ImportError {
                file: model_name.clone(),
                line: model.items[start].line,
                key: "Last cylinder number".into(),
                message: format!("zone {z} ends before it starts"),
            });
        }
        rows.push([
            (last - first + 1.0) as u32,
            spt as u32,
            ts as u32,
            cs as u32,
        ]);
        firsts.push(first as u32);
        if let Some(i) = (start..end).find(|&i| model.items[i].key == "Empty space at zone front") {
            let v = model.number(i)?;
            if v > 0.0 {
                let a = &model.items[i];
                fronts.push((z, v as u64, format!("{}:{}", a.file, a.line)));
            }
        }
        if offsets_in_sectors {
            if let Some(i) = (start..end).find(|&i| model.items[i].key == "Offset of first block") {
                let v = model.number(i)?;
                if v > 0.0 {
                    offsets.push((z, v as u64));
                }
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
                let a = &model.items[i];
                let list = a.value.trim_start_matches('[').trim_end_matches(']');
                for n in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    let block = n.parse::<u64>().map_err(|_| ImportError {
                        file: a.file.clone(),
                        line: a.line,
                        key: "slips".into(),
                        message: format!("{n:?} in zone {z} is not a block number"),
                    })?;
                    slips.push((z, block));
                }
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

    // Everything else that is set is a warning.
    let mut warnings = Vec::new();
    for spec in [&disk, &model] {
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
    Ok(Imported {
        profile: t,
        warnings,
    })
}
