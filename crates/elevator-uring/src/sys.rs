//! The few system calls a job file's run needs besides I/O: resource
//! usage (fio's `usr_cpu`, `sys_cpu`, `ctx`, `majf`, `minf`), block
//! allocation for a laid-out file (`fallocate`, fio's default
//! `fallocate=native`), dropping a file's cached pages (`invalidate=1`),
//! and the device statistics behind fio's `disk_util`.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The process's CPU time and scheduling counters (`getrusage`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub user_us: u64,
    pub sys_us: u64,
    /// Voluntary plus involuntary context switches.
    pub ctx: u64,
    pub majflt: u64,
    pub minflt: u64,
}

impl Usage {
    /// Counters between `earlier` and `self`.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user_us: self.user_us.saturating_sub(earlier.user_us),
            sys_us: self.sys_us.saturating_sub(earlier.sys_us),
            ctx: self.ctx.saturating_sub(earlier.ctx),
            majflt: self.majflt.saturating_sub(earlier.majflt),
            minflt: self.minflt.saturating_sub(earlier.minflt),
        }
    }
}

/// `getrusage(RUSAGE_SELF)`.
pub fn usage() -> Usage {
    // SAFETY: `getrusage` fills the zeroed struct it is given a valid
    // pointer to; RUSAGE_SELF cannot fail.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Usage {
        user_us: us(ru.ru_utime),
        sys_us: us(ru.ru_stime),
        ctx: (ru.ru_nvcsw + ru.ru_nivcsw) as u64,
        majflt: ru.ru_majflt as u64,
        minflt: ru.ru_minflt as u64,
    }
}

/// Allocate `[0, len)` of `file` (`fallocate(2)`, mode 0); a file system
/// that cannot is left sparse, as fio does then.
pub fn allocate(file: &File, len: u64) -> io::Result<()> {
    // SAFETY: the descriptor is open for the call's duration (borrowed
    // from `file`); fallocate reads no memory of ours.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(()),
        _ => Err(e),
    }
}

/// Drop the cached pages of `file` (`posix_fadvise(POSIX_FADV_DONTNEED)`).
pub fn drop_cache(file: &File) -> io::Result<()> {
    // SAFETY: as above: a borrowed open descriptor, no memory passed.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// The whole disk holding `path` (a block device, or the file system
/// of a file): its sysfs directory, e.g. `/sys/block/vda`.
pub fn disk_of(path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(path).ok()?;
    let dev = if m.file_type().is_block_device() {
        m.rdev()
    } else {
        m.dev()
    };
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff);
    let link = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    // A partition's stat is under its disk's directory.
    if link.join("partition").exists() {
        link.parent().map(Path::to_path_buf)
    } else {
        Some(link)
    }
}

/// A disk's counters (`/sys/block/X/stat`): reads, read merges, read
/// ticks (ms), writes, write merges, write ticks, busy ms, queue ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStat {
    pub read_ios: u64,
    pub read_merges: u64,
    pub read_ticks: u64,
    pub write_ios: u64,
    pub write_merges: u64,
    pub write_ticks: u64,
    pub io_ticks: u64,
    pub in_queue: u64,
}

/// Read a disk's `stat`.
pub fn disk_stat(dir: &Path) -> Option<DiskStat> {
    let text = std::fs::read_to_string(dir.join("stat")).ok()?;
    let f: Vec<u64> = text
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    (f.len() >= 11).then(|| DiskStat {
        read_ios: f[0],
        read_merges: f[1],
        read_ticks: f[3],
        write_ios: f[4],
        write_merges: f[5],
        write_ticks: f[7],
        io_ticks: f[9],
        in_queue: f[10],
    })
}

/// Bytes free to an unprivileged writer in the file system holding
/// `dir` (`statvfs`'s `f_bavail`), fio's `get_fs_free_counts`.
pub fn free_bytes(dir: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("a path with a NUL byte"))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call; the
    // zeroed struct is filled by statvfs through the pointer given.
    let (rc, st) = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        let rc = libc::statvfs(c.as_ptr(), &mut st);
        (rc, st)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_bavail * st.f_frsize)
}
