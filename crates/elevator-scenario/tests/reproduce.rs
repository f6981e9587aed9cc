//! `elevator reproduce` holds the line: every published table's verdict is
//! no worse than the committed expectations, the README's result tables are
//! what the run prints (`UPDATE_EXPECT=1` rewrites them), every table of
//! every built-in fits 100 columns, and a perturbed model fails the check.

use elevator_metrics::text::WIDTH;
use elevator_scenario::reproduce::{reproduce, Expectations, ReproduceOptions, EXPECTATIONS};
use elevator_scenario::{builtin, builtins, run, RunOptions};
use std::path::Path;

const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
const BEGIN: &str = "<!-- reproduce:begin (generated: UPDATE_EXPECT=1 cargo test -p elevator-scenario --test reproduce) -->\n";
const END: &str = "<!-- reproduce:end -->";

fn committed() -> Expectations {
    let text = std::fs::read_to_string(EXPECTATIONS).expect("committed expectations file");
    Expectations::parse(EXPECTATIONS, &text).expect("expectations parse")
}

fn too_wide(name: &str, text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.chars().count() > WIDTH)
        .map(|l| format!("{name}: {} columns: {l}", l.chars().count()))
        .collect()
}

#[test]
fn every_table_holds_its_committed_verdict_and_the_readme_is_its_snapshot() {
    let r = reproduce(&ReproduceOptions::default(), &|_, _, _| {}).expect("reproduces");
    // Every 2003 experiment and the letter on both devices.
    let ids: Vec<&str> = r.tables.iter().map(|t| t.id.as_str()).collect();
    for want in [
        "morton-1-parallel-streaming-reads",
        "morton-10-cp-1g-and-sync",
        "bfq-letter-2016/ssd-sata-2016/xterm-seq",
        "bfq-letter-2016/sata-hdd/oowriter-random",
    ] {
        assert!(ids.contains(&want), "no table {want} in {ids:?}");
    }
    assert_eq!(ids.iter().filter(|i| i.starts_with("morton-")).count(), 11);

    let text = r.to_text();
    println!("{text}");
    let mut problems = committed().check(&r);
    problems.extend(committed().missing(&r));
    assert!(
        problems.is_empty(),
        "worse than committed, or missing:\n{}",
        problems.join("\n")
    );

    // 100 columns: the reproduce text and every built-in's own table.
    let mut wide = too_wide("reproduce", &text);
    let mut covered = Vec::new();
    for report in &r.reports {
        wide.extend(too_wide(&report.scenario, &report.to_table()));
        covered.push(report.scenario.clone());
    }
    for (name, _) in builtins() {
        if covered.iter().any(|c| c == name) {
            continue;
        }
        let s = builtin(name).expect("built-in").expect("valid");
        let report = run(&s, &RunOptions::default(), &mut |_| {}).expect("runs");
        let table = report.to_table();
        assert!(!table.contains("NaN"), "{name} prints NaN:\n{table}");
        wide.extend(too_wide(name, &table));
        covered.push(name.to_string());
    }
    assert_eq!(covered.len(), builtins().len());
    assert!(
        wide.is_empty(),
        "lines over {WIDTH} columns:\n{}",
        wide.join("\n")
    );

    // The HTML report: one non-empty chart per table, a bar per figure.
    let html = elevator_scenario::html::reproduction_html(&r);
    assert_eq!(html.matches("<svg class=\"chart\"").count(), r.tables.len());
    for section in html.split("<section").skip(1) {
        let figures = section.matches("<tr><td>").count();
        assert!(figures > 0, "a table without rows:\n{section}");
        assert!(
            section.contains("<rect class=\"mark ours\""),
            "a chart without our bars:\n{section}"
        );
    }
    assert!(!html.contains("NaN"), "NaN in the report");
    // Self-contained: nothing to fetch.
    assert!(
        !html.contains("src=") && !html.contains("href="),
        "the report links out"
    );

    // The README's tables are this run's.
    let readme = std::fs::read_to_string(README).expect("README.md");
    let (Some(b), Some(e)) = (readme.find(BEGIN), readme.find(END)) else {
        panic!("README.md lacks the markers {BEGIN:?} … {END:?}");
    };
    let snapshot = format!("\n{}", r.to_markdown());
    let current = &readme[b + BEGIN.len()..e];
    if current != snapshot {
        if std::env::var_os("UPDATE_EXPECT").is_some() {
            let updated = format!("{}{snapshot}{}", &readme[..b + BEGIN.len()], &readme[e..]);
            std::fs::write(README, updated).expect("README.md rewritten");
        } else {
            panic!(
                "README.md's reproduce tables differ from the run (UPDATE_EXPECT=1 rewrites):\n\
                 --- README\n{current}\n--- run\n{snapshot}"
            );
        }
    }
}

fn perturbed_check(options: ReproduceOptions) -> Vec<String> {
    let r = reproduce(&options, &|_, _, _| {}).expect("runs");
    println!("{}", r.to_text());
    committed().check(&r)
}

#[test]
fn a_disk_without_its_write_cache_fails_the_check() {
    // The 2003 disk's profile with its write-back cache off: every write
    // then holds the head, and experiment 10 (cp 1 GB, then sync) orders
    // the policies otherwise and moves away from the seed's figures.
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../elevator-device/profiles/ide-2003.toml");
    let text = std::fs::read_to_string(&source).expect("ide-2003 profile");
    assert!(
        text.contains("\nwrite_cache = true\n"),
        "the profile changed"
    );
    let perturbed = text.replace("\nwrite_cache = true\n", "\nwrite_cache = false\n");
    let path = std::env::temp_dir().join(format!("ide-2003-no-cache-{}.toml", std::process::id()));
    std::fs::write(&path, perturbed).expect("temp profile");
    let problems = perturbed_check(ReproduceOptions {
        only: Some("morton-10".into()),
        device: Some(path.display().to_string()),
        ..ReproduceOptions::default()
    });
    let _ = std::fs::remove_file(&path);
    assert!(
        problems.iter().any(|p| p.starts_with("morton-10")),
        "a perturbed disk passed: {problems:?}"
    );
}

#[test]
fn the_unperturbed_experiment_passes_and_an_unknown_one_is_an_error() {
    let problems = perturbed_check(ReproduceOptions {
        only: Some("morton-6".into()),
        jobs: 1,
        ..ReproduceOptions::default()
    });
    assert!(problems.is_empty(), "{problems:?}");
    let e = reproduce(
        &ReproduceOptions {
            only: Some("no-such-experiment".into()),
            ..ReproduceOptions::default()
        },
        &|_, _, _| {},
    )
    .expect_err("matches nothing");
    assert!(e.to_string().contains("matches no experiment"), "{e}");
}
