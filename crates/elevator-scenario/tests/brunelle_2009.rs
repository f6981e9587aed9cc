//! Brunelle's 2009 priority test (`ioprio-17-2009-sync`): 17 direct sync
//! tasks, one per class and level, on each of 12 disks, his table summing
//! the disks. What the 2.6.32 mechanisms behind his tables do here, each
//! shown against the run without it. Numbers: docs/results/brunelle-2009.md.

use elevator_scenario::{builtin, run_one, Scenario};
use elevator_sim::EngineConfig;

const STARVED: [&str; 9] = [
    "be0", "be1", "be2", "be3", "be4", "be5", "be6", "be7", "idle",
];

fn sync_scenario() -> Scenario {
    builtin("ioprio-17-2009-sync")
        .expect("built-in")
        .expect("valid")
}

/// KiB per task, in the scenario's job order.
fn kib(s: &Scenario, policy: &str) -> Vec<(String, u64)> {
    let r = run_one(s, policy, &s.device, s.seed, &[]).expect("runs");
    r.jobs
        .iter()
        .map(|j| (j.name.clone(), j.bytes / 1024))
        .collect()
}

fn of(rows: &[(String, u64)], name: &str) -> u64 {
    rows.iter().find(|(n, _)| n == name).expect("job").1
}

#[test]
fn each_starved_task_completes_its_first_io_once_per_disk() {
    // A BE or IDLE task's first 4 KiB I/O waits behind the RT tasks for the
    // whole run and completes when they stop: one I/O per disk, so his
    // 12-disk table has 48 KiB in every such row.
    let twelve = sync_scenario();
    assert_eq!(twelve.disks, 12);
    let rows = kib(&twelve, "cfq-2.6.32");
    for name in STARVED {
        assert_eq!(of(&rows, name), 48, "{name}: {rows:?}");
    }
    let one = Scenario {
        disks: 1,
        ..sync_scenario()
    };
    let rows = kib(&one, "cfq-2.6.32");
    for name in STARVED {
        assert_eq!(of(&rows, name), 4, "{name}: {rows:?}");
    }
}

#[test]
fn with_his_sort_rt0_and_rt1_take_turns_because_the_driver_restarts_first() {
    // 2.6.32 starts the next request from the completion, before the task
    // whose request completed can queue its next one: when RT0's slice ends
    // RT0 is not in the tree, so the first of the rest, RT1 under
    // Brunelle's class-then-level sort, gets the next slice, and RT0 the
    // one after ("priority 0 & 1 flip-flop"). His RT1 moved 92 % of RT0's
    // bytes.
    let one = Scenario {
        disks: 1,
        ..sync_scenario()
    };
    let rows = kib(&one, "cfq-2.6.32-brunelle");
    let total: u64 = rows.iter().map(|r| r.1).sum();
    let (rt0, rt1) = (of(&rows, "rt0"), of(&rows, "rt1"));
    println!("restart first: rt0 {rt0} KiB, rt1 {rt1} KiB of {total}");
    assert!(rt0 + rt1 > total * 99 / 100, "{rows:?}");
    assert!(rt1 * 10 > rt0 * 8, "rt1 {rt1} against rt0 {rt0}");
    // Were the woken task to queue its next request before the driver
    // asks for one, RT0 would be back in the tree and first again: it
    // would keep the disk and RT1 get almost nothing.
    let mut woken_first = one.clone();
    woken_first.block = EngineConfig {
        restart_before_wakeup: false,
        ..one.block
    };
    let rows = kib(&woken_first, "cfq-2.6.32-brunelle");
    let (rt0, rt1) = (of(&rows, "rt0"), of(&rows, "rt1"));
    println!("woken task first: rt0 {rt0} KiB, rt1 {rt1} KiB");
    assert!(rt1 * 100 < rt0, "rt1 {rt1} against rt0 {rt0}");
}
