//! fio's JSON output (`--output-format=json`), so that scripts written for
//! fio read our runs unchanged.
//!
//! The keys, units and percentile format follow fio 3.42's `stat.c` as the
//! reference notes describe it (../shared/reference/userspace-peers.md §7):
//! `bw` in KiB/s, `runtime` in ms, latencies in ns under `clat_ns` and
//! `lat_ns` with `min`, `max`, `mean`, `stddev`, `N` and a `percentile` map
//! keyed by `%f`-formatted percentages ("99.000000"). We issue no separate
//! submission step, so `lat_ns` equals `clat_ns` and `slat_ns` is zero.
//! Invariant: rendering reads only the recorded numbers (equal runs, equal
//! bytes); a direction that moved nothing prints zeros, never NaN.

use elevator_core::Duration;
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// fio's default `percentile_list`.
pub const FIO_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// Longest latency the histogram resolves (one hour), as `LatencyStats`.
const HIST_MAX_NS: u64 = 3_600_000_000_000;

/// Completion latencies of one direction of one job, with fio's moments.
#[derive(Clone, Debug)]
pub struct FioLatency {
    hist: Histogram<u64>,
    min_ns: u64,
    max_ns: u64,
    sum_ns: u128,
    sum_sq: f64,
}

impl Default for FioLatency {
    fn default() -> Self {
        FioLatency {
            hist: Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("valid bounds"),
            min_ns: u64::MAX,
            max_ns: 0,
            sum_ns: 0,
            sum_sq: 0.0,
        }
    }
}

impl FioLatency {
    pub fn record(&mut self, d: Duration) {
        let ns = d.nanos();
        self.hist.saturating_record(ns.clamp(1, HIST_MAX_NS));
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns += u128::from(ns);
        self.sum_sq += (ns as f64) * (ns as f64);
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The `p`-th percentile (0-100), in ns.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count() == 0 {
            0
        } else {
            self.hist.value_at_percentile(p).min(self.max_ns)
        }
    }

    pub fn mean_ns(&self) -> f64 {
        if self.count() == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count() as f64
        }
    }

    fn stddev_ns(&self) -> f64 {
        let n = self.count() as f64;
        if n < 2.0 {
            return 0.0;
        }
        let mean = self.mean_ns();
        ((self.sum_sq - n * mean * mean) / (n - 1.0))
            .max(0.0)
            .sqrt()
    }

    fn to_json(&self, with_percentiles: bool) -> Value {
        let n = self.count();
        let mut v = json!({
            "min": if n == 0 { 0 } else { self.min_ns },
            "max": self.max_ns,
            "mean": self.mean_ns(),
            "stddev": self.stddev_ns(),
            "N": n,
        });
        if with_percentiles && n > 0 {
            let pct: Map<String, Value> = FIO_PERCENTILES
                .iter()
                .map(|p| (format!("{p:.6}"), json!(self.percentile(*p))))
                .collect();
            v["percentile"] = Value::Object(pct);
        }
        v
    }
}

/// One direction (read or write) of one job.
#[derive(Clone, Debug, Default)]
pub struct FioDirection {
    pub io_bytes: u64,
    pub total_ios: u64,
    /// Reads or writes that moved fewer bytes than asked.
    pub short_ios: u64,
    /// From the job's first measured submission to its last completion.
    pub runtime: Duration,
    pub clat: FioLatency,
}

impl FioDirection {
    fn to_json(&self, prio: Option<(u8, u8)>) -> Value {
        let secs = self.runtime.as_secs_f64();
        let per_sec = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
        let bw_bytes = per_sec(self.io_bytes as f64);
        let mut v = json!({
            "io_bytes": self.io_bytes,
            "io_kbytes": self.io_bytes / 1024,
            "bw_bytes": bw_bytes.round() as u64,
            "bw": (bw_bytes / 1024.0).round() as u64,
            "iops": per_sec(self.total_ios as f64),
            "runtime": (secs * 1000.0).round() as u64,
            "total_ios": self.total_ios,
            "short_ios": self.short_ios,
            "drop_ios": 0,
            "slat_ns": { "min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0 },
            "clat_ns": self.clat.to_json(true),
            "lat_ns": self.clat.to_json(false),
        });
        if let (Some((class, level)), true) = (prio, self.total_ios > 0) {
            v["prios"] = json!([{
                "prioclass": class,
                "prio": level,
                "clat_ns": self.clat.to_json(true),
            }]);
        }
        v
    }
}

/// One job (one clone of a fio job section).
#[derive(Clone, Debug, Default)]
pub struct FioJob {
    pub jobname: String,
    pub groupid: u32,
    /// The options of its section as written (after `${VAR}` expansion).
    pub options: BTreeMap<String, String>,
    /// fio's prioclass (1 RT, 2 BE, 3 IDLE) and level, when the job set one.
    pub prio: Option<(u8, u8)>,
    pub read: FioDirection,
    pub write: FioDirection,
    /// Wall (or simulated) time the job existed, ms.
    pub elapsed_ms: u64,
    /// Requests the device failed (left out of the figures above).
    pub errors: u64,
}

/// `disk_util`: what the target saw.
#[derive(Clone, Debug, Default)]
pub struct FioDiskUtil {
    pub name: String,
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_merges: u64,
    pub write_merges: u64,
    /// Share of the run with at least one request at the device, 0-100.
    pub util: f64,
}

/// The whole JSON document.
pub fn render_json(
    engine: &str,
    global: &BTreeMap<String, String>,
    jobs: &[FioJob],
    disks: &[FioDiskUtil],
) -> String {
    let jobs: Vec<Value> = jobs
        .iter()
        .map(|j| {
            json!({
                "jobname": j.jobname,
                "groupid": j.groupid,
                // fio puts the first error's errno here; ours are all EIO.
                "error": if j.errors > 0 { 5 } else { 0 },
                "elevator_errors": j.errors,
                "eta": 0,
                "elapsed": j.elapsed_ms.div_ceil(1000),
                "job options": j.options,
                "read": j.read.to_json(j.prio),
                "write": j.write.to_json(j.prio),
                "job_runtime": j.read.runtime.max(j.write.runtime).as_millis_f64().round() as u64,
            })
        })
        .collect();
    let disks: Vec<Value> = disks
        .iter()
        .map(|d| {
            json!({
                "name": d.name,
                "read_ios": d.read_ios,
                "write_ios": d.write_ios,
                "read_merges": d.read_merges,
                "write_merges": d.write_merges,
                "read_ticks": 0,
                "write_ticks": 0,
                "in_queue": 0,
                "util": d.util,
            })
        })
        .collect();
    let doc = json!({
        "fio version": format!("elevator-{} ({engine})", env!("CARGO_PKG_VERSION")),
        "timestamp": 0,
        "timestamp_ms": 0,
        "time": "",
        "global options": global,
        "jobs": jobs,
        "disk_util": disks,
    });
    let mut s = serde_json::to_string_pretty(&doc).expect("JSON values serialise");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_keys_are_formatted_as_fio_formats_them() {
        let mut d = FioDirection {
            io_bytes: 4096 * 100,
            total_ios: 100,
            runtime: Duration::from_millis(500),
            ..FioDirection::default()
        };
        for i in 1..=100 {
            d.clat.record(Duration::from_micros(i));
        }
        let job = FioJob {
            jobname: "j".into(),
            read: d,
            prio: Some((1, 0)),
            ..FioJob::default()
        };
        let text = render_json("sim", &BTreeMap::new(), &[job], &[]);
        let v: Value = serde_json::from_str(&text).unwrap();
        let read = &v["jobs"][0]["read"];
        assert_eq!(read["bw"], 800, "400 KiB in 0.5 s");
        assert_eq!(read["iops"], 200.0);
        assert_eq!(read["runtime"], 500);
        let p99 = read["clat_ns"]["percentile"]["99.000000"].as_u64().unwrap();
        assert!((98_900..=99_100).contains(&p99), "{p99}");
        assert_eq!(read["clat_ns"]["N"], 100);
        assert_eq!(read["clat_ns"]["min"], 1000);
        assert_eq!(read["prios"][0]["prioclass"], 1);
        assert!(read["clat_ns"]["percentile"]["99.990000"].is_u64());
        // An idle direction: zeros, no NaN, no percentile map.
        let write = &v["jobs"][0]["write"];
        assert_eq!(write["iops"], 0.0);
        assert!(write["clat_ns"].get("percentile").is_none());
        assert!(!text.contains("NaN"));
    }
}
