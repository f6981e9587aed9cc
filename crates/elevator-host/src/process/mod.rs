//! The processes of the classic benchmarks, one module per kind.
//!
//! Each is a [`Program`](crate::Program): a small state machine that
//! issues system calls through the host and sees only their results. They
//! live here, beside the host, rather than in `elevator-workload`, because
//! they speak the host's system-call interface (files, pipes, fsync) and
//! nothing else; `elevator-workload` stays the home of block-level jobs
//! and of the `Mix` that runs both side by side.
//!
//! Each module also declares its [`ProgramType`] (`TYPE`): the keys a
//! `[[process]]` section gives it and how it spawns; [`programs::PROGRAMS`]
//! lists them.
//!
//! | module | command |
//! |---|---|
//! | [`cat`] | `cat FILE... > /dev/null`, once or in an endless loop |
//! | [`find_cat`] | `find DIR -type f \| xargs cat > /dev/null` (two processes and a pipe) |
//! | [`dd`] | `dd if=/dev/zero of=F bs=1M count=N conv=notrunc`, once or looping |
//! | [`cp`] | `cp -a SRC DST` or `cp FILE DST`, then optionally `sync` |
//! | [`write_fsync`] | `write-and-fsync -f -m N F` |
//! | [`app_start`] | an application's start-up: dependent reads with think time |
//! | [`player`] | a media player reading a frame per period against a deadline |
//! | [`tiotest`] | tiotest with N threads: its four phases, rate and latency tables |
//! | [`fsync_tester`] | write then fsync in a loop, timing each fsync |

pub mod app_start;
pub mod cat;
pub mod cp;
pub mod dd;
pub mod find_cat;
pub mod fsync_tester;
pub mod player;
pub mod programs;
pub mod registry;
pub mod tiotest;
pub mod write_fsync;

pub use app_start::AppStart;
pub use cat::Cat;
pub use cp::Cp;
pub use dd::Dd;
pub use find_cat::{Find, XargsCat};
pub use fsync_tester::{FsyncTester, RandomWriter};
pub use player::Player;
pub use programs::PROGRAMS;
pub use registry::ProgramType;
pub use tiotest::TiotestThread;
pub use write_fsync::WriteAndFsync;

/// `st_blksize` of ext2 with 4 KiB blocks: the buffer GNU `cat` and `cp`
/// of 2003 read and wrote with (textutils/fileutils used `ST_BLKSIZE`).
pub const BUFFER_2003: u64 = 4096;
