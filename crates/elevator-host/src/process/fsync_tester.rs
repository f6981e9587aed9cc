//! Theodore Ts'o's fsync-tester (2009), as described in
//! ../shared/reference/devices-workloads-traces.md §4.2: every `interval`
//! write 1 MiB at offset 0 of a file and fsync it, timing both, until
//! `duration` has passed. Extras: `fsyncs`, `fsync_mean_s`,
//! `fsync_max_s`, `write_max_s`. Chris Mason's variant adds a child that
//! keeps writing 4 KiB at random offsets of a 256 MiB file
//! ([`RandomWriter`]), run as a separate background process.

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
                self.write_max = self.write_max.max(cx.last.latency.as_secs_f64());
                self.state = State::Record;
                Syscall::Fsync(self.file)
            }
            State::Record => {
                let t = cx.last.latency.as_secs_f64();
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
