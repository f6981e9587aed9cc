//! Policy traces as data: every `testdata/*.txt` file is a list of calls
//! into a policy with the expected answers written after `->`.
//!
//! ```text
//! # A comment. Each `policy` line starts a fresh policy instance.
//! policy deadline fifo_batch=2 writes_starved=2
//! limits max_sectors=16             (optional, right after `policy`)
//! insert 1 R 100+8 task=1 t=0       op R, W (async write), WS (fsync write,
//!                                   REQ_NOIDLE), WD (O_DIRECT write), F;
//! insert 2 W 50+8 task=2 t=0        task=1 prio=be/4 group=0 t=now by default
//! dispatch t=0 -> 1                 one dispatch, nothing completes
//! complete 1 t=2ms                  the device finished dispatched request 1
//! drain t=2ms -> 2 3+4@300+16 empty dispatch, completing each at once, until
//!                                   empty or wait=<until>
//! queued -> 2                       Scheduler::queued()
//! exit task=1 t=3ms                 Scheduler::task_exited
//! ```
//!
//! A dispatched request prints as its id, or, when it carries merged
//! requests, as `survivor+merged+...@sector+sectors` (merged ids ascending).
//! Times are `0` or an integer with a unit: `ns`, `us`, `ms`, `s`; they never
//! go back within a policy block, and `t=` defaults to the current time.
//!
//! `UPDATE_EXPECT=1 cargo test --test traces` rewrites the expectations
//! with what the policies answer; review the diff before committing it.
//!
//! Why this calls the policy itself rather than going through the shared
//! harness (`elevator_sched::harness`): a trace *is* the sequence of calls,
//! each at a time the file states, and the test is the answer to each
//! call. The harness turns a workload and a fake device into calls of its
//! own choosing (when to dispatch, when a request completes), which is
//! what the conformance suite and the unit tests that measure shares
//! want and what a trace must not have. What the two share is the
//! checker: every call of a trace goes through `Checked`, as the
//! harness's and the simulator's do, and a broken promise fails the trace
//! at its line.

use elevator_core::{Duration, GroupId, Instant, IoPrio, Op, QueueLimits, Request, TaskId};
use elevator_sched::check::{CheckOptions, Checked, OnViolation};
use elevator_sched::{Dispatch, Scheduler};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[test]
fn policy_traces() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("testdata directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no traces in {}", dir.display());
    let update = std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v == "1");
    let mut failures = String::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable trace");
        let name = path.file_name().expect("file name").to_string_lossy();
        let outcome = run_trace(&text).unwrap_or_else(|e| panic!("{name}:{e}"));
        if update {
            if outcome.rewritten != text {
                std::fs::write(path, &outcome.rewritten).expect("writable trace");
                eprintln!("updated {name}");
            }
        } else {
            for m in &outcome.mismatches {
                let _ = writeln!(
                    failures,
                    "{name}:{}: {}\n    expected: {}\n    actual:   {}",
                    m.line, m.command, m.expected, m.actual
                );
            }
        }
    }
    assert!(
        failures.is_empty(),
        "traces differ from the policies (UPDATE_EXPECT=1 rewrites them):\n{failures}"
    );
}

/// The reader must reject malformed traces with the line that is wrong.
#[test]
fn malformed_traces_name_the_line() {
    let cases = [
        ("insert 1 R 0+8\n", "1: `insert` before any `policy` line"),
        ("policy nope\n", "1: no policy named \"nope\""),
        ("policy noop\ninsert 1 X 0+8\n", "2: bad op \"X\""),
        (
            "policy noop\ninsert 1 R 0+8 t=5ms\ndispatch t=1ms -> 1\n",
            "3: time goes back",
        ),
        (
            "policy deadline fifo_batch=x\n",
            "1: bad tunable value \"fifo_batch=x\"",
        ),
        (
            "policy deadline batch=2\n",
            "1: deadline has no tunable \"batch\"",
        ),
        ("policy noop\ncomplete 3\n", "2: request 3 is not in flight"),
        (
            "policy noop\nqueued -> 0\nlimits max_sectors=8\n",
            "3: `limits` must follow",
        ),
        (
            "policy noop\ninsert 1 R 0+8 -> 1\n",
            "2: `insert 1 R 0+8` has no result",
        ),
    ];
    for (text, want) in cases {
        let err = run_trace(text)
            .err()
            .unwrap_or_else(|| panic!("accepted {text:?}"));
        assert!(
            err.starts_with(want),
            "{text:?}: got {err:?}, want {want:?}"
        );
    }
}

/// Wrong and missing expectations are reported, and the rewrite (what
/// `UPDATE_EXPECT=1` writes) fixes exactly those lines.
#[test]
fn expectations_are_checked_and_rewritten() {
    let text = "# noop -> comments stay as they are\n\
                policy noop\n\
                insert 1 R 0+8 t=0\n\
                insert 2 R 8+8\n\
                queued -> 2\n\
                dispatch\n\
                drain   ->   empty\n";
    let outcome = run_trace(text).expect("well-formed");
    let lines: Vec<(usize, &str, &str)> = outcome
        .mismatches
        .iter()
        .map(|m| (m.line, m.expected.as_str(), m.actual.as_str()))
        .collect();
    assert_eq!(
        lines,
        vec![(5, "2", "1"), (6, "(nothing)", "1+2@0+16")],
        "{outcome:?}"
    );
    assert_eq!(
        outcome.rewritten,
        "# noop -> comments stay as they are\n\
         policy noop\n\
         insert 1 R 0+8 t=0\n\
         insert 2 R 8+8\n\
         queued -> 1\n\
         dispatch -> 1+2@0+16\n\
         drain -> empty\n"
    );
    assert!(run_trace(&outcome.rewritten).unwrap().mismatches.is_empty());
}

#[test]
fn rendering_round_trips() {
    for t in ["0", "7ns", "250us", "8ms", "5s"] {
        assert_eq!(render_time(parse_time(t).unwrap()), t);
    }
    assert_eq!(parse_time("1500us").unwrap(), Instant(1_500_000));
    assert_eq!(render_time(Instant(1_500_000)), "1500us");
}

/// One expectation that did not hold.
#[derive(Debug)]
struct Mismatch {
    line: usize,
    command: String,
    expected: String,
    actual: String,
}

/// The result of running one file.
#[derive(Debug)]
struct Outcome {
    /// The file with every expectation replaced by the actual answer.
    rewritten: String,
    mismatches: Vec<Mismatch>,
}

/// The policy under test in the current block, inside the checker.
struct Block {
    policy: Checked,
    ty: &'static elevator_sched::SchedulerType,
    tunables: elevator_sched::Tunables,
    now: Instant,
    in_flight: BTreeMap<u64, Request>,
    /// Whether any call was made yet (`limits` must come before).
    started: bool,
}

/// Run a trace; `Err("line: message")` on malformed input.
fn run_trace(text: &str) -> Result<Outcome, String> {
    let mut block: Option<Block> = None;
    let mut rewritten = String::with_capacity(text.len());
    let mut mismatches = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            rewritten.push_str(raw);
            rewritten.push('\n');
            continue;
        }
        let (command, expected) = match raw.split_once("->") {
            Some((c, e)) => (c.trim(), Some(e.trim())),
            None => (raw.trim(), None),
        };
        let actual = step(&mut block, command).map_err(|message| format!("{line}: {message}"))?;
        if let Some(v) = block.as_ref().and_then(|b| b.policy.violation()) {
            return Err(format!("{line}: invariant violated: {v}"));
        }
        match actual {
            Some(actual) => {
                let _ = writeln!(rewritten, "{command} -> {actual}");
                if expected != Some(actual.as_str()) {
                    mismatches.push(Mismatch {
                        line,
                        command: command.to_string(),
                        expected: expected.unwrap_or("(nothing)").to_string(),
                        actual,
                    });
                }
            }
            None => {
                if expected.is_some() {
                    return Err(format!("{line}: `{command}` has no result to expect"));
                }
                rewritten.push_str(raw);
                rewritten.push('\n');
            }
        }
    }
    Ok(Outcome {
        rewritten,
        mismatches,
    })
}

/// Carry out one command; `Some(answer)` for commands that answer.
fn step(block: &mut Option<Block>, command: &str) -> Result<Option<String>, String> {
    let mut words = command.split_whitespace();
    let Some(verb) = words.next() else {
        return Ok(None);
    };
    let args: Vec<&str> = words.collect();
    if verb == "policy" {
        *block = Some(new_block(&args)?);
        return Ok(None);
    }
    let Some(b) = block.as_mut() else {
        return Err(format!("`{verb}` before any `policy` line"));
    };
    if verb == "limits" {
        if b.started {
            return Err("`limits` must follow the `policy` line directly".into());
        }
        let limits = parse_limits(&args)?;
        b.policy = checked((b.ty.build)(&b.tunables, &limits), &limits);
        return Ok(None);
    }
    b.started = true;
    let (keyed, positional) = split_keyed(&args)?;
    if let Some(t) = keyed.get("t") {
        let t = parse_time(t)?;
        if t < b.now {
            return Err(format!(
                "time goes back: t={} after t={}",
                render_time(t),
                render_time(b.now)
            ));
        }
        b.now = t;
    }
    let now = b.now;
    let known = |allowed: &[&str]| -> Result<(), String> {
        match keyed.keys().find(|k| !allowed.contains(k)) {
            Some(k) => Err(format!("`{verb}` takes no `{k}=`")),
            None => Ok(()),
        }
    };
    match verb {
        "insert" => {
            known(&["t", "task", "prio", "group", "meta"])?;
            let request = parse_insert(&positional, &keyed, now)?;
            b.policy.insert(request, now);
            Ok(None)
        }
        "dispatch" => {
            known(&["t"])?;
            no_positional(verb, &positional)?;
            let answer = b.policy.dispatch(now);
            Ok(Some(render_dispatch(answer, &mut b.in_flight)))
        }
        "drain" => {
            known(&["t"])?;
            no_positional(verb, &positional)?;
            let mut out = Vec::new();
            loop {
                let answer = b.policy.dispatch(now);
                let last = !matches!(answer, Dispatch::Request(_));
                let token = render_dispatch(answer, &mut b.in_flight);
                if !last {
                    let id = token_survivor(&token);
                    let request = b.in_flight.remove(&id).expect("just dispatched");
                    b.policy.complete(&request, now);
                }
                out.push(token);
                if last {
                    break;
                }
                if out.len() > 100_000 {
                    return Err("drain does not end".into());
                }
            }
            Ok(Some(out.join(" ")))
        }
        "complete" => {
            known(&["t"])?;
            let [id] = positional[..] else {
                return Err("usage: complete <id> [t=<time>]".into());
            };
            let id: u64 = id.parse().map_err(|_| format!("bad id {id:?}"))?;
            let request = b
                .in_flight
                .remove(&id)
                .ok_or_else(|| format!("request {id} is not in flight"))?;
            b.policy.complete(&request, now);
            Ok(None)
        }
        "exit" => {
            known(&["t", "task"])?;
            no_positional(verb, &positional)?;
            let task = keyed.get("task").ok_or("usage: exit task=<n> [t=<time>]")?;
            let task = task.parse().map_err(|_| format!("bad task {task:?}"))?;
            b.policy.task_exited(TaskId(task), now);
            Ok(None)
        }
        "queued" => {
            known(&[])?;
            no_positional(verb, &positional)?;
            Ok(Some(b.policy.queued().to_string()))
        }
        other => Err(format!("unknown command {other:?}")),
    }
}

fn new_block(args: &[&str]) -> Result<Block, String> {
    let (&name, overrides) = args
        .split_first()
        .ok_or("usage: policy <name> [tunable=value]...")?;
    let ty = elevator_sched::find(name).ok_or_else(|| format!("no policy named {name:?}"))?;
    let mut values = Vec::new();
    for o in overrides {
        let value = o
            .split_once('=')
            .and_then(|(k, v)| Some((k, v.parse::<i64>().ok()?)))
            .ok_or_else(|| format!("bad tunable value {o:?}"))?;
        values.push(value);
    }
    let tunables = ty.tunables(values).map_err(|e| e.to_string())?;
    let limits = QueueLimits::default();
    let policy = checked((ty.build)(&tunables, &limits), &limits);
    Ok(Block {
        policy,
        ty,
        tunables,
        now: Instant::ZERO,
        in_flight: BTreeMap::new(),
        started: false,
    })
}

/// `policy` inside the checker, recording the first violation.
fn checked(policy: Box<dyn Scheduler>, limits: &QueueLimits) -> Checked {
    Checked::new(policy, limits, CheckOptions::default(), OnViolation::Record)
}

fn split_keyed<'a>(args: &[&'a str]) -> Result<(BTreeMap<&'a str, &'a str>, Vec<&'a str>), String> {
    let mut keyed = BTreeMap::new();
    let mut positional = Vec::new();
    for a in args {
        match a.split_once('=') {
            Some((k, v)) => {
                if keyed.insert(k, v).is_some() {
                    return Err(format!("`{k}=` given twice"));
                }
            }
            None => positional.push(*a),
        }
    }
    Ok((keyed, positional))
}

fn no_positional(verb: &str, positional: &[&str]) -> Result<(), String> {
    match positional.first() {
        Some(p) => Err(format!("`{verb}` takes no {p:?}")),
        None => Ok(()),
    }
}

fn parse_limits(args: &[&str]) -> Result<QueueLimits, String> {
    let (keyed, positional) = split_keyed(args)?;
    no_positional("limits", &positional)?;
    let mut limits = QueueLimits::default();
    for (k, v) in keyed {
        let n: u64 = v.parse().map_err(|_| format!("bad limit {k}={v}"))?;
        match k {
            "max_sectors" => limits.max_sectors = n as u32,
            "queue_depth" => limits.queue_depth = n as u32,
            "rotational" => limits.rotational = n != 0,
            "capacity" => limits.capacity = n,
            _ => return Err(format!("unknown limit {k:?}")),
        }
    }
    Ok(limits)
}

fn parse_insert(
    positional: &[&str],
    keyed: &BTreeMap<&str, &str>,
    now: Instant,
) -> Result<Request, String> {
    let [id, op, extent] = positional[..] else {
        return Err(
            "usage: insert <id> <R|W|WS|WD|F> <sector>+<sectors> [task= prio= group= meta= t=]"
                .into(),
        );
    };
    let id: u64 = id.parse().map_err(|_| format!("bad id {id:?}"))?;
    // WS is fsync's WRITE_SYNC (sync + REQ_NOIDLE), WD an O_DIRECT write
    // (sync, no REQ_NOIDLE).
    let (op, sync, noidle) = match op {
        "R" => (Op::Read, true, false),
        "W" => (Op::Write, false, false),
        "WS" => (Op::Write, true, true),
        "WD" => (Op::Write, true, false),
        "F" => (Op::Flush, true, false),
        other => return Err(format!("bad op {other:?}")),
    };
    let (sector, sectors) = extent
        .split_once('+')
        .and_then(|(s, n)| Some((s.parse().ok()?, n.parse().ok()?)))
        .ok_or_else(|| format!("bad extent {extent:?}, want <sector>+<sectors>"))?;
    let number = |key: &str, default: u32| -> Result<u32, String> {
        keyed.get(key).map_or(Ok(default), |v| {
            v.parse().map_err(|_| format!("bad {key}={v}"))
        })
    };
    let prio = match keyed.get("prio") {
        Some(p) => p.parse::<IoPrio>().map_err(|e| e.to_string())?,
        None => IoPrio::default(),
    };
    Ok(Request {
        id: elevator_core::RequestId(id),
        op,
        sync,
        sector,
        sectors,
        task: TaskId(number("task", 1)?),
        prio,
        group: GroupId(number("group", 0)?),
        arrival: now,
        merged: Vec::new(),
        meta: number("meta", 0)? != 0,
        noidle,
    })
}

/// `5ms`, `250us`, `0`: an integer and a unit.
fn parse_time(text: &str) -> Result<Instant, String> {
    if text == "0" {
        return Ok(Instant::ZERO);
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("time {text:?} needs a unit (ns, us, ms, s)"))?;
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("bad time {text:?}"))?;
    let d = match unit {
        "ns" => Duration::from_nanos(n),
        "us" => Duration::from_micros(n),
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        _ => return Err(format!("bad time unit in {text:?}")),
    };
    Ok(Instant::ZERO + d)
}

/// The largest unit that shows `t` exactly.
fn render_time(t: Instant) -> String {
    let ns = t.nanos();
    if ns == 0 {
        return "0".into();
    }
    for (unit, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        // (Not `is_multiple_of`: the workspace supports Rust 1.80.)
        let (whole, rest) = (ns / scale, ns % scale);
        if rest == 0 {
            return format!("{whole}{unit}");
        }
    }
    format!("{ns}ns")
}

fn render_dispatch(answer: Dispatch, in_flight: &mut BTreeMap<u64, Request>) -> String {
    match answer {
        Dispatch::Empty => "empty".into(),
        Dispatch::Wait { until } => format!("wait={}", render_time(until)),
        Dispatch::Request(r) => {
            let mut token = r.id.0.to_string();
            if !r.merged.is_empty() {
                let mut merged: Vec<u64> = r.merged.iter().map(|id| id.0).collect();
                merged.sort_unstable();
                for id in merged {
                    let _ = write!(token, "+{id}");
                }
                let _ = write!(token, "@{}+{}", r.sector, r.sectors);
            }
            in_flight.insert(r.id.0, r);
            token
        }
    }
}

/// The survivor id of a rendered request token.
fn token_survivor(token: &str) -> u64 {
    let end = token.find(['+', '@']).unwrap_or(token.len());
    token[..end].parse().expect("a rendered request token")
}
