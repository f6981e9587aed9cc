//! fio's per-job logs (`write_lat_log`, `write_bw_log`,
//! `write_iops_log`): lines of `time, value, direction, block size[,
//! offset], priority` as fio 3.33's `flush_samples` writes them, one line
//! per completed I/O, or with `log_avg_msec` one per direction per window
//! holding the window's mean (latency) or rate (bandwidth, IOPS).
//!
//! Times are milliseconds since the job started, latencies nanoseconds,
//! bandwidth KiB/s; the priority column is the I/O's `ioprio` value with
//! `log_prio`, else 1 for real-time I/O and 0 for the rest. Where the lines
//! go is the caller's ([`LogSink`]): the run only hands them over.

use super::job::Job;

/// Which log a line belongs to (fio's file suffixes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LogKind {
    Lat,
    Clat,
    Slat,
    Bw,
    Iops,
}

impl LogKind {
    pub fn suffix(self) -> &'static str {
        match self {
            LogKind::Lat => "lat",
            LogKind::Clat => "clat",
            LogKind::Slat => "slat",
            LogKind::Bw => "bw",
            LogKind::Iops => "iops",
        }
    }
}

/// Where log lines go.
pub trait LogSink: std::fmt::Debug {
    /// One line of `kind`'s log of thread `number` (fio's 1-based thread
    /// number) of a job whose log prefix is `prefix`.
    fn line(&mut self, prefix: &str, number: u32, per_job: bool, kind: LogKind, text: &str);
    /// The run is over: make everything durable; the logs written.
    fn finish(&mut self) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
}

/// The logs one thread keeps, and the windows being averaged.
#[derive(Clone, Debug, Default)]
pub struct ThreadLogs {
    /// (kind, prefix) of each log the job writes.
    logs: Vec<(LogKind, String)>,
    avg_ms: u64,
    offset: bool,
    prio: bool,
    per_job: bool,
    number: u32,
    /// Per kind and direction: sum and count in the current window.
    acc: Vec<[(u64, u64); 2]>,
    window_start_ms: u64,
}

impl ThreadLogs {
    pub fn new(job: &Job, number: u32) -> Self {
        let o = &job.o;
        let prefix = |v: &Option<String>| -> Option<String> {
            v.as_ref().map(|p| {
                if p.is_empty() {
                    job.name.clone()
                } else {
                    p.clone()
                }
            })
        };
        let mut logs = Vec::new();
        if let Some(p) = prefix(&o.write_lat_log) {
            if !o.disable_lat && !o.gtod_reduce {
                logs.push((LogKind::Lat, p.clone()));
            }
            if !o.disable_slat && !o.gtod_reduce {
                logs.push((LogKind::Slat, p.clone()));
            }
            if !o.disable_clat && !o.gtod_reduce {
                logs.push((LogKind::Clat, p));
            }
        }
        if let Some(p) = prefix(&o.write_bw_log) {
            logs.push((LogKind::Bw, p));
        }
        if let Some(p) = prefix(&o.write_iops_log) {
            logs.push((LogKind::Iops, p));
        }
        let n = logs.len();
        ThreadLogs {
            logs,
            avg_ms: o.log_avg_msec,
            offset: o.log_offset,
            prio: o.log_prio,
            per_job: o.per_job_logs,
            number,
            acc: vec![[(0, 0); 2]; n],
            window_start_ms: 0,
        }
    }

    pub fn enabled(&self) -> bool {
        !self.logs.is_empty()
    }

    fn prio_col(&self, ioprio: u16) -> String {
        if self.prio {
            format!("0x{ioprio:04x}")
        } else {
            u16::from(ioprio >> 13 == 1).to_string()
        }
    }

    /// A completed read (0) or write (1) of `bs` bytes at `offset`,
    /// `t_ms` after the job started, with these latencies (ns).
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        sink: &mut dyn LogSink,
        t_ms: u64,
        d: usize,
        bs: u64,
        offset: u64,
        ioprio: u16,
        slat: u64,
        clat: u64,
    ) {
        if self.avg_ms > 0 {
            for (i, (kind, _)) in self.logs.iter().enumerate() {
                let v = match kind {
                    LogKind::Lat => slat + clat,
                    LogKind::Clat => clat,
                    LogKind::Slat => slat,
                    LogKind::Bw => bs,
                    LogKind::Iops => 1,
                };
                self.acc[i][d].0 += v;
                self.acc[i][d].1 += 1;
            }
            if t_ms >= self.window_start_ms + self.avg_ms {
                self.flush_window(sink, t_ms);
            }
            return;
        }
        let prio = self.prio_col(ioprio);
        for (kind, prefix) in &self.logs {
            let v = match kind {
                LogKind::Lat => slat + clat,
                LogKind::Clat => clat,
                LogKind::Slat => slat,
                LogKind::Bw => {
                    let ns = (slat + clat).max(1);
                    bs * 1_000_000_000 / ns / 1024
                }
                LogKind::Iops => 1,
            };
            let text = if self.offset {
                format!("{t_ms}, {v}, {d}, {bs}, {offset}, {prio}")
            } else {
                format!("{t_ms}, {v}, {d}, {bs}, {prio}")
            };
            sink.line(prefix, self.number, self.per_job, *kind, &text);
        }
    }

    /// Write the averages of the window that ends at `t_ms`.
    pub fn flush_window(&mut self, sink: &mut dyn LogSink, t_ms: u64) {
        let span = t_ms.saturating_sub(self.window_start_ms).max(1);
        for (i, (kind, prefix)) in self.logs.iter().enumerate() {
            for d in 0..2 {
                let (sum, n) = self.acc[i][d];
                if n == 0 {
                    continue;
                }
                let v = match kind {
                    LogKind::Bw => sum * 1000 / span / 1024,
                    LogKind::Iops => n * 1000 / span,
                    _ => sum / n,
                };
                let text = if self.offset {
                    format!("{t_ms}, {v}, {d}, 0, 0, 0")
                } else {
                    format!("{t_ms}, {v}, {d}, 0, 0")
                };
                sink.line(prefix, self.number, self.per_job, *kind, &text);
                self.acc[i][d] = (0, 0);
            }
        }
        self.window_start_ms = t_ms;
    }
}
