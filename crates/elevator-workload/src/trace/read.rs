//! Streaming readers for block traces in the formats users have.
//!
//! Each format becomes the same [`TraceRecord`]: when the request was
//! issued (from the trace's first request), which process issued it, read
//! or write, where and how large, and the service time the trace measured
//! where it has one. The formats (../shared/reference/
//! devices-workloads-traces.md §5, userspace-peers.md §7):
//!
//! - **blkparse** text output in its default format,
//!   `maj,min cpu seq time_s pid action RWBS sector + sectors [process]`
//!   (blktrace's `blkparse -i`): one record per `Q` (queued: the moment
//!   the process asked for the I/O); `G`, `I`, `D`, `C` and the other
//!   actions are checked and skipped; requests carrying no data (`N`) and
//!   discards (`D` in RWBS) are skipped. The process is `name-pid`.
//!   blkparse's closing summary (from the first `CPU…`/`Total` line) ends
//!   the events.
//! - **fio iolog v2** (`fio version 2 iolog`; `file action [offset len]`,
//!   `file wait µs` between them) and **v3** (`fio version 3 iolog`; each
//!   line starts with µs since the run began; fio's `log_io_u` writes
//!   `utime_since_now`). One process per file name; offsets and lengths in
//!   bytes; `add`, `open`, `close`, `sync`, `datasync` and `trim` carry no
//!   data for the simulator and are skipped.
//! - **MSR Cambridge** CSV (SNIA IOTTA 388): `Timestamp,Hostname,
//!   DiskNumber,Type,Offset,Size,ResponseTime`, times in 100 ns ticks
//!   (Windows FILETIME), offsets and sizes in bytes; the header line is
//!   optional. One process per host and disk; the response time is kept as
//!   the measured service time.
//! - **MQSim** ASCII (its README): `arrival_ns device sector sectors type`,
//!   type 1 a read, 0 a write. One process per device number.
//! - **DiskSim ASCII** (DiskSim 4.0 manual, `ascii` trace format):
//!   `arrival_ms device blkno bcount flags`, flags bit 0 set for a read.
//! - **DiskSim validation** traces (`valid/*.trace`, read by DiskSim as
//!   `"%c %s %ld %d %lf %lf"`): `R|W Hit|Miss blkno bcount service_µs
//!   next_µs`, the real drive's measured service time, and the gap from
//!   this request's completion to the next one's arrival (a closed loop).
//!   The record's time is the recorded timeline: each arrival is the
//!   previous one plus its measured service and gap.
//!
//! The reader never holds more than one line: a multi-gigabyte trace
//! streams. Every record's time is at or after the previous one's; a line
//! that does not parse, or goes back in time, ends the stream with one
//! [`TraceError`] naming the file, the line and the field.
//!
//! The two formats read by the million (DiskSim validation traces for
//! `elevator validate`, MQSim traces) take a byte-level path for plain
//! lines: fields of printable ASCII between ASCII whitespace, numbers as
//! bare digits, decimals in integer arithmetic. Any other line, and any
//! line that would be an error, goes the general way above, which reads
//! it or names the error; the tests hold both paths to the same records
//! and errors.
//!
//! Multi-device traces (MQSim's devices, MSR's disks) keep each device as
//! its own process; the replay puts all of them on the one simulated
//! device.

use crate::startup::TraceError;
use elevator_core::{Duration, Op, Sector, SECTOR_SIZE};
use rustc_hash::FxHashMap;
use std::fmt;
use std::io::{BufRead, Read};

/// Largest request accepted from a trace (32 MiB), as in the start-up
/// traces: anything larger is a corrupt line, not a block request.
pub const MAX_REQUEST_SECTORS: u64 = 65_536;
/// Longest line a reader accepts: binary input is rejected, not buffered.
pub const MAX_LINE_BYTES: u64 = 4096;
/// Latest time a trace may reach (about 31 years, in ns): arithmetic on
/// trace times never overflows.
const MAX_TRACE_NS: u128 = 1 << 60;

/// A trace format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    Blkparse,
    FioIolog,
    Msr,
    Mqsim,
    DisksimAscii,
    DisksimValidate,
}

impl TraceFormat {
    pub const ALL: [TraceFormat; 6] = [
        TraceFormat::Blkparse,
        TraceFormat::FioIolog,
        TraceFormat::Msr,
        TraceFormat::Mqsim,
        TraceFormat::DisksimAscii,
        TraceFormat::DisksimValidate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Blkparse => "blkparse",
            TraceFormat::FioIolog => "iolog",
            TraceFormat::Msr => "msr",
            TraceFormat::Mqsim => "mqsim",
            TraceFormat::DisksimAscii => "disksim",
            TraceFormat::DisksimValidate => "disksim-validate",
        }
    }

    pub fn from_name(name: &str) -> Option<TraceFormat> {
        TraceFormat::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The format of a trace whose first non-blank line is `line`, if it
    /// can be told from that line alone.
    pub fn detect(line: &str) -> Option<TraceFormat> {
        let line = line.trim();
        if line.starts_with("fio version ") {
            return Some(TraceFormat::FioIolog);
        }
        if line.contains(',') && line.split(',').count() == 7 {
            return Some(TraceFormat::Msr);
        }
        let cols: Vec<&str> = line.split_whitespace().collect();
        match cols.as_slice() {
            [rw, hit, ..] if cols.len() == 6 && matches!(*rw, "R" | "W") && hit.len() > 1 => {
                Some(TraceFormat::DisksimValidate)
            }
            [dev, ..] if dev.split_once(',').is_some() => Some(TraceFormat::Blkparse),
            [time, ..] if cols.len() == 5 => Some(if time.contains('.') {
                TraceFormat::DisksimAscii
            } else {
                TraceFormat::Mqsim
            }),
            _ => None,
        }
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One request of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    /// Line in the trace file (1-based).
    pub line: usize,
    /// When it was issued, from the trace's first request.
    pub time: Duration,
    /// Index into [`TraceReader::processes`].
    pub process: u32,
    /// `Op::Read` or `Op::Write`.
    pub op: Op,
    /// Someone waits for it: every read, and writes flagged synchronous.
    pub sync: bool,
    /// Filesystem metadata (blktrace's `M`).
    pub meta: bool,
    pub sector: Sector,
    pub sectors: u32,
    /// The service or response time the trace measured, if it has one.
    pub service: Option<Duration>,
}

/// A streaming reader of one trace: an iterator of records that stops at
/// the end of the trace or at its first error.
#[derive(Debug)]
pub struct TraceReader<R> {
    input: R,
    file: String,
    format: TraceFormat,
    line: usize,
    buf: Vec<u8>,
    processes: Vec<String>,
    by_name: FxHashMap<String, u32>,
    /// The first record's timestamp, in the trace's own clock (ns).
    origin: Option<u128>,
    last_time: u128,
    /// fio v2 and DiskSim validation traces: the running clock (ns).
    clock: u128,
    /// fio iologs: the version from the header (0 before it).
    iolog_version: u8,
    /// blkparse: the closing summary has begun.
    summary: bool,
    finished: bool,
    records: u64,
    /// The process of the previous record, and its index.
    last_process: Option<(String, u32)>,
    by_device: FxHashMap<u32, u32>,
    /// Whether plain lines of the volume formats take [`fast_fields`]'
    /// byte-level path (always, except in the tests that compare it with
    /// the general one).
    fast: bool,
}

/// Split `line` on whitespace into `out`; the count of fields (which may
/// exceed `out`'s length: those beyond are not stored).
fn split_fields<'a>(line: &'a str, out: &mut [&'a str]) -> usize {
    let mut n = 0;
    for f in line.split_ascii_whitespace() {
        if let Some(slot) = out.get_mut(n) {
            *slot = f;
        }
        n += 1;
    }
    n
}

/// Who issued a request, as a line names it (turned into a name only
/// the first time it is met).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Who<'a> {
    /// `name-number`: blkparse's process and pid, MSR's host and disk.
    Named(&'a str, u32),
    /// `devN`: MQSim's and DiskSim's device numbers.
    Device(u32),
    /// The name as is: fio's file names, DiskSim validation's one disk.
    Plain(&'a str),
}

impl Who<'_> {
    fn name(self) -> String {
        match self {
            Who::Named(n, k) => format!("{n}-{k}"),
            Who::Device(d) => format!("dev{d}"),
            Who::Plain(n) => n.to_string(),
        }
    }
}

/// What one line held.
enum Parsed<'a> {
    Skip,
    Record {
        time_ns: u128,
        process: Who<'a>,
        op: Op,
        sync: bool,
        meta: bool,
        sector: u64,
        sectors: u64,
        service: Option<Duration>,
    },
}

impl<R: BufRead> TraceReader<R> {
    /// Read `input` as `format`; `file` names it in errors.
    pub fn new(file: &str, input: R, format: TraceFormat) -> Self {
        TraceReader {
            input,
            file: file.to_string(),
            format,
            line: 0,
            buf: Vec::new(),
            processes: Vec::new(),
            by_name: FxHashMap::default(),
            origin: None,
            last_time: 0,
            clock: 0,
            iolog_version: 0,
            summary: false,
            finished: false,
            records: 0,
            last_process: None,
            by_device: FxHashMap::default(),
            fast: true,
        }
    }

    /// The same reader with every line on the general path (tests compare
    /// the two paths).
    #[cfg(test)]
    pub(crate) fn without_fast_path(mut self) -> Self {
        self.fast = false;
        self
    }

    pub fn format(&self) -> TraceFormat {
        self.format
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    /// The processes met so far, in order of first appearance.
    pub fn processes(&self) -> &[String] {
        &self.processes
    }

    /// Records returned so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    fn error(&self, field: &'static str, message: String) -> TraceError {
        TraceError {
            file: self.file.clone(),
            line: self.line,
            field,
            message,
        }
    }

    /// Read the next line into `buf`; false at the end of input.
    fn next_line(&mut self) -> Result<bool, TraceError> {
        self.buf.clear();
        let n = (&mut self.input)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| self.error("line", format!("reading: {e}")))?;
        if n == 0 {
            return Ok(false);
        }
        self.line += 1;
        if self.buf.len() as u64 > MAX_LINE_BYTES {
            return Err(self.error(
                "line",
                format!("longer than {MAX_LINE_BYTES} bytes: not a text trace"),
            ));
        }
        Ok(true)
    }

    /// The text of the line in `buf`.
    fn text<'a>(&self, buf: &'a [u8]) -> Result<&'a str, TraceError> {
        std::str::from_utf8(buf).map_err(|_| self.error("line", "not UTF-8 text".into()))
    }

    fn next_record(&mut self) -> Result<Option<TraceRecord>, TraceError> {
        loop {
            if !self.next_line()? {
                if self.format == TraceFormat::FioIolog && self.iolog_version == 0 {
                    return Err(self.error("header", "no `fio version N iolog` header".into()));
                }
                return Ok(None);
            }
            // Parse from the buffer taken out, so that parsing may update
            // the reader; it goes back for the next line.
            let buf = std::mem::take(&mut self.buf);
            let record = self.record_of(&buf);
            self.buf = buf;
            if let Some(r) = record? {
                return Ok(Some(r));
            }
        }
    }

    /// The record on line `buf`, if it holds one.
    fn record_of(&mut self, buf: &[u8]) -> Result<Option<TraceRecord>, TraceError> {
        {
            let fast = match self.format {
                _ if !self.fast => None,
                TraceFormat::DisksimValidate => self.fast_disksim_validate(buf),
                TraceFormat::Mqsim => fast_mqsim(buf),
                _ => None,
            };
            let parsed = match fast {
                Some(parsed) => parsed,
                None => {
                    let trimmed = self.text(buf)?.trim();
                    if trimmed.is_empty()
                        || (trimmed.starts_with('#') && self.format != TraceFormat::Msr)
                    {
                        return Ok(None);
                    }
                    match self.format {
                        TraceFormat::Blkparse => self.parse_blkparse(trimmed),
                        TraceFormat::FioIolog => self.parse_iolog(trimmed),
                        TraceFormat::Msr => self.parse_msr(trimmed),
                        TraceFormat::Mqsim => self.parse_mqsim(trimmed),
                        TraceFormat::DisksimAscii => self.parse_disksim_ascii(trimmed),
                        TraceFormat::DisksimValidate => self.parse_disksim_validate(trimmed),
                    }?
                }
            };
            let Parsed::Record {
                time_ns,
                process,
                op,
                sync,
                meta,
                sector,
                sectors,
                service,
            } = parsed
            else {
                return Ok(None);
            };
            if sectors == 0 || sectors > MAX_REQUEST_SECTORS {
                return Err(self.error(
                    "size",
                    format!("{sectors} sectors: a request is 1..={MAX_REQUEST_SECTORS}"),
                ));
            }
            let end = sector.checked_add(sectors);
            if end.filter(|&e| e <= u64::MAX / SECTOR_SIZE).is_none() {
                return Err(self.error("sector", format!("{sector} is past any device")));
            }
            let origin = *self.origin.get_or_insert(time_ns);
            if time_ns.saturating_sub(origin) > MAX_TRACE_NS {
                return Err(self.error("time", "more than 30 years into the trace".into()));
            }
            if time_ns < origin || time_ns < self.last_time {
                return Err(self.error(
                    "time",
                    format!(
                        "goes back in time ({:.9} s after {:.9} s)",
                        time_ns.saturating_sub(origin) as f64 / 1e9,
                        self.last_time.saturating_sub(origin) as f64 / 1e9
                    ),
                ));
            }
            self.last_time = time_ns;
            let process = self.process_index(process);
            self.records += 1;
            Ok(Some(TraceRecord {
                line: self.line,
                time: Duration((time_ns - origin) as u64),
                process,
                op,
                sync,
                meta,
                sector,
                sectors: sectors as u32,
                service,
            }))
        }
    }

    /// The index of process `who`, registering it when new.
    fn process_index(&mut self, who: Who<'_>) -> u32 {
        if let Who::Device(d) = who {
            if let Some(&p) = self.by_device.get(&d) {
                return p;
            }
        }
        let same = |name: &str| match who {
            Who::Named(n, k) => name
                .strip_prefix(n)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|num| num.parse() == Ok(k)),
            Who::Plain(n) => name == n,
            Who::Device(_) => false,
        };
        if let Some((name, p)) = &self.last_process {
            if same(name) {
                return *p;
            }
        }
        let name = who.name();
        let p = match self.by_name.get(&name) {
            Some(&p) => p,
            None => {
                let p = self.processes.len() as u32;
                self.by_name.insert(name.clone(), p);
                self.processes.push(name.clone());
                p
            }
        };
        if let Who::Device(d) = who {
            self.by_device.insert(d, p);
        }
        self.last_process = Some((name, p));
        p
    }

    fn number<T: std::str::FromStr>(
        &self,
        s: &str,
        field: &'static str,
        what: &str,
    ) -> Result<T, TraceError> {
        s.parse()
            .map_err(|_| self.error(field, format!("{s:?} is not {what}")))
    }

    fn decimal(&self, s: &str, unit_ns: u128, field: &'static str) -> Result<u128, TraceError> {
        parse_decimal_ns(s, unit_ns)
            .ok_or_else(|| self.error(field, format!("{s:?} is not a non-negative decimal number")))
    }

    fn columns<'a>(
        &self,
        line: &'a str,
        names: &[&'static str],
    ) -> Result<[&'a str; 8], TraceError> {
        let mut cols = [""; 8];
        let n = split_fields(line, &mut cols);
        if n < names.len() {
            return Err(self.error(
                names[n],
                format!("missing (a line has {} fields)", names.len()),
            ));
        }
        if n > names.len() {
            return Err(self.error(
                "line",
                format!("{n} fields, expected {}: {}", names.len(), names.join(" ")),
            ));
        }
        Ok(cols)
    }

    fn parse_blkparse<'a>(&mut self, line: &'a str) -> Result<Parsed<'a>, TraceError> {
        if self.summary {
            return Ok(Parsed::Skip);
        }
        let mut cols = [""; 11];
        let count = split_fields(line, &mut cols);
        if cols[0].starts_with("CPU") || cols[0] == "Total" {
            // blkparse's per-CPU and total summary follows the events.
            self.summary = true;
            return Ok(Parsed::Skip);
        }
        const NAMES: [&str; 7] = ["device", "cpu", "sequence", "time", "pid", "action", "rwbs"];
        if count < NAMES.len() {
            return Err(self.error(
                NAMES[count],
                format!("missing (an event line starts with {})", NAMES.join(" ")),
            ));
        }
        let bad_dev = || self.error("device", format!("{:?}: want major,minor", cols[0]));
        let (major, minor) = cols[0].split_once(',').ok_or_else(bad_dev)?;
        major.parse::<u32>().map_err(|_| bad_dev())?;
        minor.parse::<u32>().map_err(|_| bad_dev())?;
        self.number::<u32>(cols[1], "cpu", "a CPU number")?;
        self.number::<u64>(cols[2], "sequence", "a sequence number")?;
        let time_ns = self.decimal(cols[3], 1_000_000_000, "time")?;
        let pid: u32 = self.number(cols[4], "pid", "a process id")?;
        let action = cols[5];
        if !matches!(
            action,
            "Q" | "G"
                | "I"
                | "D"
                | "C"
                | "M"
                | "F"
                | "S"
                | "P"
                | "U"
                | "UT"
                | "X"
                | "A"
                | "R"
                | "T"
                | "B"
                | "m"
        ) {
            return Err(self.error(
                "action",
                format!("{action:?} is not a blktrace action (Q G I D C M F S P U X A R T B m)"),
            ));
        }
        let rwbs = cols[6];
        let (mut read, mut write, mut discard, mut none) = (false, false, false, false);
        let (mut sync, mut meta) = (false, false);
        for c in rwbs.chars() {
            match c {
                'R' => read = true,
                'W' => write = true,
                'D' => discard = true,
                'N' => none = true,
                'S' => sync = true,
                'M' => meta = true,
                'F' | 'A' | 'E' | 'B' | 'P' => {}
                _ => {
                    return Err(self.error(
                        "rwbs",
                        format!("{rwbs:?}: {c:?} is not an RWBS flag (R W D N F A S M E)"),
                    ))
                }
            }
        }
        if action != "Q" || discard || none {
            return Ok(Parsed::Skip);
        }
        if read == write {
            return Err(self.error(
                "rwbs",
                format!("{rwbs:?}: a queued request is a read (R) or a write (W)"),
            ));
        }
        if count < 11 {
            let names = ["sector", "+", "sectors", "process"];
            return Err(self.error(
                names[count.saturating_sub(7).min(3)],
                "missing (a Q line ends `sector + sectors [process]`)".into(),
            ));
        }
        let sector: u64 = self.number(cols[7], "sector", "a sector number")?;
        if cols[8] != "+" {
            return Err(self.error("+", format!("{:?}: want `+`", cols[8])));
        }
        let sectors: u64 = self.number(cols[9], "sectors", "a number of sectors")?;
        // The name is the rest of the line (it may hold spaces).
        let start = cols[10].as_ptr() as usize - line.as_ptr() as usize;
        let name = line[start..].trim_end();
        let Some(name) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) else {
            return Err(self.error("process", format!("{name:?}: want [name]")));
        };
        Ok(Parsed::Record {
            time_ns,
            process: Who::Named(name, pid),
            op: if read { Op::Read } else { Op::Write },
            sync: read || sync,
            meta,
            sector,
            sectors,
            service: None,
        })
    }

    fn parse_iolog<'a>(&mut self, line: &'a str) -> Result<Parsed<'a>, TraceError> {
        if self.iolog_version == 0 {
            self.iolog_version = match line {
                "fio version 2 iolog" => 2,
                "fio version 3 iolog" => 3,
                _ => {
                    return Err(self.error(
                        "header",
                        format!(
                            "{line:?}: want `fio version 2 iolog` or `fio version 3 iolog` \
                             (v1 is unsupported, as in fio since 1.20)"
                        ),
                    ))
                }
            };
            return Ok(Parsed::Skip);
        }
        let mut cols: Vec<&str> = line.split_whitespace().collect();
        let time_ns = if self.iolog_version == 3 {
            if cols.is_empty() {
                return Err(self.error("timestamp", "missing".into()));
            }
            let us: u64 = self.number(cols.remove(0), "timestamp", "µs since the start")?;
            u128::from(us) * 1000
        } else {
            self.clock
        };
        if cols.len() < 2 {
            let field = ["file", "action"][cols.len()];
            return Err(self.error(
                field,
                "missing (a line is `file action [offset length]`)".into(),
            ));
        }
        let file = cols[0];
        match cols[1] {
            "add" | "open" | "close" | "sync" | "datasync" | "trim" => Ok(Parsed::Skip),
            "wait" => {
                if self.iolog_version == 3 {
                    return Err(self.error("action", "`wait` is not allowed in a v3 iolog".into()));
                }
                let Some(us) = cols.get(2) else {
                    return Err(self.error("wait", "missing: `file wait µs`".into()));
                };
                let us: u64 = self.number(us, "wait", "a wait in µs")?;
                self.clock += u128::from(us) * 1000;
                if self.clock > MAX_TRACE_NS {
                    return Err(self.error("wait", "waits add up to over 30 years".into()));
                }
                Ok(Parsed::Skip)
            }
            op @ ("read" | "write") => {
                let (Some(offset), Some(length)) = (cols.get(2), cols.get(3)) else {
                    let field = if cols.len() < 3 { "offset" } else { "length" };
                    return Err(self.error(field, format!("missing: `file {op} offset length`")));
                };
                if cols.len() > 4 {
                    return Err(self.error(
                        "line",
                        format!("{} fields after `{op}`, expected 2", cols.len() - 2),
                    ));
                }
                let offset: u64 = self.number(offset, "offset", "a byte offset")?;
                let length: u64 = self.number(length, "length", "a length in bytes")?;
                if length == 0 {
                    return Err(self.error("length", "0 bytes".into()));
                }
                let read = op == "read";
                Ok(Parsed::Record {
                    time_ns,
                    process: Who::Plain(file),
                    op: if read { Op::Read } else { Op::Write },
                    // fio's replay issues every I/O itself and waits for it.
                    sync: true,
                    meta: false,
                    sector: offset / SECTOR_SIZE,
                    sectors: (offset % SECTOR_SIZE + length).div_ceil(SECTOR_SIZE),
                    service: None,
                })
            }
            other => Err(self.error(
                "action",
                format!(
                    "{other:?}: want read, write, wait, add, open, close, sync, datasync or trim"
                ),
            )),
        }
    }

    fn parse_msr<'a>(&mut self, line: &'a str) -> Result<Parsed<'a>, TraceError> {
        const NAMES: [&str; 7] = [
            "Timestamp",
            "Hostname",
            "DiskNumber",
            "Type",
            "Offset",
            "Size",
            "ResponseTime",
        ];
        let cols: Vec<&str> = line.split(',').map(str::trim).collect();
        if self.line == 1 && cols.first() == Some(&"Timestamp") {
            return Ok(Parsed::Skip);
        }
        if cols.len() != NAMES.len() {
            let field = if cols.len() < NAMES.len() {
                NAMES[cols.len()]
            } else {
                "line"
            };
            return Err(self.error(
                field,
                format!(
                    "{} comma-separated fields, expected {}: {}",
                    cols.len(),
                    NAMES.len(),
                    NAMES.join(",")
                ),
            ));
        }
        let ticks: u64 = self.number(cols[0], "Timestamp", "a count of 100 ns ticks")?;
        let disk: u32 = self.number(cols[2], "DiskNumber", "a disk number")?;
        let read = match cols[3] {
            t if t.eq_ignore_ascii_case("read") => true,
            t if t.eq_ignore_ascii_case("write") => false,
            t => return Err(self.error("Type", format!("{t:?}: want Read or Write"))),
        };
        let offset: u64 = self.number(cols[4], "Offset", "a byte offset")?;
        let size: u64 = self.number(cols[5], "Size", "a size in bytes")?;
        if size == 0 {
            return Err(self.error("Size", "0 bytes".into()));
        }
        let response: u64 = self.number(cols[6], "ResponseTime", "a count of 100 ns ticks")?;
        Ok(Parsed::Record {
            time_ns: u128::from(ticks) * 100,
            process: Who::Named(cols[1], disk),
            op: if read { Op::Read } else { Op::Write },
            sync: read,
            meta: false,
            sector: offset / SECTOR_SIZE,
            sectors: (offset % SECTOR_SIZE + size).div_ceil(SECTOR_SIZE),
            service: Some(Duration(response.saturating_mul(100))),
        })
    }

    fn parse_mqsim<'a>(&mut self, line: &'a str) -> Result<Parsed<'a>, TraceError> {
        let cols = self.columns(line, &["time", "device", "sector", "size", "type"])?;
        let time_ns: u64 = self.number(cols[0], "time", "an arrival time in ns")?;
        let device: u32 = self.number(cols[1], "device", "a device number")?;
        let sector: u64 = self.number(cols[2], "sector", "a sector number")?;
        let sectors: u64 = self.number(cols[3], "size", "a number of sectors")?;
        let read = match cols[4] {
            "1" => true,
            "0" => false,
            t => return Err(self.error("type", format!("{t:?}: want 1 (read) or 0 (write)"))),
        };
        Ok(Parsed::Record {
            time_ns: u128::from(time_ns),
            process: Who::Device(device),
            op: if read { Op::Read } else { Op::Write },
            sync: read,
            meta: false,
            sector,
            sectors,
            service: None,
        })
    }

    fn parse_disksim_ascii<'a>(&mut self, line: &'a str) -> Result<Parsed<'a>, TraceError> {
        let cols = self.columns(line, &["time", "device", "blkno", "bcount", "flags"])?;
        let time_ns = self.decimal(cols[0], 1_000_000, "time")?;
        let device: u32 = self.number(cols[1], "device", "a device number")?;
        let sector: u64 = self.number(cols[2], "blkno", "a block number")?;
        let sectors: u64 = self.number(cols[3], "bcount", "a number of blocks")?;
        let flags: u32 = self.number(cols[4], "flags", "a flag word")?;
        let read = flags & 1 == 1;
        Ok(Parsed::Record {
            time_ns,
            process: Who::Device(device),
            op: if read { Op::Read } else { Op::Write },
            sync: read,
            meta: false,
            sector,
            sectors,
            service: None,
        })
    }

    /// [`TraceReader::parse_disksim_validate`] for a plain line (see
    /// [`fast_fields`]); `None` sends the line the general way.
    fn fast_disksim_validate(&mut self, line: &[u8]) -> Option<Parsed<'static>> {
        let [rw, cache, blkno, bcount, service, next] = fast_fields(line)?;
        let read = match rw {
            b"R" => true,
            b"W" => false,
            _ => return None,
        };
        if !matches!(cache, b"Hit" | b"Miss") {
            return None;
        }
        let sector = plain_u64(blkno)?;
        let sectors = plain_u64(bcount)?;
        // At most MAX_TRACE_NS each, as the general path requires.
        let service = decimal_ns(service, 1000)?;
        let next = decimal_ns(next, 1000)?;
        Some(self.disksim_record(read, sector, sectors, service, next))
    }

    /// One DiskSim validation record: issued at the running clock, which
    /// then moves by its service time and the idle time after it.
    fn disksim_record(
        &mut self,
        read: bool,
        sector: u64,
        sectors: u64,
        service: u128,
        next: u128,
    ) -> Parsed<'static> {
        let time_ns = self.clock;
        self.clock += service + next;
        Parsed::Record {
            time_ns,
            process: Who::Plain("disk"),
            op: if read { Op::Read } else { Op::Write },
            sync: true,
            meta: false,
            sector,
            sectors,
            service: Some(Duration(service as u64)),
        }
    }

    fn parse_disksim_validate<'a>(&mut self, line: &'a str) -> Result<Parsed<'a>, TraceError> {
        let cols = self.columns(line, &["rw", "cache", "blkno", "bcount", "service", "next"])?;
        let read = match cols[0] {
            "R" => true,
            "W" => false,
            t => return Err(self.error("rw", format!("{t:?}: want R or W"))),
        };
        if !matches!(cols[1], "Hit" | "Miss") {
            return Err(self.error("cache", format!("{:?}: want Hit or Miss", cols[1])));
        }
        let sector: u64 = self.number(cols[2], "blkno", "a block number")?;
        let sectors: u64 = self.number(cols[3], "bcount", "a number of blocks")?;
        let service = self.decimal(cols[4], 1000, "service")?;
        let next = self.decimal(cols[5], 1000, "next")?;
        if service > MAX_TRACE_NS || next > MAX_TRACE_NS {
            return Err(self.error("service", "over 30 years".into()));
        }
        Ok(self.disksim_record(read, sector, sectors, service, next))
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<TraceRecord, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        match self.next_record() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => {
                self.finished = true;
                None
            }
            Err(e) => {
                self.finished = true;
                Some(Err(e))
            }
        }
    }
}

/// A non-negative decimal (`12`, `.5`, `4757.708232`) times `unit_ns`, in
/// whole nanoseconds (digits below a nanosecond are dropped); `None` if it
/// is not such a number or is absurdly large.
pub fn parse_decimal_ns(s: &str, unit_ns: u128) -> Option<u128> {
    decimal_ns(s.as_bytes(), unit_ns)
}

/// Powers of ten that fit in a `u64`.
const POW10: [u64; 20] = {
    let mut p = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        p[i] = p[i - 1] * 10;
        i += 1;
    }
    p
};

/// [`parse_decimal_ns`] on bytes. The value is `int · unit + ⌊F · unit /
/// 10^k⌋`, where `F` is the first `k ≤ 18` fractional digits read as an
/// integer (later digits are below a nanosecond for every unit we use and
/// are dropped): exact, with no division while reading digits, and in one
/// pass of 64-bit arithmetic unless the whole part has 20 digits.
fn decimal_ns(s: &[u8], unit_ns: u128) -> Option<u128> {
    let (mut int, mut int_digits) = (0u64, 0usize);
    let mut i = 0;
    while let Some(&b) = s.get(i) {
        if !b.is_ascii_digit() {
            break;
        }
        if int_digits == 19 {
            return long_decimal_ns(s, unit_ns);
        }
        int = int * 10 + u64::from(b - b'0');
        int_digits += 1;
        i += 1;
    }
    let (mut frac, mut frac_digits) = (0u64, 0usize);
    match s.get(i) {
        None => {}
        Some(b'.') => {
            for &b in &s[i + 1..] {
                if !b.is_ascii_digit() {
                    return None;
                }
                if frac_digits < 18 {
                    frac = frac * 10 + u64::from(b - b'0');
                }
                frac_digits += 1;
            }
        }
        Some(_) => return None,
    }
    if int_digits == 0 && frac_digits == 0 {
        return None;
    }
    let whole = u128::from(int) * unit_ns;
    if whole > MAX_TRACE_NS {
        return None;
    }
    let value = whole + fraction_ns(frac, frac_digits.min(18), unit_ns);
    (value <= MAX_TRACE_NS).then_some(value)
}

/// `⌊frac · unit / 10^k⌋`.
fn fraction_ns(frac: u64, k: usize, unit_ns: u128) -> u128 {
    let fraction = u128::from(frac) * unit_ns;
    match u64::try_from(fraction) {
        Ok(f) => u128::from(f / POW10[k]),
        Err(_) => fraction / u128::from(POW10[k]),
    }
}

/// [`decimal_ns`] of a number whose whole part has 20 digits or more.
fn long_decimal_ns(s: &[u8], unit_ns: u128) -> Option<u128> {
    let (int, frac) = match s.iter().position(|&b| b == b'.') {
        Some(dot) => (&s[..dot], &s[dot + 1..]),
        None => (s, &s[s.len()..]),
    };
    if !int.iter().all(u8::is_ascii_digit) || !frac.iter().all(u8::is_ascii_digit) || int.len() > 20
    {
        return None;
    }
    let digits = |d: &[u8]| d.iter().fold(0u128, |v, &b| v * 10 + u128::from(b - b'0'));
    let whole = digits(int).checked_mul(unit_ns)?;
    if whole > MAX_TRACE_NS {
        return None;
    }
    let k = frac.len().min(18);
    let value = whole + fraction_ns(digits(&frac[..k]) as u64, k, unit_ns);
    (value <= MAX_TRACE_NS).then_some(value)
}

/// The `N` fields of a plain line: printable ASCII fields separated by
/// ASCII whitespace (what `str::trim` and `split_ascii_whitespace` make of
/// such a line). `None` for any other line: another field count, a byte
/// outside printable ASCII and ASCII whitespace (the line may not be
/// UTF-8, or holds a vertical tab, which the two disagree on), a blank
/// line. Such lines go the general way, which reads them or names the
/// error; so the byte-level readers built on this only ever accept lines
/// the general path reads the same way, and never decide an error.
fn fast_fields<const N: usize>(line: &[u8]) -> Option<[&[u8]; N]> {
    let mut out: [&[u8]; N] = [&[]; N];
    let (mut n, mut i) = (0, 0);
    while i < line.len() {
        let b = line[i];
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        while i < line.len() && line[i].is_ascii_graphic() {
            i += 1;
        }
        if i == start {
            return None;
        }
        *out.get_mut(n)? = &line[start..i];
        n += 1;
    }
    (n == N).then_some(out)
}

/// A field of 1 to 19 ASCII digits (so it fits a `u64`): what
/// `str::parse::<u64>` reads from it, without the signs and overflow it
/// also handles.
fn plain_u64(field: &[u8]) -> Option<u64> {
    if field.is_empty() || field.len() > 19 || !field.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        field
            .iter()
            .fold(0u64, |v, &b| v * 10 + u64::from(b - b'0')),
    )
}

/// [`TraceReader::parse_mqsim`] for a plain line (see [`fast_fields`]);
/// `None` sends the line the general way.
fn fast_mqsim(line: &[u8]) -> Option<Parsed<'static>> {
    let [time, device, sector, size, kind] = fast_fields(line)?;
    let read = match kind {
        b"1" => true,
        b"0" => false,
        _ => return None,
    };
    let time_ns = plain_u64(time)?;
    let device = u32::try_from(plain_u64(device)?).ok()?;
    Some(Parsed::Record {
        time_ns: u128::from(time_ns),
        process: Who::Device(device),
        op: if read { Op::Read } else { Op::Write },
        sync: read,
        meta: false,
        sector: plain_u64(sector)?,
        sectors: plain_u64(size)?,
        service: None,
    })
}

/// Open `path` as a trace of `format` (or the format its first line shows).
pub fn open_trace(
    path: &str,
    format: Option<TraceFormat>,
) -> Result<TraceReader<Box<dyn BufRead + Send>>, TraceError> {
    let whole = |message: String| TraceError {
        file: path.to_string(),
        line: 0,
        field: "file",
        message,
    };
    let open = || {
        std::fs::File::open(path)
            .map(|f| std::io::BufReader::with_capacity(1 << 16, f))
            .map_err(|e| whole(format!("cannot open: {e}")))
    };
    let format = match format {
        Some(f) => f,
        None => {
            let mut probe = TraceReader::new(path, open()?, TraceFormat::Mqsim);
            let mut first = None;
            while probe.next_line()? {
                let line = probe.text(&probe.buf)?.trim();
                if !line.is_empty() && !line.starts_with('#') {
                    first = Some(line.to_string());
                    break;
                }
            }
            let first = first.ok_or_else(|| whole("empty: no requests".into()))?;
            TraceFormat::detect(&first).ok_or_else(|| {
                whole(format!(
                    "cannot tell the format from its first line {first:?}; name it with \
                     --format ({})",
                    TraceFormat::ALL.map(TraceFormat::name).join(", ")
                ))
            })?
        }
    };
    Ok(TraceReader::new(path, Box::new(open()?), format))
}

/// Read a whole trace from text (tests and small inputs).
pub fn parse_all(
    file: &str,
    text: &str,
    format: TraceFormat,
) -> Result<(Vec<TraceRecord>, Vec<String>), TraceError> {
    let mut reader = TraceReader::new(file, text.as_bytes(), format);
    let records = reader.by_ref().collect::<Result<Vec<_>, _>>()?;
    Ok((records, reader.processes().to_vec()))
}
