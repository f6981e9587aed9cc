//! Opening what the runtime reads and writes, safely.
//!
//! Rules: only the path named is touched. A block device is refused when it
//! (or one of its partitions) is mounted, is swap, or has holders (dm, md),
//! and it is opened with `O_EXCL`, so the kernel refuses it too while
//! anything claims it. Writing needs `allow_write`; without it the target is
//! opened read-only. Nothing is created without `allow_write`: a file
//! target that does not exist is created at the requested size only with
//! it, and never under `/dev` (a missing device is an error, not a file);
//! an existing file is never grown or truncated without it.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// How to open a target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// O_DIRECT (aligned buffers; bypasses the page cache).
    pub direct: bool,
    /// The workload writes.
    pub writes: bool,
    /// The user said `--allow-write`.
    pub allow_write: bool,
    /// Bytes the workload needs (a file target is created this large).
    pub size: u64,
}

/// An open target and its size in bytes.
#[derive(Debug)]
pub struct Target {
    pub file: File,
    pub path: PathBuf,
    pub bytes: u64,
    pub block_device: bool,
}

/// Why a target was refused.
#[derive(Debug)]
pub enum TargetError {
    WriteNotAllowed {
        path: PathBuf,
    },
    Mounted {
        path: PathBuf,
        at: String,
    },
    InUse {
        path: PathBuf,
        why: String,
    },
    TooSmall {
        path: PathBuf,
        bytes: u64,
        needed: u64,
    },
    NotFileOrDevice {
        path: PathBuf,
    },
    /// The target does not exist and may not be created.
    Missing {
        path: PathBuf,
        size: u64,
    },
    /// A missing path under `/dev`: never created.
    UnderDev {
        path: PathBuf,
    },
    Io {
        path: PathBuf,
        error: io::Error,
    },
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetError::WriteNotAllowed { path } => write!(
                f,
                "{}: the job writes; refusing without --allow-write",
                path.display()
            ),
            TargetError::Mounted { path, at } => {
                write!(
                    f,
                    "{}: mounted at {at}; refusing to touch it",
                    path.display()
                )
            }
            TargetError::InUse { path, why } => {
                write!(
                    f,
                    "{}: in use ({why}); refusing to touch it",
                    path.display()
                )
            }
            TargetError::TooSmall {
                path,
                bytes,
                needed,
            } => write!(
                f,
                "{}: {bytes} bytes, the job needs {needed} (--allow-write lets a file grow)",
                path.display()
            ),
            TargetError::NotFileOrDevice { path } => {
                write!(
                    f,
                    "{}: neither a regular file nor a block device",
                    path.display()
                )
            }
            TargetError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            TargetError::Missing { path, size } => write!(
                f,
                "{}: does not exist; creating it ({size} bytes) writes: refusing without \
                 --allow-write",
                path.display()
            ),
            TargetError::UnderDev { path } => write!(
                f,
                "{}: no such device; nothing is ever created under /dev",
                path.display()
            ),
        }
    }
}

impl std::error::Error for TargetError {}

/// Open `path` for the runtime under the rules above.
pub fn open(path: &Path, access: Access) -> Result<Target, TargetError> {
    let io_err = |error| TargetError::Io {
        path: path.to_path_buf(),
        error,
    };
    if access.writes && !access.allow_write {
        return Err(TargetError::WriteNotAllowed {
            path: path.to_path_buf(),
        });
    }
    let mut flags = 0;
    if access.direct {
        flags |= libc::O_DIRECT;
    }
    let meta = match std::fs::metadata(path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(e)),
    };
    match meta {
        None if under_dev(path) => Err(TargetError::UnderDev {
            path: path.to_path_buf(),
        }),
        None if !access.allow_write => Err(TargetError::Missing {
            path: path.to_path_buf(),
            size: access.size,
        }),
        None => {
            // A new file at the requested size: named by the user, so ours.
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .custom_flags(flags)
                .open(path)
                .map_err(io_err)?;
            file.set_len(access.size).map_err(io_err)?;
            Ok(Target {
                file,
                path: path.to_path_buf(),
                bytes: access.size,
                block_device: false,
            })
        }
        Some(m) if m.file_type().is_block_device() => {
            let mounts = std::fs::read_to_string("/proc/self/mounts").map_err(io_err)?;
            let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
            check_block_device(path, m.rdev(), &mounts, &swaps)?;
            let file = OpenOptions::new()
                .read(true)
                .write(access.writes)
                .custom_flags(flags | libc::O_EXCL)
                .open(path)
                .map_err(|e| {
                    if e.raw_os_error() == Some(libc::EBUSY) {
                        TargetError::InUse {
                            path: path.to_path_buf(),
                            why: "the kernel says busy (O_EXCL)".into(),
                        }
                    } else {
                        io_err(e)
                    }
                })?;
            let bytes = device_bytes(&file).map_err(io_err)?;
            if bytes < access.size {
                return Err(TargetError::TooSmall {
                    path: path.to_path_buf(),
                    bytes,
                    needed: access.size,
                });
            }
            Ok(Target {
                file,
                path: path.to_path_buf(),
                bytes,
                block_device: true,
            })
        }
        Some(m) if m.file_type().is_file() => {
            let file = OpenOptions::new()
                .read(true)
                .write(access.writes)
                .custom_flags(flags)
                .open(path)
                .map_err(io_err)?;
            let mut bytes = m.len();
            if bytes < access.size {
                if !access.allow_write {
                    return Err(TargetError::TooSmall {
                        path: path.to_path_buf(),
                        bytes,
                        needed: access.size,
                    });
                }
                file.set_len(access.size).map_err(io_err)?;
                bytes = access.size;
            }
            Ok(Target {
                file,
                path: path.to_path_buf(),
                bytes,
                block_device: false,
            })
        }
        Some(_) => Err(TargetError::NotFileOrDevice {
            path: path.to_path_buf(),
        }),
    }
}

/// Whether `path` is under `/dev` (as written, or once its directory is
/// resolved).
pub fn under_dev(path: &Path) -> bool {
    if path.starts_with("/dev") {
        return true;
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::canonicalize(dir).is_ok_and(|d| d.starts_with("/dev"))
}

/// Open `/dev/null` or `/dev/zero` (I/O that reaches no device): the one
/// kind of character device a job may name.
pub fn open_null(path: &Path, writes: bool) -> Result<Target, TargetError> {
    let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if canon != Path::new("/dev/null") && canon != Path::new("/dev/zero") {
        return Err(TargetError::NotFileOrDevice {
            path: path.to_path_buf(),
        });
    }
    let file = OpenOptions::new()
        .read(true)
        .write(writes)
        .open(path)
        .map_err(|error| TargetError::Io {
            path: path.to_path_buf(),
            error,
        })?;
    Ok(Target {
        file,
        path: path.to_path_buf(),
        bytes: u64::MAX / 4,
        block_device: false,
    })
}

/// The size of an open block device (seeking to its end needs no ioctl).
fn device_bytes(file: &File) -> io::Result<u64> {
    use std::io::Seek;
    let mut f = file;
    let end = f.seek(io::SeekFrom::End(0))?;
    f.seek(io::SeekFrom::Start(0))?;
    Ok(end)
}

/// Refuse `path` if it is a block device that is mounted, active swap or
/// held (as [`check_block_device`] says); anything else passes. For callers
/// that must refuse before they look further (a job file's plan reads a
/// device's size, which a mounted disk must not even be opened for).
pub fn refuse_in_use(path: &Path) -> Result<(), TargetError> {
    let Ok(m) = std::fs::metadata(path) else {
        return Ok(());
    };
    if !m.file_type().is_block_device() {
        return Ok(());
    }
    let mounts = std::fs::read_to_string("/proc/self/mounts").map_err(|error| TargetError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    check_block_device(path, m.rdev(), &mounts, &swaps)
}

/// Refuse the block device `rdev` (at `path`) if it or one of its
/// partitions is mounted according to `mounts` (the text of
/// /proc/self/mounts), is active swap according to `swaps` (/proc/swaps),
/// or has holders in sysfs. A mount's device is the `st_dev` of its mount
/// point, so this holds for any name the device was mounted by.
pub fn check_block_device(
    path: &Path,
    rdev: u64,
    mounts: &str,
    swaps: &str,
) -> Result<(), TargetError> {
    let mut devices = vec![rdev];
    devices.extend(partitions(rdev));
    for line in mounts.lines() {
        let mut fields = line.split_whitespace();
        let (Some(_source), Some(at), Some(fstype)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        // Network and FUSE mounts have no block device, and stat on a dead
        // server can hang.
        if fstype.starts_with("nfs") || fstype.starts_with("fuse") || fstype == "cifs" {
            continue;
        }
        let at = unescape_mount(at);
        if let Ok(m) = std::fs::metadata(&at) {
            if devices.contains(&m.dev()) {
                return Err(TargetError::Mounted {
                    path: path.to_path_buf(),
                    at,
                });
            }
        }
    }
    for line in swaps.lines().skip(1) {
        if let Some(source) = line.split_whitespace().next() {
            if let Ok(m) = std::fs::metadata(source) {
                if m.file_type().is_block_device() && devices.contains(&m.rdev()) {
                    return Err(TargetError::InUse {
                        path: path.to_path_buf(),
                        why: format!("swap on {source}"),
                    });
                }
            }
        }
    }
    for dev in &devices {
        let holders = format!("/sys/dev/block/{}:{}/holders", major(*dev), minor(*dev));
        if let Ok(mut dir) = std::fs::read_dir(&holders) {
            if let Some(Ok(h)) = dir.next() {
                return Err(TargetError::InUse {
                    path: path.to_path_buf(),
                    why: format!("held by {}", h.file_name().to_string_lossy()),
                });
            }
        }
    }
    Ok(())
}

/// The device numbers of the partitions of disk `rdev`, from sysfs.
fn partitions(rdev: u64) -> Vec<u64> {
    let dir = format!("/sys/dev/block/{}:{}", major(rdev), minor(rdev));
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.path().join("partition").exists())
        .filter_map(|e| std::fs::read_to_string(e.path().join("dev")).ok())
        .filter_map(|s| {
            let (a, b) = s.trim().split_once(':')?;
            Some(makedev(a.parse().ok()?, b.parse().ok()?))
        })
        .collect()
}

/// /proc/mounts escapes space, tab, newline and backslash as octal.
fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

// glibc's encoding of dev_t (sys/sysmacros.h).
fn major(dev: u64) -> u64 {
    ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff)
}

fn minor(dev: u64) -> u64 {
    ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff)
}

fn makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xffff_f000) << 32)
        | ((major & 0x0000_0fff) << 8)
        | ((minor & 0xffff_ff00) << 12)
        | (minor & 0x0000_00ff)
}
