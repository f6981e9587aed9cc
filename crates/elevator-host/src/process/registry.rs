//! The registry of program kinds: what a `[[process]]` section may name.
//!
//! A [`ProgramType`] is to a host program what the scheduler registry's
//! `SchedulerType` is to a policy (itself after the kernel's
//! `elevator_type`): a name, the keys the program takes with their types and
//! defaults, and a `build` that spawns one instance's processes on a host.
//! The scenario crate reads a section's keys by these descriptions, checks
//! them (ranges, file-set kinds and counts) and hands the typed [`Args`] to
//! [`crate::setup::build`], which calls `build`. Adding a program kind is
//! its module under `process/` with a `pub const TYPE: ProgramType` and one
//! line in `PROGRAMS` (`process/programs.rs`, a file of its own so that the
//! programs, which use the types here, and their list import no circle).
//!
//! Invariant: `build` cannot fail. Everything it reads was checked against
//! `keys` when the scenario was parsed (every declared key has a value or
//! was declared optional; every file set exists, has an accepted kind and a
//! count the [`Share`] rule allows).

use crate::fs::gen::AppOp;
use crate::fs::FileId;
use crate::host::Host;
use crate::syscall::Program;
use elevator_core::{Duration, IoPrio, Prng, SECTOR_SIZE};
use std::collections::BTreeMap;

/// What kind of file set a `[[files]]` entry is, as programs ask for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetKind {
    /// One regular file with data.
    File,
    /// One empty regular file.
    Empty,
    /// An empty directory.
    Dir,
    /// A directory tree (a kernel tree or a copy of one).
    Tree,
    /// An application's start-up files and its recorded operations.
    App,
}

impl SetKind {
    pub fn name(self) -> &'static str {
        match self {
            SetKind::File => "file",
            SetKind::Empty => "empty",
            SetKind::Dir => "dir",
            SetKind::Tree => "tree",
            SetKind::App => "app",
        }
    }
}

/// How the instances of a process share a file set's instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    /// Each process instance takes its own set instance (equal counts), or
    /// all take the one instance of a set of count 1.
    PerInstance,
    /// Process instance `i` takes set instance `min(i, count - 1)`.
    Any,
    /// Like `PerInstance`, and a single process takes every instance
    /// (`cat` of several files).
    PerInstanceOrAll,
}

/// The type of a key's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    /// A byte count written with units (`4k`, `80m`), within `min..=max`.
    Size { min: u64, max: u64 },
    /// An integer within `min..=max`.
    Int { min: i64, max: i64 },
    /// `true` or `false`.
    Bool,
    /// A time written with units (`40ms`, `4s`).
    Time,
    /// The name of a `[[files]]` set of one of `kinds`.
    Files {
        kinds: &'static [SetKind],
        share: Share,
    },
}

/// A checked value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Size(u64),
    Int(i64),
    Bool(bool),
    Time(Duration),
    Files(String),
}

/// What a key is when the section leaves it out.
#[derive(Clone, Debug, PartialEq)]
pub enum Default {
    /// The section must give it.
    Required,
    /// It stays absent (`Args::files_opt`).
    Absent,
    /// This value.
    Size(u64),
    Int(i64),
    Bool(bool),
    Time(Duration),
}

/// One key a program kind takes.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    pub name: &'static str,
    pub ty: KeyType,
    pub default: Default,
}

/// The buffer size of `read(2)`/`write(2)` calls, shared by the programs
/// that take `bs`: at least a sector (a buffer of a few bytes turns one
/// file into hundreds of millions of system calls to simulate), at most
/// 64 MiB, by default 2003's `st_blksize` ([`super::BUFFER_2003`]).
pub const BS: Key = Key {
    name: "bs",
    ty: KeyType::Size {
        min: SECTOR_SIZE,
        max: 64 << 20,
    },
    default: Default::Size(super::BUFFER_2003),
};

/// A byte count of at least one byte (`size`, `frame`), written with
/// units.
pub const fn bytes(name: &'static str, default: Default) -> Key {
    Key {
        name,
        ty: KeyType::Size {
            min: 1,
            max: u64::MAX,
        },
        default,
    }
}

/// The `[[files]]` set a program works on (`files`), one set per instance,
/// of one of `kinds`.
pub const fn files(kinds: &'static [SetKind]) -> Key {
    Key {
        name: "files",
        ty: KeyType::Files {
            kinds,
            share: Share::PerInstance,
        },
        default: Default::Required,
    }
}

/// A yes/no switch (`sync`, `stat`).
pub const fn flag(name: &'static str, default: bool) -> Key {
    Key {
        name,
        ty: KeyType::Bool,
        default: Default::Bool(default),
    }
}

/// Where a program puts the files it creates: a `[[files]]` directory
/// set, the file system's root when left out.
pub const DIR: Key = Key {
    name: "dir",
    ty: KeyType::Files {
        kinds: &[SetKind::Dir],
        share: Share::Any,
    },
    default: Default::Absent,
};

/// A program kind.
pub struct ProgramType {
    /// The name `[[process]] kind` gives.
    pub name: &'static str,
    /// One line for `elevator list`: the command it models.
    pub about: &'static str,
    /// The keys it takes beyond `name`, `kind`, `count`, `start`, `prio`,
    /// `background` and `group`.
    pub keys: &'static [Key],
    /// The key holding a wake-up period, if it has one (checked against the
    /// time limit for the number of wake-ups).
    pub period: Option<&'static str>,
    /// How many processes one instance spawns.
    pub tasks: fn(&Args) -> u64,
    /// Spawn one instance.
    pub build: fn(&Args, &mut Instance<'_>),
}

impl std::fmt::Debug for ProgramType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgramType")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ProgramType {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Key {
    /// The key as `elevator list` shows it: `name`, `name=DEFAULT`, or
    /// `name!` when the section must give it.
    pub fn describe(&self) -> String {
        let bytes = |n: u64| {
            for (unit, shift) in [("g", 30), ("m", 20), ("k", 10)] {
                if n >= 1 << shift && n % (1 << shift) == 0 {
                    return format!("{}{unit}", n >> shift);
                }
            }
            n.to_string()
        };
        match &self.default {
            Default::Required => format!("{}!", self.name),
            Default::Absent => self.name.to_string(),
            Default::Size(n) => format!("{}={}", self.name, bytes(*n)),
            Default::Int(n) => format!("{}={n}", self.name),
            Default::Bool(b) => format!("{}={b}", self.name),
            Default::Time(d) if d.0 % 1_000_000_000 == 0 => {
                format!("{}={}s", self.name, d.0 / 1_000_000_000)
            }
            Default::Time(d) => format!("{}={}ms", self.name, d.0 / 1_000_000),
        }
    }
}

impl ProgramType {
    /// The key named `name`.
    pub fn key(&self, name: &str) -> Option<&'static Key> {
        self.keys.iter().find(|k| k.name == name)
    }
}

/// A program's checked keys: every key of its type with a value, except
/// optional ones left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Args {
    values: BTreeMap<&'static str, Value>,
}

impl Args {
    /// Set `key` (the scenario parser, after checking the value).
    pub fn insert(&mut self, key: &'static str, value: Value) {
        self.values.insert(key, value);
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    fn value(&self, key: &str) -> &Value {
        self.values
            .get(key)
            .unwrap_or_else(|| panic!("key {key:?} was not checked into the arguments"))
    }

    /// A `Size` key's bytes.
    pub fn size(&self, key: &str) -> u64 {
        match self.value(key) {
            Value::Size(v) => *v,
            other => panic!("key {key:?} is {other:?}, not a size"),
        }
    }

    pub fn int(&self, key: &str) -> i64 {
        match self.value(key) {
            Value::Int(v) => *v,
            other => panic!("key {key:?} is {other:?}, not an integer"),
        }
    }

    pub fn flag(&self, key: &str) -> bool {
        match self.value(key) {
            Value::Bool(v) => *v,
            other => panic!("key {key:?} is {other:?}, not a flag"),
        }
    }

    pub fn time(&self, key: &str) -> Duration {
        match self.value(key) {
            Value::Time(v) => *v,
            other => panic!("key {key:?} is {other:?}, not a time"),
        }
    }

    /// A `Files` key that may be absent.
    pub fn files_opt(&self, key: &str) -> Option<&str> {
        match self.values.get(key) {
            None => None,
            Some(Value::Files(s)) => Some(s),
            Some(other) => panic!("key {key:?} is {other:?}, not a file set"),
        }
    }

    /// A required `Files` key.
    pub fn files(&self, key: &str) -> &str {
        self.files_opt(key)
            .unwrap_or_else(|| panic!("key {key:?} was not checked into the arguments"))
    }
}

/// One placed instance of a file set.
#[derive(Clone, Debug)]
pub struct Placed {
    /// The file or the top directory.
    pub top: FileId,
    /// The regular files in it.
    pub files: Vec<FileId>,
    /// An application's recorded start-up operations.
    pub ops: Vec<AppOp>,
}

/// Where one process instance is built: the host, the placed file sets and
/// the instance's row, start, priority and seed.
pub struct Instance<'a> {
    pub host: &'a mut Host,
    pub(crate) sets: &'a BTreeMap<String, Vec<Placed>>,
    /// Its report row.
    pub row: usize,
    /// The row's name (`name` or `name.i`), which labels its random streams.
    pub row_name: &'a str,
    /// Which instance of `count`.
    pub index: u32,
    pub count: u32,
    pub start: Duration,
    pub prio: IoPrio,
    /// A background process loops until the measured ones end.
    pub looping: bool,
    pub seed: u64,
}

impl std::fmt::Debug for Instance<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("row_name", &self.row_name)
            .field("index", &self.index)
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

impl Instance<'_> {
    /// Spawn `program` in this instance's row.
    pub fn spawn(&mut self, program: Box<dyn Program>) {
        self.host.spawn(self.row, program, self.start, self.prio);
    }

    /// Spawn `program` in another row (a helper process reported apart).
    pub fn spawn_in(&mut self, row: usize, program: Box<dyn Program>) {
        self.host.spawn(row, program, self.start, self.prio);
    }

    /// This instance's share of `set` (by `Share::Any`'s rule, which the
    /// stricter rules imply).
    pub fn pick(&self, set: &str) -> &Placed {
        let v = &self.sets[set];
        &v[(self.index as usize).min(v.len() - 1)]
    }

    /// The top of this instance's share of `set`.
    pub fn top(&self, set: &str) -> FileId {
        self.pick(set).top
    }

    /// The directory set `set`'s top, or the root if none is given.
    pub fn dir_or_root(&self, set: Option<&str>) -> FileId {
        set.map_or(FileId::ROOT, |d| self.top(d))
    }

    /// `Share::PerInstanceOrAll`: this instance's files, or every file of
    /// every instance for a single process (or a set of count 1).
    pub fn files_of(&self, set: &str) -> Vec<FileId> {
        let v = &self.sets[set];
        if v.len() == self.count as usize && self.count > 1 {
            v[self.index as usize].files.clone()
        } else {
            v.iter().flat_map(|x| x.files.iter().copied()).collect()
        }
    }

    /// A random stream of its own, labelled `label` under the run's seed.
    pub fn rng(&self, label: &str) -> Prng {
        Prng::derive(self.seed, label)
    }
}

/// `tasks` for programs that spawn one process.
pub fn one_task(_: &Args) -> u64 {
    1
}
