//! The host sections of a scenario: `[host]` (the machine and its kernel
//! knobs), `[[files]]` (what lies on the file system before the run) and
//! `[[process]]` (what runs on it). See `docs/scenarios.md`.
//!
//! Parsing checks every value and every cross-reference (a process's file
//! set exists and has a usable kind and count) so that building the host
//! for a run cannot fail on its input.

use crate::ctx::Ctx;
use crate::error::ScenarioError;
use elevator_core::{Duration, GroupId, GroupTree, IoPrio, QueueLimits};
use elevator_host::params::{Allocator, HostParams, PRESETS};
use elevator_host::process::programs;
use elevator_host::process::registry::{self, Args, Default, KeyType, ProgramType, Share, Value};
use elevator_host::setup::{self, SetupError};
use elevator_host::{Host, WritebackCharge};
use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

type S<T> = Spanned<T>;

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHost {
    preset: Option<S<String>>,
    memory: Option<S<String>>,
    reserved: Option<S<String>>,
    cpus: Option<S<i64>>,
    readahead: Option<S<String>>,
    dirty_background_ratio: Option<S<i64>>,
    dirty_ratio: Option<S<i64>>,
    dirty_expire_centisecs: Option<S<i64>>,
    dirty_writeback_centisecs: Option<S<i64>>,
    allocator: Option<S<String>>,
    fs_size: Option<S<String>>,
    fs_offset: Option<S<String>>,
    fragmentation: Option<S<f64>>,
    writeback_charge: Option<S<String>>,
    io_less_throttling: Option<bool>,
    fs: Option<S<String>>,
    mount: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFiles {
    name: S<String>,
    kind: S<String>,
    count: Option<S<i64>>,
    size: Option<S<String>>,
    of: Option<S<String>>,
    within: Option<S<String>>,
    allocator: Option<S<String>>,
}

/// A `[[process]]` table as written: its keys are the common ones
/// ([`COMMON`]) and those of its kind's [`ProgramType`], read by their
/// registered types.
pub(crate) type RawProcess = BTreeMap<String, S<toml::Value>>;

/// Keys every process takes, whatever its kind.
const COMMON: [&str; 7] = [
    "name",
    "kind",
    "count",
    "start",
    "prio",
    "background",
    "group",
];

pub use elevator_host::setup::FileKind;
/// A validated `[[files]]` entry.
pub type FileSetSpec = elevator_host::setup::FileSet;
/// A validated `[[process]]` entry; `count` instances each report a row.
pub type ProcessSpec = elevator_host::setup::ProcessSet;

/// The validated host part of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct HostSpec {
    pub params: HostParams,
    /// Lines of `host.fs_size` and `host.fs_offset`, for errors found when
    /// the device is known.
    pub fs_size_line: Option<usize>,
    pub fs_offset_line: Option<usize>,
    /// Parameters for policies that run on another preset (`[presets]`).
    pub params_by_policy: BTreeMap<String, HostParams>,
    pub files: Vec<FileSetSpec>,
    pub processes: Vec<ProcessSpec>,
}

impl HostSpec {
    /// Report-row names of every process instance, in spawn order.
    pub fn row_names(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.processes {
            for i in 0..p.count {
                out.push(p.instance_name(i));
            }
        }
        out
    }
}

fn allocator(cx: &Ctx<'_>, v: &S<String>, key: &str) -> Result<Allocator, ScenarioError> {
    match v.get_ref().as_str() {
        "orlov" => Ok(Allocator::Orlov),
        "oldalloc" | "old" => Ok(Allocator::Old),
        other => Err(cx.at(
            v,
            key,
            format!("unknown allocator {other:?} (orlov, oldalloc)"),
        )),
    }
}

fn ratio(cx: &Ctx<'_>, v: &Option<S<i64>>, key: &str, into: &mut u32) -> Result<(), ScenarioError> {
    if let Some(v) = v {
        *into = cx.int(v, key, 0, 100)? as u32;
    }
    Ok(())
}

fn centisecs(
    cx: &Ctx<'_>,
    v: &Option<S<i64>>,
    key: &str,
    into: &mut u32,
) -> Result<(), ScenarioError> {
    if let Some(v) = v {
        *into = cx.int(v, key, 0, 8_640_000)? as u32;
    }
    Ok(())
}

/// The host's parameters: `preset` (or the scenario's own preset), then
/// every other `[host]` key on top.
pub(crate) fn host_params(
    cx: &Ctx<'_>,
    h: &RawHost,
    preset: Option<&str>,
) -> Result<HostParams, ScenarioError> {
    let mut params = match (preset, &h.preset) {
        (Some(name), _) => HostParams::preset(name).expect("validated preset"),
        (None, Some(p)) => HostParams::preset(p.get_ref()).ok_or_else(|| {
            cx.at(
                p,
                "host.preset",
                format!("unknown preset {:?} ({})", p.get_ref(), PRESETS.join(", ")),
            )
        })?,
        (None, None) => HostParams::linux_2_6(),
    };
    if let Some(m) = &h.memory {
        params.memory = cx.size(m, "host.memory")?;
        if params.memory < 16 << 20 {
            return Err(cx.at(m, "host.memory", "at least 16m"));
        }
    }
    if let Some(r) = &h.reserved {
        params.reserved = cx.size(r, "host.reserved")?;
        if params.reserved >= params.memory {
            return Err(cx.at(r, "host.reserved", "must be less than host.memory"));
        }
    }
    if let Some(c) = &h.cpus {
        params.cpus = cx.int(c, "host.cpus", 1, 1024)? as u32;
    }
    if let Some(r) = &h.readahead {
        params.readahead_max = cx.size(r, "host.readahead")?;
        if params.readahead_max % 4096 != 0 || params.readahead_max > 16 << 20 {
            return Err(cx.at(
                r,
                "host.readahead",
                "a multiple of 4k, at most 16m (0 turns readahead off)",
            ));
        }
    }
    ratio(
        cx,
        &h.dirty_background_ratio,
        "host.dirty_background_ratio",
        &mut params.dirty_background_ratio,
    )?;
    ratio(
        cx,
        &h.dirty_ratio,
        "host.dirty_ratio",
        &mut params.dirty_ratio,
    )?;
    // 2.4 has no dirty ratios: on its host they set bdflush's `nfract`
    // and `nfract_sync`, the fractions they stood for before bdflush was
    // built (and equal to them in the preset).
    if let elevator_host::params::Writeback::Bdflush(b) = &mut params.writeback {
        b.nfract = params.dirty_background_ratio;
        b.nfract_sync = params.dirty_ratio;
    }
    centisecs(
        cx,
        &h.dirty_expire_centisecs,
        "host.dirty_expire_centisecs",
        &mut params.dirty_expire_centisecs,
    )?;
    centisecs(
        cx,
        &h.dirty_writeback_centisecs,
        "host.dirty_writeback_centisecs",
        &mut params.dirty_writeback_centisecs,
    )?;
    if let Some(a) = &h.allocator {
        params.fs.allocator = allocator(cx, a, "host.allocator")?;
    }
    if let Some(b) = h.io_less_throttling {
        params.io_less_throttling = b;
    }
    if let Some(w) = &h.writeback_charge {
        params.writeback_charge = match w.get_ref().as_str() {
            "dirtier" | "v2" => WritebackCharge::Dirtier,
            "flusher" | "v1" => WritebackCharge::Flusher,
            other => {
                return Err(cx.at(
                    w,
                    "host.writeback_charge",
                    format!("{other:?}: dirtier (cgroup v2) or flusher (cgroup v1)"),
                ))
            }
        };
    }
    if let Some(s) = &h.fs_size {
        let size = cx.size(s, "host.fs_size")?;
        if size < 2 * params.fs.blocks_per_group * params.fs.block_size {
            return Err(cx.at(s, "host.fs_size", "at least two block groups (256m)"));
        }
        params.fs.size = Some(size);
    }
    match (&h.fs, &h.mount) {
        (Some(name), mount) => {
            let options = mount.as_ref().map_or("", |m| m.get_ref().as_str());
            params.fs.fs_type = elevator_host::fs::registry::mount(name.get_ref(), options)
                .map_err(|e| match mount {
                    Some(m) if elevator_host::fs::registry::lookup(name.get_ref()).is_some() => {
                        cx.at(m, "host.mount", e)
                    }
                    _ => cx.at(name, "host.fs", e),
                })?;
        }
        (None, Some(m)) => {
            return Err(cx.at(
                m,
                "host.mount",
                "mount options need the file system: add host.fs (ext2, ext3, nilfs2)",
            ))
        }
        (None, None) => {}
    }
    if let Some(s) = &h.fs_offset {
        params.fs.offset = cx.sectors(s, "host.fs_offset")?;
    }
    if let Some(f) = &h.fragmentation {
        let x = *f.get_ref();
        if !(0.0..=0.9).contains(&x) {
            return Err(cx.at(
                f,
                "host.fragmentation",
                format!("{x} is out of range 0.0..=0.9"),
            ));
        }
        params.fs.fragmentation = x;
    }

    Ok(params)
}

pub(crate) fn parse_host(
    cx: &Ctx<'_>,
    raw: &Option<S<RawHost>>,
    block: &crate::block::RawBlock,
    files: &[RawFiles],
    processes: &[RawProcess],
    groups: &GroupTree,
) -> Result<Option<HostSpec>, ScenarioError> {
    if raw.is_none() && files.is_empty() && processes.is_empty() {
        return Ok(None);
    }
    let default = S::new(0..0, RawHost::default());
    let h = raw.as_ref().unwrap_or(&default).get_ref();
    // Without a `host.preset`, the 2.6.32 block layer brings the 2.6.32
    // host (READ_META on metadata reads).
    let implied = block
        .preset
        .as_ref()
        .filter(|p| h.preset.is_none() && p.get_ref() == "linux-2.6.32")
        .map(|p| p.get_ref().as_str());
    let params = host_params(cx, h, implied)?;

    let mut sets: Vec<FileSetSpec> = Vec::new();
    for f in files {
        let name = f.name.get_ref().clone();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(cx.at(&f.name, "files.name", "a file-set name is one word"));
        }
        if sets.iter().any(|s| s.name == name) {
            return Err(cx.at(
                &f.name,
                "files.name",
                format!("file set {name:?} is declared twice"),
            ));
        }
        let count = match &f.count {
            Some(c) => cx.int(c, "files.count", 1, 4096)? as u32,
            None => 1,
        };
        let kind_name = f.kind.get_ref().as_str();
        let kind = match kind_name {
            "file" => {
                let s = f
                    .size
                    .as_ref()
                    .ok_or_else(|| cx.at(&f.kind, "files.size", "a `file` set needs `size`"))?;
                let size = cx.size(s, "files.size")?;
                if size == 0 {
                    return Err(cx.at(s, "files.size", "must not be zero (use kind = \"empty\")"));
                }
                FileKind::File { size }
            }
            "empty" => FileKind::Empty,
            "dir" => FileKind::Dir,
            "kernel-tree" => FileKind::KernelTree,
            "copy" => {
                let of =
                    f.of.as_ref()
                        .ok_or_else(|| cx.at(&f.kind, "files.of", "a `copy` set needs `of`"))?;
                let src = sets
                    .iter()
                    .find(|s| &s.name == of.get_ref())
                    .ok_or_else(|| {
                        cx.at(
                            of,
                            "files.of",
                            format!("no earlier file set {:?}", of.get_ref()),
                        )
                    })?;
                if !matches!(src.kind, FileKind::KernelTree | FileKind::Copy { .. }) {
                    return Err(cx.at(
                        of,
                        "files.of",
                        "only trees (kernel-tree or copy sets) can be copied",
                    ));
                }
                FileKind::Copy {
                    of: of.get_ref().clone(),
                }
            }
            "app" => FileKind::App,
            other => {
                return Err(cx.at(
                    &f.kind,
                    "files.kind",
                    format!("unknown kind {other:?} (file, empty, dir, kernel-tree, copy, app)"),
                ))
            }
        };
        if let Some(size) = &f.size {
            if !matches!(kind, FileKind::File { .. }) {
                return Err(cx.at(
                    size,
                    "files.size",
                    format!("`size` does not apply to kind {kind_name:?}"),
                ));
            }
        }
        if let Some(of) = &f.of {
            if !matches!(kind, FileKind::Copy { .. }) {
                return Err(cx.at(
                    of,
                    "files.of",
                    format!("`of` does not apply to kind {kind_name:?}"),
                ));
            }
        }
        let within = match &f.within {
            Some(w) => {
                let d = sets
                    .iter()
                    .find(|s| &s.name == w.get_ref())
                    .ok_or_else(|| {
                        cx.at(
                            w,
                            "files.within",
                            format!("no earlier file set {:?}", w.get_ref()),
                        )
                    })?;
                if d.kind != FileKind::Dir {
                    return Err(cx.at(
                        w,
                        "files.within",
                        format!("{:?} is not a `dir` set", w.get_ref()),
                    ));
                }
                Some(w.get_ref().clone())
            }
            None => None,
        };
        let alloc = f
            .allocator
            .as_ref()
            .map(|a| allocator(cx, a, "files.allocator"))
            .transpose()?;
        sets.push(FileSetSpec {
            name,
            line: cx.line(f.name.span().start),
            kind,
            count,
            within,
            allocator: alloc,
        });
    }

    let mut procs: Vec<ProcessSpec> = Vec::new();
    for p in processes {
        procs.push(process(cx, p, &sets, &procs, groups)?);
    }
    Ok(Some(HostSpec {
        params,
        fs_size_line: h.fs_size.as_ref().map(|v| cx.line(v.span().start)),
        fs_offset_line: h.fs_offset.as_ref().map(|v| cx.line(v.span().start)),
        params_by_policy: BTreeMap::new(),
        files: sets,
        processes: procs,
    }))
}

/// The file set `v` names, checked against what key `key` of a process of
/// `count` instances accepts.
fn file_set(
    cx: &Ctx<'_>,
    v: &S<toml::Value>,
    key: &str,
    kind: &str,
    (kinds, share): (&[registry::SetKind], Share),
    sets: &[FileSetSpec],
    count: u32,
) -> Result<String, ScenarioError> {
    let name = string(cx, v, key)?;
    let s = sets
        .iter()
        .find(|s| &s.name == name.get_ref())
        .ok_or_else(|| cx.at(v, key, format!("no file set {:?}", name.get_ref())))?;
    let k = s.kind.set_kind();
    if !kinds.contains(&k) {
        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        return Err(cx.at(
            v,
            key,
            format!(
                "{:?} is a {} set; kind {kind:?} takes {}",
                name.get_ref(),
                k.name(),
                names.join(" or ")
            ),
        ));
    }
    let fits = match share {
        Share::Any => true,
        Share::PerInstance => s.count == 1 || s.count == count,
        Share::PerInstanceOrAll => count == 1 || s.count == 1 || s.count == count,
    };
    if !fits {
        return Err(cx.at(
            v,
            key,
            format!(
                "{:?} has {} instances and the process {count}: give each process one \
                 (equal counts) or share one (count 1)",
                name.get_ref(),
                s.count
            ),
        ));
    }
    Ok(name.into_inner())
}

fn type_error(cx: &Ctx<'_>, v: &S<toml::Value>, key: &str, want: &str) -> ScenarioError {
    cx.at(
        v,
        key,
        format!("expected {want}, found {}", v.get_ref().type_str()),
    )
}

fn string(cx: &Ctx<'_>, v: &S<toml::Value>, key: &str) -> Result<S<String>, ScenarioError> {
    match v.get_ref() {
        toml::Value::String(s) => Ok(S::new(v.span(), s.clone())),
        _ => Err(type_error(cx, v, key, "a string")),
    }
}

fn integer(cx: &Ctx<'_>, v: &S<toml::Value>, key: &str) -> Result<S<i64>, ScenarioError> {
    match v.get_ref() {
        toml::Value::Integer(i) => Ok(S::new(v.span(), *i)),
        _ => Err(type_error(cx, v, key, "an integer")),
    }
}

fn boolean(cx: &Ctx<'_>, v: &S<toml::Value>, key: &str) -> Result<bool, ScenarioError> {
    match v.get_ref() {
        toml::Value::Boolean(b) => Ok(*b),
        _ => Err(type_error(cx, v, key, "true or false")),
    }
}

/// Bytes as the scenario format writes them (`512`, `4k`, `64m`).
fn bytes(n: u64) -> String {
    for (unit, shift) in [("g", 30), ("m", 20), ("k", 10)] {
        if n >= 1 << shift && n % (1 << shift) == 0 {
            return format!("{}{unit}", n >> shift);
        }
    }
    format!("{n} bytes")
}

/// One key's value, checked against its registered type.
fn value(
    cx: &Ctx<'_>,
    v: &S<toml::Value>,
    key: &str,
    kind: &str,
    ty: KeyType,
    sets: &[FileSetSpec],
    count: u32,
) -> Result<Value, ScenarioError> {
    Ok(match ty {
        KeyType::Size { min, max } => {
            let n = cx.size(&string(cx, v, key)?, key)?;
            if n < min || n > max {
                let message = match (min, max) {
                    (1, u64::MAX) => "must not be zero".to_string(),
                    (_, u64::MAX) => format!("at least {}", bytes(min)),
                    _ => format!("between {} and {}", bytes(min), bytes(max)),
                };
                return Err(cx.at(v, key, message));
            }
            Value::Size(n)
        }
        KeyType::Int { min, max } => Value::Int(cx.int(&integer(cx, v, key)?, key, min, max)?),
        KeyType::Bool => Value::Bool(boolean(cx, v, key)?),
        KeyType::Time => Value::Time(cx.duration(&string(cx, v, key)?, key)?),
        KeyType::Files { kinds, share } => {
            Value::Files(file_set(cx, v, key, kind, (kinds, share), sets, count)?)
        }
    })
}

fn process(
    cx: &Ctx<'_>,
    p: &RawProcess,
    sets: &[FileSetSpec],
    earlier: &[ProcessSpec],
    groups: &GroupTree,
) -> Result<ProcessSpec, ScenarioError> {
    // A table without `name` or `kind` is blamed on its first key's line.
    let first_line = p.values().map(|v| cx.line(v.span().start)).min();
    let required = |key: &str| -> Result<S<String>, ScenarioError> {
        let v = p.get(key).ok_or_else(|| {
            ScenarioError::new(
                cx.file,
                first_line,
                Some(&format!("process.{key}")),
                format!("a [[process]] needs `{key}`"),
            )
        })?;
        string(cx, v, &format!("process.{key}"))
    };
    let name_v = required("name")?;
    let name = name_v.get_ref().clone();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(cx.at(&name_v, "process.name", "a process name is one word"));
    }
    if earlier.iter().any(|e| e.name == name) {
        return Err(cx.at(
            &name_v,
            "process.name",
            format!("process {name:?} is declared twice"),
        ));
    }
    let kind_v = required("kind")?;
    let kind = kind_v.get_ref().as_str();
    let program: &'static ProgramType = programs::find(kind).ok_or_else(|| {
        cx.at(
            &kind_v,
            "process.kind",
            format!("unknown kind {kind:?} ({})", programs::names()),
        )
    })?;
    // Keys present that this kind does not take.
    for (key, v) in p {
        if !COMMON.contains(&key.as_str()) && program.key(key).is_none() {
            let takes: Vec<&str> = program.keys.iter().map(|k| k.name).collect();
            return Err(cx.at(
                v,
                &format!("process.{key}"),
                format!(
                    "`{key}` does not apply to kind {kind:?} (it takes: {})",
                    takes.join(", ")
                ),
            ));
        }
    }
    let count = match p.get("count") {
        Some(c) => cx.int(&integer(cx, c, "process.count")?, "process.count", 1, 4096)? as u32,
        None => 1,
    };
    let background = match p.get("background") {
        Some(b) => boolean(cx, b, "process.background")?,
        None => false,
    };
    let mut args = Args::default();
    for k in program.keys {
        let key = format!("process.{}", k.name);
        let v = match (p.get(k.name), &k.default) {
            (Some(v), _) => value(cx, v, &key, kind, k.ty, sets, count)?,
            (None, Default::Required) => {
                return Err(cx.at(&kind_v, &key, format!("kind {kind:?} needs `{}`", k.name)))
            }
            (None, Default::Absent) => continue,
            (None, Default::Size(n)) => Value::Size(*n),
            (None, Default::Int(n)) => Value::Int(*n),
            (None, Default::Bool(b)) => Value::Bool(*b),
            (None, Default::Time(t)) => Value::Time(*t),
        };
        args.insert(k.name, v);
    }
    Ok(ProcessSpec {
        name,
        line: cx.line(name_v.span().start),
        count,
        program,
        args,
        start: match p.get("start") {
            Some(s) => cx.duration(&string(cx, s, "process.start")?, "process.start")?,
            None => Duration::ZERO,
        },
        prio: match p.get("prio") {
            Some(x) => {
                let x = string(cx, x, "process.prio")?;
                x.get_ref()
                    .parse::<IoPrio>()
                    .map_err(|e| cx.at(&x, "process.prio", e.to_string()))?
            }
            None => IoPrio::default(),
        },
        background,
        group: match p.get("group") {
            None => GroupId::ROOT,
            Some(g) => {
                let g = string(cx, g, "process.group")?;
                groups.find(g.get_ref()).ok_or_else(|| {
                    cx.at(
                        &g,
                        "process.group",
                        format!("no group named {:?}", g.get_ref()),
                    )
                })?
            }
        },
    })
}

/// Build the host of `spec` for one run (`elevator_host::setup::build`),
/// with the device's limits and the block layer's request slots, and its
/// errors named by the scenario's file, line and key.
pub(crate) fn build_host(
    spec: &HostSpec,
    limits: &QueueLimits,
    nr_requests: Option<usize>,
    seed: u64,
    first_task: u32,
    file: &str,
    files_allocator: Allocator,
) -> Result<Host, ScenarioError> {
    let mut params = spec.params.clone();
    params.max_sectors = limits.max_sectors;
    if let Some(n) = nr_requests {
        params.nr_requests = n.min(u32::MAX as usize) as u32;
    }
    setup::build(
        params,
        limits.capacity,
        &spec.files,
        &spec.processes,
        seed,
        first_task,
        files_allocator,
    )
    .map_err(|e| match e {
        SetupError::FsPastDevice { key, message } => {
            let line = if key == "host.fs_size" {
                spec.fs_size_line
            } else {
                spec.fs_offset_line
            };
            ScenarioError::new(file, line, Some(key), message)
        }
        SetupError::SetDoesNotFit { line, message } => {
            ScenarioError::new(file, Some(line), Some("files"), message)
        }
    })
}
