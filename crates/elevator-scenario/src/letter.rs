//! The 2016 BFQ cover letter's table (shared/seeds/valente-2016-bfq-cover-
//! letter.txt), reproduced on the simulated devices: the aggregate
//! throughput of ten raw sequential and ten raw random readers, and the
//! cold-cache start-up time of xterm, LibreOffice Writer and konsole while
//! either kind of reader runs, under each policy, with the letter's figures
//! beside ours.
//!
//! It is built from two built-in scenarios, `bfq-startup-seq` and
//! `bfq-startup-random`, run in variants: the readers alone for ten seconds
//! (the throughput rows), each application's start-up trace in place of
//! the scenario's (the start-up rows), and each application on the idle
//! device (a reference row the letter does not have). konsole has no trace
//! in the S suite: gnome-terminal stands in for it. `elevator letter`
//! prints the table.

use crate::{run, RunOptions, Scenario, ScenarioError};
use elevator_core::Duration;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The letter's applications: (its row name, our trace, what we call it).
pub const APPS: [(&str, &str, &str); 3] = [
    ("xterm", "xterm", "xterm"),
    ("oowriter", "lowriter", "LibreOffice Writer"),
    ("konsole", "gnometerm", "gnome-terminal"),
];

/// The letter's policies, in its column order.
pub const LETTER_SCHEDULERS: [&str; 4] = ["bfq", "cfq", "deadline", "noop"];

/// The device the letter measured on (a Plextor PX-256M5S SSD).
pub const LETTER_DEVICE: &str = "ssd-sata-2016";

/// How long the readers run alone for the throughput rows.
const READERS_ALONE: Duration = Duration::from_secs(10);

/// The letter's timeout: a start-up longer than this is ">60".
pub const TIMEOUT_S: f64 = 60.0;

/// What runs in the background.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Background {
    Idle,
    Sequential,
    Random,
}

impl Background {
    fn scenario(self) -> &'static str {
        match self {
            Background::Random => "bfq-startup-random",
            _ => "bfq-startup-seq",
        }
    }
}

/// The letter's figure for a row and policy, as printed there.
pub fn letter_figure(row: &str, background: Background, sched: &str) -> Option<&'static str> {
    let col = LETTER_SCHEDULERS.iter().position(|&s| s == sched)?;
    let row: [&str; 4] = match (background, row) {
        (Background::Sequential, "throughput") => ["399", "400", "400", "400"],
        (Background::Random, "throughput") => ["191", "193", "202", "203"],
        (Background::Sequential, "xterm") => ["0.21", ">60", "1.91", "1.88"],
        (Background::Sequential, "oowriter") => ["0.93", ">60", "10.2", "10.8"],
        (Background::Sequential, "konsole") => ["0.89", ">60", "29.7", "30.0"],
        (Background::Random, "xterm") => ["0.20", "0.30", "0.21", "0.21"],
        (Background::Random, "oowriter") => ["0.81", "3.28", "0.80", "0.81"],
        (Background::Random, "konsole") => ["0.88", "2.90", "1.02", "1.00"],
        _ => return None,
    };
    Some(row[col])
}

/// Which devices and policies to run.
#[derive(Clone, Debug)]
pub struct LetterOptions {
    pub devices: Vec<String>,
    pub schedulers: Vec<String>,
    pub seed: Option<u64>,
    /// Factor on the traces' think times in place of the scenarios'
    /// (`Some(1.0)`: as recorded).
    pub think_scale: Option<f64>,
}

impl Default for LetterOptions {
    /// Both devices of issue 5 and the letter's policies (those registered).
    fn default() -> Self {
        LetterOptions {
            devices: vec![LETTER_DEVICE.into(), "sata-hdd".into()],
            schedulers: LETTER_SCHEDULERS
                .iter()
                .filter(|s| elevator_sched::stack::find(s).is_some())
                .map(|s| s.to_string())
                .collect(),
            seed: None,
            think_scale: None,
        }
    }
}

/// One device's results.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceLetter {
    pub device: String,
    /// (background, policy) → the readers' MiB/s running alone.
    pub throughput: BTreeMap<(Background, String), f64>,
    /// (background, policy) → the readers' MiB/s while the applications
    /// start, averaged over the three start-ups.
    pub throughput_during: BTreeMap<(Background, String), f64>,
    /// (background, letter row, policy) → start-up seconds (`None`: over
    /// the timeout).
    pub startup: BTreeMap<(Background, String, String), Option<f64>>,
}

/// The whole table.
#[derive(Clone, Debug, PartialEq)]
pub struct LetterReport {
    pub schedulers: Vec<String>,
    pub devices: Vec<DeviceLetter>,
    /// Think time of each trace as replayed, after the scenarios'
    /// `think_scale` (letter row → seconds).
    pub think_s: BTreeMap<String, f64>,
    /// The factor the traces' think times were replayed with.
    pub think_scale: f64,
}

impl LetterReport {
    pub fn device(&self, name: &str) -> Option<&DeviceLetter> {
        self.devices.iter().find(|d| d.device == name)
    }
}

impl DeviceLetter {
    /// Start-up seconds (`None`: over the timeout or not run).
    pub fn startup(&self, bg: Background, row: &str, sched: &str) -> Option<f64> {
        self.startup
            .get(&(bg, row.to_string(), sched.to_string()))
            .copied()
            .flatten()
    }
    pub fn throughput(&self, bg: Background, sched: &str) -> Option<f64> {
        self.throughput.get(&(bg, sched.to_string())).copied()
    }
}

/// A built-in letter scenario, its start-ups' think times scaled by
/// `think_scale` where given (checked by [`run_letter`]).
fn base(bg: Background, think_scale: Option<f64>) -> Result<Scenario, ScenarioError> {
    let mut s = crate::builtin(bg.scenario()).expect("built-in letter scenario")?;
    if let Some(k) = think_scale {
        for st in &mut s.startups {
            st.think_scale = k;
        }
    }
    Ok(s)
}

/// Run every variant; `progress` hears a line per finished run.
pub fn run_letter(
    options: &LetterOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<LetterReport, ScenarioError> {
    if let Some(k) = options.think_scale {
        crate::startup::check_think_scale(k)
            .map_err(|m| ScenarioError::command_line(Some("think-scale"), m))?;
    }
    let mut devices = Vec::new();
    let mut think_s = BTreeMap::new();
    let think_scale = base(Background::Sequential, options.think_scale)?.startups[0].think_scale;
    for &(row, trace, _) in &APPS {
        let t = crate::startup::load_trace(trace)
            .map_err(|m| ScenarioError::new("<letter>", None, Some("startup.trace"), m))?;
        let t = t.with_think_scaled(think_scale);
        think_s.insert(row.to_string(), t.total_think().as_secs_f64());
    }
    for device in &options.devices {
        let opts = RunOptions {
            schedulers: Some(options.schedulers.clone()),
            device: Some(device.clone()),
            seed: options.seed,
            tunables: Vec::new(),
            trace: false,
            charts: false,
            clock: None,
            check: false,
        };
        let mut d = DeviceLetter {
            device: device.clone(),
            ..DeviceLetter::default()
        };
        for bg in [Background::Sequential, Background::Random] {
            // The readers alone.
            let mut s = base(bg, options.think_scale)?;
            s.startups.clear();
            for j in &mut s.jobs {
                j.background = false;
                j.runtime = Some(READERS_ALONE);
            }
            for r in run(&s, &opts, &mut |_| {})?.runs {
                let bytes: u64 = r.jobs.iter().map(|j| j.bytes).sum();
                let mib_s = bytes as f64 / f64::from(1 << 20) / r.simulated_s.max(1e-9);
                progress(&format!(
                    "{device} {bg:?} readers alone, {}: {mib_s:.0} MiB/s",
                    r.scheduler
                ));
                d.throughput.insert((bg, r.scheduler.clone()), mib_s);
            }
        }
        for bg in [Background::Idle, Background::Sequential, Background::Random] {
            for &(row, trace, _) in &APPS {
                let mut s = base(bg, options.think_scale)?;
                if bg == Background::Idle {
                    s.jobs.clear();
                }
                s.startups[0].trace = trace.to_string();
                s.time_limit = s.startups[0].start + Duration::from_secs(TIMEOUT_S as u64);
                for r in run(&s, &opts, &mut |_| {})?.runs {
                    let app = r.jobs.iter().find(|j| j.name == s.startups[0].name);
                    let secs = app
                        .and_then(|j| j.extra.get("startup_s"))
                        .copied()
                        .filter(|&t| t <= TIMEOUT_S);
                    progress(&format!(
                        "{device} {bg:?} {row}, {}: {}",
                        r.scheduler,
                        secs.map_or(">60".to_string(), |t| format!("{t:.2} s"))
                    ));
                    d.startup
                        .insert((bg, row.to_string(), r.scheduler.clone()), secs);
                    if bg != Background::Idle {
                        let bytes: u64 = r
                            .jobs
                            .iter()
                            .filter(|j| j.name != s.startups[0].name)
                            .map(|j| j.bytes)
                            .sum();
                        let mib_s = bytes as f64 / f64::from(1 << 20) / r.simulated_s.max(1e-9);
                        *d.throughput_during
                            .entry((bg, r.scheduler.clone()))
                            .or_insert(0.0) += mib_s / APPS.len() as f64;
                    }
                }
            }
        }
        devices.push(d);
    }
    Ok(LetterReport {
        schedulers: options.schedulers.clone(),
        devices,
        think_s,
        think_scale,
    })
}

const CELL: usize = 15;
const LABEL: usize = 22;

impl LetterReport {
    /// The table in the letter's layout, one per device: ours, and the
    /// letter's figure in brackets where it has one.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "The 2016 BFQ cover letter's table: our figure, the letter's in brackets (Plextor PX-256M5S SSD,\n\
             modelled by {LETTER_DEVICE}; it has none for other devices). Throughput in MiB/s (iostat -m);\n\
             start-up in seconds, \">60\" past the letter's 60 s timeout. konsole has no trace in the S suite:\n\
             gnome-terminal stands in for it. Start-ups replay S's traces, their think times scaled by\n\
             {:.3} (bfq-startup-seq.toml fits 0.075 to the letter's machine; 1: as recorded):",
            self.think_scale
        );
        let thinks: Vec<String> = APPS
            .iter()
            .map(|&(row, _, ours)| {
                format!(
                    "{ours} {:.2} s",
                    self.think_s.get(row).copied().unwrap_or(0.0)
                )
            })
            .collect();
        let _ = writeln!(out, "{} of think time.", thinks.join(", "));
        let width = (CELL + 1) * self.schedulers.len() + LABEL + 3;
        let rule = "-".repeat(width);
        for d in &self.devices {
            let letter = d.device == LETTER_DEVICE;
            let cell = |ours: String, theirs: Option<&str>| match (letter, theirs) {
                (true, Some(t)) => format!("{ours} ({t})"),
                _ => ours,
            };
            let line = |out: &mut String, cells: &[String], label: &str| {
                let _ = write!(out, "|");
                for c in cells {
                    let _ = write!(out, "{c:^CELL$}|");
                }
                let _ = writeln!(out, " {label:<LABEL$}|");
            };
            let blank: Vec<String> = vec![String::new(); self.schedulers.len()];
            let _ = writeln!(out, "\n{}", d.device);
            let _ = writeln!(out, "{rule}");
            let names: Vec<String> = self.schedulers.iter().map(|s| s.to_uppercase()).collect();
            line(&mut out, &names, "");
            let _ = writeln!(out, "{rule}");
            line(&mut out, &blank, "Aggregate Throughput");
            line(&mut out, &blank, "      [MiB/s]");
            for (bg, label) in [
                (Background::Sequential, "10 raw seq. readers"),
                (Background::Random, "10 raw random readers"),
            ] {
                let cells: Vec<String> = self
                    .schedulers
                    .iter()
                    .map(|s| {
                        let ours = d
                            .throughput(bg, s)
                            .map_or("-".into(), |v| format!("{v:.0}"));
                        cell(ours, letter_figure("throughput", bg, s))
                    })
                    .collect();
                line(&mut out, &cells, label);
            }
            line(&mut out, &blank, "");
            line(&mut out, &blank, "... while apps start");
            for (bg, label) in [
                (Background::Sequential, "10 raw seq. readers"),
                (Background::Random, "10 raw random readers"),
            ] {
                let cells: Vec<String> = self
                    .schedulers
                    .iter()
                    .map(|s| {
                        d.throughput_during
                            .get(&(bg, s.clone()))
                            .map_or("-".into(), |v| format!("{v:.0}"))
                    })
                    .collect();
                line(&mut out, &cells, label);
            }
            for (bg, title) in [
                (Background::Idle, "Start-up time idle"),
                (Background::Sequential, "Start-up time 10 seq"),
                (Background::Random, "Start-up time 10 rand"),
            ] {
                let _ = writeln!(out, "{rule}");
                line(&mut out, &blank, title);
                line(&mut out, &blank, "      [sec]");
                for &(row, trace, _) in &APPS {
                    let cells: Vec<String> = self
                        .schedulers
                        .iter()
                        .map(|s| {
                            let v = match d.startup.get(&(bg, row.to_string(), s.clone())) {
                                Some(Some(t)) => format!("{t:.2}"),
                                Some(None) => ">60".into(),
                                None => "-".into(),
                            };
                            cell(v, letter_figure(row, bg, s))
                        })
                        .collect();
                    let label = if row == trace {
                        row.to_string()
                    } else {
                        format!("{row} ({trace})")
                    };
                    line(&mut out, &cells, &label);
                }
            }
            let _ = writeln!(out, "{rule}");
        }
        out
    }
}
