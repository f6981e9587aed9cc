//! The host on `ide-2003` against the seed's reference figure.

mod common;

use elevator_core::{Duration, IoPrio, Prng};
use elevator_host::fs::gen::{place_tree, TreeShape};
use elevator_host::fs::FileId;
use elevator_host::process::{find_cat, Find, XargsCat, BUFFER_2003};

/// "As a reference, the time to read the kernel tree with no competing I/O
/// is 7.9 seconds" (seed, experiment 7).
#[test]
fn one_kernel_tree_alone_reads_in_about_the_seeds_time() {
    let mut host = common::host_on("ide-2003", 1, None);
    let mut rng = Prng::derive(1, "tree");
    let shape = TreeShape::kernel_tree(&mut rng);
    let top = place_tree(host.fs_mut(), FileId::ROOT, &shape, 300).unwrap();
    let row = host.add_row("tree-read", true);
    let pipe = host.new_pipe(find_cat::PIPE_NAMES);
    host.spawn(
        row,
        Box::new(Find::new(top, pipe, true)),
        Duration::ZERO,
        IoPrio::default(),
    );
    host.spawn(
        row,
        Box::new(XargsCat::new(pipe, find_cat::XARGS_BATCH, BUFFER_2003)),
        Duration::ZERO,
        IoPrio::default(),
    );
    let (summary, log) = common::run(&mut host, "noop", "ide-2003", 600);
    let secs = summary.end.as_secs_f64();
    let reads = log
        .iter()
        .filter(|s| s.op == elevator_core::Op::Read)
        .count();
    println!(
        "one kernel tree: {secs:.2} s (seed: 7.9 s), {reads} read requests, busy {:.2} s, {} seeks",
        summary.device.busy_ns as f64 / 1e9,
        summary.device.seeks
    );
    println!("{:?}", host.stats);
    assert!(!summary.timed_out);
    assert!((7.9 / 2.0..=7.9 * 2.0).contains(&secs), "{secs} s");
}
