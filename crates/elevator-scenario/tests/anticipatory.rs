//! The anticipatory scheduler's defining behaviour on the simulated 2003
//! IDE disk: a dependent reader (one 64 KiB read at a time, a little think
//! time between them, reading a file sequentially) against a streaming
//! writer that keeps the queue full of async writes. Without anticipation
//! every read completes into a queue holding only writes, the head goes to
//! the writes, and the next read pays two long seeks plus the writes
//! (Iyer & Druschel's "deceptive idleness"); with it the disk waits a few
//! milliseconds and the reader streams, giving way to a write batch every
//! read_batch_expire. The 2.4 elevator is printed for comparison: each read
//! joins the tail of ~256 queued writes and is passed by 128 more.

use elevator_scenario::{run, RunOptions, Scenario};

/// 64 MB read in 64 KiB requests with 200 us of think time after each,
/// against 128 KiB async writes 10 GB away, 256 of them queued.
const READER_VS_WRITER: &str = r#"
name = "reader-vs-writer"
description = "dependent sequential reader vs streaming async writer"
device = "ide-2003"
schedulers = ["noop", "deadline", "anticipatory", "linus24"]
# linus24 needs over an hour of simulated time.
time_limit = "3h"

[result]
name = "seconds to read 64 MB"
unit = "s"
metric = "completion"
job = "reader"

[block]
nr_requests = 256

[[job]]
name = "writer"
rw = "write"
bs = "128k"
region = "2g"
offset = "10g"
iodepth = 256
sync = false
background = true

[[job]]
name = "reader"
rw = "read"
bs = "64k"
size = "64m"
think = "200us"
start = "1s"
"#;

#[test]
fn a_dependent_reader_beats_a_streaming_writer_only_with_anticipation() {
    let scenario = Scenario::parse("reader-vs-writer", READER_VS_WRITER).unwrap();
    let report = run(&scenario, &RunOptions::default(), &mut |_| {}).unwrap();
    let seconds = |policy: &str| {
        report
            .runs
            .iter()
            .find(|r| r.scheduler == policy)
            .unwrap()
            .result
            .value
    };
    let (noop, deadline, anticipatory, linus24) = (
        seconds("noop"),
        seconds("deadline"),
        seconds("anticipatory"),
        seconds("linus24"),
    );
    println!(
        "64 MB dependent read against a streaming writer on ide-2003: noop {noop:.2} s, \
         deadline {deadline:.2} s, anticipatory {anticipatory:.2} s, linus24 {linus24:.2} s"
    );
    for run in &report.runs {
        println!(
            "  {:<13} reader {:.2} s, aggregate {:.1} MB/s",
            run.scheduler, run.result.value, run.aggregate_mb_s
        );
    }
    assert!(
        deadline > 4.0 * anticipatory,
        "anticipatory {anticipatory:.2} s is not many times faster than deadline {deadline:.2} s"
    );
    assert!(
        noop > 4.0 * anticipatory,
        "anticipatory {anticipatory:.2} s is not many times faster than noop {noop:.2} s"
    );
}
