//! Per-request CPU cost of the runtime at queue depth 32: a closed loop of
//! 4 KiB random reads from 32 tasks, each task resubmitting when its read
//! returns. `null` completes every operation at once in memory (the
//! runtime and the policy alone, as Seastar's io_tester measures its
//! scheduler against /dev/null); `uring` goes through a real io_uring to a
//! page-cached file (adds the kernel's submission and completion path).
//! For `null`, bfq runs with `slice_idle=0` so that no real idle time is
//! counted as cost.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use elevator_core::{QueueLimits, TaskId};
use elevator_sched::stack::{Origin, StackBuilder};
use elevator_uring::{Backend, Runtime, Submission, Submit, Uring};
use std::hint::black_box;

const DEPTH: usize = 32;
const REQUESTS: u64 = 4096;
const FILE_BYTES: u64 = 64 << 20;

/// Completes everything pushed, in order, at the next wait.
#[derive(Debug, Default)]
struct Null {
    pushed: Vec<Submission>,
}

impl Backend for Null {
    fn push(&mut self, sub: Submission) -> std::io::Result<()> {
        self.pushed.push(sub);
        Ok(())
    }
    fn arm_timer(&mut self, _after: std::time::Duration) -> std::io::Result<()> {
        Ok(())
    }
    fn wait(&mut self, out: &mut Vec<(u64, i32)>) -> std::io::Result<()> {
        out.extend(self.pushed.drain(..).map(|s| (s.tag, s.len as i32)));
        Ok(())
    }
    fn in_flight(&self) -> usize {
        self.pushed.len()
    }
}

fn limits() -> QueueLimits {
    QueueLimits {
        rotational: false,
        queue_depth: DEPTH as u32,
        max_sectors: 2560,
        capacity: FILE_BYTES / 512,
    }
}

/// Run `REQUESTS` reads through `rt`, `DEPTH` outstanding at a time.
fn closed_loop<B: Backend>(rt: &mut Runtime<B>, seed: &mut u64) {
    let mut next = |task: u32| {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        Submit::read(task, (*seed % (FILE_BYTES / 4096)) * 4096, 4096)
    };
    for task in 0..DEPTH as u32 {
        rt.submit(next(task)).unwrap();
    }
    let mut issued = DEPTH as u64;
    let mut done = Vec::with_capacity(DEPTH);
    let mut returned = 0;
    while returned < REQUESTS {
        done.clear();
        rt.poll(None, &mut done).unwrap();
        returned += done.len() as u64;
        for d in &done {
            black_box(d.result.unwrap());
            if issued < REQUESTS {
                rt.submit(next(d.task.0)).unwrap();
                issued += 1;
            }
        }
    }
    for task in 0..DEPTH as u32 {
        rt.task_exited(TaskId(task));
    }
}

fn overhead(c: &mut Criterion) {
    let mut group = c.benchmark_group("runtime_qd32");
    group.throughput(Throughput::Elements(REQUESTS));
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("bench.bin");
    std::fs::write(&path, vec![1u8; FILE_BYTES as usize]).unwrap();
    for name in ["noop", "bfq"] {
        let origin = Origin::command_line;
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        // With idling on, bfq would hold the null device idle for real
        // milliseconds and the figure would be its idle time; off, the
        // wall time is CPU time.
        let overrides: &[(&str, i64)] = if name == "bfq" {
            &[("slice_idle", 0)]
        } else {
            &[]
        };
        let mut builder = StackBuilder::new(name, origin()).unwrap();
        for &(k, v) in overrides {
            builder = builder.tunable(k, v, origin()).unwrap();
        }
        let (mut rt, _) =
            Runtime::build(builder.clone(), Null::default(), &limits(), DEPTH).unwrap();
        group.bench_function(BenchmarkId::new("null", name), |b| {
            b.iter(|| closed_loop(&mut rt, &mut seed))
        });
        let file = std::fs::File::open(&path).unwrap();
        let (mut rt, _) =
            Runtime::build(builder, Uring::new(file, 128).unwrap(), &limits(), DEPTH).unwrap();
        group.bench_function(BenchmarkId::new("uring-page-cache", name), |b| {
            b.iter(|| closed_loop(&mut rt, &mut seed))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = overhead
}
criterion_main!(benches);
