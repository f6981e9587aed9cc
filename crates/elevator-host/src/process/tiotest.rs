//! tiotest (tiobench) with N threads, as ../shared/reference/
//! linux-2.6.3x-era.md §8.1 and devices-workloads-traces.md §4.1 describe
//! tiotest.c of tiobench 0.3.3: each thread owns a file of `size` bytes and
//! runs four phases in order — sequential write, random write, sequential
//! read, random read — all threads concurrently within a phase, the next
//! phase starting when every thread has finished the last (threads are
//! joined and re-created; here they meet at a barrier). Sequential phases
//! move the whole file in `bs` calls; random phases do `random_ops` calls
//! per thread at `rand() % blocks` block offsets. Write phases end with
//! fsync, which the phase time includes; per-call latency covers only the
//! read(2)/write(2).
//!
//! The threads share one report row. Every timed call is a per-call sample
//! (`seq_write.write`, `rand_write.write`, `seq_read.read`,
//! `rand_read.read`, and `seq_write.fsync`, `rand_write.fsync`). Extras per
//! phase (`seq_write`, `rand_write`, `seq_read`, `rand_read`): the phase's
//! wall time `{phase}_time_s` (first thread's start to last thread's end,
//! the results table's "Time"), the rate `{phase}_mb_s` (MiB, tiotest's
//! "MB", over that time) and the latency figures `{phase}_lat_avg_ms`,
//! `{phase}_lat_max_ms`, `{phase}_pct_over_2s`, `{phase}_pct_over_10s`.
//! These are what a `[[table]]` cell selects (`extra:rand_read_lat_avg_ms`).
//! Random phases count `threads x random_ops x bs` bytes, as tiotest 0.3.3
//! did (0.3.5 to 0.4.2 counted the whole file instead).
//!
//! When the last thread ends, the row's output holds tiotest's two tables
//! in its own layout (`print_results` of tiotest.c 0.3.3): "Tiotest results
//! for N concurrent io threads" (per phase: MB, time, rate) and "Tiotest
//! latency results" (per phase and in total: average and maximum latency,
//! % of calls over 2 s and over 10 s, `LATENCY_STAT1`/`LATENCY_STAT2`). One
//! departure: the results table's "Usr CPU" and "Sys CPU" columns, which
//! the simulator has no figures for, are replaced by the phase's calls per
//! second.

use crate::fs::FileId;
use crate::syscall::{BarrierId, Ctx, Program, Syscall};
use elevator_core::{Duration, Prng};
use elevator_metrics::CallSamples;

/// The phases in order.
pub const PHASES: [&str; 4] = ["seq_write", "rand_write", "seq_read", "rand_read"];

/// tiotest's names of the phases in its tables.
const ITEMS: [&str; 4] = ["Write", "Random Write", "Read", "Random Read"];

/// tiotest.c's `LATENCY_STAT1` and `LATENCY_STAT2`: calls slower than these
/// are counted in the latency table's last two columns.
pub const LATENCY_STAT1: Duration = Duration::from_secs(2);
pub const LATENCY_STAT2: Duration = Duration::from_secs(10);

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
    threads: u32,
    barrier: BarrierId,
    rng: Prng,
    phase: usize,
    step: Step,
    i: u64,
    after: Option<&'static str>,
}

impl TiotestThread {
    /// One of `threads` threads meeting at `barrier` between phases.
    pub fn new(
        dir: FileId,
        size: u64,
        bs: u64,
        random_ops: u64,
        threads: u32,
        barrier: BarrierId,
        rng: Prng,
    ) -> Self {
        TiotestThread {
            dir,
            file: None,
            size,
            bs: bs.max(1),
            random_ops,
            threads: threads.max(1),
            barrier,
            rng,
            phase: 0,
            step: Step::Barrier,
            i: 0,
            after: None,
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

/// Per phase, the names every timed call updates, spelled out so that a
/// call (some 1.3 million in Zoccolo's 32-thread run) formats no string:
/// its read or write sample, its fsync sample, and the extras `calls`,
/// `lat_avg_ms`, `lat_max_ms`, `over_2s`, `over_10s` (as [`key`] names
/// them).
const HOT: [(&str, &str, [&str; 5]); 4] = [
    (
        "seq_write.write",
        "seq_write.fsync",
        [
            "seq_write_calls",
            "seq_write_lat_avg_ms",
            "seq_write_lat_max_ms",
            "seq_write_over_2s",
            "seq_write_over_10s",
        ],
    ),
    (
        "rand_write.write",
        "rand_write.fsync",
        [
            "rand_write_calls",
            "rand_write_lat_avg_ms",
            "rand_write_lat_max_ms",
            "rand_write_over_2s",
            "rand_write_over_10s",
        ],
    ),
    (
        "seq_read.read",
        "seq_read.fsync",
        [
            "seq_read_calls",
            "seq_read_lat_avg_ms",
            "seq_read_lat_max_ms",
            "seq_read_over_2s",
            "seq_read_over_10s",
        ],
    ),
    (
        "rand_read.read",
        "rand_read.fsync",
        [
            "rand_read_calls",
            "rand_read_lat_avg_ms",
            "rand_read_lat_max_ms",
            "rand_read_over_2s",
            "rand_read_over_10s",
        ],
    ),
];

/// The extra `k`, created at 0 the first time, found without allocating.
fn extra<'a>(x: &'a mut std::collections::BTreeMap<String, f64>, k: &str) -> &'a mut f64 {
    if !x.contains_key(k) {
        x.insert(k.to_string(), 0.0);
    }
    x.get_mut(k).expect("just inserted")
}

/// The name of phase `phase`'s read or write call among the samples.
pub fn call(phase: usize) -> String {
    let op = if phase < 2 { "write" } else { "read" };
    format!("{}.{op}", PHASES[phase])
}

/// Average and maximum in milliseconds and the percentages over the two
/// limits, of `samples`.
fn latency(samples: &[Duration]) -> (f64, f64, f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let n = samples.len() as f64;
    let sum: f64 = samples.iter().map(|d| d.as_millis_f64()).sum();
    let max = samples.iter().max().map_or(0.0, |d| d.as_millis_f64());
    let over = |limit: Duration| 100.0 * samples.iter().filter(|d| **d > limit).count() as f64 / n;
    (sum / n, max, over(LATENCY_STAT1), over(LATENCY_STAT2))
}

/// tiotest's two tables from the row's extras and samples.
pub fn tables(
    threads: u32,
    extra: &std::collections::BTreeMap<String, f64>,
    calls: &CallSamples,
) -> Vec<String> {
    let g = |p: usize, what: &str| extra.get(&key(p, what)).copied().unwrap_or(0.0);
    // tiotest.c prints "| Write %11.0f MBs |": the item and its MB fill 21
    // columns.
    let mut out = vec![
        format!("Tiotest results for {threads} concurrent io threads:"),
        format!(",{}.", "-".repeat(62)),
        "| Item                  | Time     | Rate         | Calls/s    |".into(),
        "+-----------------------+----------+--------------+------------+".into(),
    ];
    for (p, item) in ITEMS.iter().enumerate() {
        let time = g(p, "end_s") - g(p, "start_s");
        let n = calls.samples(&call(p)).len() as f64;
        let per_s = |x: f64| if time > 0.0 { x / time } else { 0.0 };
        let width = 21 - item.len() - " MBs".len() - 1;
        let label = format!("{item} {:>width$.0} MBs", g(p, "mb"));
        out.push(format!(
            "| {label} | {time:6.1} s | {:7.3} MB/s | {:10.1} |",
            per_s(g(p, "mb")),
            per_s(n)
        ));
    }
    out.push(format!("`{}'", "-".repeat(62)));
    out.push("Tiotest latency results:".into());
    out.push(",-------------------------------------------------------------------------.".into());
    out.push("| Item         | Average latency | Maximum latency | % >2 sec | % >10 sec |".into());
    out.push("+--------------+-----------------+-----------------+----------+-----------+".into());
    let row = |item: &str, samples: &[Duration]| {
        let (avg, max, over1, over2) = latency(samples);
        format!("| {item:<12} | {avg:12.3} ms | {max:12.3} ms | {over1:8.5} | {over2:9.5} |")
    };
    let mut all = Vec::new();
    for (p, item) in ITEMS.iter().enumerate() {
        let samples = calls.samples(&call(p));
        out.push(row(item, samples));
        all.extend_from_slice(samples);
    }
    out.push("|--------------+-----------------+-----------------+----------+-----------|".into());
    out.push(row("Total", &all));
    out.push("`--------------+-----------------+-----------------+----------+-----------'".into());
    out
}

impl Program for TiotestThread {
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall {
        let p = self.phase;
        if let Some(call) = self.after.take() {
            let took = cx.last.latency;
            let (op, fsync, [calls, avg, max, over1, over2]) = HOT[p];
            let fsynced = call == "fsync";
            cx.stats
                .calls
                .record(if fsynced { fsync } else { op }, took);
            if !fsynced {
                let ms = took.as_millis_f64();
                let x = &mut cx.stats.extra;
                let n = extra(x, calls);
                *n += 1.0;
                let n = *n;
                let a = extra(x, avg);
                *a += (ms - *a) / n;
                let m = extra(x, max);
                *m = m.max(ms);
                for (limit, name) in [(LATENCY_STAT1, over1), (LATENCY_STAT2, over2)] {
                    let c = extra(x, name);
                    if took > limit {
                        *c += 1.0;
                    }
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
                    return if p < 2 {
                        self.after = Some("write");
                        Syscall::Write {
                            file,
                            offset,
                            len: self.bs,
                        }
                    } else {
                        self.after = Some("read");
                        Syscall::Read {
                            file,
                            offset,
                            len: self.bs,
                        }
                    };
                }
                Step::Fsync => {
                    self.step = Step::Close;
                    self.after = Some("fsync");
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
                        x.insert(key(p, "time_s"), end - start);
                        x.insert(key(p, "mb_s"), total / (end - start));
                    }
                    let calls = x.get(&key(p, "calls")).copied().unwrap_or(0.0).max(1.0);
                    for name in ["over_2s", "over_10s"] {
                        let c = x.get(&key(p, name)).copied().unwrap_or(0.0);
                        x.insert(key(p, &format!("pct_{name}")), 100.0 * c / calls);
                    }
                    self.phase += 1;
                    self.step = Step::Barrier;
                    if self.phase == PHASES.len() {
                        let done = x.entry("threads_done".into()).or_insert(0.0);
                        *done += 1.0;
                        if *done == f64::from(self.threads) {
                            cx.stats.output =
                                tables(self.threads, &cx.stats.extra, &cx.stats.calls);
                        }
                    }
                }
            }
        }
    }
}

use super::registry::{self, Args, Instance, Key, KeyType, ProgramType};

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
    about: "tiotest: write, random write, read, random read by N threads; prints its tables",
    keys: &[
        registry::DIR,
        Key {
            name: "threads",
            ty: KeyType::Int { min: 1, max: 1024 },
            default: registry::Default::Int(THREADS),
        },
        registry::bytes("size", registry::Default::Size(SIZE)),
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
            threads,
            barrier,
            rng,
        );
        at.spawn(Box::new(program));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spelled_out_names_are_the_formatted_ones() {
        for (p, (op, fsync, keys)) in HOT.iter().enumerate() {
            assert_eq!(*op, call(p));
            assert_eq!(*fsync, format!("{}.fsync", PHASES[p]));
            for (k, what) in
                keys.iter()
                    .zip(["calls", "lat_avg_ms", "lat_max_ms", "over_2s", "over_10s"])
            {
                assert_eq!(*k, key(p, what));
            }
        }
    }
}
