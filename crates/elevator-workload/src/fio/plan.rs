//! Which files each job's threads use, and how much of each: fio's
//! `add_job` (file names), `setup_files` and `get_start_offset`
//! (`filesetup.c`).
//!
//! A thread (one clone of a job, fio's `td`) gets its files from
//! `filename=` (several separated by `:`, all clones sharing them) or, by
//! default, `filename_format` (`$jobname.$jobnum.$filenum`: one set per
//! clone), under `directory=`. Each file's I/O range starts at `offset`
//! plus the clone's `offset_increment` and spans `size / nrfiles` (or
//! `filesize`, or what the file holds past the offset). A regular file
//! too short for its range is laid out first: written with data when a
//! job reads it, extended otherwise.
//!
//! The engine says what exists ([`Existing`]): a block device's size, a
//! file's, or nothing; on the simulator every `/dev/...` path is the
//! simulated device and no file exists before the run.

use super::job::Job;
use super::options::{FileService, ZoneMode, READ, WRITE};
use super::value::Size;
use super::{FioError, FioErrors};

/// What a path is before the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    /// Nothing there.
    Missing,
    /// A regular file of this many bytes.
    File(u64),
    /// A block device of this many bytes.
    Device(u64),
    /// `/dev/null` or `/dev/zero`: I/O that never reaches a device.
    Null,
}

/// One distinct file of the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanFile {
    /// The path as fio opens it (`directory/` joined).
    pub path: String,
    pub existing: Existing,
    /// Bytes it has once laid out (its `real_file_size`).
    pub size: u64,
    /// A regular file that must grow before the run: written with data
    /// (`true`, a job reads it) or only extended.
    pub layout: Option<bool>,
    /// Some job writes to it.
    pub written: bool,
    /// Jobs using it with `direct=1` / `direct=0`.
    pub direct: bool,
    pub buffered: bool,
}

/// One thread's share of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadFile {
    /// Index into [`Plan::files`].
    pub file: usize,
    /// Where the thread's range starts (`file_offset`).
    pub offset: u64,
    /// Bytes of the range (`io_size`).
    pub io_size: u64,
}

/// One thread: a clone of a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanThread {
    pub job: usize,
    /// The clone's number within its job (fio's `subjob_number`).
    pub clone: u32,
    /// fio's `thread_number`: 1-based over all threads (log names).
    pub number: u32,
    pub files: Vec<ThreadFile>,
    /// Bytes one pass moves (`size` after setup).
    pub size: u64,
    /// Bytes (or with `number_ios`, I/Os) before the thread ends.
    pub limit: u64,
}

/// Files and threads of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub files: Vec<PlanFile>,
    pub threads: Vec<PlanThread>,
    /// Zone size per file for `zonemode=zbd` (emulated zones).
    pub zone_size: Vec<u64>,
}

/// The paths a job's clone uses, fio's way.
pub fn paths(job: &Job, clone: u32) -> Vec<String> {
    let o = &job.o;
    let names: Vec<String> = match &o.filename {
        Some(f) => split_names(f),
        None => (0..o.nrfiles)
            .map(|n| {
                o.filename_format
                    .replace("$jobname", &job.name)
                    .replace("$jobnum", &clone.to_string())
                    .replace("$filenum", &n.to_string())
            })
            .collect(),
    };
    names
        .into_iter()
        .map(|n| match &o.directory {
            Some(d) if !n.starts_with('/') && !d.is_empty() => {
                format!("{}/{}", d.trim_end_matches('/'), n)
            }
            _ => n,
        })
        .collect()
}

/// `a:b:c`, with `\:` a literal colon.
fn split_names(f: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = f.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&':') => {
                out.last_mut().expect("one name").push(':');
                chars.next();
            }
            ':' => out.push(String::new()),
            c => out.last_mut().expect("one name").push(c),
        }
    }
    out.retain(|n| !n.is_empty());
    out
}

/// Work out the plan; `existing` says what each path is, `fill_free` how
/// many bytes a `fill_device` job may write where it is.
pub fn plan(
    jobs: &[Job],
    existing: &dyn Fn(&str) -> Existing,
    fill_free: u64,
) -> Result<Plan, FioErrors> {
    let mut errors = Vec::new();
    let mut files: Vec<PlanFile> = Vec::new();
    let mut zone_size: Vec<u64> = Vec::new();
    let mut threads = Vec::new();
    let mut number = 0u32;
    for (ji, job) in jobs.iter().enumerate() {
        let o = &job.o;
        let at = |option: &str, message: String| FioError {
            file: job.file.clone(),
            line: job.line,
            option: format!("[{}] {option}", job.section),
            message,
        };
        let bs = job.rw_min_bs();
        let zone = if job.zonemode == ZoneMode::Zbd {
            o.zonesize
        } else {
            0
        };
        let zones = |s: Size| -> Size {
            match s {
                Size::Zones(n) => Size::Bytes(n.saturating_mul(zone)),
                other => other,
            }
        };
        for clone in 0..o.numjobs {
            number += 1;
            let names = paths(job, clone);
            let nr = names.len() as u64;
            // The size per file when size= is given (fio: the first files
            // take the remainder, a block each).
            let size_opt = o.size.map(zones);
            let total_size = match size_opt {
                Some(Size::Bytes(b)) => Some(b),
                _ => None,
            };
            let fs = total_size.map(|s| s / nr.max(1));
            let mut extra = match (total_size, fs) {
                (Some(s), Some(f)) if f * nr < s => (s - f * nr) / bs.max(1),
                _ => 0,
            };
            let mut tfiles = Vec::new();
            let mut sum = 0u64;
            for (fi, path) in names.iter().enumerate() {
                // The null engine opens nothing (fio's FIO_DISKLESSIO).
                let ex = if o.engine == super::options::Engine::Null {
                    Existing::Null
                } else {
                    existing(path)
                };
                let real = match ex {
                    Existing::Missing => 0,
                    Existing::File(b) | Existing::Device(b) => b,
                    Existing::Null => u64::MAX / 4,
                };
                // get_start_offset
                let incr = match zones(o.offset_increment) {
                    Size::Bytes(b) => b,
                    Size::Percent(p) => real / 100 * p,
                    Size::Zones(_) => 0,
                };
                let align = if o.offset_align > 0 {
                    o.offset_align
                } else {
                    bs.max(1)
                };
                let offset = match zones(o.offset) {
                    Size::Bytes(b) => b + u64::from(clone) * incr,
                    Size::Percent(p) => {
                        let raw = real / 100 * p + u64::from(clone) * incr;
                        raw.div_ceil(align) * align
                    }
                    Size::Zones(_) => 0,
                };
                let offset = if matches!(o.offset_increment, Size::Percent(_)) {
                    offset.div_ceil(align) * align
                } else {
                    offset
                };
                let mut io_size = match (o.filesize, fs) {
                    (None, Some(f)) if f > 0 => {
                        let mut s = f;
                        if extra > 0 {
                            extra -= 1;
                            s += bs;
                        }
                        s
                    }
                    (None, _) => {
                        if ex == Existing::Missing && !o.fill_device {
                            0
                        } else if offset > real {
                            errors.push(at(
                                "offset",
                                format!("{path}: offset {offset} is past its end ({real} bytes)"),
                            ));
                            0
                        } else {
                            real - offset
                        }
                    }
                    (Some((lo, hi)), _) => {
                        if real < lo || real > hi || ex == Existing::Missing {
                            let size = if lo == hi {
                                lo
                            } else {
                                // A size in the range, fixed by the file's
                                // index so that runs repeat.
                                lo + (hi - lo) / 2 / nr.max(1) * fi as u64
                            };
                            size.saturating_sub(offset)
                        } else {
                            real - offset
                        }
                    }
                };
                if let Some(Size::Percent(p)) = size_opt {
                    if p != 100 {
                        let file_size = io_size + offset;
                        io_size = (file_size * p / 100).min(file_size - offset);
                        io_size -= io_size % bs.max(1);
                    }
                }
                if o.fill_device && total_size.is_none() {
                    io_size = fill_free.saturating_sub(offset);
                }
                let need = offset.saturating_add(io_size);
                let idx = match files.iter().position(|f| f.path == *path) {
                    Some(i) => i,
                    None => {
                        files.push(PlanFile {
                            path: path.clone(),
                            existing: ex,
                            size: real,
                            layout: None,
                            written: false,
                            direct: false,
                            buffered: false,
                        });
                        zone_size.push(0);
                        files.len() - 1
                    }
                };
                let f = &mut files[idx];
                if zone > 0 {
                    zone_size[idx] = zone;
                }
                if matches!(ex, Existing::Missing | Existing::File(_)) && need > f.size {
                    if !o.allow_file_create && ex == Existing::Missing {
                        errors.push(at(
                            "allow_file_create",
                            format!("{path} does not exist and allow_file_create=0"),
                        ));
                    }
                    f.size = need;
                    let data = o.overwrite || job.o.rw.read;
                    f.layout = Some(f.layout.unwrap_or(false) || data);
                } else if matches!(ex, Existing::Device(_)) && need > real {
                    errors.push(at(
                        "size",
                        format!("{path}: the range ends at byte {need}, past the device's {real}"),
                    ));
                }
                f.written |= job.writes();
                if o.direct {
                    f.direct = true;
                } else {
                    f.buffered = true;
                }
                sum += io_size;
                tfiles.push(ThreadFile {
                    file: idx,
                    offset,
                    io_size,
                });
            }
            let size = match total_size {
                Some(s) if sum == 0 || s <= sum => s,
                _ => sum,
            };
            if size == 0 && o.number_ios == 0 {
                errors.push(at(
                    "size",
                    format!(
                        "{}: you need to specify size= (the file does not exist or is empty)",
                        names.join(":")
                    ),
                ));
                continue;
            }
            if size < bs && o.number_ios == 0 {
                errors.push(at(
                    "size",
                    format!("blocksize is larger than data set range ({size} < {bs})"),
                ));
                continue;
            }
            let io_limit = match o.io_size.map(zones) {
                Some(Size::Bytes(b)) => b,
                Some(Size::Percent(p)) => size / 100 * p,
                _ => size,
            };
            let _ = (READ, WRITE, FileService::Sequential);
            threads.push(PlanThread {
                job: ji,
                clone,
                number,
                files: tfiles,
                size,
                limit: io_limit,
            });
        }
    }
    if errors.is_empty() {
        Ok(Plan {
            files,
            threads,
            zone_size,
        })
    } else {
        Err(FioErrors(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_on_unescaped_colons() {
        assert_eq!(split_names("a:b"), vec!["a", "b"]);
        assert_eq!(split_names(r"c\:d"), vec!["c:d"]);
    }
}
