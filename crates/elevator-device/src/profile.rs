//! Device profiles: a model and its numbers, as a TOML file.
//!
//! A profile names its model with `kind = "hdd" | "ssd" | "sdcard"` and
//! gives that model's parameters in a few tables; every built-in profile
//! says where each number comes from. Built-ins are compiled in from
//! `profiles/NAME.toml`; [`open`] also takes a path to a file of the same
//! form.
//!
//! Loading never panics. A file that does not parse, has an unknown or a
//! missing key, or a value out of range gives a [`ProfileError`] naming the
//! file, the line and the key.

use crate::hdd::geometry::{skew_for, ZoneSpec};
use crate::hdd::seek::{Seek, SeekCurve, SeekFitError};
use crate::hdd::{Hdd, HddParams, Overheads, Watermark};
use crate::sdcard::{SdCard, SdParams};
use crate::ssd::{Ssd, SsdParams, Variability};
use crate::Device;
use elevator_core::{Duration, SECTOR_SIZE};
use serde::Deserialize;
use std::fmt;
use std::ops::RangeInclusive;

/// The built-in profiles: name, one-line description, file text.
pub(crate) const BUILTINS: &[(&str, &str, &str)] = &[
    (
        "ide-2003",
        "2003 fast IDE disk (Deskstar 120GXP class): 80 GB, 7200 rpm, ATA-100, no queueing",
        include_str!("../profiles/ide-2003.toml"),
    ),
    (
        "sata-hdd",
        "current 7200 rpm SATA disk: 1 TB, 210-100 MB/s, NCQ 31, 64 MB cache",
        include_str!("../profiles/sata-hdd.toml"),
    ),
    (
        "hdd-2009",
        "2009 desktop SATA disk (Barracuda 7200.12 class): 500 GB, 7200 rpm, no queueing",
        include_str!("../profiles/hdd-2009.toml"),
    ),
    (
        "hdd-2009-ncq",
        "2009 desktop SATA disk (Barracuda 7200.12 class): 500 GB, 7200 rpm, NCQ 31",
        include_str!("../profiles/hdd-2009-ncq.toml"),
    ),
    (
        "hdd-2009-laptop",
        "2009 laptop SATA disk (Momentus 5400.4 class): 250 GB, 5400 rpm, no queueing",
        include_str!("../profiles/hdd-2009-laptop.toml"),
    ),
    (
        "mtron-2009",
        "2009 PATA SSD (MTRON MOBI 3000 class): 16 GB SLC, UDMA, no queueing",
        include_str!("../profiles/mtron-2009.toml"),
    ),
    (
        "ibm18es",
        "ibm18es, imported from DiskSim's validated model IBM_DNES-309170W_validate",
        include_str!("../profiles/ibm18es.toml"),
    ),
    (
        "ssd-sata-2016",
        "SATA SSD (Plextor PX-256M5S class): 256 GB MLC, 8 channels, NCQ 31",
        include_str!("../profiles/ssd-sata-2016.toml"),
    ),
    (
        "nvme",
        "NVMe SSD (Samsung 970 EVO Plus 1 TB class): PCIe 3.0 x4, 3.5 GB/s",
        include_str!("../profiles/nvme.toml"),
    ),
    (
        "sdcard-2009",
        "cheap 2009 SDHC card: 4 GB, class 4, 4 MiB allocation units, 2 open",
        include_str!("../profiles/sdcard-2009.toml"),
    ),
];

/// Names and one-line descriptions of the built-in profiles.
pub fn builtin_profiles() -> Vec<(&'static str, &'static str)> {
    BUILTINS.iter().map(|&(n, d, _)| (n, d)).collect()
}

/// The text of built-in profile `name`.
pub fn builtin_text(name: &str) -> Option<&'static str> {
    BUILTINS.iter().find(|b| b.0 == name).map(|b| b.2)
}

/// The largest profile file read: the built-in ones are under 4 KiB.
pub const MAX_PROFILE_BYTES: usize = 1 << 20;

/// The disk model of an `hdd` profile itself, for the model's unit tests
/// that look at its state.
#[cfg(test)]
pub(crate) fn parse_hdd(source_name: &str, text: &str) -> Result<Hdd, ProfileError> {
    let ctx = Ctx {
        file: source_name,
        text,
    };
    let f: HddFile = toml::from_str(text).map_err(|e| ctx.toml_error(&e))?;
    Ok(Hdd::new(f.validate(&ctx, source_name.to_string())?))
}

/// Why a profile could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// Neither a built-in name nor a readable file.
    #[error(
        "no device profile {name:?}: not a built-in ({builtins}) and not a readable file: {source}"
    )]
    NotFound {
        name: String,
        builtins: String,
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid profile.
    #[error("{file}:{line}: `{key}`: {message}")]
    Invalid {
        file: String,
        /// 1-based.
        line: usize,
        /// Dotted path of the key, e.g. `mechanics.rpm`.
        key: String,
        message: String,
    },
}

/// A device model, as `SchedulerType` is a policy: the `kind` a profile
/// names it by, a line for `elevator list`, the tables its profiles have,
/// and `build`, which checks a profile's text and builds the model (named
/// by its second argument). Each model declares one; the registry
/// ([`crate::DEVICE_MODELS`]) lists them.
#[derive(Clone, Copy)]
pub struct DeviceModelType {
    /// `kind = "NAME"` in a profile.
    pub name: &'static str,
    pub about: &'static str,
    /// The profile's tables besides `kind` (`mechanics`, `flash`).
    pub keys: &'static [&'static str],
    pub build: BuildModel,
}

/// A model's `build`: the profile's text and the device's name to the
/// model, or the error at the profile's line and key.
pub type BuildModel = fn(&ProfileText<'_>, String) -> Result<Box<dyn Device>, ProfileError>;

impl fmt::Debug for DeviceModelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceModelType")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A profile file being loaded: its text, and errors that name the file,
/// the line and the key.
#[derive(Clone, Copy, Debug)]
pub struct ProfileText<'a> {
    pub file: &'a str,
    pub text: &'a str,
}

type Ctx<'a> = ProfileText<'a>;

impl ProfileText<'_> {
    /// The whole file as a model's schema `T`; an unknown or missing key,
    /// or a value of the wrong type, is an error at its line.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, ProfileError> {
        toml::from_str(self.text).map_err(|e| self.toml_error(&e))
    }

    /// An error about `key` (a dotted path), at the line that sets it.
    pub fn error(&self, key: &str, message: impl Into<String>) -> ProfileError {
        ProfileError::Invalid {
            file: self.file.to_string(),
            line: locate_key(self.text, key),
            key: key.to_string(),
            message: message.into(),
        }
    }

    /// `value` if it lies in `range`, else an error naming `key`.
    pub fn check<T: PartialOrd + fmt::Display + Copy>(
        &self,
        key: &str,
        value: T,
        range: RangeInclusive<T>,
    ) -> Result<T, ProfileError> {
        if range.contains(&value) {
            Ok(value)
        } else {
            Err(self.error(
                key,
                format!(
                    "{value} is out of range (expected {} to {})",
                    range.start(),
                    range.end()
                ),
            ))
        }
    }

    /// Translate a toml/serde error, finding the line from its span and
    /// the key from the message or the line.
    pub(crate) fn toml_error(&self, e: &toml::de::Error) -> ProfileError {
        let message = e.message().trim().to_string();
        let offset = e.span().map_or(0, |s| s.start.min(self.text.len()));
        let line = self.text[..offset].matches('\n').count() + 1;
        let line_text = self.text.lines().nth(line - 1).unwrap_or("");
        let table = table_at(self.text, line);
        let named = ["unknown field `", "missing field `", "duplicate key `"]
            .iter()
            .find_map(|p| message.strip_prefix(p))
            .and_then(|rest| rest.split('`').next());
        let key = match named {
            // A missing key is reported on its table's header.
            Some(k) if message.starts_with("missing") => {
                let t = table_header(line_text).unwrap_or(table);
                join_key(t, k)
            }
            Some(k) => join_key(table, k),
            None => match line_text.split_once('=') {
                Some((k, _)) if table_header(line_text).is_none() => {
                    join_key(table, k.trim().trim_matches('"'))
                }
                _ => table_header(line_text).unwrap_or(table).to_string(),
            },
        };
        let key = if key.is_empty() {
            "(top level)".to_string()
        } else {
            key
        };
        ProfileError::Invalid {
            file: self.file.to_string(),
            line,
            key,
            message,
        }
    }
}

fn join_key(table: &str, key: &str) -> String {
    if table.is_empty() {
        key.to_string()
    } else {
        format!("{table}.{key}")
    }
}

/// The table named by a `[header]` or `[[header]]` line.
fn table_header(line: &str) -> Option<&str> {
    let l = line.trim();
    let l = l.split('#').next().unwrap_or("").trim();
    let inner = l.strip_prefix("[[").and_then(|r| r.strip_suffix("]]"));
    let inner = inner.or_else(|| l.strip_prefix('[').and_then(|r| r.strip_suffix(']')));
    inner.map(str::trim)
}

/// The table in force at 1-based `line` ("" for the top level).
fn table_at(text: &str, line: usize) -> &str {
    text.lines()
        .take(line)
        .filter_map(table_header)
        .last()
        .unwrap_or("")
}

/// The 1-based line that sets dotted `key` (an index suffix like `[3]` is
/// ignored); the table's header if the key is absent; 1 if neither is.
fn locate_key(text: &str, key: &str) -> usize {
    let key = key.split('[').next().unwrap_or(key);
    let (table, leaf) = key.rsplit_once('.').unwrap_or(("", key));
    let mut current = "";
    let mut header_line = None;
    for (i, l) in text.lines().enumerate() {
        if let Some(t) = table_header(l) {
            current = t;
            if t == table {
                header_line = Some(i + 1);
            }
            continue;
        }
        if current == table {
            if let Some((k, _)) = l.split_once('=') {
                if k.trim().trim_matches('"') == leaf {
                    return i + 1;
                }
            }
        }
    }
    header_line.unwrap_or(1)
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v / 1e3)
}

fn us(v: f64) -> Duration {
    Duration::from_secs_f64(v / 1e6)
}

/// A profile's first key, read before the rest: serde keeps toml's spans
/// only when the target type is known up front.
#[derive(Deserialize)]
pub(crate) struct KindOnly {
    pub(crate) kind: String,
}

// ---------------------------------------------------------------- hdd --

/// The hard-disk model ([`Hdd`]).
pub const HDD: DeviceModelType = DeviceModelType {
    name: "hdd",
    about: "hard disk: seek curve, rotation, zones, segmented cache, write-back, NCQ",
    keys: &["interface", "mechanics", "layout", "controller", "cache"],
    build: |p, name| {
        let f: HddFile = p.parse()?;
        Ok(Box::new(Hdd::new(f.validate(p, name)?)))
    },
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HddFile {
    #[allow(dead_code)]
    kind: String,
    #[allow(dead_code)]
    description: Option<String>,
    interface: HddInterface,
    mechanics: HddMechanics,
    layout: HddLayout,
    controller: HddController,
    cache: HddCache,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HddInterface {
    queue_depth: u32,
    max_sectors: u32,
    transfer_mb_per_s: f64,
    ncq_age_limit_ms: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HddMechanics {
    rpm: u32,
    surfaces: u32,
    track_to_track_ms: Option<f64>,
    average_seek_ms: Option<f64>,
    full_stroke_ms: Option<f64>,
    /// Measured `[distance, ms]` points, instead of the three figures.
    seek_table: Option<Vec<(u32, f64)>>,
    head_switch_ms: f64,
    cylinder_switch_ms: f64,
    write_settle_ms: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HddLayout {
    cylinders: Option<u32>,
    zones: Option<u32>,
    outer_sectors_per_track: Option<u32>,
    inner_sectors_per_track: Option<u32>,
    /// Rows of `[cylinders, sectors_per_track, track_skew, cylinder_skew]`.
    zone_table: Option<Vec<[u32; 4]>>,
    /// Each zone's first cylinder (DiskSim's "First cylinder number"),
    /// one per `zone_table` row; cylinders between zones are spares, not
    /// mapped. Absent: each zone follows the one before.
    zone_first_cylinders: Option<Vec<u32>>,
    /// `[zone, blocks]` rows: unmapped blocks at a zone's front (DiskSim's
    /// "Empty space at zone front").
    zone_front_empty: Option<Vec<[u64; 2]>>,
    /// `[zone, block]` rows: slipped blocks, by physical block number in
    /// the zone (DiskSim's `slips` with "Sparing scheme used = 7", slips
    /// to the zone's end).
    zone_slips: Option<Vec<[u64; 2]>>,
    /// `[zone, tracks]` rows: spare tracks at a zone's end, not mapped
    /// (DiskSim's "Number of spares" with "Sparing scheme used = 1").
    zone_spare_tracks: Option<Vec<[u64; 2]>>,
    /// `[zone, sectors]` rows: how far round from angle 0 a zone's first
    /// block lies (DiskSim's "Offset of first block").
    zone_first_block_offset: Option<Vec<[u64; 2]>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HddController {
    read_miss_overhead_ms: f64,
    read_hit_overhead_ms: f64,
    write_overhead_ms: f64,
    /// The same three when the command before was a write (DiskSim's
    /// "... over. after write"); each defaults to its after-read value.
    read_miss_overhead_after_write_ms: Option<f64>,
    read_hit_overhead_after_write_ms: Option<f64>,
    write_overhead_after_write_ms: Option<f64>,
    /// Time from the end of a read's (write's) data transfer to its
    /// completion reaching the host (DiskSim's "Read completion overhead",
    /// "Write completion overhead"); 0 by default.
    read_completion_ms: Option<f64>,
    write_completion_ms: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HddCache {
    segments: u32,
    segment_sectors: u32,
    write_cache: bool,
    write_buffer_sectors: u32,
    write_buffer_runs: u32,
    /// A write empties every read segment it overlaps, as DiskSim's
    /// `disk_buffer_set_segment` does (default false: a segment keeps its
    /// sectors before the write).
    write_empties_segment: Option<bool>,
    /// DiskSim's "High (read) water mark": the fraction of a read (of its
    /// segment, without `watermark_by_request_size`) that must be in the
    /// buffer before its data starts across the bus. Absent: the data
    /// streams to the host from the first sector read.
    read_watermark: Option<f64>,
    /// DiskSim's "Set watermark by reqsize" (default true).
    watermark_by_request_size: Option<bool>,
    /// DiskSim's "Minimum read-ahead (blks)", SCSI's MINIMUM PRE-FETCH
    /// (caching mode page 08h): sectors the drive reads ahead after a read
    /// miss before it starts the next command that misses. Absent: 0, the
    /// read-ahead stops as soon as such a command arrives.
    min_read_ahead_sectors: Option<u32>,
}

/// Default NCQ age limit when a queued profile gives none.
const NCQ_AGE_LIMIT_MS: f64 = 500.0;

impl HddFile {
    fn validate(self, c: &Ctx, name: String) -> Result<HddParams, ProfileError> {
        let i = &self.interface;
        let m = &self.mechanics;
        let queue_depth = c.check("interface.queue_depth", i.queue_depth, 1..=256)?;
        let max_sectors = c.check("interface.max_sectors", i.max_sectors, 8..=65_535)?;
        let bus = c.check(
            "interface.transfer_mb_per_s",
            i.transfer_mb_per_s,
            0.1..=100_000.0,
        )?;
        let age = c.check(
            "interface.ncq_age_limit_ms",
            i.ncq_age_limit_ms.unwrap_or(NCQ_AGE_LIMIT_MS),
            1.0..=60_000.0,
        )?;
        let rpm = c.check("mechanics.rpm", m.rpm, 1_000..=20_000)?;
        let surfaces = c.check("mechanics.surfaces", m.surfaces, 1..=64)?;
        let hs = c.check("mechanics.head_switch_ms", m.head_switch_ms, 0.0..=20.0)?;
        let cs = c.check(
            "mechanics.cylinder_switch_ms",
            m.cylinder_switch_ms,
            0.0..=20.0,
        )?;
        // Negative: writes settle sooner than reads (DiskSim accepts it).
        let settle = c.check("mechanics.write_settle_ms", m.write_settle_ms, -20.0..=20.0)?;
        let mut zones = self.layout.zones(c, rpm, hs, cs)?;
        self.layout.spares(c, surfaces, &mut zones)?;
        let cylinders: u32 = zones.iter().fold(0, |end, z| {
            z.first_cylinder.unwrap_or(end).max(end) + z.cylinders
        });
        let seek = m.seek(c, cylinders)?;
        let ctl = &self.controller;
        let read_miss = c.check(
            "controller.read_miss_overhead_ms",
            ctl.read_miss_overhead_ms,
            0.0..=50.0,
        )?;
        let read_hit = c.check(
            "controller.read_hit_overhead_ms",
            ctl.read_hit_overhead_ms,
            0.0..=50.0,
        )?;
        let write = c.check(
            "controller.write_overhead_ms",
            ctl.write_overhead_ms,
            0.0..=50.0,
        )?;
        let optional = |key: &str, value: Option<f64>, default: f64| {
            c.check(key, value.unwrap_or(default), 0.0..=50.0)
        };
        let overheads = Overheads {
            read_miss: [
                ms(read_miss),
                ms(optional(
                    "controller.read_miss_overhead_after_write_ms",
                    ctl.read_miss_overhead_after_write_ms,
                    read_miss,
                )?),
            ],
            read_hit: [
                ms(read_hit),
                ms(optional(
                    "controller.read_hit_overhead_after_write_ms",
                    ctl.read_hit_overhead_after_write_ms,
                    read_hit,
                )?),
            ],
            write: [
                ms(write),
                ms(optional(
                    "controller.write_overhead_after_write_ms",
                    ctl.write_overhead_after_write_ms,
                    write,
                )?),
            ],
            read_completion: ms(optional(
                "controller.read_completion_ms",
                ctl.read_completion_ms,
                0.0,
            )?),
            write_completion: ms(optional(
                "controller.write_completion_ms",
                ctl.write_completion_ms,
                0.0,
            )?),
        };
        let k = &self.cache;
        let segments = c.check("cache.segments", k.segments, 1..=1024)?;
        let segment_sectors = c.check("cache.segment_sectors", k.segment_sectors, 1..=1 << 24)?;
        let wb = c.check(
            "cache.write_buffer_sectors",
            k.write_buffer_sectors,
            0..=1 << 24,
        )?;
        let runs = c.check("cache.write_buffer_runs", k.write_buffer_runs, 1..=4096)?;
        let read_watermark = match k.read_watermark {
            Some(w) => Some(Watermark {
                fraction: c.check("cache.read_watermark", w, 0.0..=1.0)?,
                by_request_size: k.watermark_by_request_size.unwrap_or(true),
            }),
            None => None,
        };
        let min_read_ahead = c.check(
            "cache.min_read_ahead_sectors",
            k.min_read_ahead_sectors.unwrap_or(0),
            0..=segment_sectors,
        )?;
        if k.write_cache && wb < max_sectors {
            return Err(c.error(
                "cache.write_buffer_sectors",
                format!(
                    "{wb} cannot hold one largest request (interface.max_sectors = {max_sectors})"
                ),
            ));
        }
        Ok(HddParams {
            name,
            rpm,
            surfaces,
            zones,
            seek,
            head_switch: ms(hs),
            cylinder_switch: ms(cs),
            // As `ms` converts every other time, with the sign kept.
            write_settle_ns: (ms(settle.abs()).0 as i64) * if settle < 0.0 { -1 } else { 1 },
            overheads,
            bus_rate: bus * 1e6,
            segments,
            segment_sectors: u64::from(segment_sectors),
            write_cache: k.write_cache,
            write_buffer_sectors: u64::from(wb),
            write_buffer_runs: runs,
            write_empties_segment: k.write_empties_segment.unwrap_or(false),
            read_watermark,
            min_read_ahead: u64::from(min_read_ahead),
            queue_depth,
            max_sectors,
            age_limit: ms(age),
        })
    }
}

impl HddMechanics {
    /// The seek model: a measured table, or a curve fitted to the
    /// track-to-track, average and full-stroke figures.
    fn seek(&self, c: &Ctx, cylinders: u32) -> Result<Seek, ProfileError> {
        let figures = [
            self.track_to_track_ms,
            self.average_seek_ms,
            self.full_stroke_ms,
        ];
        match (&self.seek_table, figures) {
            (Some(points), [None, None, None]) => {
                if points.is_empty() {
                    return Err(c.error("mechanics.seek_table", "needs at least one point"));
                }
                let mut last = 0;
                for (i, &(d, ms)) in points.iter().enumerate() {
                    let key = format!("mechanics.seek_table[{i}]");
                    if d <= last {
                        return Err(c.error(&key, "distances must increase from 1"));
                    }
                    c.check(&key, ms, 0.0..=100.0)?;
                    last = d;
                }
                Ok(Seek::Table(points.clone()))
            }
            (None, [Some(t1), Some(avg), Some(full)]) => {
                let t1 = c.check("mechanics.track_to_track_ms", t1, 0.01..=20.0)?;
                let avg = c.check("mechanics.average_seek_ms", avg, 0.1..=50.0)?;
                let full = c.check("mechanics.full_stroke_ms", full, 0.1..=100.0)?;
                let curve = SeekCurve::fit(cylinders, t1, avg, full).map_err(|e| match e {
                    SeekFitError::NotIncreasing => c.error(
                        "mechanics.average_seek_ms",
                        "seek times must grow: track_to_track_ms < average_seek_ms < full_stroke_ms",
                    ),
                    SeekFitError::AverageOutOfReach { lowest, highest } => c.error(
                        "mechanics.average_seek_ms",
                        format!(
                            "no square-root/linear seek curve through {t1} ms and {full} ms \
                             averages {avg} ms: it must lie between {lowest:.3} and {highest:.3} ms"
                        ),
                    ),
                })?;
                Ok(Seek::Fitted(curve))
            }
            _ => Err(c.error(
                "mechanics",
                "give either seek_table, or all of track_to_track_ms, average_seek_ms \
                 and full_stroke_ms",
            )),
        }
    }
}

impl HddLayout {
    /// Spare cylinders between zones, empty zone fronts and slipped blocks
    /// (DiskSim's `dm_layout_g1`, see `hdd::geometry`), checked against
    /// the zones they name.
    fn spares(&self, c: &Ctx, surfaces: u32, zones: &mut [ZoneSpec]) -> Result<(), ProfileError> {
        if let Some(firsts) = &self.zone_first_cylinders {
            let key = "layout.zone_first_cylinders";
            if firsts.len() != zones.len() {
                return Err(c.error(
                    key,
                    format!("has {} entries for {} zones", firsts.len(), zones.len()),
                ));
            }
            let mut end = 0u32;
            for (n, (z, &first)) in zones.iter_mut().zip(firsts).enumerate() {
                let first = c.check(&format!("{key}[{n}]"), first, 0..=10_000_000)?;
                if first < end {
                    return Err(c.error(
                        &format!("{key}[{n}]"),
                        format!("cylinder {first} is inside the zone before (it ends at {end})"),
                    ));
                }
                z.first_cylinder = Some(first);
                end = first.saturating_add(z.cylinders);
            }
        }
        let count = zones.len();
        let zone = |key: &str, n: usize, row: [u64; 2]| -> Result<usize, ProfileError> {
            usize::try_from(row[0])
                .ok()
                .filter(|&z| z < count)
                .ok_or_else(|| {
                    c.error(
                        &format!("{key}[{n}]"),
                        format!("zone {} does not exist ({count} zones)", row[0]),
                    )
                })
        };
        let blocks = |z: &ZoneSpec| {
            u64::from(z.cylinders) * u64::from(surfaces) * u64::from(z.sectors_per_track)
        };
        for (n, &row) in self.zone_front_empty.iter().flatten().enumerate() {
            let key = "layout.zone_front_empty";
            let i = zone(key, n, row)?;
            zones[i].front_empty = row[1];
        }
        for (n, &row) in self.zone_slips.iter().flatten().enumerate() {
            let key = "layout.zone_slips";
            let i = zone(key, n, row)?;
            let z = &mut zones[i];
            if row[1] >= blocks(z) || z.slips.last().is_some_and(|&last| row[1] <= last) {
                return Err(c.error(
                    &format!("{key}[{n}]"),
                    format!(
                        "block {} of zone {i}: slips must rise within a zone and stay below \
                         its {} blocks",
                        row[1],
                        blocks(z)
                    ),
                ));
            }
            z.slips.push(row[1]);
        }
        for (n, &row) in self.zone_spare_tracks.iter().flatten().enumerate() {
            let key = "layout.zone_spare_tracks";
            let i = zone(key, n, row)?;
            let z = &mut zones[i];
            z.end_spare = row[1].saturating_mul(u64::from(z.sectors_per_track));
        }
        for (n, &row) in self.zone_first_block_offset.iter().flatten().enumerate() {
            let key = format!("layout.zone_first_block_offset[{n}]");
            let i = zone("layout.zone_first_block_offset", n, row)?;
            let spt = zones[i].sectors_per_track;
            zones[i].first_block_offset = c.check(&key, row[1], 0..=u64::from(spt - 1))? as u32;
        }
        for (i, z) in zones.iter().enumerate() {
            let unmapped = z.front_empty.saturating_add(z.end_spare);
            if unmapped.saturating_add(z.slips.len() as u64) >= blocks(z) {
                return Err(c.error(
                    "layout.zone_front_empty",
                    format!("zone {i} has no block left after its empty front, slips and spares"),
                ));
            }
        }
        Ok(())
    }

    /// The zones, from the explicit table or generated from the outer and
    /// inner track sizes (equal cylinder counts, sectors per track falling
    /// linearly with the radius).
    fn zones(&self, c: &Ctx, rpm: u32, hs: f64, cs: f64) -> Result<Vec<ZoneSpec>, ProfileError> {
        let generated = [
            self.cylinders.is_some(),
            self.zones.is_some(),
            self.outer_sectors_per_track.is_some(),
            self.inner_sectors_per_track.is_some(),
        ];
        let spt_range = 16..=100_000;
        match (&self.zone_table, generated) {
            (Some(rows), [false, false, false, false]) => {
                if rows.is_empty() {
                    return Err(c.error("layout.zone_table", "needs at least one zone"));
                }
                rows.iter()
                    .enumerate()
                    .map(|(n, &[cylinders, spt, ts, cks])| {
                        let key = format!("layout.zone_table[{n}]");
                        c.check(&key, cylinders, 1..=10_000_000)?;
                        c.check(&key, spt, spt_range.clone())?;
                        c.check(&key, ts, 0..=spt - 1)?;
                        c.check(&key, cks, 0..=spt - 1)?;
                        Ok(ZoneSpec {
                            cylinders,
                            sectors_per_track: spt,
                            track_skew: ts,
                            cylinder_skew: cks,
                            ..ZoneSpec::default()
                        })
                    })
                    .collect()
            }
            (None, [true, true, true, true]) => {
                let cylinders = c.check(
                    "layout.cylinders",
                    self.cylinders.unwrap_or(0),
                    3..=10_000_000,
                )?;
                let n = c.check(
                    "layout.zones",
                    self.zones.unwrap_or(0),
                    1..=1024.min(cylinders),
                )?;
                let outer = c.check(
                    "layout.outer_sectors_per_track",
                    self.outer_sectors_per_track.unwrap_or(0),
                    spt_range.clone(),
                )?;
                let inner = c.check(
                    "layout.inner_sectors_per_track",
                    self.inner_sectors_per_track.unwrap_or(0),
                    spt_range.start().to_owned()..=outer,
                )?;
                Ok((0..n)
                    .map(|z| {
                        let frac = if n > 1 {
                            f64::from(z) / f64::from(n - 1)
                        } else {
                            0.0
                        };
                        let spt =
                            (f64::from(outer) - f64::from(outer - inner) * frac).round() as u32;
                        ZoneSpec {
                            cylinders: cylinders / n + u32::from(z < cylinders % n),
                            sectors_per_track: spt,
                            track_skew: skew_for(ms(hs), rpm, spt),
                            cylinder_skew: skew_for(ms(cs), rpm, spt),
                            ..ZoneSpec::default()
                        }
                    })
                    .collect())
            }
            _ => Err(c.error(
                "layout",
                "give either zone_table, or all of cylinders, zones, \
                 outer_sectors_per_track and inner_sectors_per_track",
            )),
        }
    }
}

// ---------------------------------------------------------------- ssd --

/// The flash SSD model ([`Ssd`]).
pub const SSD: DeviceModelType = DeviceModelType {
    name: "ssd",
    about: "SSD: channels, dies and planes, striped map, write buffer, host link",
    keys: &["interface", "flash", "buffer", "variability"],
    build: |p, name| {
        let f: SsdFile = p.parse()?;
        Ok(Box::new(Ssd::new(f.validate(p, name)?)))
    },
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SsdFile {
    #[allow(dead_code)]
    kind: String,
    #[allow(dead_code)]
    description: Option<String>,
    interface: SsdInterface,
    flash: SsdFlash,
    buffer: SsdBuffer,
    /// Optional: a lognormal extra controller delay per command.
    variability: Option<SsdVariability>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SsdVariability {
    /// The extra delay's median and 99th percentile, microseconds.
    extra_p50_us: f64,
    extra_p99_us: f64,
    /// Besides, a fraction of commands stalls this long (default none).
    #[serde(default)]
    stall_fraction: f64,
    #[serde(default)]
    stall_us: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SsdInterface {
    /// Capacity in GB (10^9 bytes), or in MB with `capacity_mb` (a probed
    /// loop device of 1 GiB is not a whole number of GB); exactly one.
    capacity_gb: Option<u64>,
    capacity_mb: Option<u64>,
    queue_depth: u32,
    max_sectors: u32,
    link_mb_per_s: f64,
    command_overhead_us: f64,
    firmware_latency_us: f64,
    /// Whether the drive reports itself rotational (ATA IDENTIFY word 217
    /// not 1): a 2009 PATA SSD may not set it. Default false.
    #[serde(default)]
    rotational: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SsdFlash {
    channels: u32,
    dies_per_channel: u32,
    planes_per_die: u32,
    page_kib: u32,
    read_us: f64,
    program_us: f64,
    channel_mb_per_s: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SsdBuffer {
    write_buffer_mib: u32,
}

impl SsdFile {
    fn validate(self, c: &Ctx, name: String) -> Result<SsdParams, ProfileError> {
        let i = &self.interface;
        let f = &self.flash;
        let capacity_bytes = match (i.capacity_gb, i.capacity_mb) {
            (Some(gb), None) => {
                c.check("interface.capacity_gb", gb, 1..=1_000_000)? * 1_000_000_000
            }
            (None, Some(mb)) => {
                c.check("interface.capacity_mb", mb, 1..=1_000_000_000)? * 1_000_000
            }
            _ => return Err(c.error("interface", "give one of capacity_gb and capacity_mb")),
        };
        let queue_depth = c.check("interface.queue_depth", i.queue_depth, 1..=65_535)?;
        let max_sectors = c.check("interface.max_sectors", i.max_sectors, 8..=65_535)?;
        let link = c.check("interface.link_mb_per_s", i.link_mb_per_s, 1.0..=1e6)?;
        let cmd = c.check(
            "interface.command_overhead_us",
            i.command_overhead_us,
            0.0..=10_000.0,
        )?;
        let fw = c.check(
            "interface.firmware_latency_us",
            i.firmware_latency_us,
            0.0..=10_000.0,
        )?;
        let channels = c.check("flash.channels", f.channels, 1..=256)?;
        let dies = c.check("flash.dies_per_channel", f.dies_per_channel, 1..=256)?;
        let planes = c.check("flash.planes_per_die", f.planes_per_die, 1..=16)?;
        let page_kib = c.check("flash.page_kib", f.page_kib, 1..=1024)?;
        let read = c.check("flash.read_us", f.read_us, 0.1..=100_000.0)?;
        let program = c.check("flash.program_us", f.program_us, 0.1..=100_000.0)?;
        let chan = c.check("flash.channel_mb_per_s", f.channel_mb_per_s, 1.0..=1e6)?;
        let page_bytes = u64::from(page_kib) * 1024;
        let largest = u64::from(max_sectors) * SECTOR_SIZE;
        let wb_mib = c.check(
            "buffer.write_buffer_mib",
            self.buffer.write_buffer_mib,
            1..=1 << 20,
        )?;
        let wb = u64::from(wb_mib) << 20;
        if wb < largest + page_bytes {
            return Err(c.error(
                "buffer.write_buffer_mib",
                "the write buffer must hold at least one largest request and a page",
            ));
        }
        let variability = match &self.variability {
            None => None,
            Some(v) => {
                let p50 = c.check(
                    "variability.extra_p50_us",
                    v.extra_p50_us,
                    0.001..=100_000.0,
                )?;
                let p99 = c.check(
                    "variability.extra_p99_us",
                    v.extra_p99_us,
                    0.001..=100_000.0,
                )?;
                if p99 < p50 {
                    return Err(c.error(
                        "variability.extra_p99_us",
                        "the 99th percentile must be at least the median (extra_p50_us)",
                    ));
                }
                let fraction =
                    c.check("variability.stall_fraction", v.stall_fraction, 0.0..=0.5)?;
                let stall = c.check("variability.stall_us", v.stall_us, 0.0..=1_000_000.0)?;
                Some(
                    Variability::from_percentiles(us(p50), us(p99))
                        .with_stalls(fraction, us(stall)),
                )
            }
        };
        Ok(SsdParams {
            name,
            capacity_sectors: capacity_bytes / SECTOR_SIZE,
            queue_depth,
            max_sectors,
            channels,
            dies_per_channel: dies,
            planes_per_die: planes,
            page_bytes,
            read_latency: us(read),
            program_latency: us(program),
            channel_rate: chan * 1e6,
            link_rate: link * 1e6,
            command_overhead: us(cmd),
            firmware_latency: us(fw),
            write_buffer_bytes: wb,
            rotational: i.rotational,
            variability,
        })
    }
}

// ------------------------------------------------------------- sdcard --

/// The SD card model ([`SdCard`]).
pub const SDCARD: DeviceModelType = DeviceModelType {
    name: "sdcard",
    about: "SD card: allocation units, a few open, opening one costs a copy",
    keys: &["interface", "flash"],
    build: |p, name| {
        let f: SdFile = p.parse()?;
        Ok(Box::new(SdCard::new(f.validate(p, name)?)))
    },
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SdFile {
    #[allow(dead_code)]
    kind: String,
    #[allow(dead_code)]
    description: Option<String>,
    interface: SdInterface,
    flash: SdFlash,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SdInterface {
    capacity_mb: u64,
    max_sectors: u32,
    read_overhead_ms: f64,
    read_mb_per_s: f64,
    write_overhead_ms: f64,
    write_mb_per_s: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SdFlash {
    au_kib: u32,
    open_aus: u32,
    page_mapped_aus: u32,
    copy_mb_per_s: f64,
    erase_ms: f64,
}

impl SdFile {
    fn validate(self, c: &Ctx, name: String) -> Result<SdParams, ProfileError> {
        let i = &self.interface;
        let f = &self.flash;
        let mb = c.check("interface.capacity_mb", i.capacity_mb, 1..=10_000_000)?;
        let max_sectors = c.check("interface.max_sectors", i.max_sectors, 1..=65_535)?;
        let read_ovh = c.check(
            "interface.read_overhead_ms",
            i.read_overhead_ms,
            0.0..=1000.0,
        )?;
        let read = c.check("interface.read_mb_per_s", i.read_mb_per_s, 0.01..=10_000.0)?;
        let write_ovh = c.check(
            "interface.write_overhead_ms",
            i.write_overhead_ms,
            0.0..=1000.0,
        )?;
        let write = c.check(
            "interface.write_mb_per_s",
            i.write_mb_per_s,
            0.01..=10_000.0,
        )?;
        let au_kib = c.check("flash.au_kib", f.au_kib, 4..=1 << 22)?;
        let open = c.check("flash.open_aus", f.open_aus, 1..=64)?;
        let mapped = c.check("flash.page_mapped_aus", f.page_mapped_aus, 0..=1 << 20)?;
        let copy = c.check("flash.copy_mb_per_s", f.copy_mb_per_s, 0.01..=10_000.0)?;
        let erase = c.check("flash.erase_ms", f.erase_ms, 0.0..=10_000.0)?;
        Ok(SdParams {
            name,
            capacity_sectors: mb * 1_000_000 / SECTOR_SIZE,
            max_sectors,
            au_sectors: u64::from(au_kib) * 1024 / SECTOR_SIZE,
            open_aus: open,
            page_mapped_aus: u64::from(mapped),
            read_overhead: ms(read_ovh),
            read_rate: read * 1e6,
            write_overhead: ms(write_ovh),
            write_rate: write * 1e6,
            copy_rate: copy * 1e6,
            erase_time: ms(erase),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{open, parse};

    fn invalid(text: &str) -> (usize, String, String) {
        match parse("t.toml", text) {
            Err(ProfileError::Invalid {
                line, key, message, ..
            }) => (line, key, message),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("accepted bad profile"),
        }
    }

    #[test]
    fn every_builtin_loads_and_matches_its_description() {
        for (name, desc, text) in BUILTINS {
            let dev = open(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(dev.name(), *name);
            let head: toml::Table = toml::from_str(text).unwrap();
            assert_eq!(head["description"].as_str(), Some(*desc), "{name}");
        }
    }

    #[test]
    fn spare_and_slip_keys_are_checked_against_their_zones() {
        let base = include_str!("../profiles/ide-2003.toml");
        let layout = |extra: &str| {
            let mut t = String::new();
            for line in base.lines() {
                if line.starts_with("cylinders =") {
                    continue;
                }
                t.push_str(line);
                t.push('\n');
                if line == "[layout]" {
                    t.push_str(extra);
                }
            }
            t.replace("zones = ", "# zones = ")
                .replace("outer_sectors_per_track", "# outer")
                .replace("inner_sectors_per_track", "# inner")
        };
        let two = "zone_table = [[30000, 845, 100, 150], [30700, 442, 52, 78]]\n";
        if let Err(e) = parse("t.toml", &layout(two)) {
            panic!("{e}\n{}", layout(two));
        }
        let (_, key, message) = invalid(&layout(&format!(
            "{two}zone_first_cylinders = [0, 29999]\n"
        )));
        assert_eq!(key, "layout.zone_first_cylinders[1]");
        assert!(message.contains("inside the zone before"), "{message}");
        let (_, key, message) = invalid(&layout(&format!("{two}zone_slips = [[2, 5]]\n")));
        assert_eq!(key, "layout.zone_slips[0]");
        assert!(message.contains("zone 2 does not exist"), "{message}");
        let (_, key, _) = invalid(&layout(&format!("{two}zone_slips = [[0, 9], [0, 7]]\n")));
        assert_eq!(key, "layout.zone_slips[1]");
        let (_, key, _) = invalid(&layout(&format!(
            "{two}zone_front_empty = [[1, 18446744073709551615]]\n"
        )));
        assert_eq!(key, "layout.zone_front_empty");
        let (_, key, _) = invalid(&layout(&format!(
            "{two}zone_first_block_offset = [[1, 442]]\n"
        )));
        assert_eq!(key, "layout.zone_first_block_offset[0]");
    }

    #[test]
    fn locates_keys_in_tables() {
        let text = "kind = \"hdd\"\n[a]\nx = 1\n[b]\nx = 2\ny = 3\n";
        assert_eq!(locate_key(text, "b.x"), 5);
        assert_eq!(locate_key(text, "a.x"), 3);
        assert_eq!(locate_key(text, "kind"), 1);
        assert_eq!(locate_key(text, "b.z"), 4);
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let text = BUILTINS[0]
            .2
            .replace("[mechanics]\n", "[mechanics]\nspeed = 3\n");
        let (line, key, msg) = invalid(&text);
        assert_eq!(key, "mechanics.speed");
        assert_eq!(text.lines().nth(line - 1), Some("speed = 3"));
        assert!(msg.contains("unknown field"), "{msg}");
    }

    #[test]
    fn out_of_range_and_wrong_type_name_line_and_key() {
        let base = BUILTINS[0].2;
        let rpm_line = base.lines().position(|l| l.starts_with("rpm")).unwrap() + 1;
        let text = base.replacen("rpm = 7200", "rpm = 0", 1);
        let (line, key, _) = invalid(&text);
        assert_eq!((line, key.as_str()), (rpm_line, "mechanics.rpm"));
        let text = base.replacen("rpm = 7200", "rpm = \"fast\"", 1);
        let (line, key, _) = invalid(&text);
        assert_eq!((line, key.as_str()), (rpm_line, "mechanics.rpm"));
        let text = base.replacen("queue_depth = 1", "queue_depth = 0", 1);
        let (_, key, _) = invalid(&text);
        assert_eq!(key, "interface.queue_depth");
    }

    #[test]
    fn missing_key_and_bad_kind_are_errors() {
        let text = BUILTINS[0].2.replacen("rpm = 7200", "", 1);
        let (_, key, msg) = invalid(&text);
        assert_eq!(key, "mechanics.rpm");
        assert!(msg.contains("missing"), "{msg}");
        let (line, key, _) = invalid("kind = \"tape\"\n");
        assert_eq!((line, key.as_str()), (1, "kind"));
        let (line, key, msg) = invalid("description = \"x\"\n");
        assert_eq!((line, key.as_str()), (1, "kind"));
        assert!(msg.contains("missing"), "{msg}");
        let (line, _, _) = invalid("kind = \"hdd\"\n[interface\n");
        assert_eq!(line, 2);
    }

    #[test]
    fn unknown_name_is_not_found() {
        let e = open("no-such-disk").err().unwrap();
        assert!(matches!(e, ProfileError::NotFound { .. }));
        assert!(e.to_string().contains("ide-2003"));
    }
}
