//! The file systems a host can mount, registered as policies are.
//!
//! Each file system is one module and one line of [`FILE_SYSTEMS`]: a
//! [`FileSystemType`] gives its name, the mount options it takes and a
//! `build` that validates them into a [`FsType`], the plain-data choice
//! that [`HostParams`](crate::HostParams) carries and the host acts on.
//! The scenario crate only looks names up here (`[host] fs = "ext3"`,
//! `mount = "data=writeback,commit=5"`), so the errors a user sees are the
//! ones written below.
//!
//! Invariant: `ext2` with no options is [`FsType::Ext2`], the host of the
//! 2003 experiments, whose behaviour no other file system's code touches.

use super::ext3::{self, Ext3Options};
use super::nilfs2::{self, Nilfs2Options};

/// Which file system a host runs, with its validated mount options.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum FsType {
    /// The ext2-like file system of the 2003 host (no journal).
    #[default]
    Ext2,
    /// ext3: ext2's layout plus jbd's journal ([`super::ext3`]).
    Ext3(Ext3Options),
    /// nilfs2: log-structured placement ([`super::nilfs2`]).
    Nilfs2(Nilfs2Options),
}

impl FsType {
    /// The registered name.
    pub fn name(&self) -> &'static str {
        match self {
            FsType::Ext2 => "ext2",
            FsType::Ext3(_) => "ext3",
            FsType::Nilfs2(_) => "nilfs2",
        }
    }
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
        None => Ok(FsType::Ext2),
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
    build: |options| ext3::parse_options(options).map(FsType::Ext3),
};

/// nilfs2 (`super::nilfs2`), likewise.
pub const NILFS2: FileSystemType = FileSystemType {
    name: "nilfs2",
    about: "log-structured: segctord appends dirty blocks to 8 MiB segments, reads follow",
    keys: &["blocks_per_segment=2048"],
    build: |options| nilfs2::parse_options(options).map(FsType::Nilfs2),
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
    let Some(t) = lookup(name) else {
        let names: Vec<&str> = FILE_SYSTEMS.iter().map(|t| t.name).collect();
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
        assert_eq!(mount("ext2", ""), Ok(FsType::Ext2));
        assert!(matches!(mount("ext3", "data=journal"), Ok(FsType::Ext3(_))));
        assert!(matches!(mount("nilfs2", ""), Ok(FsType::Nilfs2(_))));
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
