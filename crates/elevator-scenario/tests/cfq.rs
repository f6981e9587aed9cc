//! CFQ's defining behaviour on a simulated disk: the I/O class decides
//! who may use the disk, the level how much of it a queue gets.

use elevator_scenario::{run_one, Scenario};

/// One direct sequential reader per (name, prio), each in its own 4 GiB
/// region, 10 GiB apart, reading 128 KiB at a time for `runtime`.
fn readers(device: &str, runtime: &str, jobs: &[(String, String)]) -> Scenario {
    let mut text = format!(
        r#"
name = "cfq-prio"
description = "direct sync readers at several I/O priorities"
device = "{device}"
schedulers = ["cfq"]

[result]
name = "aggregate"
unit = "MB/s"
metric = "aggregate_mb_s"
"#
    );
    for (i, (name, prio)) in jobs.iter().enumerate() {
        text += &format!(
            r#"
[[job]]
name = "{name}"
rw = "read"
bs = "128k"
region = "4g"
offset = "{}g"
runtime = "{runtime}"
prio = "{prio}"
"#,
            10 * i
        );
    }
    Scenario::parse("cfq-prio", &text).expect("valid scenario")
}

fn kib_read(scenario: &Scenario, device: &str) -> Vec<(String, u64)> {
    let run = run_one(scenario, "cfq", device, 1, &[]).expect("runs");
    run.jobs
        .iter()
        .map(|j| (j.name.clone(), j.read_bytes / 1024))
        .collect()
}

#[test]
fn rt_takes_the_disk_and_its_levels_share_it_by_slice() {
    let mut jobs: Vec<(String, String)> = Vec::new();
    for l in 0..8 {
        jobs.push((format!("rt{l}"), format!("rt/{l}")));
    }
    for l in 0..8 {
        jobs.push((format!("be{l}"), format!("be/{l}")));
    }
    jobs.push(("idle".into(), "idle".into()));
    let device = "sata-hdd";
    let got = kib_read(&readers(device, "20s", &jobs), device);
    let total: u64 = got.iter().map(|(_, k)| k).sum();
    println!("cfq, 17 direct readers on {device} for 20 s, KiB read per task:");
    for (name, kib) in &got {
        println!(
            "  {name:>5} {kib:>9} KiB  {:5.1}%",
            100.0 * *kib as f64 / total as f64
        );
    }
    let rt: Vec<u64> = got[..8].iter().map(|(_, k)| *k).collect();
    let others: u64 = got[8..].iter().map(|(_, k)| k).sum();
    let rt_total: u64 = rt.iter().sum();
    assert!(rt.iter().all(|&k| k > 0), "an RT level got nothing: {rt:?}");
    assert!(
        rt.windows(2).all(|w| w[0] > w[1]),
        "RT service does not fall from level 0 to 7: {rt:?}"
    );
    assert!(
        rt[0] > 4 * rt[7],
        "RT level 0 should get far more than level 7: {rt:?}"
    );
    assert!(
        others * 100 < rt_total,
        "BE and IDLE got {others} KiB against RT's {rt_total} KiB"
    );
}

#[test]
fn two_be_levels_share_time_in_the_ratio_of_their_slices() {
    let jobs = vec![
        ("be0".to_string(), "be/0".to_string()),
        ("be7".to_string(), "be/7".to_string()),
    ];
    for device in ["sata-hdd", "ide-2003"] {
        let got = kib_read(&readers(device, "20s", &jobs), device);
        let ratio = got[0].1 as f64 / got[1].1 as f64;
        println!(
            "cfq on {device}: be/0 read {} KiB, be/7 {} KiB, ratio {ratio:.2} (slices 180 ms : 40 ms = 4.5)",
            got[0].1, got[1].1
        );
        assert!(
            (3.6..=5.4).contains(&ratio),
            "be/0 : be/7 = {ratio:.2} on {device}, expected about 4.5"
        );
    }
}
