//! A setting as a Linux block device takes it: sysfs writes, a udev rule,
//! and the kernel's own default for the device type.
//!
//! Names: our `noop` is blk-mq's `none`; `bfq` and `bfq-6.1` are the
//! kernel's `bfq`; `mq-deadline` and `kyber` keep theirs. Tunables are
//! written under `queue/iosched/` with the names and units the registry
//! carries (the kernel's); block settings under `queue/`. Policies that no
//! current kernel has (cfq, anticipatory, deadline-mc, ...) get a comment
//! instead of a line.

use crate::space::Setting;
use elevator_core::QueueLimits;

/// The kernel's name for `policy`, if a current kernel has it.
pub fn kernel_name(policy: &str) -> Option<&'static str> {
    let name = elevator_sched::find(policy).map_or(policy, |t| t.name);
    match name {
        "noop" => Some("none"),
        "mq-deadline" => Some("mq-deadline"),
        "kyber" => Some("kyber"),
        "bfq" | "bfq-6.1" => Some("bfq"),
        _ => None,
    }
}

/// The registered policy the kernel picks for a device with `limits`
/// (block/elevator.c `elevator_get_default`, v5.16+: `none` for a queue
/// with several hardware queues, shared tags or
/// `BLK_MQ_F_NO_SCHED_BY_DEFAULT` (NVMe, loop, virtio with many queues),
/// else `mq-deadline`). A device model does not say how many hardware
/// queues it has; a queue deeper than SATA's 32 tags stands for NVMe and
/// its kind.
pub fn kernel_default(limits: &QueueLimits) -> &'static str {
    if !limits.rotational && limits.queue_depth > 32 {
        "noop"
    } else {
        "mq-deadline"
    }
}

/// The shell lines that apply `s` to `/dev/DEV` (root; run in order: the
/// scheduler first, its tunables after).
pub fn shell_lines(s: &Setting, dev: &str) -> Vec<String> {
    let q = format!("/sys/block/{dev}/queue");
    let mut out = Vec::new();
    match kernel_name(&s.policy) {
        Some(k) => {
            out.push(format!("echo {k} > {q}/scheduler"));
            for (t, v) in &s.tunables {
                out.push(format!("echo {v} > {q}/iosched/{t}"));
            }
        }
        None => out.push(format!(
            "# {} is not in current kernels; nothing to write for it",
            s.policy
        )),
    }
    for (b, v) in &s.block {
        out.push(format!("echo {v} > {q}/{b}"));
    }
    out
}

/// A udev rule applying `s` to device `dev` whenever it appears.
pub fn udev_rule(s: &Setting, dev: &str) -> String {
    let mut attrs = Vec::new();
    match kernel_name(&s.policy) {
        Some(k) => {
            attrs.push(format!("ATTR{{queue/scheduler}}=\"{k}\""));
            for (t, v) in &s.tunables {
                attrs.push(format!("ATTR{{queue/iosched/{t}}}=\"{v}\""));
            }
        }
        None => return format!("# {} is not in current kernels: no udev rule", s.policy),
    }
    for (b, v) in &s.block {
        attrs.push(format!("ATTR{{queue/{b}}}=\"{v}\""));
    }
    // One key per line (udev joins lines ending in a backslash), so that
    // the rule prints within 100 columns.
    format!(
        "# /etc/udev/rules.d/60-elevator-{dev}.rules\n\
         ACTION==\"add|change\", KERNEL==\"{dev}\", \\\n  {}",
        attrs.join(", \\\n  ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_the_kernels_files() {
        let s = Setting {
            policy: "bfq-6.1".into(),
            tunables: vec![("slice_idle".into(), 0)],
            block: vec![("nr_requests".into(), 64)],
        };
        assert_eq!(
            shell_lines(&s, "sdb"),
            vec![
                "echo bfq > /sys/block/sdb/queue/scheduler",
                "echo 0 > /sys/block/sdb/queue/iosched/slice_idle",
                "echo 64 > /sys/block/sdb/queue/nr_requests",
            ]
        );
        let rule = udev_rule(&s, "sdb");
        assert!(rule.contains("KERNEL==\"sdb\", \\\n  ATTR{queue/scheduler}=\"bfq\", \\\n  ATTR{queue/iosched/slice_idle}=\"0\""), "{rule}");
        assert!(shell_lines(&Setting::defaults("cfq"), "sdb")[0].starts_with('#'));
        let nvme = elevator_device::open("nvme").unwrap().limits();
        assert_eq!(kernel_default(&nvme), "noop");
        let sata = elevator_device::open("ssd-sata-2016").unwrap().limits();
        assert_eq!(kernel_default(&sata), "mq-deadline");
    }
}
