//! The host of the simulator: what the 2003 benchmarks ran on.
//!
//! The published experiments are `cat`, `find | xargs cat`, `dd`, `cp -a`
//! and `sync` on ext2, through the page cache; their results hang on
//! readahead, on writeback and on where the files lie. This crate models
//! that host inside the simulator:
//!
//! - [`fs`]: an ext2-like file system placing files as extents in 128 MiB
//!   block groups, with Orlov directory placement, in-line indirect blocks
//!   and metadata that costs I/O; generators for Linux 2.4.19 source trees,
//!   big files, copies and an application's start-up file set; its
//!   [`fs::registry`] mounts ext2 (the default), ext3 ([`fs::ext3`], jbd's
//!   journal) or nilfs2 ([`fs::nilfs2`], log-structured placement);
//! - [`cache`]: the page cache (LRU over 32-page chunks, dirty and
//!   writeback accounting);
//! - [`readahead`]: 2.6.0's per-open-file readahead windows;
//! - [`readahead24`]: 2.4's read-ahead context (`generic_file_readahead`);
//! - [`host`]: system calls, `balance_dirty_pages`, pdflush, kupdate,
//!   fsync and sync, and the [`Host`] workload that runs [`process`]es;
//! - [`bdflush`]: 2.4's writeback instead of pdflush (bdflush, kupdated,
//!   `balance_dirty`, reclaim that writes and waits) for the 2.4 host;
//! - [`params`]: the machine and the kernel's knobs, with presets;
//! - [`setup`]: a host assembled from a validated description (file sets,
//!   processes by their registered [`process::registry::ProgramType`]).
//!
//! A [`Host`] is one part of a simulator workload mix
//! ([`elevator_workload::Part`]): it owns the file system, the page cache,
//! the flusher and the processes. Requests carry the task and I/O priority
//! of the process that issued them; writeback by the flusher carries the
//! flusher's task, writeback a throttled writer does itself carries the
//! writer's (as in the kernel, where `balance_dirty_pages` runs in the
//! writer's context).
//!
//! Determinism: no clock, no unseeded randomness; every choice comes from
//! a `Prng` derived from the run's seed.

pub mod bdflush;
pub mod cache;
pub mod fio;
pub mod fs;
pub mod host;
pub mod params;
pub mod process;
pub mod readahead;
pub mod readahead24;
pub mod setup;
pub mod syscall;

pub use fs::{FileId, FileSystem, NoSpace};
pub use host::{Host, HostStats, Pid};
pub use params::{HostParams, SyncWriteHint, WritebackCharge};
pub use syscall::{Ctx, Errno, Program, Ret, SysResult, Syscall};
