//! Theodore Ts'o's fsync-tester (2009), as described in
//! ../shared/reference/linux-2.6.3x-era.md §8.2 and
//! devices-workloads-traces.md §4.2: every `interval` write 1 MiB at offset
//! 0 of a file and fsync it, timing both, until `duration` has passed.
//! Chris Mason's variant adds a child that keeps writing 4 KiB at random
//! offsets of a 256 MiB file ([`RandomWriter`]), run as a separate
//! background process.
//!
//! As the tool does, it prints one line per round, `fsync time: X.XXXX`
//! (seconds, `printf("fsync time: %2.4f\n", ...)`), into the row's output;
//! Mason's copy also printed the write time on that line, which here is the
//! per-call sample `write` beside `fsync` (count, median, p90, max of every
//! call). Extras: `fsyncs`, `fsync_mean_s`, `fsync_max_s`, `write_max_s`.

use crate::fs::FileId;
use crate::syscall::{Ctx, Program, Syscall};
use elevator_core::{Duration, Instant, Prng};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    Write,
    Fsync,
    Record,
}

#[derive(Debug)]
pub struct FsyncTester {
    file: FileId,
    bytes: u64,
    interval: Duration,
    duration: Duration,
    state: State,
    t0: Option<Instant>,
    n: u64,
    sum: f64,
    max: f64,
    write_max: f64,
}

impl FsyncTester {
    pub fn new(file: FileId, bytes: u64, interval: Duration, duration: Duration) -> Self {
        FsyncTester {
            file,
            bytes,
            interval,
            duration,
            state: State::Open,
            t0: None,
            n: 0,
            sum: 0.0,
            max: 0.0,
            write_max: 0.0,
        }
    }
}

impl Program for FsyncTester {
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall {
        let t0 = *self.t0.get_or_insert(cx.now);
        match self.state {
            State::Open => {
                self.state = State::Write;
                Syscall::Open(self.file)
            }
            State::Write => {
                self.state = State::Fsync;
                Syscall::Write {
                    file: self.file,
                    offset: 0,
                    len: self.bytes,
                }
            }
            State::Fsync => {
                cx.stats.calls.record("write", cx.last.latency);
                self.write_max = self.write_max.max(cx.last.latency.as_secs_f64());
                self.state = State::Record;
                Syscall::Fsync(self.file)
            }
            State::Record => {
                cx.stats.calls.record("fsync", cx.last.latency);
                let t = cx.last.latency.as_secs_f64();
                cx.stats.output.push(format!("fsync time: {t:.4}"));
                self.n += 1;
                self.sum += t;
                self.max = self.max.max(t);
                let x = &mut cx.stats.extra;
                x.insert("fsyncs".into(), self.n as f64);
                x.insert("fsync_mean_s".into(), self.sum / self.n as f64);
                x.insert("fsync_max_s".into(), self.max);
                x.insert("write_max_s".into(), self.write_max);
                if cx.now.since(t0) >= self.duration {
                    return Syscall::Exit;
                }
                self.state = State::Write;
                Syscall::Sleep(self.interval)
            }
        }
    }
}

/// Mason's background child: buffered 4 KiB writes at random 4 KiB-aligned
/// offsets of `file`, forever (the tester uses `srand(4096)`; here the
/// stream comes from the run's seed).
#[derive(Debug)]
pub struct RandomWriter {
    file: FileId,
    rng: Prng,
    opened: bool,
}

impl RandomWriter {
    pub fn new(file: FileId, rng: Prng) -> Self {
        RandomWriter {
            file,
            rng,
            opened: false,
        }
    }
}

impl Program for RandomWriter {
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall {
        if !self.opened {
            self.opened = true;
            return Syscall::Open(self.file);
        }
        let blocks = (cx.fs.size(self.file) / 4096).max(1);
        Syscall::Write {
            file: self.file,
            offset: self.rng.below(blocks) * 4096,
            len: 4096,
        }
    }
}

use super::registry::{self, Args, Instance, Key, KeyType, ProgramType, SetKind, Share};

/// fsync-tester.c (Ts'o, 2009; ../shared/reference/linux-2.6.3x-era.md
/// §8.2): a 1 MiB `pwrite` then `fsync`, sleeping 4 s between rounds, until
/// 60 s have passed.
const SIZE: u64 = 1 << 20;
const INTERVAL: Duration = Duration::from_secs(4);
const DURATION: Duration = Duration::from_secs(60);

/// `kind = "fsync-tester"`: `files` (its file), `size` (bytes per write),
/// `interval`, `duration` and `random_writer` (a file for Mason's random
/// writer child, reported in row `NAME.rnd`).
pub const TYPE: ProgramType = ProgramType {
    name: "fsync-tester",
    about: "Ts'o's fsync-tester: 1 MiB write + fsync per interval; prints every fsync time",
    keys: &[
        registry::files(&[SetKind::File, SetKind::Empty]),
        registry::bytes("size", registry::Default::Size(SIZE)),
        Key {
            name: "interval",
            ty: KeyType::Time,
            default: registry::Default::Time(INTERVAL),
        },
        Key {
            name: "duration",
            ty: KeyType::Time,
            default: registry::Default::Time(DURATION),
        },
        Key {
            name: "random_writer",
            ty: KeyType::Files {
                kinds: &[SetKind::File],
                share: Share::PerInstance,
            },
            default: registry::Default::Absent,
        },
    ],
    period: Some("interval"),
    tasks: |args| 1 + u64::from(args.files_opt("random_writer").is_some()),
    build,
};

fn build(args: &Args, at: &mut Instance<'_>) {
    let file = at.top(args.files("files"));
    let program = FsyncTester::new(
        file,
        args.size("size"),
        args.time("interval"),
        args.time("duration"),
    );
    at.spawn(Box::new(program));
    if let Some(rw) = args.files_opt("random_writer") {
        let target = at.top(rw);
        let name = format!("{}.rnd", at.row_name);
        let row = at.host.add_row(&name, false);
        let rng = at.rng(&name);
        at.spawn_in(row, Box::new(RandomWriter::new(target, rng)));
    }
}
