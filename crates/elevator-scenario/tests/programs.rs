//! `[[process]]` sections are read by the program registry: every
//! registered kind parses from its required keys alone, and a key its kind
//! does not declare, or a value of the wrong type, is an error naming the
//! file, the line and the field.

use elevator_host::process::registry::{Default as Given, KeyType, SetKind};
use elevator_host::process::PROGRAMS;
use elevator_scenario::Scenario;

const HEAD: &str = r#"
name = "p"
description = "one process of each kind"

[result]
name = "time"
unit = "s"
metric = "completion"
job = "p"

[[files]]
name = "file"
kind = "file"
size = "8m"

[[files]]
name = "empty"
kind = "empty"

[[files]]
name = "dir"
kind = "dir"

[[files]]
name = "app"
kind = "app"
"#;

fn set_for(kind: SetKind) -> &'static str {
    match kind {
        SetKind::File => "file",
        SetKind::Empty => "empty",
        SetKind::Dir | SetKind::Tree => "dir",
        SetKind::App => "app",
    }
}

/// A `[[process]]` named `p` of kind `name` with its required keys.
fn section(name: &str) -> String {
    let t = elevator_host::process::programs::find(name).unwrap();
    let mut s = format!("\n[[process]]\nname = \"p\"\nkind = \"{name}\"\n");
    for k in t.keys {
        if k.default != Given::Required {
            continue;
        }
        match k.ty {
            KeyType::Files { kinds, .. } => {
                s += &format!("{} = \"{}\"\n", k.name, set_for(kinds[0]));
            }
            KeyType::Size { .. } => s += &format!("{} = \"1m\"\n", k.name),
            ref other => panic!("{name}: no stand-in for required {} ({other:?})", k.name),
        }
    }
    s
}

#[test]
fn every_registered_kind_parses_from_its_required_keys() {
    for t in PROGRAMS {
        let text = format!("{HEAD}{}", section(t.name));
        let s =
            Scenario::parse("my.toml", &text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", t.name));
        let p = &s.host.as_ref().unwrap().processes[0];
        assert_eq!(p.program.name, t.name);
        for k in t.keys {
            let given = p.args.get(k.name).is_some();
            assert_eq!(given, k.default != Given::Absent, "{}.{}", t.name, k.name);
        }
    }
}

#[test]
fn an_unknown_key_or_a_wrong_type_is_an_error_naming_the_field() {
    let text = format!("{HEAD}{}colour = 3\n", section("dd"));
    let line = text.lines().position(|l| l.starts_with("colour")).unwrap() + 1;
    let e = Scenario::parse("my.toml", &text).unwrap_err().to_string();
    println!("{e}");
    assert!(
        e.starts_with(&format!("my.toml:{line}: key `process.colour`")),
        "{e}"
    );
    assert!(e.contains("does not apply to kind \"dd\""), "{e}");

    let text = format!("{HEAD}{}threads = \"four\"\n", section("tiotest"));
    let line = text.lines().position(|l| l.starts_with("threads")).unwrap() + 1;
    let e = Scenario::parse("my.toml", &text).unwrap_err().to_string();
    println!("{e}");
    assert!(
        e.starts_with(&format!("my.toml:{line}: key `process.threads`")),
        "{e}"
    );

    let text = format!("{HEAD}{}", section("dd").replace("size = \"1m\"\n", ""));
    let e = Scenario::parse("my.toml", &text).unwrap_err().to_string();
    println!("{e}");
    assert!(
        e.contains("key `process.size`") && e.contains("needs `size`"),
        "{e}"
    );

    let text = format!("{HEAD}\n[[process]]\nname = \"p\"\nkind = \"rsync\"\n");
    let e = Scenario::parse("my.toml", &text).unwrap_err().to_string();
    println!("{e}");
    assert!(
        e.contains("key `process.kind`") && e.contains("tiotest"),
        "{e}"
    );
}

/// A tiotest and an fsync-tester run from a scenario print, in the report,
/// their per-call samples, tiotest's two tables and every fsync time, all
/// within 100 columns; the JSON carries the same samples.
#[test]
fn the_report_prints_the_tools_own_output_and_per_call_samples() {
    let text = format!(
        "{HEAD}\n[[process]]\nname = \"tio\"\nkind = \"tiotest\"\ndir = \"dir\"\nthreads = 2\n\
         size = \"2m\"\nrandom_ops = 100\n\n[[process]]\nname = \"p\"\nkind = \"fsync-tester\"\n\
         files = \"empty\"\ninterval = \"1s\"\nduration = \"3s\"\n"
    )
    .replace(
        "description = \"one process of each kind\"",
        "description = \"x\"\nschedulers = [\"deadline\"]",
    );
    let s = Scenario::parse("my.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    let report =
        elevator_scenario::run(&s, &elevator_scenario::RunOptions::default(), &mut |_| {}).unwrap();
    let table = report.to_table();
    println!("{table}");
    for line in table.lines() {
        assert!(line.chars().count() <= 100, "{line}");
    }
    assert!(table.contains("per-call samples, deadline"));
    assert!(table.contains("Tiotest results for 2 concurrent io threads:"));
    assert!(table.contains("Tiotest latency results:"));
    let job = |name: &str| {
        report.runs[0]
            .jobs
            .iter()
            .find(|j| j.name == name)
            .unwrap()
            .clone()
    };
    let tester = job("p");
    // 0, 1, 2, 3 s: four rounds, each printed.
    assert_eq!(tester.calls["fsync"].count, 4);
    assert_eq!(tester.output.len(), 4);
    for line in &tester.output {
        assert!(table.contains(line.as_str()), "{line}");
    }
    assert_eq!(job("tio").calls["seq_write.write"].count, 2 * 512);
    assert!(report.to_json().contains("\"seq_write.write\""));
}
