//! The file systems a host can mount, registered as policies are.
//!
//! Each file system is one module and one entry here: a [`FileSystemType`]
//! (a `const` below and its line in [`FILE_SYSTEMS`]) gives its name, the
//! mount options it takes and a `build` that validates them into a
//! [`FsType`]: the plain data that [`HostParams`](crate::HostParams)
//! carries, naming the file system and choosing what the host does for it
//! from the mechanisms the host has: block allocation ([`Alloc`]: ext2's
//! preallocation or ext3's reservation windows) and what comes on top of
//! ext2's layout ([`Layer`]: nothing, jbd's journal, or nilfs2's log).
//! A file system made of those needs no host code (the toy in
//! `tests/filesystems.rs` is one registry entry); a new mechanism (a
//! journal of another kind, copy-on-write) is host code in `host/`
//! beside `host/layers.rs`.
//!
//! The scenario crate only looks names up here (`[host] fs = "ext3"`,
//! `mount = "data=writeback,commit=5"`), so the errors a user sees are the
//! ones written below.
//!
//! Invariant: `ext2` with no options is [`FsType::default`] (preallocation,
//! no layer), the host of the 2003 experiments, whose behaviour no other
//! file system's code touches.

use super::ext3::{self, Ext3Options};
use super::nilfs2::{self, Nilfs2Options};

/// Which file system a host runs: its name and, from its validated mount
/// options, the host mechanisms it uses.
#[derive(Clone, Debug, PartialEq)]
pub struct FsType {
    /// The registered name.
    pub name: &'static str,
    pub alloc: Alloc,
    pub layer: Layer,
}

impl Default for FsType {
    /// ext2, the 2003 host's file system.
    fn default() -> Self {
        FsType {
            name: "ext2",
            alloc: Alloc::Prealloc,
            layer: Layer::Plain,
        }
    }
}

impl FsType {
    /// The registered name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// How data blocks of a regular file are allocated ([`super::alloc`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Alloc {
    /// ext2's 8-block preallocation per open file.
    #[default]
    Prealloc,
    /// ext3's per-inode reservation windows ([`super::ext3`]).
    Reservations,
}

/// What the host adds on top of ext2's layout.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Layer {
    /// Nothing: metadata and data are written home by writeback and fsync.
    #[default]
    Plain,
    /// jbd's journal: metadata (and with `data=journal` data) committed by
    /// kjournald ([`super::ext3`]).
    Journal(Ext3Options),
    /// A log: segctord appends every dirty block to segments
    /// ([`super::nilfs2`]).
    Log(Nilfs2Options),
}

/// One mount option, `key=value` (`value` empty for a bare `key`).
pub type MountOption<'a> = (&'a str, &'a str);

/// A file system the host can mount (after the kernel's
/// `struct file_system_type`: a name and a way to mount it).
#[derive(Clone, Copy, Debug)]
pub struct FileSystemType {
    pub name: &'static str,
    /// One line for `elevator list`.
    pub about: &'static str,
    /// The mount options it takes, `key=DEFAULT|other|values`.
    pub keys: &'static [&'static str],
    /// Validate `mount` options (`key=value` pairs split at commas).
    pub build: fn(&[MountOption<'_>]) -> Result<FsType, String>,
}

fn build_ext2(options: &[(&str, &str)]) -> Result<FsType, String> {
    match options.first() {
        None => Ok(FsType::default()),
        Some((k, _)) => Err(format!("ext2 takes no mount options here (got {k:?})")),
    }
}

/// ext2 as the 2003 host ran it.
pub const EXT2: FileSystemType = FileSystemType {
    name: "ext2",
    about: "ext2-like block groups, Orlov directories, in-line indirect blocks (the 2003 host)",
    keys: &[],
    build: build_ext2,
};

/// ext3 (`super::ext3`): its module validates the options; the registry
/// line is here, so that the module needs nothing of the registry.
pub const EXT3: FileSystemType = FileSystemType {
    name: "ext3",
    about: "ext2's layout with jbd's journal: kjournald commits, data=ordered|writeback|journal",
    keys: &["data=writeback|ordered|journal", "commit=5"],
    build: |options| {
        ext3::parse_options(options).map(|o| FsType {
            name: "ext3",
            alloc: Alloc::Reservations,
            layer: Layer::Journal(o),
        })
    },
};

/// nilfs2 (`super::nilfs2`), likewise.
pub const NILFS2: FileSystemType = FileSystemType {
    name: "nilfs2",
    about: "log-structured: segctord appends dirty blocks to 8 MiB segments, reads follow",
    keys: &["blocks_per_segment=2048"],
    build: |options| {
        nilfs2::parse_options(options).map(|o| FsType {
            name: "nilfs2",
            alloc: Alloc::Prealloc,
            layer: Layer::Log(o),
        })
    },
};

/// Every registered file system.
pub const FILE_SYSTEMS: &[FileSystemType] = &[EXT2, EXT3, NILFS2];

/// The file system called `name`.
pub fn lookup(name: &str) -> Option<&'static FileSystemType> {
    FILE_SYSTEMS.iter().find(|t| t.name == name)
}

/// Mount `name` with `options` (`"data=writeback,commit=5"`, or empty):
/// the [`FsType`] or an error naming the option at fault.
pub fn mount(name: &str, options: &str) -> Result<FsType, String> {
    mount_with(FILE_SYSTEMS, name, options)
}

/// [`mount`] with the file systems of `file_systems` (a test's registry
/// with a toy).
pub fn mount_with(
    file_systems: &[FileSystemType],
    name: &str,
    options: &str,
) -> Result<FsType, String> {
    let Some(t) = file_systems.iter().find(|t| t.name == name) else {
        let names: Vec<&str> = file_systems.iter().map(|t| t.name).collect();
        return Err(format!(
            "unknown file system {name:?} ({})",
            names.join(", ")
        ));
    };
    let mut pairs = Vec::new();
    for opt in options.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = opt.split_once('=').unwrap_or((opt, ""));
        if pairs.iter().any(|(seen, _)| *seen == k) {
            return Err(format!("mount option {k:?} given twice"));
        }
        pairs.push((k, v));
    }
    (t.build)(&pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_and_bad_options_name_themselves() {
        assert_eq!(mount("ext2", ""), Ok(FsType::default()));
        let ext3 = mount("ext3", "data=journal").unwrap();
        assert!(matches!(ext3.layer, Layer::Journal(_)) && ext3.alloc == Alloc::Reservations);
        assert!(matches!(mount("nilfs2", "").unwrap().layer, Layer::Log(_)));
        let e = mount("ext3", "data=sloppy").unwrap_err();
        assert!(e.contains("data") && e.contains("sloppy"), "{e}");
        let e = mount("ext3", "commit=0").unwrap_err();
        assert!(e.contains("commit"), "{e}");
        let e = mount("xfs", "").unwrap_err();
        assert!(e.contains("ext2, ext3, nilfs2"), "{e}");
        assert!(mount("ext3", "data=ordered,data=journal").is_err());
        assert!(mount("ext2", "data=ordered").is_err());
    }
}
