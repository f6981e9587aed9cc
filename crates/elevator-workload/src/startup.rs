//! Application start-up, replayed from a real cold-cache block trace.
//!
//! The traces are those of the BFQ benchmark suite S
//! (`Algodev-github/S`, `comm_startup_lat/{xterm,gnometerm,lowriter}.trace`,
//! GPL-2.0): every block request an application's processes issued while
//! it started with cold caches, one per line,
//!
//! ```text
//! proc-pid  Δt_s  size_sectors  start_sector  Seq|Rand  distance  seq_run_len  R|RA|RM|WS  abs_time_s  START|C
//! xterm-31657 .015820  8 113248520 Rand  -65536   0 RA 4.682409 C
//! ```
//!
//! where `Δt` is the pause before the request (the think time) and the
//! action says what it was: `R` a read, `RA` readahead, `RM` a metadata
//! read, `WS` a synchronous write (a journal commit).
//!
//! The replay follows S's `replay-startup-io.cc`, with its one known bug
//! fixed: S assigns the fractional part of `Δt` to the seconds and the
//! integer part to the nanoseconds, so its replays run back to back; here
//! each request waits its `Δt`. The rules:
//! - each traced process is its own task (its own queue in a scheduler that
//!   keeps per-task queues) with its own 20 MB region, as S gives each
//!   replaying thread a 20 MB file; `Seq` requests continue where the
//!   process's previous request ended, `Rand` ones go to a seeded random
//!   offset in the region;
//! - requests are issued in trace order: each waits its `Δt` after the
//!   previous one was issued (if that one was asynchronous) or completed;
//! - `RA` requests are asynchronous (S submits them with libaio), all the
//!   others synchronous; a synchronous request first waits for its
//!   process's outstanding readaheads; the last request is synchronous;
//! - reads are O_DIRECT-like (no page cache); `WS` is a synchronous write;
//!   `RM` is flagged metadata (the kernel's `REQ_META | REQ_PRIO`).
//!
//! `Δt` is the gap between two requests' issue times on the machine that
//! recorded the trace, so it holds that machine's computing and whatever
//! waits the replay does not reproduce; [`StartupTrace::with_think_scaled`]
//! replays a trace at another machine's speed (a scenario's
//! `think_scale`).
//!
//! The figure is the start-up time: from the first request's submission to
//! the last completion (`startup_s` in the job's extra figures).
//!
//! Invariant: every request is submitted once and completes once; the
//! chain waits on at most one thing at a time.

use crate::Part;
use elevator_core::{BlockIo, Completion, Io, Workload};
use elevator_core::{
    Duration, GroupId, Instant, IoPrio, Op, Prng, RequestId, Sector, TaskId, SECTOR_SIZE,
};
use elevator_metrics::JobStats;
use std::fmt;

/// Bytes of each traced process's region (S's `OUT_FILE_SIZE`).
pub const PROCESS_REGION_BYTES: u64 = 20_000_000;

/// The columns of a trace line, as error messages name them.
pub const FIELDS: [&str; 10] = [
    "process", "think", "size", "sector", "kind", "distance", "run", "action", "time", "mark",
];

/// Largest request accepted from a trace (32 MiB).
const MAX_REQUEST_SECTORS: u64 = 65_536;
/// Longest think time accepted from a trace.
const MAX_THINK: Duration = Duration::from_secs(3600);

/// What a traced request did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `R`: a read the process waited for.
    Read,
    /// `RA`: readahead, not waited for at once.
    ReadAhead,
    /// `RM`: a metadata read.
    ReadMeta,
    /// `WS`: a synchronous write.
    WriteSync,
}

impl Action {
    fn parse(s: &str) -> Option<Action> {
        Some(match s {
            "R" => Action::Read,
            "RA" => Action::ReadAhead,
            "RM" => Action::ReadMeta,
            "WS" => Action::WriteSync,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Read => "R",
            Action::ReadAhead => "RA",
            Action::ReadMeta => "RM",
            Action::WriteSync => "WS",
        }
    }
}

/// One line of a start-up trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRequest {
    /// Index into [`StartupTrace::processes`].
    pub process: usize,
    /// Pause before this request.
    pub think: Duration,
    pub sectors: u32,
    /// Where the original request went (kept for reference; the replay
    /// places requests in its own regions).
    pub sector: Sector,
    /// `Seq`: continues the process's previous request.
    pub sequential: bool,
    pub action: Action,
    /// Line in the trace file (1-based).
    pub line: usize,
}

/// A parsed start-up trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartupTrace {
    /// `proc-pid` of each process, in order of first appearance.
    pub processes: Vec<String>,
    pub requests: Vec<TraceRequest>,
}

/// A trace line that does not parse: which file, line and field, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    pub file: String,
    /// 1-based; 0 when the problem is the whole file.
    pub line: usize,
    /// One of [`FIELDS`], or `"line"` for a wrong number of fields.
    pub field: &'static str,
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(
                f,
                "{}:{}: field `{}`: {}",
                self.file, self.line, self.field, self.message
            )
        }
    }
}

impl std::error::Error for TraceError {}

/// Seconds written as a decimal (`.015820`, `4.666589`, `0`) in exact ns.
fn parse_seconds(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a decimal number of seconds");
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(bad());
    }
    let secs: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    // Nanoseconds from the first nine fractional digits (the rest is below
    // a nanosecond and dropped).
    let mut nanos = 0u64;
    for (i, b) in frac.bytes().take(9).enumerate() {
        nanos += u64::from(b - b'0') * 10u64.pow(8 - i as u32);
    }
    secs.checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(nanos))
        .map(Duration)
        .ok_or_else(bad)
}

impl StartupTrace {
    /// Parse the text of trace `file` (the name is only for errors).
    /// Blank lines and lines starting with `#` are skipped.
    pub fn parse(file: &str, text: &str) -> Result<StartupTrace, TraceError> {
        let mut processes: Vec<String> = Vec::new();
        let mut requests = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |field: &'static str, message: String| TraceError {
                file: file.to_string(),
                line,
                field,
                message,
            };
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let cols: Vec<&str> = trimmed.split_whitespace().collect();
            if cols.len() < FIELDS.len() {
                let missing = FIELDS[cols.len()];
                return Err(err(
                    missing,
                    format!("missing (a line has {} fields)", FIELDS.len()),
                ));
            }
            if cols.len() > FIELDS.len() {
                return Err(err(
                    "line",
                    format!(
                        "{} fields, expected {}: {}",
                        cols.len(),
                        FIELDS.len(),
                        FIELDS.join(" ")
                    ),
                ));
            }
            let process = match processes.iter().position(|p| p == cols[0]) {
                Some(p) => p,
                None => {
                    processes.push(cols[0].to_string());
                    processes.len() - 1
                }
            };
            let think = parse_seconds(cols[1]).map_err(|m| err("think", m))?;
            if think > MAX_THINK {
                return Err(err("think", format!("{} s is over an hour", cols[1])));
            }
            let sectors: u64 = cols[2]
                .parse()
                .map_err(|_| err("size", format!("{:?} is not a number of sectors", cols[2])))?;
            if sectors == 0 || sectors > MAX_REQUEST_SECTORS {
                return Err(err(
                    "size",
                    format!("{sectors} sectors: a request is 1..={MAX_REQUEST_SECTORS}"),
                ));
            }
            let sector: Sector = cols[3]
                .parse()
                .map_err(|_| err("sector", format!("{:?} is not a sector number", cols[3])))?;
            let sequential = match cols[4] {
                "Seq" => true,
                "Rand" => false,
                other => return Err(err("kind", format!("{other:?}: want Seq or Rand"))),
            };
            cols[5].parse::<i64>().map_err(|_| {
                err(
                    "distance",
                    format!("{:?} is not a signed distance", cols[5]),
                )
            })?;
            cols[6]
                .parse::<u64>()
                .map_err(|_| err("run", format!("{:?} is not a run length", cols[6])))?;
            let action = Action::parse(cols[7])
                .ok_or_else(|| err("action", format!("{:?}: want R, RA, RM or WS", cols[7])))?;
            parse_seconds(cols[8]).map_err(|m| err("time", m))?;
            if cols[9] != "START" && cols[9] != "C" {
                return Err(err("mark", format!("{:?}: want START or C", cols[9])));
            }
            requests.push(TraceRequest {
                process,
                think,
                sectors: sectors as u32,
                sector,
                sequential,
                action,
                line,
            });
        }
        if requests.is_empty() {
            return Err(TraceError {
                file: file.to_string(),
                line: 0,
                field: "line",
                message: "no requests in the trace".into(),
            });
        }
        Ok(StartupTrace {
            processes,
            requests,
        })
    }

    /// The think time the replay honours (every `Δt` but the first's, which
    /// S also ignores): a lower bound on the start-up time.
    pub fn total_think(&self) -> Duration {
        self.requests
            .iter()
            .skip(1)
            .fold(Duration::ZERO, |acc, r| acc + r.think)
    }

    /// The same trace with every `Δt` multiplied by `factor` (rounded to
    /// the nanosecond): a trace recorded on a slower machine, replayed at
    /// the speed of another.
    ///
    /// # Panics
    /// If `factor` is negative or not finite (scenarios check it first).
    pub fn with_think_scaled(mut self, factor: f64) -> Self {
        assert!(
            factor.is_finite() && factor >= 0.0,
            "think scale {factor} is not a finite non-negative number"
        );
        for r in &mut self.requests {
            let ns = (r.think.nanos() as f64 * factor).round() as u64;
            r.think = Duration::from_nanos(ns);
        }
        self
    }

    pub fn total_sectors(&self) -> u64 {
        self.requests.iter().map(|r| u64::from(r.sectors)).sum()
    }

    /// The trace as text again (one line per request; the columns the
    /// replay ignores are written as zeros).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for r in &self.requests {
            let ns = r.think.nanos();
            out.push_str(&format!(
                "{} {}.{:09} {} {} {} 0 0 {} 0 C\n",
                self.processes[r.process],
                ns / 1_000_000_000,
                ns % 1_000_000_000,
                r.sectors,
                r.sector,
                if r.sequential { "Seq" } else { "Rand" },
                r.action.as_str()
            ));
        }
        out
    }
}

const WAKE_START: u64 = 0;
const WAKE_ISSUE: u64 = 1;

/// What the replay's chain of requests is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chain {
    /// Not started.
    Idle,
    /// A timer for the next request's think time is armed.
    Thinking,
    /// The next (synchronous) request waits for its process's readaheads.
    Draining,
    /// A synchronous request is in flight.
    Blocked(RequestId),
    /// Every request has been issued.
    Issued,
}

/// A start-up replay: a [`Part`] with one task per traced process.
#[derive(Clone, Debug)]
pub struct StartupReplay {
    pub name: String,
    trace: StartupTrace,
    first_task: u32,
    /// When the application is launched.
    pub start: Duration,
    /// First sector of the first process's region.
    pub region_start: Sector,
    /// Sectors of each process's region.
    pub process_region_sectors: u64,
    pub prio: IoPrio,
    pub group: GroupId,
    rng: Prng,
    next: usize,
    chain: Chain,
    /// Per process: where its next `Seq` request goes in its region.
    offsets: Vec<u64>,
    /// Per process: readaheads in flight.
    pending_async: Vec<u32>,
    in_flight: u32,
    stats: JobStats,
    done: bool,
}

impl StartupReplay {
    /// Replay `trace` as tasks `first_task ..`, its regions from
    /// `region_start` on; random offsets come from `seed` and `name`.
    pub fn new(name: &str, trace: StartupTrace, first_task: u32, seed: u64) -> Self {
        let n = trace.processes.len();
        StartupReplay {
            name: name.to_string(),
            trace,
            first_task,
            start: Duration::ZERO,
            region_start: 0,
            process_region_sectors: PROCESS_REGION_BYTES / SECTOR_SIZE,
            prio: IoPrio::default(),
            group: GroupId::ROOT,
            rng: Prng::derive(seed, name),
            next: 0,
            chain: Chain::Idle,
            offsets: vec![0; n],
            pending_async: vec![0; n],
            in_flight: 0,
            stats: JobStats::new(name),
            done: false,
        }
    }

    /// Sectors the replay's regions take, from `region_start`.
    pub fn footprint_sectors(&self) -> u64 {
        self.process_region_sectors * self.trace.processes.len() as u64
    }

    pub fn trace(&self) -> &StartupTrace {
        &self.trace
    }

    fn task_of(&self, process: usize) -> TaskId {
        TaskId(self.first_task + process as u32)
    }

    /// Whether request `i` is replayed asynchronously.
    fn is_async(&self, i: usize) -> bool {
        self.trace.requests[i].action == Action::ReadAhead && i + 1 < self.trace.requests.len()
    }

    /// Move the chain on: think before request `next` (unless
    /// `think_done`), issue it, and go on through asynchronous requests
    /// until one must be waited for.
    fn advance(&mut self, mut think_done: bool, io: &mut Io<'_>) {
        loop {
            if self.next >= self.trace.requests.len() {
                self.chain = Chain::Issued;
                return;
            }
            let think = self.trace.requests[self.next].think;
            if !think_done && think > Duration::ZERO {
                self.chain = Chain::Thinking;
                io.wake_at(io.now() + think, WAKE_ISSUE);
                return;
            }
            think_done = false;
            let i = self.next;
            let p = self.trace.requests[i].process;
            let asynchronous = self.is_async(i);
            if !asynchronous && self.pending_async[p] > 0 {
                self.chain = Chain::Draining;
                return;
            }
            let id = self.submit(i, io);
            self.next += 1;
            if asynchronous {
                self.pending_async[p] += 1;
            } else {
                self.chain = Chain::Blocked(id);
                return;
            }
        }
    }

    fn submit(&mut self, i: usize, io: &mut Io<'_>) -> RequestId {
        let r = &self.trace.requests[i];
        let sectors = u64::from(r.sectors).min(self.process_region_sectors);
        let offset = if r.sequential {
            let at = self.offsets[r.process];
            if at + sectors > self.process_region_sectors {
                0
            } else {
                at
            }
        } else {
            self.rng.below(self.process_region_sectors - sectors + 1)
        };
        self.offsets[r.process] = offset + sectors;
        if self.stats.started.is_none() {
            self.stats.started = Some(io.now());
        }
        self.in_flight += 1;
        io.submit(BlockIo {
            op: if r.action == Action::WriteSync {
                Op::Write
            } else {
                Op::Read
            },
            sync: true,
            sector: self.region_start + r.process as u64 * self.process_region_sectors + offset,
            sectors: sectors as u32,
            task: self.task_of(r.process),
            prio: self.prio,
            group: self.group,
            meta: r.action == Action::ReadMeta,
            // A traced `WS` is taken as fsync's `WRITE_SYNC` (an
            // application start-up does not write with O_DIRECT).
            noidle: r.action == Action::WriteSync,
        })
    }

    fn finish_if_done(&mut self, io: &mut Io<'_>) {
        if self.done || self.chain != Chain::Issued || self.in_flight > 0 {
            return;
        }
        self.done = true;
        let now = io.now();
        self.stats.finished = Some(now);
        let started = self.stats.started.unwrap_or(now);
        self.stats
            .extra
            .insert("startup_s".into(), now.since(started).as_secs_f64());
        for p in 0..self.trace.processes.len() {
            io.task_exited(self.task_of(p));
        }
    }
}

impl Workload for StartupReplay {
    fn start(&mut self, io: &mut Io<'_>) {
        io.wake_at(Instant::ZERO + self.start, WAKE_START);
    }

    fn wake(&mut self, token: u64, io: &mut Io<'_>) {
        // S ignores the first request's think time; later wake-ups end one.
        debug_assert!(token == WAKE_START || self.chain == Chain::Thinking);
        self.advance(true, io);
        self.finish_if_done(io);
    }

    fn completed(&mut self, done: &Completion, io: &mut Io<'_>) {
        self.in_flight -= 1;
        if done.error.is_some() {
            // The replayed application reads on: S's replayer does not
            // stop at a failed read; the error is counted.
            self.stats.errors += 1;
        } else {
            self.stats.record(
                done.completed,
                done.op == Op::Read,
                u64::from(done.sectors) * SECTOR_SIZE,
                done.completed.since(done.submitted),
            );
        }
        self.stats.disk_time += done.disk_time;
        let process = (done.task.0 - self.first_task) as usize;
        match self.chain {
            Chain::Blocked(id) if id == done.id => self.advance(false, io),
            _ => {
                // A readahead.
                self.pending_async[process] -= 1;
                if self.chain == Chain::Draining
                    && self.trace.requests[self.next].process == process
                    && self.pending_async[process] == 0
                {
                    self.advance(true, io);
                }
            }
        }
        self.finish_if_done(io);
    }

    fn finished(&self) -> bool {
        self.done
    }
}

impl Part for StartupReplay {
    fn tasks(&self) -> Vec<TaskId> {
        (0..self.trace.processes.len())
            .map(|p| self.task_of(p))
            .collect()
    }
    fn measured(&self) -> bool {
        true
    }
    fn stats(&self) -> Vec<JobStats> {
        vec![self.stats.clone()]
    }
    fn stats_mut(&mut self) -> Vec<&mut JobStats> {
        vec![&mut self.stats]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const XTERM_HEAD: &str = "\
xterm-31657 \t   0      8 113314048 Rand -427336   0 RM 4.666589 START
xterm-31657 .015820     8 113248520 Rand  -65536   0 RA 4.682409 C
xterm-31657 .000066     8 113248528  Seq       0   8 RA 4.682475 C
Xorg-925    .029161     8 109119744 Rand 16556008  0 RM 6.117143 START
";

    #[test]
    fn parses_the_s_format_with_exact_think_times() {
        let t = StartupTrace::parse("xterm.trace", XTERM_HEAD).unwrap();
        assert_eq!(t.processes, vec!["xterm-31657", "Xorg-925"]);
        assert_eq!(t.requests.len(), 4);
        assert_eq!(t.requests[1].think, Duration(15_820_000));
        assert_eq!(t.requests[2].think, Duration(66_000));
        assert_eq!(t.requests[3].process, 1);
        assert_eq!(t.requests[1].action, Action::ReadAhead);
        assert!(t.requests[2].sequential);
        assert_eq!(t.total_think(), Duration(15_820_000 + 66_000 + 29_161_000));
    }

    #[test]
    fn think_times_scale_and_nothing_else_changes() {
        let t = StartupTrace::parse("xterm.trace", XTERM_HEAD).unwrap();
        let scaled = t.clone().with_think_scaled(0.5);
        assert_eq!(scaled.requests[1].think, Duration(7_910_000));
        assert_eq!(scaled.requests[2].think, Duration(33_000));
        assert_eq!(
            scaled.total_think(),
            Duration((15_820_000 + 66_000 + 29_161_000) / 2)
        );
        let back_to_back = t.clone().with_think_scaled(0.0);
        assert_eq!(back_to_back.total_think(), Duration::ZERO);
        for (a, b) in t.requests.iter().zip(&scaled.requests) {
            assert_eq!(
                (a.sectors, a.action, a.process),
                (b.sectors, b.action, b.process)
            );
        }
        assert_eq!(t.clone().with_think_scaled(1.0), t);
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let bad = XTERM_HEAD.replace("RA 4.682475", "RX 4.682475");
        let e = StartupTrace::parse("xterm.trace", &bad).unwrap_err();
        assert_eq!((e.line, e.field), (3, "action"));
        assert!(
            e.to_string().starts_with("xterm.trace:3: field `action`:"),
            "{e}"
        );
        let e = StartupTrace::parse("t", "p 0 8 1 Seq 0 0 R").unwrap_err();
        assert_eq!((e.line, e.field), (1, "time"));
        let e = StartupTrace::parse("t", "p -1 8 1 Seq 0 0 R 0 C").unwrap_err();
        assert_eq!(e.field, "think");
        let e = StartupTrace::parse("t", "p 0 0 1 Seq 0 0 R 0 C").unwrap_err();
        assert_eq!(e.field, "size");
        let e = StartupTrace::parse("t", "\n# nothing\n").unwrap_err();
        assert_eq!(e.line, 0);
    }

    proptest! {
        /// Arbitrary text never panics the parser, and an error always
        /// points at a real line and a known field.
        #[test]
        fn parser_never_panics(text in "(([a-zA-Z0-9.-]{0,8}|Seq|Rand|RA|R|START|C)[ \t]{1,2}){0,12}(\n(([a-zA-Z0-9.-]{0,8}|Seq|RA|C)[ \t]){0,11}){0,4}") {
            match StartupTrace::parse("fuzz", &text) {
                Ok(t) => prop_assert!(!t.requests.is_empty()),
                Err(e) => {
                    prop_assert!(e.line <= text.lines().count());
                    prop_assert!(e.field == "line" || FIELDS.contains(&e.field));
                }
            }
        }

        /// Valid traces survive a round trip through text.
        #[test]
        fn round_trip(reqs in proptest::collection::vec(
            (0usize..3, 0u64..2_000_000_000, 1u32..2048, 0u64..1 << 40, any::<bool>(), 0usize..4), 1..40)
        ) {
            let actions = [Action::Read, Action::ReadAhead, Action::ReadMeta, Action::WriteSync];
            let trace = StartupTrace {
                processes: vec!["a-1".into(), "b-2".into(), "c-3".into()],
                requests: reqs.iter().enumerate().map(|(i, &(p, ns, sectors, sector, seq, a))| TraceRequest {
                    process: p, think: Duration(ns), sectors, sector, sequential: seq, action: actions[a], line: i + 1,
                }).collect(),
            };
            let back = StartupTrace::parse("rt", &trace.to_text()).unwrap();
            // Processes are numbered by first appearance in the text.
            for (a, b) in trace.requests.iter().zip(&back.requests) {
                prop_assert_eq!(&trace.processes[a.process], &back.processes[b.process]);
                prop_assert_eq!((a.think, a.sectors, a.sector, a.sequential, a.action), (b.think, b.sectors, b.sector, b.sequential, b.action));
            }
        }
    }
}
