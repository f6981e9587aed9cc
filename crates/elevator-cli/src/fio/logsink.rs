//! The files fio's `write_lat_log`, `write_bw_log` and `write_iops_log`
//! name: `PREFIX_KIND.N.log` (N, the thread's number; without
//! `per_job_logs`, `PREFIX_KIND.log`), in the current directory unless
//! the prefix has one, as fio writes them.

use elevator_workload::fio::logs::{LogKind, LogSink};
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};

#[derive(Debug, Default)]
pub struct FileSink {
    files: BTreeMap<String, BufWriter<std::fs::File>>,
    /// The first error met (the run goes on; the error is reported).
    pub error: Option<String>,
}

impl LogSink for FileSink {
    fn line(&mut self, prefix: &str, number: u32, per_job: bool, kind: LogKind, text: &str) {
        let name = if per_job {
            format!("{prefix}_{}.{number}.log", kind.suffix())
        } else {
            format!("{prefix}_{}.log", kind.suffix())
        };
        if self.error.is_some() && !self.files.contains_key(&name) {
            return;
        }
        let w = match self.files.get_mut(&name) {
            Some(w) => w,
            None => match std::fs::File::create(&name) {
                Ok(f) => self.files.entry(name.clone()).or_insert(BufWriter::new(f)),
                Err(e) => {
                    self.error = Some(format!("{name}: {e}"));
                    return;
                }
            },
        };
        if let Err(e) = writeln!(w, "{text}") {
            self.error.get_or_insert(format!("{name}: {e}"));
        }
    }

    /// Flush every log; the names written.
    fn finish(&mut self) -> Result<Vec<String>, String> {
        for (name, w) in &mut self.files {
            w.flush().map_err(|e| format!("{name}: {e}"))?;
        }
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(self.files.keys().cloned().collect()),
        }
    }
}
