//! What a policy costs the CPU per request, for the simulator's optional
//! CPU limit (`EngineConfig::cpu_cost`, `--set block.cpu_cost=NS`, on by
//! default in `elevator tune`).
//!
//! A blk-mq scheduler runs insert and dispatch under one lock of its own
//! (`dd->lock` in mq-deadline, `bfqd->lock` in BFQ), so however many cores
//! submit, one request at a time passes the policy: its per-request cost
//! bounds the IOPS a fast device can get through it.
//!
//! Anchors, from the kernel's own documentation
//! (Documentation/block/bfq-iosched.rst, section 1 "When may BFQ be
//! useful?", v5.x-6.x): "the per-request processing time of BFQ ... about
//! 1.9 us ... of mq-deadline ... about 0.7 us" on an Intel i7-2760QM, and
//! a sustainable rate of 400 K IOPS (i7-4850HQ) to 80 K (Cortex-A53); the
//! 4.1x-era text said ~30 K IOPS on average CPUs, ~50 K on faster ones.
//!
//! The other policies are scaled from mq-deadline's 0.7 us by our own
//! criterion figures (`cargo bench -p elevator-sched --bench policies`,
//! ns per insert+dispatch+complete at 64 tasks on an idle run, README
//! "Speed": mq-deadline 123, deadline 121, anticipatory 200, cfq 338,
//! cfq-2003 156, cfq-2.6.32 234, deadline-mc 209, kyber 85, mclock 113,
//! linus24 455); ours are leaner than the kernel's code (no locking, no
//! cgroup accounting, no tracing), so only their ratios are used.
//! `noop` stands for blk-mq's `none`, which takes no scheduler lock
//! (requests go from the per-CPU software queues to the hardware queue):
//! zero.

use elevator_core::Duration;

/// mq-deadline's per-request cost (Documentation/block/bfq-iosched.rst).
pub const MQ_DEADLINE_NS: u64 = 700;
/// BFQ's per-request cost (same source).
pub const BFQ_NS: u64 = 1900;

/// Our criterion ns per request at 64 tasks, for the scaled policies.
const BENCH_NS: &[(&str, u64)] = &[
    ("mq-deadline", 123),
    ("deadline", 121),
    ("anticipatory", 200),
    ("cfq", 338),
    ("cfq-2003", 156),
    ("cfq-2.6.32", 234),
    ("cfq-2.6.32-brunelle", 231),
    ("deadline-mc", 209),
    ("kyber", 85),
    ("mclock", 113),
    ("linus24", 455),
];

/// The CPU time `policy` (a registered name) spends per request.
pub fn per_request(policy: &str) -> Duration {
    let name = crate::find(policy).map_or(policy, |t| t.name);
    let ns = match name {
        "noop" => 0,
        "mq-deadline" => MQ_DEADLINE_NS,
        "bfq" | "bfq-6.1" => BFQ_NS,
        other => match BENCH_NS.iter().find(|(n, _)| *n == other) {
            Some(&(_, ours)) => MQ_DEADLINE_NS * ours / BENCH_NS[0].1,
            None => MQ_DEADLINE_NS,
        },
    };
    Duration(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_has_a_cost_and_the_anchors_are_the_kernels() {
        for t in crate::registry() {
            let c = per_request(t.name);
            assert!(c.nanos() < 5_000, "{}: {c:?}", t.name);
        }
        assert_eq!(per_request("bfq").nanos(), 1900);
        assert_eq!(per_request("mq-deadline").nanos(), 700);
        assert_eq!(per_request("none").nanos(), 0);
        assert!(per_request("kyber") < per_request("mq-deadline"));
    }
}
