//! The search finds the known optimum of a toy objective, exhaustively in
//! a small space and with TPE in a large one, and repeats itself exactly.

use elevator_tune::objective::{Figures, JobFigures, Objective};
use elevator_tune::search::{search, SearchOptions};
use elevator_tune::space::{Axis, Setting, Space, Uses};

/// A toy "run": p99 is smallest for mq-deadline with fifo_batch 64,
/// read_expire 250 and nr_requests 64; other policies are worse.
fn toy(s: &Setting) -> Result<Figures, String> {
    let get = |k: &str, d: i64| {
        s.tunables
            .iter()
            .chain(&s.block)
            .find(|(n, _)| n == k)
            .map_or(d, |p| p.1) as f64
    };
    let base = match s.policy.as_str() {
        "mq-deadline" => 0.0,
        "kyber" => 3.0,
        "bfq-6.1" => 5.0,
        _ => 8.0,
    };
    let p99 = 1.0
        + base
        + (get("fifo_batch", 16).log2() - 6.0).powi(2)
        + (get("read_expire", 500).log2() - 250f64.log2()).powi(2)
        + (get("nr_requests", 128).log2() - 6.0).powi(2);
    Ok(Figures {
        jobs: vec![JobFigures {
            name: "reader".into(),
            p50_ms: p99 / 2.0,
            p99_ms: p99,
            p999_ms: p99,
            mean_ms: p99,
            max_ms: p99,
            mb_s: 100.0 / p99,
            iops: 1000.0 / p99,
        }],
        total_mb_s: 100.0 / p99,
        total_iops: 1000.0 / p99,
        groups: Vec::new(),
    })
}

fn nr() -> Axis {
    Axis {
        name: "nr_requests".into(),
        values: vec![32, 64, 128, 256],
        default: 128,
    }
}

fn optimum() -> Setting {
    Setting {
        policy: "mq-deadline".into(),
        tunables: vec![("read_expire".into(), 250), ("fifo_batch".into(), 64)],
        block: vec![("nr_requests".into(), 64)],
    }
}

fn sorted(mut s: Setting) -> Setting {
    s.tunables.sort();
    s
}

#[test]
fn exhaustive_search_finds_the_toy_optimum() {
    // Only mq-deadline's read_expire and fifo_batch vary: 5 x 5 x 4 points.
    let mut space = Space::new(&["mq-deadline".into()], Uses::default(), vec![nr()]).unwrap();
    space.policies[0]
        .tunables
        .retain(|a| a.name == "read_expire" || a.name == "fifo_batch");
    assert_eq!(space.size(), 100);
    let objective = Objective::parse("minimize p99(reader)").unwrap();
    let o = SearchOptions {
        exhaustive_limit: 100,
        ..SearchOptions::default()
    };
    let r = search(
        &space,
        &objective,
        &toy,
        &[Setting::defaults("mq-deadline")],
        &o,
        &|_, _| {},
    );
    assert!(r.exhaustive);
    assert_eq!(r.evaluations, 100);
    assert_eq!(sorted(r.best().unwrap().setting.clone()), sorted(optimum()));
}

#[test]
fn tpe_finds_the_toy_optimum_in_a_large_space_and_repeats_itself() {
    let space = Space::new(&[], Uses::default(), vec![nr()]).unwrap();
    assert!(space.size() > 10_000, "{}", space.size());
    let objective = Objective::parse("minimize p99(reader)").unwrap();
    let o = SearchOptions {
        budget: 400,
        patience: 400,
        exhaustive_limit: 64,
        threads: 2,
        ..SearchOptions::default()
    };
    let baselines: Vec<Setting> = ["noop", "mq-deadline", "kyber", "bfq-6.1"]
        .iter()
        .map(|p| Setting::defaults(p))
        .collect();
    let r = search(&space, &objective, &toy, &baselines, &o, &|_, _| {});
    assert!(!r.exhaustive);
    eprintln!("evaluations {} early {}", r.evaluations, r.stopped_early);
    let best = r.best().unwrap();
    let value = best.score.as_ref().unwrap().values[0];
    // The optimum's p99 is 1.0 whatever the other tunables are.
    assert!(
        best.setting.policy == "mq-deadline" && (value - 1.0).abs() < 1e-9,
        "{} {value}",
        best.setting
    );
    // Same seed, other thread count: the same ranking.
    let again = search(
        &space,
        &objective,
        &toy,
        &baselines,
        &SearchOptions { threads: 1, ..o },
        &|_, _| {},
    );
    let names = |r: &elevator_tune::search::SearchResult| {
        r.ranked
            .iter()
            .map(|t| t.setting.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&r), names(&again));
}
