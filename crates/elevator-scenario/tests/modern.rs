//! Issue 17: today's schedulers beside the classics. The orderings the
//! kernel shows on this machine (measured on a loop device), reproduced in
//! simulation on the `ssd-sata-2016` and `nvme` profiles: ionice RT/0 vs
//! IDLE readers, a QD1 random reader against a buffered writer; kyber's
//! read latency target; mClock's reservation and limit. The tests assert
//! orderings and promises, not the kernel's numbers.

use elevator_metrics::{Report, RunReport};
use elevator_scenario::{builtin, run, RunOptions, Scenario};

const DEVICES: [&str; 2] = ["ssd-sata-2016", "nvme"];

fn run_builtin(name: &str, device: Option<&str>) -> Report {
    let scenario = builtin(name).expect("built-in").expect("valid");
    let options = RunOptions {
        device: device.map(str::to_string),
        ..RunOptions::default()
    };
    run(&scenario, &options, &mut |_| {}).expect("runs")
}

fn policy<'a>(report: &'a Report, name: &str) -> &'a RunReport {
    report
        .runs
        .iter()
        .find(|r| r.scheduler == name)
        .unwrap_or_else(|| panic!("{name} ran"))
}

fn job<'a>(run: &'a RunReport, name: &str) -> &'a elevator_metrics::JobReport {
    run.jobs
        .iter()
        .find(|j| j.name == name)
        .unwrap_or_else(|| panic!("job {name}"))
}

#[test]
fn rt_over_idle_under_mq_deadline_and_bfq_but_not_none_or_kyber() {
    for device in DEVICES {
        let report = run_builtin("modern-ionice-rt-vs-idle", Some(device));
        for r in &report.runs {
            let ratio = job(r, "rt").mb_s / job(r, "idle").mb_s;
            println!(
                "{device} {:<12} RT/IDLE bandwidth {ratio:>8.1}x",
                r.scheduler
            );
            match r.scheduler.as_str() {
                "mq-deadline" | "bfq" => {
                    assert!(ratio > 100.0, "{device} {}: {ratio}", r.scheduler)
                }
                "noop" | "kyber" => assert!(
                    (0.8..1.25).contains(&ratio),
                    "{device} {}: {ratio}",
                    r.scheduler
                ),
                other => panic!("unexpected policy {other}"),
            }
        }
    }
}

#[test]
fn bfq_gives_a_random_reader_several_times_the_iops_against_a_buffered_writer() {
    for device in DEVICES {
        let report = run_builtin("modern-random-read-vs-buffered-write", Some(device));
        let reader = |p: &str| job(policy(&report, p), "reader");
        for r in &report.runs {
            let j = job(r, "reader");
            println!(
                "{device} {:<12} reader {:>7.0} IOPS, p99 {:>6.2} ms",
                r.scheduler, j.iops, j.lat_p99_ms
            );
        }
        let bfq = reader("bfq");
        for other in ["noop", "mq-deadline", "kyber"] {
            let o = reader(other);
            assert!(
                bfq.iops > 3.0 * o.iops,
                "{device}: bfq {} IOPS vs {other} {}",
                bfq.iops,
                o.iops
            );
        }
    }
}

/// The random reader against the buffered writer under `policies`, with
/// the reader's `prio` replaced (None keeps the scenario's) and its
/// `runtime` replaced (None keeps the scenario's 10 s).
fn random_reader_vs_writer_with(
    device: &str,
    policies: &[&str],
    reader_prio: Option<&str>,
    reader_runtime: Option<&str>,
) -> Report {
    let name = "modern-random-read-vs-buffered-write.toml";
    let text = include_str!("../../../scenarios/modern-random-read-vs-buffered-write.toml");
    let text = match reader_runtime {
        Some(runtime) => {
            let line = "runtime = \"10s\"";
            assert_eq!(text.matches(line).count(), 1, "the reader's runtime line");
            text.replace(line, &format!("runtime = \"{runtime}\""))
        }
        None => text.to_string(),
    };
    let text = match reader_prio {
        // The reader is the last job: its keys end the file.
        Some(prio) => format!("{text}\nprio = \"{prio}\"\n"),
        None => text,
    };
    let scenario = Scenario::parse(name, &text).expect("valid");
    let options = RunOptions {
        device: Some(device.to_string()),
        schedulers: Some(policies.iter().map(|p| p.to_string()).collect()),
        ..RunOptions::default()
    };
    run(&scenario, &options, &mut |_| {}).expect("runs")
}

/// The random reader against the buffered writer under bfq's two presets,
/// with the reader's `prio` replaced (None keeps the scenario's).
fn random_reader_vs_writer(device: &str, reader_prio: Option<&str>) -> Report {
    let policies = ["noop", "mq-deadline", "bfq", "bfq-6.1"];
    random_reader_vs_writer_with(device, &policies, reader_prio, None)
}

/// Plugging for a reader that needs it: a QD1 random reader at ionice
/// best-effort 0 (weight 80 against the writeback's 40) makes the scenario
/// asymmetric, so bfq idles for it (4.12's rule and 6.1's alike;
/// `bfq_asymmetric_scenario`), the device drains, and under 6.1 only one
/// large write at a time is injected meanwhile
/// (`bfq_choose_bfqq_for_injection`). Its p99 falls far below noop's and
/// mq-deadline's, which leave it behind the device's full queue of writes.
#[test]
fn bfq_keeps_a_heavier_random_readers_p99_far_below_noop_and_mq_deadline() {
    for device in DEVICES {
        let report = random_reader_vs_writer(device, Some("be/0"));
        let p99 = |p: &str| job(policy(&report, p), "reader").lat_p99_ms;
        for r in &report.runs {
            let (reader, writer) = (job(r, "reader"), job(r, "writer"));
            println!(
                "{device} {:<12} reader p99 {:>6.2} ms, writer {:>7.1} MB/s",
                r.scheduler, reader.lat_p99_ms, writer.mb_s
            );
        }
        for bfq in ["bfq", "bfq-6.1"] {
            for other in ["noop", "mq-deadline"] {
                assert!(
                    p99(bfq) * 5.0 < p99(other),
                    "{device}: {bfq} p99 {} ms vs {other} {} ms",
                    p99(bfq),
                    p99(other)
                );
            }
        }
    }
}

/// What 6.1 does *not* change: at the default weight the reader and the
/// writeback are symmetric, and once the reader's interactive raising
/// ends (`max_service_from_wr`, 120000 sectors, about 2 s in) nothing
/// plugs for a seeky queue on NCQ flash
/// (`idling_needed_for_service_guarantees`: the plugging for "in-flight
/// I/O not belonging to bfqq", `rq_in_driver >= dispatched + 4`, is for
/// raised queues only; 5.12's plugging for the only busy queue never
/// applies, as the writeback always has a request waiting). The async tag
/// share is every slot of an NCQ-31 drive (31 of `nr_requests` 62), and
/// 2022's per-queue share (`bfqq_request_over_limit`) halves it only while
/// the reader's entity is on a service tree, which between its reads it
/// is not (its finish time is behind the virtual time, so it is
/// forgotten). So its reads wait behind the writes in the device, as
/// under noop. The kernel-side figure of the issue (p99 3x below the
/// others) came from a loop device over tmpfs, not a drive with a queue
/// of 512 KiB writes; see the closing note of issue 17.
#[test]
fn bfq_61_at_the_default_weight_leaves_the_readers_p99_at_noops() {
    for device in DEVICES {
        let report = random_reader_vs_writer(device, None);
        let reader = |p: &str| job(policy(&report, p), "reader");
        for p in ["noop", "bfq", "bfq-6.1"] {
            println!(
                "{device} {p:<8} reader {:>7.0} IOPS, p99 {:>6.2} ms",
                reader(p).iops,
                reader(p).lat_p99_ms
            );
        }
        // The raised first seconds still buy several times noop's IOPS...
        assert!(reader("bfq-6.1").iops > 3.0 * reader("noop").iops);
        // ... but the tail is noop's.
        let ratio = reader("bfq-6.1").lat_p99_ms / reader("noop").lat_p99_ms;
        assert!((0.7..1.3).contains(&ratio), "{device}: p99 ratio {ratio}");
    }
}

/// What does keep a default-weight reader's reads out from behind the
/// writes: while the reader is weight-raised (its first 120000 sectors,
/// `max_service_from_wr`: about 1.8 s on `ssd-sata-2016` and 1 s on `nvme`
/// here), bfq plugs for it (`idling_needed_for_service_guarantees`: a
/// raised queue with unraised busy queues beside it), and nothing is
/// injected meanwhile: 4.12 has no injection, and 6.1 injects nothing for
/// a raised queue with a short think time (the fourth alternative in
/// `bfq_select_queue`) and cuts the async tag share to 3/16 of
/// `nr_requests` (`bfq_limit_depth`). So each read finds the device
/// drained. Measured over a 500 ms reader, inside the raising, bfq's p99
/// is far below that of every policy that leaves the read behind the
/// device's queue of 512 KiB writes. The price is the writer's bandwidth
/// while the raising lasts.
#[test]
fn bfq_keeps_a_raised_readers_reads_out_from_behind_the_writes() {
    let policies = ["noop", "deadline", "mq-deadline", "kyber", "bfq", "bfq-6.1"];
    for device in DEVICES {
        let report = random_reader_vs_writer_with(device, &policies, None, Some("500ms"));
        let reader = |p: &str| job(policy(&report, p), "reader");
        for r in &report.runs {
            let (rd, wr) = (job(r, "reader"), job(r, "writer"));
            println!(
                "{device} {:<12} reader {:>6.0} IOPS, p99 {:>6.2} ms, writer {:>7.1} MB/s",
                r.scheduler, rd.iops, rd.lat_p99_ms, wr.mb_s
            );
        }
        for bfq in ["bfq", "bfq-6.1"] {
            for other in ["noop", "deadline", "mq-deadline", "kyber"] {
                assert!(
                    reader(bfq).lat_p99_ms * 10.0 < reader(other).lat_p99_ms,
                    "{device}: {bfq} p99 {} ms vs {other} {} ms",
                    reader(bfq).lat_p99_ms,
                    reader(other).lat_p99_ms
                );
            }
        }
    }
}

#[test]
fn kyber_keeps_the_readers_p99_near_read_lat_nsec_against_a_write_flood() {
    let report = run_builtin("kyber-read-latency-vs-write-flood", None);
    let p99 = |p: &str| job(policy(&report, p), "reader").lat_p99_ms;
    for r in &report.runs {
        println!("{:<12} reader p99 {:.2} ms", r.scheduler, p99(&r.scheduler));
    }
    // read_lat_nsec is 2 ms: kyber's histogram buckets are a quarter of it
    // wide, and it only acts when the p99 leaves the four good buckets.
    assert!(p99("kyber") <= 4.0, "kyber p99 {} ms", p99("kyber"));
    // The others leave the reader behind the writes in the device.
    for other in ["noop", "mq-deadline"] {
        assert!(p99(other) > 20.0, "{other} p99 {} ms", p99(other));
    }
}

#[test]
fn mclock_meets_a_reservation_and_caps_a_limit() {
    let report = run_builtin("mclock-reservation-and-limit", None);
    let group = |run: &RunReport, g: &str| {
        run.groups
            .iter()
            .find(|x| x.name == g)
            .unwrap_or_else(|| panic!("group {g}"))
            .iops
    };
    let mclock = policy(&report, "mclock");
    let (reserved, heavy, capped) = (
        group(mclock, "reserved"),
        group(mclock, "heavy"),
        group(mclock, "capped"),
    );
    println!("mclock: reserved {reserved:.0} IOPS, heavy {heavy:.0}, capped {capped:.0}");
    assert!(reserved >= 0.98 * 5000.0, "reservation missed: {reserved}");
    assert!(capped <= 1.02 * 2000.0, "limit exceeded: {capped}");
    assert!(heavy > 5.0 * reserved, "heavy got {heavy}");

    // Without its reservation the light group gets about its weight's share.
    let text = include_str!("../../../scenarios/mclock-reservation-and-limit.toml")
        .replace("reservation = 5000", "");
    let scenario = Scenario::parse("no-reservation", &text).expect("valid");
    let options = RunOptions {
        schedulers: Some(vec!["mclock".into()]),
        ..RunOptions::default()
    };
    let report = run(&scenario, &options, &mut |_| {}).expect("runs");
    let unreserved = group(&report.runs[0], "reserved");
    println!("mclock without the reservation: {unreserved:.0} IOPS");
    assert!(
        unreserved < 0.2 * reserved,
        "weight alone gave {unreserved}"
    );
}
