//! tiotest (tiobench) with N threads, as ../shared/reference/
//! devices-workloads-traces.md §4.1 describes tiotest.c: each thread owns a
//! file of `size` bytes and runs four phases — sequential write, random
//! write, sequential read, random read — all threads concurrently within a
//! phase, the next phase starting when every thread has finished the last
//! (threads are joined and re-created; here they meet at a barrier).
//! Sequential phases move the whole file in `bs` calls; random phases do
//! `random_ops` calls per thread at `rand() % blocks` block offsets. Write
//! phases end with fsync, which the phase time includes; per-call latency
//! covers only the read(2)/write(2).
//!
//! The threads share one report row and write its tables as extras:
//! per phase (`seq_write`, `rand_write`, `seq_read`, `rand_read`) the rate
//! `{phase}_mb_s` (MiB over the phase's wall time, first thread's start to
//! last thread's end) and the latency table `{phase}_lat_avg_ms`,
//! `{phase}_lat_max_ms`, `{phase}_pct_over_2s`, `{phase}_pct_over_10s`.
//! The "Total" latency row is the row's own latency statistics. Random
//! phases count `threads x random_ops x bs` bytes, as tiotest 0.3.3 did
//! (0.3.5 to 0.4.2 counted the whole file instead).

use crate::fs::FileId;
use crate::syscall::{BarrierId, Ctx, Program, Syscall};
use elevator_core::Prng;

/// The phases in order.
pub const PHASES: [&str; 4] = ["seq_write", "rand_write", "seq_read", "rand_read"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Barrier,
    Open,
    Ops,
    Fsync,
    Close,
    End,
}

/// One tiotest thread.
#[derive(Debug)]
pub struct TiotestThread {
    dir: FileId,
    file: Option<FileId>,
    size: u64,
    bs: u64,
    random_ops: u64,
    barrier: BarrierId,
    rng: Prng,
    phase: usize,
    step: Step,
    i: u64,
    after_op: bool,
}

impl TiotestThread {
    pub fn new(
        dir: FileId,
        size: u64,
        bs: u64,
        random_ops: u64,
        barrier: BarrierId,
        rng: Prng,
    ) -> Self {
        TiotestThread {
            dir,
            file: None,
            size,
            bs: bs.max(1),
            random_ops,
            barrier,
            rng,
            phase: 0,
            step: Step::Barrier,
            i: 0,
            after_op: false,
        }
    }

    fn blocks(&self) -> u64 {
        (self.size / self.bs).max(1)
    }

    fn ops(&self) -> u64 {
        if self.phase.is_multiple_of(2) {
            self.blocks()
        } else {
            self.random_ops
        }
    }
}

fn key(phase: usize, what: &str) -> String {
    format!("{}_{what}", PHASES[phase])
}

impl Program for TiotestThread {
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall {
        let p = self.phase;
        if self.after_op {
            self.after_op = false;
            let ms = cx.last.latency.as_millis_f64();
            let x = &mut cx.stats.extra;
            let n = x.entry(key(p, "calls")).or_insert(0.0);
            *n += 1.0;
            let n = *n;
            let avg = x.entry(key(p, "lat_avg_ms")).or_insert(0.0);
            *avg += (ms - *avg) / n;
            let max = x.entry(key(p, "lat_max_ms")).or_insert(0.0);
            *max = max.max(ms);
            for (limit, name) in [(2000.0, "over_2s"), (10_000.0, "over_10s")] {
                let c = x.entry(key(p, name)).or_insert(0.0);
                if ms > limit {
                    *c += 1.0;
                }
            }
        }
        loop {
            match self.step {
                Step::Barrier => {
                    if self.phase >= PHASES.len() {
                        return Syscall::Exit;
                    }
                    self.step = Step::Open;
                    return Syscall::Barrier(self.barrier);
                }
                Step::Open => {
                    let start = cx.stats.extra.entry(key(p, "start_s")).or_insert(f64::MAX);
                    *start = start.min(cx.now.as_secs_f64());
                    self.step = Step::Ops;
                    self.i = 0;
                    return match self.file {
                        None => Syscall::Create {
                            parent: self.dir,
                            dir: false,
                        },
                        Some(f) => Syscall::Open(f),
                    };
                }
                Step::Ops => {
                    let file = *self
                        .file
                        .get_or_insert_with(|| cx.last.file().expect("created"));
                    if self.i >= self.ops() {
                        self.step = if p < 2 { Step::Fsync } else { Step::Close };
                        continue;
                    }
                    let offset = if p.is_multiple_of(2) {
                        self.i * self.bs
                    } else {
                        self.rng.below(self.blocks()) * self.bs
                    };
                    self.i += 1;
                    self.after_op = true;
                    return if p < 2 {
                        Syscall::Write {
                            file,
                            offset,
                            len: self.bs,
                        }
                    } else {
                        Syscall::Read {
                            file,
                            offset,
                            len: self.bs,
                        }
                    };
                }
                Step::Fsync => {
                    self.step = Step::Close;
                    return Syscall::Fsync(self.file.expect("created"));
                }
                Step::Close => {
                    self.step = Step::End;
                    return Syscall::Close(self.file.expect("created"));
                }
                Step::End => {
                    let now = cx.now.as_secs_f64();
                    let mb = (self.ops() * self.bs) as f64 / (1 << 20) as f64;
                    let x = &mut cx.stats.extra;
                    let end = x.entry(key(p, "end_s")).or_insert(0.0);
                    *end = end.max(now);
                    let end = *end;
                    let start = x.get(&key(p, "start_s")).copied().unwrap_or(0.0);
                    let total = x.entry(key(p, "mb")).or_insert(0.0);
                    *total += mb;
                    let total = *total;
                    if end > start {
                        x.insert(key(p, "mb_s"), total / (end - start));
                    }
                    let calls = x.get(&key(p, "calls")).copied().unwrap_or(0.0).max(1.0);
                    for name in ["over_2s", "over_10s"] {
                        let c = x.get(&key(p, name)).copied().unwrap_or(0.0);
                        x.insert(key(p, &format!("pct_{name}")), 100.0 * c / calls);
                    }
                    self.phase += 1;
                    self.step = Step::Barrier;
                }
            }
        }
    }
}

use super::registry::{self, Args, Instance, Key, KeyType, ProgramType, SetKind, Share};

/// tiotest's defaults (tiotest.c of tiobench 0.3.3: `DEFAULT_THREADS 4`,
/// `DEFAULT_FILESIZE 10` MB, `DEFAULT_RANDOM_OPS 1000`).
const THREADS: i64 = 4;
const SIZE: u64 = 10 << 20;
const RANDOM_OPS: i64 = 1000;

/// `kind = "tiotest"`: `dir` (where the threads' files go, default the
/// root), `threads`, `size` (per thread), `bs` and `random_ops` (per thread
/// and random phase).
pub const TYPE: ProgramType = ProgramType {
    name: "tiotest",
    keys: &[
        Key {
            name: "dir",
            ty: KeyType::Files {
                kinds: &[SetKind::Dir],
                share: Share::Any,
            },
            default: registry::Default::Absent,
        },
        Key {
            name: "threads",
            ty: KeyType::Int { min: 1, max: 1024 },
            default: registry::Default::Int(THREADS),
        },
        Key {
            name: "size",
            ty: KeyType::Size {
                min: 1,
                max: u64::MAX,
            },
            default: registry::Default::Size(SIZE),
        },
        registry::BS,
        Key {
            name: "random_ops",
            ty: KeyType::Int {
                min: 0,
                max: 100_000_000,
            },
            default: registry::Default::Int(RANDOM_OPS),
        },
    ],
    period: None,
    tasks: |args| args.int("threads") as u64,
    build,
};

fn build(args: &Args, at: &mut Instance<'_>) {
    let dir = at.dir_or_root(args.files_opt("dir"));
    let threads = args.int("threads") as u32;
    let barrier = at.host.new_barrier(threads as usize);
    for t in 0..threads {
        let rng = at.rng(&format!("{}.thread{t}", at.row_name));
        let program = TiotestThread::new(
            dir,
            args.size("size"),
            args.size("bs"),
            args.int("random_ops") as u64,
            barrier,
            rng,
        );
        at.spawn(Box::new(program));
    }
}
