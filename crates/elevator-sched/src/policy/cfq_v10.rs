//! cfq-v10: grouped CFQ charging a group the disk time its seeky queues'
//! reads take, for Goyal's 2009 IO controller tables.
//!
//! Vivek Goyal's "IO scheduler based IO controller V10" (lkml, 2009-09-24,
//! on 2.6.31) scheduled cgroups by disk time inside the elevator; its
//! `block/elevator-fq.c` is not in our corpora. Its direct descendant, by
//! the same author three months later, is CFQ's group scheduling in
//! v2.6.33 (`block/cfq-iosched.c` read at 60b341b: `cfq_group_served`,
//! `cfq_cfqq_slice_usage`, `cfq_group_service_tree_add`), which our `cfq`
//! (`cfq.rs`, 2.6.33-3.x) implements. This variant is that `cfq` with one
//! rule changed: how a queue expired before its first completion is charged.
//!
//! # The charge, and why our engine needs it spelled out
//! v2.6.33 `cfq_cfqq_slice_usage` charges a queue that expired before any
//! request of its slice completed `max(jiffies − dispatch_start, 1)`, with
//! `dispatch_start` set when the queue was selected
//! (`__cfq_set_active_queue`), and says why: "Also charge the seek time
//! incurred to the group, otherwise if there are mutiple queues in the
//! group, each can dispatch a single request on seeky media and cause lots
//! of seek time and group will never know it." In the kernel that span is
//! about one read's disk time even on a disk that takes one command at a
//! time: v2.6.33 `scsi_request_fn` calls `blk_peek_request` (and so the
//! elevator's dispatch) *before* `scsi_dev_queue_ready`, so CFQ selects the
//! next queue and moves its request to the dispatch list while the disk is
//! still busy with the one before; that queue is expired at the next
//! dispatch call, when its request starts, or when a neighbour's next read
//! preempts it (`cfq_should_preempt`: both on the sync-noidle tree, the
//! tree holding just the two, the active queue empty), a disk service
//! later. Our engine asks the policy for a request only when the device has
//! room (the block layer's dispatch list is not modelled), so in `cfq` such
//! a queue is selected at the previous read's completion, dispatches, and
//! is preempted by the neighbour's next read in the same instant: charged
//! one jiffy for a 9 ms random read. A group of several seeky queues then
//! gets 84-88 % of the disk against one sequential reader
//! (docs/results/io-controllers-2009.md, "Goyal's two tables").
//!
//! Here such a queue's charge is left open at expiry (`charge_from`, the
//! earliest uncharged selection) and made when its reads in the driver have
//! completed: from its selection to their completion, the time the disk
//! spent on them. Summed over a round of the group's seeky queues this is
//! what the kernel charged through the dispatch list (each queue there paid
//! for the read before its own), without modelling the list. V10's
//! changelog says the same of its own charge, "charging the queue only for
//! allocated slice length ... if it consumed more than allocated slice":
//! disk time used, capped from above; the cap is unchanged here. Nothing
//! else differs from `cfq`: the same tunables with the same defaults, the
//! same idling, `group_idle` and wait-busy rules.
//!
//! 2.6.31's per-queue rules (V10 ran on 2.6.31 CFQ: `hw_tag` assumed on
//! until more than `CFQ_HW_QUEUE_MIN` requests are seen, no idle window for
//! a seeky queue while it is on) are not modelled here; see the results
//! document.

use super::cfq::{self, Cfq};
use crate::SchedulerType;

pub const TYPE: SchedulerType = SchedulerType {
    name: "cfq-v10",
    aliases: &["cfq-io-controller-v10"],
    about: "cfq charging a seeky queue's group its reads' disk time (Goyal's 2009 IO controller)",
    honours: cfq::TYPE.honours,
    tunables: cfq::TYPE.tunables,
    build: |t, limits| Box::new(Cfq::from_tunables(t, limits).charging_reads_in_flight("cfq-v10")),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{Case, Layout, Options, Phase, Run, TaskScript, REGION};
    use elevator_core::{Duration, GroupId, GroupTree, Instant, QueueLimits, TaskId};

    /// One sequential reader in group "seq" and `random` readers over a
    /// 40 GB span in group "rand", equal weights, 8 sectors a read, on
    /// the harness's depth-1 serial device taking 9 ms a request, for 20 s
    /// of `policy` with its defaults: the random group's share of the
    /// requests served (each took the same disk time).
    fn random_share(policy: &SchedulerType, random: u32) -> f64 {
        let mut tree = GroupTree::default();
        let seq = tree.add("seq", GroupId::ROOT, 100, Default::default());
        let rand = tree.add("rand", GroupId::ROOT, 100, Default::default());
        let mut tasks = vec![TaskScript {
            group: seq,
            ..TaskScript::new(
                0,
                REGION,
                vec![Phase::reads(u32::MAX, 8, Layout::Sequential)],
            )
        }];
        for i in 1..=random {
            // 10 us of host time between a completion and the next read,
            // so the next read comes after the policy chose what follows
            // (as the simulator orders them): a random queue is then
            // expired, or preempted by its neighbour's next read, with its
            // own read in the driver.
            let think = Duration::from_micros(10);
            let reads = Phase {
                min_think: think,
                max_think: think,
                ..Phase::reads(u32::MAX, 8, Layout::Random { span: 80_000_000 })
            };
            tasks.push(TaskScript {
                group: rand,
                ..TaskScript::new(i, REGION, vec![reads])
            });
        }
        let limits = QueueLimits::default();
        let case = Case::serial(tasks, limits, Duration::from_millis(9));
        let mut s = policy.build_default(&limits);
        s.set_groups(&tree);
        let mut run = Run::new(s, &case, &Options::default());
        let checked = run
            .run_until(Instant(20_000_000_000))
            .and_then(|()| run.finish());
        checked.unwrap_or_else(|v| panic!("{v}"));
        let done: Vec<u64> = (0..=random)
            .map(|i| run.stats(TaskId(i)).requests())
            .collect();
        let rand_done: u64 = done[1..].iter().sum();
        println!("{}: requests per task {done:?}", policy.name);
        rand_done as f64 / (rand_done + done[0]) as f64
    }

    #[test]
    fn a_group_of_seeky_queues_pays_for_its_reads_disk_time() {
        for random in [2, 4] {
            let v10 = random_share(&TYPE, random);
            let cfq = random_share(&cfq::TYPE, random);
            println!("{random} random readers: share cfq-v10 {v10:.2}, cfq {cfq:.2}");
            // cfq charges each seeky queue one jiffy for a 9 ms read.
            assert!(cfq > 0.7, "cfq {cfq:.2}");
            assert!((0.4..0.6).contains(&v10), "cfq-v10 {v10:.2}");
        }
    }
}
