//! Assembling a host for one run from a validated description: the file
//! system with its file sets placed (they were on the disk before the run),
//! then every process instance spawned by its [`ProgramType`]'s `build`.
//!
//! The scenario crate parses and checks `[host]`, `[[files]]` and
//! `[[process]]` into [`FileSet`]s and [`ProcessSet`]s; it knows program
//! kinds only through the registry ([`crate::process::registry`]). What
//! needs the device (the file system's place, sets that must fit) is checked
//! here and reported as a [`SetupError`] naming the key or the set's line.
//!
//! Invariant: with its input validated, `build` fails only on the device
//! (too small for the file system or the sets), never on a program.

use crate::fs::gen::{self, TreeShape};
use crate::fs::{FileId, Kind};
use crate::params::{Allocator, HostParams};
use crate::process::registry::{Args, Instance, Placed, ProgramType, SetKind};
use crate::Host;
use elevator_core::{Duration, GroupId, IoPrio, Prng, Sector, SECTOR_SIZE};
use std::collections::BTreeMap;

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

impl FileKind {
    /// The kind programs ask for.
    pub fn set_kind(&self) -> SetKind {
        match self {
            FileKind::File { .. } => SetKind::File,
            FileKind::Empty => SetKind::Empty,
            FileKind::Dir => SetKind::Dir,
            FileKind::KernelTree | FileKind::Copy { .. } => SetKind::Tree,
            FileKind::App => SetKind::App,
        }
    }
}

/// A `[[files]]` entry: `count` instances of `kind`.
#[derive(Clone, Debug, PartialEq)]
pub struct FileSet {
    pub name: String,
    /// The line that declared it, for errors found when the device is known.
    pub line: usize,
    pub kind: FileKind,
    pub count: u32,
    /// Place inside instance 0 of this `dir` set (default: the root).
    pub within: Option<String>,
    /// Place with this directory allocator instead of the host's.
    pub allocator: Option<Allocator>,
}

/// A `[[process]]` entry: `count` instances of a program, each a report row.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessSet {
    pub name: String,
    pub line: usize,
    pub count: u32,
    pub program: &'static ProgramType,
    pub args: Args,
    pub start: Duration,
    pub prio: IoPrio,
    /// Loop until the measured processes end; not measured.
    pub background: bool,
    /// The control group its requests are charged to.
    pub group: GroupId,
}

impl ProcessSet {
    /// Report-row name of instance `i`.
    pub fn instance_name(&self, i: u32) -> String {
        if self.count > 1 {
            format!("{}.{i}", self.name)
        } else {
            self.name.clone()
        }
    }
}

/// The device cannot hold what the scenario put on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetupError {
    /// The file system ends past the device; `key` is `host.fs_size` when
    /// the size was given, else `host.fs_offset`.
    FsPastDevice { key: &'static str, message: String },
    /// A file set does not fit in the file system.
    SetDoesNotFit { line: usize, message: String },
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetupError::FsPastDevice { message, .. }
            | SetupError::SetDoesNotFit { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for SetupError {}

/// Build the host for one run: `params` on a device of `capacity` sectors,
/// with `files` placed and `processes` spawned. Tasks are numbered from
/// `first_task`. The file sets were on the disk before the run: they are
/// placed with `files_allocator` (the scenario's own host's) unless a set
/// names its own, whatever kernel the run's host is; files created during
/// the run use the run's host's allocator.
pub fn build(
    params: HostParams,
    capacity: Sector,
    files: &[FileSet],
    processes: &[ProcessSet],
    seed: u64,
    first_task: u32,
    files_allocator: Allocator,
) -> Result<Host, SetupError> {
    // The file system is at least one block group, wherever it starts.
    let group_bytes = params.fs.blocks_per_group * params.fs.block_size;
    let fs_bytes = params.fs.size.unwrap_or(group_bytes).max(group_bytes);
    if params.fs.offset.saturating_add(fs_bytes) > capacity * SECTOR_SIZE {
        let key = if params.fs.size.is_some() {
            "host.fs_size"
        } else {
            "host.fs_offset"
        };
        return Err(SetupError::FsPastDevice {
            key,
            message: format!(
                "a file system of {fs_bytes} bytes from byte {} ends past the device ({} bytes)",
                params.fs.offset,
                capacity * SECTOR_SIZE
            ),
        });
    }
    let host_allocator = params.fs.allocator;
    let mut host = Host::new(params, capacity, seed, first_task);
    let mut placed: BTreeMap<String, Vec<Placed>> = BTreeMap::new();
    for (n, set) in files.iter().enumerate() {
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
            let full = |_| SetupError::SetDoesNotFit {
                line: set.line,
                message: format!(
                    "file set {:?} (instance {i}) does not fit: the file system of \
                     {fs_bytes} bytes is full (see host.fs_size)",
                    set.name
                ),
            };
            fs.params.allocator = set.allocator.unwrap_or(files_allocator);
            let mut rng = Prng::derive(seed, &format!("files.{}.{i}", set.name));
            let one = |top| Placed {
                top,
                files: vec![top],
                ops: Vec::new(),
            };
            let p = match &set.kind {
                FileKind::File { size } => {
                    one(gen::big_file(fs, parent, *size, pid).map_err(full)?)
                }
                FileKind::Empty => one(fs.create(parent, Kind::File, pid).map_err(full)?),
                FileKind::Dir => Placed {
                    top: fs.create(parent, Kind::Dir, pid).map_err(full)?,
                    files: Vec::new(),
                    ops: Vec::new(),
                },
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

    for p in processes {
        for i in 0..p.count {
            let row_name = p.instance_name(i);
            let row = host.add_row(&row_name, !p.background);
            let first_pid = host.process_count();
            let mut at = Instance {
                host: &mut host,
                sets: &placed,
                row,
                row_name: &row_name,
                index: i,
                count: p.count,
                start: p.start,
                prio: p.prio,
                looping: p.background,
                seed,
            };
            (p.program.build)(&p.args, &mut at);
            if p.group != GroupId::ROOT {
                for pid in first_pid..host.process_count() {
                    host.set_group(pid, p.group);
                }
            }
        }
    }
    Ok(host)
}
