//! The host sections of a scenario: `[host]` (the machine and its kernel
//! knobs), `[[files]]` (what lies on the file system before the run) and
//! `[[process]]` (what runs on it). See `docs/scenarios.md`.
//!
//! Parsing checks every value and every cross-reference (a process's file
//! set exists and has a usable kind and count) so that building the host
//! for a run cannot fail on its input.

use crate::error::ScenarioError;
use crate::parse::Ctx;
use elevator_core::{Duration, GroupId, GroupTree, IoPrio, Prng, QueueLimits, Sector, SECTOR_SIZE};
use elevator_host::fs::gen::{self, AppOp, TreeShape};
use elevator_host::fs::{FileId, Kind};
use elevator_host::params::{Allocator, HostParams, PRESETS};
use elevator_host::process::{
    find_cat, AppStart, Cat, Cp, Dd, Find, FsyncTester, Player, RandomWriter, TiotestThread,
    WriteAndFsync, XargsCat, BUFFER_2003,
};
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProcess {
    name: S<String>,
    kind: S<String>,
    count: Option<S<i64>>,
    files: Option<S<String>>,
    dir: Option<S<String>>,
    start: Option<S<String>>,
    prio: Option<S<String>>,
    background: Option<S<bool>>,
    bs: Option<S<String>>,
    size: Option<S<String>>,
    threads: Option<S<i64>>,
    random_ops: Option<S<i64>>,
    sync: Option<S<bool>>,
    frame: Option<S<String>>,
    period: Option<S<String>>,
    frames: Option<S<i64>>,
    buffer: Option<S<i64>>,
    interval: Option<S<String>>,
    duration: Option<S<String>>,
    random_writer: Option<S<String>>,
    batch: Option<S<i64>>,
    pipe: Option<S<i64>>,
    stat: Option<S<bool>>,
    group: Option<S<String>>,
}

/// What a file set holds.
#[derive(Clone, Debug, PartialEq)]
pub enum FileKind {
    /// One file of `size` bytes, written in one go (well laid out).
    File { size: u64 },
    /// An empty file, for a writer to fill.
    Empty,
    /// An empty directory.
    Dir,
    /// A Linux 2.4.19 source tree.
    KernelTree,
    /// A copy of another tree set's instance, placed as `cp -a` would.
    Copy { of: String },
    /// The files of an xterm-sized application start-up.
    App,
}

/// A validated `[[files]]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct FileSetSpec {
    pub name: String,
    pub line: usize,
    pub kind: FileKind,
    pub count: u32,
    /// Place inside instance 0 of this `dir` set (default: the root).
    pub within: Option<String>,
    /// Place with this directory allocator instead of the host's.
    pub allocator: Option<Allocator>,
}

/// What a process runs.
#[derive(Clone, Debug, PartialEq)]
pub enum ProcKind {
    Cat {
        files: String,
        bs: u64,
    },
    FindCat {
        files: String,
        bs: u64,
        batch: usize,
        pipe: usize,
        stat: bool,
    },
    Dd {
        files: String,
        bs: u64,
        size: u64,
    },
    Cp {
        files: String,
        dir: Option<String>,
        bs: u64,
        sync: bool,
    },
    WriteAndFsync {
        dir: Option<String>,
        size: u64,
        fsync: bool,
    },
    AppStart {
        files: String,
    },
    Player {
        files: String,
        frame: u64,
        period: Duration,
        frames: u64,
        buffer: u64,
    },
    Tiotest {
        dir: Option<String>,
        threads: u32,
        size: u64,
        bs: u64,
        random_ops: u64,
    },
    FsyncTester {
        files: String,
        size: u64,
        interval: Duration,
        duration: Duration,
        random_writer: Option<String>,
    },
}

/// A validated `[[process]]` entry; `count` instances each report a row.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessSpec {
    pub name: String,
    pub line: usize,
    pub count: u32,
    pub kind: ProcKind,
    pub start: Duration,
    pub prio: IoPrio,
    /// Loop until the measured processes end; not measured.
    pub background: bool,
    /// The control group its requests are charged to.
    pub group: GroupId,
}

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
                out.push(instance_name(&p.name, p.count, i));
            }
        }
        out
    }
}

fn instance_name(name: &str, count: u32, i: u32) -> String {
    if count > 1 {
        format!("{name}.{i}")
    } else {
        name.to_string()
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
    raw: Option<&S<RawHost>>,
    files: &[RawFiles],
    processes: &[RawProcess],
    groups: &GroupTree,
) -> Result<Option<HostSpec>, ScenarioError> {
    if raw.is_none() && files.is_empty() && processes.is_empty() {
        return Ok(None);
    }
    let default = S::new(0..0, RawHost::default());
    let h = raw.unwrap_or(&default).get_ref();
    let params = host_params(cx, h, None)?;

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

/// The keys a process kind takes beyond name, kind, count, start, prio
/// and background.
fn allowed(kind: &str) -> &'static [&'static str] {
    match kind {
        "cat" => &["files", "bs"],
        "find-cat" => &["files", "bs", "batch", "pipe", "stat"],
        "dd" => &["files", "bs", "size"],
        "cp" => &["files", "dir", "bs", "sync"],
        "write-and-fsync" => &["dir", "size", "sync"],
        "app-start" => &["files"],
        "player" => &["files", "frame", "period", "frames", "buffer"],
        "tiotest" => &["dir", "threads", "size", "bs", "random_ops"],
        "fsync-tester" => &["files", "size", "interval", "duration", "random_writer"],
        _ => &[],
    }
}

const KINDS: &str =
    "cat, find-cat, dd, cp, write-and-fsync, app-start, player, tiotest, fsync-tester";

fn process(
    cx: &Ctx<'_>,
    p: &RawProcess,
    sets: &[FileSetSpec],
    earlier: &[ProcessSpec],
    groups: &GroupTree,
) -> Result<ProcessSpec, ScenarioError> {
    let name = p.name.get_ref().clone();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(cx.at(&p.name, "process.name", "a process name is one word"));
    }
    if earlier.iter().any(|e| e.name == name) {
        return Err(cx.at(
            &p.name,
            "process.name",
            format!("process {name:?} is declared twice"),
        ));
    }
    let kind = p.kind.get_ref().as_str();
    if allowed(kind).is_empty() {
        return Err(cx.at(
            &p.kind,
            "process.kind",
            format!("unknown kind {kind:?} ({KINDS})"),
        ));
    }
    // Keys present that this kind does not take.
    let spans: [(&str, Option<std::ops::Range<usize>>); 17] = [
        ("files", p.files.as_ref().map(|v| v.span())),
        ("dir", p.dir.as_ref().map(|v| v.span())),
        ("bs", p.bs.as_ref().map(|v| v.span())),
        ("size", p.size.as_ref().map(|v| v.span())),
        ("threads", p.threads.as_ref().map(|v| v.span())),
        ("random_ops", p.random_ops.as_ref().map(|v| v.span())),
        ("sync", p.sync.as_ref().map(|v| v.span())),
        ("frame", p.frame.as_ref().map(|v| v.span())),
        ("period", p.period.as_ref().map(|v| v.span())),
        ("frames", p.frames.as_ref().map(|v| v.span())),
        ("buffer", p.buffer.as_ref().map(|v| v.span())),
        ("interval", p.interval.as_ref().map(|v| v.span())),
        ("duration", p.duration.as_ref().map(|v| v.span())),
        ("random_writer", p.random_writer.as_ref().map(|v| v.span())),
        ("batch", p.batch.as_ref().map(|v| v.span())),
        ("pipe", p.pipe.as_ref().map(|v| v.span())),
        ("stat", p.stat.as_ref().map(|v| v.span())),
    ];
    for (key, span) in spans {
        if let Some(span) = span {
            if !allowed(kind).contains(&key) {
                return Err(ScenarioError::new(
                    cx.file,
                    Some(cx.line(span.start)),
                    Some(&format!("process.{key}")),
                    format!(
                        "`{key}` does not apply to kind {kind:?} (it takes: {})",
                        allowed(kind).join(", ")
                    ),
                ));
            }
        }
    }
    let count = match &p.count {
        Some(c) => cx.int(c, "process.count", 1, 4096)? as u32,
        None => 1,
    };
    let background = p.background.as_ref().is_some_and(|b| *b.get_ref());

    // A file set by name, of an acceptable kind, whose count fits.
    let set = |key: &str,
               v: &Option<S<String>>,
               kinds: &[&str],
               per_instance: bool|
     -> Result<String, ScenarioError> {
        let v = v.as_ref().ok_or_else(|| {
            cx.at(
                &p.kind,
                &format!("process.{key}"),
                format!("kind {kind:?} needs `{key}`"),
            )
        })?;
        let s = sets
            .iter()
            .find(|s| &s.name == v.get_ref())
            .ok_or_else(|| {
                cx.at(
                    v,
                    &format!("process.{key}"),
                    format!("no file set {:?}", v.get_ref()),
                )
            })?;
        let k = match s.kind {
            FileKind::File { .. } => "file",
            FileKind::Empty => "empty",
            FileKind::Dir => "dir",
            FileKind::KernelTree | FileKind::Copy { .. } => "tree",
            FileKind::App => "app",
        };
        if !kinds.contains(&k) {
            return Err(cx.at(
                v,
                &format!("process.{key}"),
                format!(
                    "{:?} is a {k} set; kind {kind:?} takes {}",
                    v.get_ref(),
                    kinds.join(" or ")
                ),
            ));
        }
        if per_instance && s.count != 1 && s.count != count {
            return Err(cx.at(
                v,
                &format!("process.{key}"),
                format!(
                    "{:?} has {} instances and the process {count}: give each process one (equal counts) or share one (count 1)",
                    v.get_ref(),
                    s.count
                ),
            ));
        }
        Ok(v.get_ref().clone())
    };
    let size_of = |key: &str, v: &Option<S<String>>| -> Result<Option<u64>, ScenarioError> {
        v.as_ref()
            .map(|s| cx.size(s, &format!("process.{key}")))
            .transpose()
    };
    let need = |key: &str, v: Option<u64>| -> Result<u64, ScenarioError> {
        v.ok_or_else(|| {
            cx.at(
                &p.kind,
                &format!("process.{key}"),
                format!("kind {kind:?} needs `{key}`"),
            )
        })
    };
    let nonzero = |key: &str, v: u64| -> Result<u64, ScenarioError> {
        if v == 0 {
            Err(cx.at(&p.kind, &format!("process.{key}"), "must not be zero"))
        } else {
            Ok(v)
        }
    };
    let bs = match size_of("bs", &p.bs)? {
        // At least a sector: a buffer of a few bytes turns one file into
        // hundreds of millions of system calls to simulate.
        Some(b) if !(SECTOR_SIZE..=64 << 20).contains(&b) => {
            return Err(cx.at(
                p.bs.as_ref().expect("some"),
                "process.bs",
                "between 512 bytes and 64m",
            ))
        }
        Some(b) => b,
        None => BUFFER_2003,
    };
    let dir = |v: &Option<S<String>>| -> Result<Option<String>, ScenarioError> {
        match v {
            Some(_) => Ok(Some(set("dir", v, &["dir"], false)?)),
            None => Ok(None),
        }
    };
    let int = |key: &str,
               v: &Option<S<i64>>,
               lo: i64,
               hi: i64,
               default: i64|
     -> Result<i64, ScenarioError> {
        match v {
            Some(x) => cx.int(x, &format!("process.{key}"), lo, hi),
            None => Ok(default),
        }
    };
    let dur =
        |key: &str, v: &Option<S<String>>, default: Duration| -> Result<Duration, ScenarioError> {
            match v {
                Some(x) => cx.duration(x, &format!("process.{key}")),
                None => Ok(default),
            }
        };

    let pk = match kind {
        "cat" => {
            let files = set("files", &p.files, &["file", "app"], false)?;
            let s = sets.iter().find(|s| s.name == files).expect("checked");
            if count > 1 && s.count != count && s.count != 1 {
                return Err(cx.at(
                    p.files.as_ref().expect("some"),
                    "process.files",
                    "give each cat one file (equal counts) or one set",
                ));
            }
            ProcKind::Cat { files, bs }
        }
        "find-cat" => ProcKind::FindCat {
            files: set("files", &p.files, &["tree", "dir"], true)?,
            bs,
            batch: int("batch", &p.batch, 1, 1 << 20, find_cat::XARGS_BATCH as i64)? as usize,
            pipe: int("pipe", &p.pipe, 1, 1 << 20, find_cat::PIPE_NAMES as i64)? as usize,
            stat: p.stat.as_ref().is_none_or(|s| *s.get_ref()),
        },
        "dd" => {
            let size = nonzero("size", need("size", size_of("size", &p.size)?)?)?;
            ProcKind::Dd {
                files: set("files", &p.files, &["file", "empty"], true)?,
                bs,
                size,
            }
        }
        "cp" => ProcKind::Cp {
            files: set("files", &p.files, &["file", "tree", "dir"], true)?,
            dir: dir(&p.dir)?,
            bs,
            sync: p.sync.as_ref().is_none_or(|s| *s.get_ref()),
        },
        "write-and-fsync" => ProcKind::WriteAndFsync {
            dir: dir(&p.dir)?,
            size: nonzero("size", need("size", size_of("size", &p.size)?)?)?,
            fsync: p.sync.as_ref().is_none_or(|s| *s.get_ref()),
        },
        "app-start" => ProcKind::AppStart {
            files: set("files", &p.files, &["app"], true)?,
        },
        "player" => ProcKind::Player {
            files: set("files", &p.files, &["file"], true)?,
            frame: nonzero("frame", size_of("frame", &p.frame)?.unwrap_or(16 << 10))?,
            period: dur("period", &p.period, Duration::from_millis(40))?,
            frames: int("frames", &p.frames, 1, 100_000_000, 1500)? as u64,
            buffer: int("buffer", &p.buffer, 1, 1_000_000, 1)? as u64,
        },
        "tiotest" => ProcKind::Tiotest {
            dir: dir(&p.dir)?,
            threads: int("threads", &p.threads, 1, 1024, 4)? as u32,
            size: nonzero("size", size_of("size", &p.size)?.unwrap_or(10 << 20))?,
            bs,
            random_ops: int("random_ops", &p.random_ops, 0, 100_000_000, 1000)? as u64,
        },
        "fsync-tester" => ProcKind::FsyncTester {
            files: set("files", &p.files, &["file", "empty"], true)?,
            size: nonzero("size", size_of("size", &p.size)?.unwrap_or(1 << 20))?,
            interval: dur("interval", &p.interval, Duration::from_secs(4))?,
            duration: dur("duration", &p.duration, Duration::from_secs(60))?,
            random_writer: match &p.random_writer {
                Some(_) => Some(set("random_writer", &p.random_writer, &["file"], true)?),
                None => None,
            },
        },
        _ => unreachable!("kind checked above"),
    };
    Ok(ProcessSpec {
        name,
        line: cx.line(p.name.span().start),
        count,
        kind: pk,
        start: match &p.start {
            Some(s) => cx.duration(s, "process.start")?,
            None => Duration::ZERO,
        },
        prio: match &p.prio {
            Some(x) => x
                .get_ref()
                .parse::<IoPrio>()
                .map_err(|e| cx.at(x, "process.prio", e.to_string()))?,
            None => IoPrio::default(),
        },
        background,
        group: match &p.group {
            None => GroupId::ROOT,
            Some(g) => groups.find(g.get_ref()).ok_or_else(|| {
                cx.at(
                    g,
                    "process.group",
                    format!("no group named {:?}", g.get_ref()),
                )
            })?,
        },
    })
}

/// One placed instance of a file set.
#[derive(Clone, Debug)]
struct Placed {
    top: FileId,
    files: Vec<FileId>,
    ops: Vec<AppOp>,
}

/// Build the host of `spec` for one run: the file system with its file
/// sets placed, and every process spawned. Tasks are numbered from
/// `first_task`. The file sets were on the disk before the run: they are
/// placed with `files_allocator` (the scenario's own host's) unless a set
/// names its own, whatever kernel the run's host is; files created during
/// the run use the run's host's allocator.
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
    let capacity: Sector = limits.capacity;
    // The file system is at least one block group, wherever it starts.
    let group_bytes = params.fs.blocks_per_group * params.fs.block_size;
    let fs_bytes = params.fs.size.unwrap_or(group_bytes).max(group_bytes);
    if params.fs.offset.saturating_add(fs_bytes) > capacity * SECTOR_SIZE {
        let (key, line) = if params.fs.size.is_some() {
            ("host.fs_size", spec.fs_size_line)
        } else {
            ("host.fs_offset", spec.fs_offset_line)
        };
        return Err(ScenarioError::new(
            file,
            line,
            Some(key),
            format!(
                "a file system of {fs_bytes} bytes from byte {} ends past the device ({} bytes)",
                params.fs.offset,
                capacity * SECTOR_SIZE
            ),
        ));
    }
    let host_allocator = params.fs.allocator;
    let mut host = Host::new(params, capacity, seed, first_task);
    let mut placed: BTreeMap<String, Vec<Placed>> = BTreeMap::new();
    for (n, set) in spec.files.iter().enumerate() {
        let parent = match &set.within {
            Some(w) => placed[w][0].top,
            None => FileId::ROOT,
        };
        // The process that created the set, for ext2's block colouring.
        let pid = 300 + n as u32;
        let mut out = Vec::new();
        for i in 0..set.count {
            let fs = host.fs_mut();
            let fs_bytes = fs.geo.blocks * fs.geo.block_size;
            // The sets were on the disk before the run: if they do not fit,
            // the scenario cannot start.
            let full = |_| {
                ScenarioError::new(
                    file,
                    Some(set.line),
                    Some("files"),
                    format!(
                        "file set {:?} (instance {i}) does not fit: the file system of \
                         {fs_bytes} bytes is full (see host.fs_size)",
                        set.name
                    ),
                )
            };
            fs.params.allocator = set.allocator.unwrap_or(files_allocator);
            let mut rng = Prng::derive(seed, &format!("files.{}.{i}", set.name));
            let p = match &set.kind {
                FileKind::File { size } => {
                    let f = gen::big_file(fs, parent, *size, pid).map_err(full)?;
                    Placed {
                        top: f,
                        files: vec![f],
                        ops: Vec::new(),
                    }
                }
                FileKind::Empty => {
                    let f = fs.create(parent, Kind::File, pid).map_err(full)?;
                    Placed {
                        top: f,
                        files: vec![f],
                        ops: Vec::new(),
                    }
                }
                FileKind::Dir => {
                    let d = fs.create(parent, Kind::Dir, pid).map_err(full)?;
                    Placed {
                        top: d,
                        files: Vec::new(),
                        ops: Vec::new(),
                    }
                }
                FileKind::KernelTree => {
                    let shape = TreeShape::kernel_tree(&mut rng);
                    let top = gen::place_tree(fs, parent, &shape, pid).map_err(full)?;
                    Placed {
                        top,
                        files: gen::files_under(fs, top),
                        ops: Vec::new(),
                    }
                }
                FileKind::Copy { of } => {
                    let src = &placed[of];
                    let from = src[(i as usize).min(src.len() - 1)].top;
                    let shape = gen::shape_of(fs, from);
                    let top = gen::place_tree(fs, parent, &shape, pid).map_err(full)?;
                    Placed {
                        top,
                        files: gen::files_under(fs, top),
                        ops: Vec::new(),
                    }
                }
                FileKind::App => {
                    let (top, ops) = gen::xterm_startup(fs, parent, &mut rng, pid).map_err(full)?;
                    Placed {
                        top,
                        files: gen::files_under(fs, top),
                        ops,
                    }
                }
            };
            out.push(p);
        }
        host.fs_mut().params.allocator = host_allocator;
        placed.insert(set.name.clone(), out);
    }

    let pick = |name: &str, i: u32| -> &Placed {
        let v = &placed[name];
        &v[(i as usize).min(v.len() - 1)]
    };
    for p in &spec.processes {
        for i in 0..p.count {
            let row_name = instance_name(&p.name, p.count, i);
            let row = host.add_row(&row_name, !p.background);
            let looping = p.background;
            let first_pid = host.process_count();
            match &p.kind {
                ProcKind::Cat { files, bs } => {
                    let set = &placed[files];
                    let list = if set.len() == p.count as usize && p.count > 1 {
                        set[i as usize].files.clone()
                    } else {
                        set.iter().flat_map(|x| x.files.iter().copied()).collect()
                    };
                    host.spawn(row, Box::new(Cat::new(list, *bs, looping)), p.start, p.prio);
                }
                ProcKind::FindCat {
                    files,
                    bs,
                    batch,
                    pipe,
                    stat,
                } => {
                    let top = pick(files, i).top;
                    let pipe = host.new_pipe(*pipe);
                    host.spawn(row, Box::new(Find::new(top, pipe, *stat)), p.start, p.prio);
                    host.spawn(
                        row,
                        Box::new(XargsCat::new(pipe, *batch, *bs)),
                        p.start,
                        p.prio,
                    );
                }
                ProcKind::Dd { files, bs, size } => {
                    let f = pick(files, i).top;
                    let count = size.div_ceil(*bs);
                    host.spawn(
                        row,
                        Box::new(Dd::new(f, *bs, count, looping)),
                        p.start,
                        p.prio,
                    );
                }
                ProcKind::Cp {
                    files,
                    dir,
                    bs,
                    sync,
                } => {
                    let src = pick(files, i).top;
                    let is_dir = host.fs().is_dir(src);
                    let dst = dir.as_ref().map_or(FileId::ROOT, |d| pick(d, i).top);
                    host.spawn(
                        row,
                        Box::new(Cp::new(src, is_dir, dst, *bs, *sync)),
                        p.start,
                        p.prio,
                    );
                }
                ProcKind::WriteAndFsync { dir, size, fsync } => {
                    let d = dir.as_ref().map_or(FileId::ROOT, |d| pick(d, i).top);
                    host.spawn(
                        row,
                        Box::new(WriteAndFsync::new(d, *size, *fsync)),
                        p.start,
                        p.prio,
                    );
                }
                ProcKind::AppStart { files } => {
                    let ops = pick(files, i).ops.clone();
                    host.spawn(row, Box::new(AppStart::new(ops)), p.start, p.prio);
                }
                ProcKind::Player {
                    files,
                    frame,
                    period,
                    frames,
                    buffer,
                } => {
                    let f = pick(files, i).top;
                    let program = Player::new(f, *frame, *period, *frames, *buffer, looping);
                    host.spawn(row, Box::new(program), p.start, p.prio);
                }
                ProcKind::Tiotest {
                    dir,
                    threads,
                    size,
                    bs,
                    random_ops,
                } => {
                    let d = dir.as_ref().map_or(FileId::ROOT, |d| pick(d, i).top);
                    let barrier = host.new_barrier(*threads as usize);
                    for t in 0..*threads {
                        let rng = Prng::derive(seed, &format!("{row_name}.thread{t}"));
                        let program = TiotestThread::new(d, *size, *bs, *random_ops, barrier, rng);
                        host.spawn(row, Box::new(program), p.start, p.prio);
                    }
                }
                ProcKind::FsyncTester {
                    files,
                    size,
                    interval,
                    duration,
                    random_writer,
                } => {
                    let f = pick(files, i).top;
                    host.spawn(
                        row,
                        Box::new(FsyncTester::new(f, *size, *interval, *duration)),
                        p.start,
                        p.prio,
                    );
                    if let Some(rw) = random_writer {
                        let target = pick(rw, i).top;
                        let rrow = host.add_row(&format!("{row_name}.rnd"), false);
                        let rng = Prng::derive(seed, &format!("{row_name}.rnd"));
                        host.spawn(
                            rrow,
                            Box::new(RandomWriter::new(target, rng)),
                            p.start,
                            p.prio,
                        );
                    }
                }
            }
            if p.group != GroupId::ROOT {
                for pid in first_pid..host.process_count() {
                    host.set_group(pid, p.group);
                }
            }
        }
    }
    Ok(host)
}
