//! fio's statistics and its JSON output (`--output-format=json` and
//! `json+`), so that scripts written for fio read our runs unchanged.
//!
//! The statistics are fio 3.33's `struct thread_stat` (`stat.h`), kept
//! the way `stat.c` keeps them:
//!
//! - latencies in fio's log-linear histogram (`io_u_plat`: 29 groups of
//!   64 buckets, `plat_val_to_idx`), so percentiles are the bucket values
//!   fio prints (`plat_idx_to_val`, the middle of the bucket) and `json+`
//!   lists the same `bins`; min, max, mean and stddev exactly (Welford's
//!   running mean, as fio's `add_stat_sample`);
//! - bandwidth and IOPS sampled per `bwavgtime`/`iopsavgtime` window;
//! - the queue depth at each submission (`io_u_map`), I/Os per submit and
//!   per reap, and completions by latency range (`latency_ns/us/ms`).
//!
//! [`render_json`] prints every key fio 3.33 prints for a job: the top
//! level, per job `read`, `write`, `trim` and `sync`, CPU and context
//! switches, the depth and latency distributions, the latency-target
//! figures, `steadystate` when set, and `disk_util`. Invariant: rendering
//! reads only the recorded numbers (equal runs, equal bytes); a direction
//! that moved nothing prints zeros, never NaN.

use serde_json::{json, Map, Value};

/// fio's `FIO_IO_U_PLAT_BITS`.
const PLAT_BITS: u32 = 6;
/// fio's `FIO_IO_U_PLAT_VAL`.
const PLAT_VAL: u64 = 1 << PLAT_BITS;
/// fio's `FIO_IO_U_PLAT_NR` (29 groups).
pub const PLAT_NR: usize = 29 * PLAT_VAL as usize;

/// fio's default `percentile_list`.
pub const FIO_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// The bucket of a latency of `val` ns (`plat_val_to_idx`).
pub fn plat_val_to_idx(val: u64) -> usize {
    let msb = if val == 0 {
        0
    } else {
        63 - val.leading_zeros()
    };
    if msb <= PLAT_BITS {
        return val as usize;
    }
    let error_bits = msb - PLAT_BITS;
    let base = ((error_bits + 1) as u64) << PLAT_BITS;
    let offset = (PLAT_VAL - 1) & (val >> error_bits);
    ((base + offset) as usize).min(PLAT_NR - 1)
}

/// The value a bucket stands for (`plat_idx_to_val`): the middle of its
/// range.
pub fn plat_idx_to_val(idx: usize) -> u64 {
    let idx = idx as u64;
    if idx < (PLAT_VAL << 1) {
        return idx;
    }
    let error_bits = (idx >> PLAT_BITS) - 1;
    let base = 1u64 << (error_bits + u64::from(PLAT_BITS));
    let k = idx % PLAT_VAL;
    base + ((k as f64 + 0.5) * (1u64 << error_bits) as f64) as u64
}

/// fio's `struct io_stat`: min, max and a running mean and variance.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IoStat {
    pub min: u64,
    pub max: u64,
    mean: f64,
    s: f64,
    pub samples: u64,
}

impl IoStat {
    /// Welford's update, as `add_stat_sample`.
    pub fn add(&mut self, v: u64) {
        if self.samples == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.samples += 1;
        let delta = v as f64 - self.mean;
        self.mean += delta / self.samples as f64;
        self.s += delta * (v as f64 - self.mean);
    }

    pub fn mean(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.mean
        }
    }

    pub fn stddev(&self) -> f64 {
        if self.samples < 2 {
            0.0
        } else {
            (self.s / (self.samples - 1) as f64).max(0.0).sqrt()
        }
    }

    /// Two sets of samples as one (`sum_stat`, the parallel variance).
    pub fn merge(&mut self, o: &IoStat) {
        if o.samples == 0 {
            return;
        }
        if self.samples == 0 {
            *self = *o;
            return;
        }
        let n1 = self.samples as f64;
        let n2 = o.samples as f64;
        let delta = o.mean - self.mean;
        let n = n1 + n2;
        self.mean += delta * n2 / n;
        self.s += o.s + delta * delta * n1 * n2 / n;
        self.samples += o.samples;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }
}

/// A latency: its moments and fio's histogram.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lat {
    pub stat: IoStat,
    plat: Vec<u64>,
}

impl Lat {
    pub fn record(&mut self, ns: u64) {
        self.stat.add(ns);
        if self.plat.is_empty() {
            self.plat = vec![0; PLAT_NR];
        }
        self.plat[plat_val_to_idx(ns)] += 1;
    }

    pub fn count(&self) -> u64 {
        self.stat.samples
    }

    pub fn merge(&mut self, o: &Lat) {
        self.stat.merge(&o.stat);
        if o.plat.is_empty() {
            return;
        }
        if self.plat.is_empty() {
            self.plat = vec![0; PLAT_NR];
        }
        for (a, b) in self.plat.iter_mut().zip(&o.plat) {
            *a += b;
        }
    }

    /// The percentiles of `list` as fio computes them
    /// (`calc_clat_percentiles`).
    pub fn percentiles(&self, list: &[f64]) -> Vec<u64> {
        let n = self.stat.samples;
        let mut sorted: Vec<f64> = list.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mut out = vec![0u64; sorted.len()];
        if n == 0 || self.plat.is_empty() || sorted.is_empty() {
            return out;
        }
        let mut sum = 0u64;
        let mut j = 0;
        'buckets: for (i, c) in self.plat.iter().enumerate() {
            sum += c;
            while sum as f64 >= sorted[j] / 100.0 * n as f64 {
                out[j] = plat_idx_to_val(i);
                j += 1;
                if j == sorted.len() {
                    break 'buckets;
                }
            }
        }
        out
    }

    /// One percentile, fio's way.
    pub fn percentile(&self, p: f64) -> u64 {
        self.percentiles(&[p])[0]
    }

    fn to_json(&self, list: &[f64], with_percentiles: bool, plus: bool) -> Value {
        let mut v = json!({
            "min": self.stat.min,
            "max": self.stat.max,
            "mean": self.stat.mean(),
            "stddev": self.stat.stddev(),
            "N": self.stat.samples,
        });
        if with_percentiles && self.stat.samples > 0 {
            let mut sorted = list.to_vec();
            sorted.sort_by(f64::total_cmp);
            let vals = self.percentiles(&sorted);
            let pct: Map<String, Value> = sorted
                .iter()
                .zip(vals)
                .map(|(p, v)| (format!("{p:.6}"), json!(v)))
                .collect();
            v["percentile"] = Value::Object(pct);
            if plus {
                let bins: Map<String, Value> = self
                    .plat
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(|(i, c)| (plat_idx_to_val(i).to_string(), json!(c)))
                    .collect();
                v["bins"] = Value::Object(bins);
            }
        }
        v
    }
}

/// One direction (read, write or trim) of a job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DirStats {
    pub io_bytes: u64,
    pub total_ios: u64,
    pub short_ios: u64,
    pub drop_ios: u64,
    pub slat: Lat,
    pub clat: Lat,
    pub lat: Lat,
    /// Milliseconds the job ran doing this direction.
    pub runtime_ms: u64,
    /// KiB/s per `bwavgtime` window.
    pub bw: IoStat,
    /// IOPS per `iopsavgtime` window.
    pub iops: IoStat,
    /// Completion latency per I/O priority (`ioprio` value, class << 13
    /// | level), when a job uses more than one.
    pub prios: Vec<(u16, Lat)>,
}

impl DirStats {
    fn merge(&mut self, o: &DirStats) {
        self.io_bytes += o.io_bytes;
        self.total_ios += o.total_ios;
        self.short_ios += o.short_ios;
        self.drop_ios += o.drop_ios;
        self.slat.merge(&o.slat);
        self.clat.merge(&o.clat);
        self.lat.merge(&o.lat);
        self.runtime_ms = self.runtime_ms.max(o.runtime_ms);
        self.bw.merge(&o.bw);
        self.iops.merge(&o.iops);
        for (p, l) in &o.prios {
            match self.prios.iter_mut().find(|(q, _)| q == p) {
                Some((_, m)) => m.merge(l),
                None => self.prios.push((*p, l.clone())),
            }
        }
        self.prios.sort_by_key(|(p, _)| *p);
    }

    /// Bytes per second over the runtime (fio's `bw_bytes`).
    pub fn bw_bytes(&self) -> u64 {
        (self.io_bytes * 1000)
            .checked_div(self.runtime_ms)
            .unwrap_or(0)
    }

    pub fn iops_value(&self) -> f64 {
        if self.runtime_ms == 0 {
            0.0
        } else {
            1000.0 * self.total_ios as f64 / self.runtime_ms as f64
        }
    }

    fn to_json(&self, s: &FioStats, agg_bytes_per_s: u64, plus: bool) -> Value {
        let list = &s.percentile_list;
        let bw_bytes = self.bw_bytes();
        let mut v = json!({
            "io_bytes": self.io_bytes,
            "io_kbytes": self.io_bytes >> 10,
            "bw_bytes": bw_bytes,
            "bw": bw_bytes / 1024,
            "iops": self.iops_value(),
            "runtime": self.runtime_ms,
            "total_ios": self.total_ios,
            "short_ios": self.short_ios,
            "drop_ios": self.drop_ios,
            "slat_ns": self.slat.to_json(list, s.slat_percentiles, plus),
            "clat_ns": self.clat.to_json(list, s.clat_percentiles, plus),
            "lat_ns": self.lat.to_json(list, s.lat_percentiles, plus),
        });
        let with_samples: Vec<&(u16, Lat)> =
            self.prios.iter().filter(|(_, l)| l.count() > 0).collect();
        if with_samples.len() >= 2 {
            let name = if s.lat_percentiles {
                "lat_ns"
            } else {
                "clat_ns"
            };
            let arr: Vec<Value> = with_samples
                .iter()
                .map(|(p, l)| {
                    let mut o = json!({ "prioclass": p >> 13, "prio": p & 7 });
                    o[name] = l.to_json(list, s.clat_percentiles || s.lat_percentiles, plus);
                    o
                })
                .collect();
            v["prios"] = Value::Array(arr);
        }
        let (bmin, bmax, agg, bmean, bdev) = if self.bw.samples > 0 {
            let agg = if agg_bytes_per_s > 0 {
                (self.bw.mean() * 100.0 / (agg_bytes_per_s as f64 / 1024.0)).min(100.0)
            } else {
                100.0
            };
            (
                self.bw.min,
                self.bw.max,
                agg,
                self.bw.mean(),
                self.bw.stddev(),
            )
        } else {
            (0, 0, 0.0, 0.0, 0.0)
        };
        v["bw_min"] = json!(bmin);
        v["bw_max"] = json!(bmax);
        v["bw_agg"] = json!(agg);
        v["bw_mean"] = json!(bmean);
        v["bw_dev"] = json!(bdev);
        v["bw_samples"] = json!(self.bw.samples);
        v["iops_min"] = json!(self.iops.min);
        v["iops_max"] = json!(self.iops.max);
        v["iops_mean"] = json!(self.iops.mean());
        v["iops_stddev"] = json!(self.iops.stddev());
        v["iops_samples"] = json!(self.iops.samples);
        v
    }
}

/// What `steadystate` detection saw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SteadyStateReport {
    /// The criterion as fio prints it (`iops_slope:0.100000%`).
    pub ss: String,
    pub duration_s: u64,
    pub attained: bool,
    pub criterion: String,
    pub max_deviation: f64,
    pub slope: f64,
    pub bw: Vec<u64>,
    pub iops: Vec<u64>,
}

/// One job's (or with `group_reporting`, one group's) statistics: fio's
/// `struct thread_stat`.
#[derive(Clone, Debug, PartialEq)]
pub struct FioStats {
    pub name: String,
    pub groupid: u32,
    /// fio's error: the first errno the job stopped on (or met, with
    /// `continue_on_error`).
    pub error: i32,
    pub description: Option<String>,
    /// The section's options as written (`job options`).
    pub options: Vec<(String, String)>,
    /// read, write, trim.
    pub dirs: [DirStats; 3],
    pub sync_ios: u64,
    pub sync_lat: Lat,
    pub job_runtime_ms: u64,
    /// CPU time (µs) in user and system mode, context switches, faults.
    pub usr_us: u64,
    pub sys_us: u64,
    pub ctx: u64,
    pub majf: u64,
    pub minf: u64,
    pub io_u_map: [u64; 7],
    pub io_u_submit: [u64; 7],
    pub io_u_complete: [u64; 7],
    pub total_submit: u64,
    pub total_complete: u64,
    pub lat_n: [u64; 10],
    pub lat_u: [u64; 10],
    pub lat_m: [u64; 12],
    pub continue_on_error: bool,
    pub total_err: u64,
    pub first_error: i32,
    pub latency_depth: u32,
    pub latency_target_us: u64,
    pub latency_percentile: f64,
    pub latency_window_us: u64,
    pub steadystate: Option<SteadyStateReport>,
    pub percentile_list: Vec<f64>,
    pub clat_percentiles: bool,
    pub lat_percentiles: bool,
    pub slat_percentiles: bool,
    /// Seconds since the run started, at the end.
    pub elapsed_s: u64,
    /// Jobs summed into this one (`group_reporting`).
    pub members: u32,
    /// Zone resets (`zonemode=zbd`).
    pub zone_resets: u64,
}

impl Default for FioStats {
    fn default() -> Self {
        FioStats {
            name: String::new(),
            groupid: 0,
            error: 0,
            description: None,
            options: Vec::new(),
            dirs: Default::default(),
            sync_ios: 0,
            sync_lat: Lat::default(),
            job_runtime_ms: 0,
            usr_us: 0,
            sys_us: 0,
            ctx: 0,
            majf: 0,
            minf: 0,
            io_u_map: [0; 7],
            io_u_submit: [0; 7],
            io_u_complete: [0; 7],
            total_submit: 0,
            total_complete: 0,
            lat_n: [0; 10],
            lat_u: [0; 10],
            lat_m: [0; 12],
            continue_on_error: false,
            total_err: 0,
            first_error: 0,
            latency_depth: 1,
            latency_target_us: 0,
            latency_percentile: 100.0,
            latency_window_us: 0,
            steadystate: None,
            percentile_list: FIO_PERCENTILES.to_vec(),
            clat_percentiles: true,
            lat_percentiles: false,
            slat_percentiles: false,
            elapsed_s: 0,
            members: 1,
            zone_resets: 0,
        }
    }
}

fn map_bucket(nr: u64) -> usize {
    match nr {
        0 => 0,
        1..=4 => 1,
        5..=8 => 2,
        9..=16 => 3,
        17..=32 => 4,
        33..=64 => 5,
        _ => 6,
    }
}

impl FioStats {
    /// An I/O was submitted with `depth` I/Os of the job in flight
    /// (itself included): `io_u_mark_depth`, and one I/O per submit call.
    pub fn mark_submit(&mut self, depth: u32) {
        let idx = match depth {
            0 | 1 => 0,
            2..=3 => 1,
            4..=7 => 2,
            8..=15 => 3,
            16..=31 => 4,
            32..=63 => 5,
            _ => 6,
        };
        self.io_u_map[idx] += 1;
        self.io_u_submit[map_bucket(1)] += 1;
        self.total_submit += 1;
    }

    /// `n` completions were reaped together (`io_u_mark_complete`).
    pub fn mark_complete(&mut self, n: u64) {
        self.io_u_complete[map_bucket(n)] += 1;
        self.total_complete += 1;
    }

    /// A read or write (`dir` 0 or 1) of `bytes` completed with these
    /// latencies (ns); `prio` is its ioprio value.
    pub fn record(&mut self, dir: usize, bytes: u64, slat: u64, clat: u64, prio: u16, short: bool) {
        let d = &mut self.dirs[dir];
        d.io_bytes += bytes;
        d.total_ios += 1;
        if short {
            d.short_ios += 1;
        }
        // Submission latency only where one was measured: the engines here
        // submit inside the call that issues (its cost is in clat), so slat
        // keeps no samples, as fio's sync engines keep none.
        if slat > 0 {
            d.slat.record(slat);
        }
        d.clat.record(clat);
        let lat = slat + clat;
        d.lat.record(lat);
        match d.prios.iter_mut().find(|(p, _)| *p == prio) {
            Some((_, l)) => l.record(clat),
            None => {
                let mut l = Lat::default();
                l.record(clat);
                d.prios.push((prio, l));
                d.prios.sort_by_key(|(p, _)| *p);
            }
        }
        // io_u_mark_latency
        if lat < 1000 {
            let i = match lat {
                0..=1 => 0,
                2..=3 => 1,
                4..=9 => 2,
                10..=19 => 3,
                20..=49 => 4,
                50..=99 => 5,
                100..=249 => 6,
                250..=499 => 7,
                500..=749 => 8,
                _ => 9,
            };
            self.lat_n[i] += 1;
        } else if lat < 1_000_000 {
            self.lat_u[range_idx(lat / 1000)] += 1;
        } else {
            let ms = lat / 1_000_000;
            let i = if ms >= 2000 {
                11
            } else if ms >= 1000 {
                10
            } else {
                range_idx(ms)
            };
            self.lat_m[i] += 1;
        }
    }

    /// A count without latency (`gtod_reduce`, `disable_lat`).
    pub fn record_bytes(&mut self, dir: usize, bytes: u64, short: bool) {
        let d = &mut self.dirs[dir];
        d.io_bytes += bytes;
        d.total_ios += 1;
        if short {
            d.short_ios += 1;
        }
    }

    pub fn record_sync(&mut self, ns: u64) {
        self.sync_ios += 1;
        self.sync_lat.record(ns);
    }

    /// Add another job's figures (`sum_thread_stats`, group reporting).
    pub fn merge(&mut self, o: &FioStats) {
        for (a, b) in self.dirs.iter_mut().zip(&o.dirs) {
            a.merge(b);
        }
        self.sync_ios += o.sync_ios;
        self.sync_lat.merge(&o.sync_lat);
        self.job_runtime_ms = self.job_runtime_ms.max(o.job_runtime_ms);
        self.usr_us += o.usr_us;
        self.sys_us += o.sys_us;
        self.ctx += o.ctx;
        self.majf += o.majf;
        self.minf += o.minf;
        for i in 0..7 {
            self.io_u_map[i] += o.io_u_map[i];
            self.io_u_submit[i] += o.io_u_submit[i];
            self.io_u_complete[i] += o.io_u_complete[i];
        }
        self.total_submit += o.total_submit;
        self.total_complete += o.total_complete;
        for i in 0..10 {
            self.lat_n[i] += o.lat_n[i];
            self.lat_u[i] += o.lat_u[i];
        }
        for i in 0..12 {
            self.lat_m[i] += o.lat_m[i];
        }
        self.total_err += o.total_err;
        if self.error == 0 {
            self.error = o.error;
        }
        if self.first_error == 0 {
            self.first_error = o.first_error;
        }
        self.elapsed_s = self.elapsed_s.max(o.elapsed_s);
        self.members += o.members;
        self.zone_resets += o.zone_resets;
    }

    fn to_json(&self, agg: [u64; 3], plus: bool) -> Value {
        let total_ios = self.dirs[0].total_ios + self.dirs[1].total_ios;
        let dist = |map: &[u64], total: u64| percents(map, total, 0.1);
        let lat_dist = |src: &[u64]| percents(src, total_ios, 0.01);
        let named = |names: &[&str], vals: Vec<f64>| -> Value {
            Value::Object(
                names
                    .iter()
                    .zip(vals)
                    .map(|(n, v)| (n.to_string(), json!(v)))
                    .collect(),
            )
        };
        let (usr, sys) = if self.job_runtime_ms > 0 {
            let rt = self.job_runtime_ms as f64 * 1000.0;
            (
                self.usr_us as f64 * 100.0 / rt,
                self.sys_us as f64 * 100.0 / rt,
            )
        } else {
            (0.0, 0.0)
        };
        let ranges = [
            "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000",
        ];
        let ranges_ms = [
            "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000",
        ];
        let mut v = json!({
            "jobname": self.name,
            "groupid": self.groupid,
            "error": self.error,
            "eta": 0,
            "elapsed": self.elapsed_s,
            "read": self.dirs[0].to_json(self, agg[0], plus),
            "write": self.dirs[1].to_json(self, agg[1], plus),
            "trim": self.dirs[2].to_json(self, agg[2], plus),
            "sync": {
                "total_ios": self.sync_ios,
                "lat_ns": self.sync_lat.to_json(
                    &self.percentile_list,
                    self.lat_percentiles || self.clat_percentiles,
                    plus,
                ),
            },
            "job_runtime": self.job_runtime_ms,
            "usr_cpu": usr,
            "sys_cpu": sys,
            "ctx": self.ctx,
            "majf": self.majf,
            "minf": self.minf,
            "iodepth_level": named(&["1", "2", "4", "8", "16", "32", ">=64"], dist(&self.io_u_map, total_ios)),
            "iodepth_submit": named(&["0", "4", "8", "16", "32", "64", ">=64"], dist(&self.io_u_submit, self.total_submit)),
            "iodepth_complete": named(&["0", "4", "8", "16", "32", "64", ">=64"], dist(&self.io_u_complete, self.total_complete)),
            "latency_ns": named(&ranges, lat_dist(&self.lat_n)),
            "latency_us": named(&ranges, lat_dist(&self.lat_u)),
            "latency_ms": named(&ranges_ms, lat_dist(&self.lat_m)),
        });
        if !self.options.is_empty() {
            let opts: Map<String, Value> = self
                .options
                .iter()
                .map(|(k, val)| (k.clone(), json!(val)))
                .collect();
            v["job options"] = Value::Object(opts);
        }
        if self.continue_on_error {
            v["total_err"] = json!(self.total_err);
            v["first_error"] = json!(self.first_error);
        }
        if self.latency_depth > 0 {
            v["latency_depth"] = json!(self.latency_depth);
            v["latency_target"] = json!(self.latency_target_us);
            v["latency_percentile"] = json!(self.latency_percentile);
            v["latency_window"] = json!(self.latency_window_us);
        }
        if let Some(d) = &self.description {
            v["desc"] = json!(d);
        }
        if let Some(ss) = &self.steadystate {
            let mean = |xs: &[u64]| -> u64 {
                if xs.is_empty() {
                    0
                } else {
                    xs.iter().sum::<u64>() / xs.len() as u64
                }
            };
            v["steadystate"] = json!({
                "ss": ss.ss,
                "duration": ss.duration_s,
                "attained": u8::from(ss.attained),
                "criterion": ss.criterion,
                "max_deviation": ss.max_deviation,
                "slope": ss.slope,
                "data": {
                    "bw_mean": mean(&ss.bw),
                    "iops_mean": mean(&ss.iops),
                    "iops": ss.iops,
                    "bw": ss.bw,
                },
            });
        }
        v
    }
}

fn range_idx(v: u64) -> usize {
    match v {
        0..=1 => 0,
        2..=3 => 1,
        4..=9 => 2,
        10..=19 => 3,
        20..=49 => 4,
        50..=99 => 5,
        100..=249 => 6,
        250..=499 => 7,
        500..=749 => 8,
        _ => 9,
    }
}

/// `disk_util`: what the device under the target saw during the run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiskUtil {
    pub name: String,
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_merges: u64,
    pub write_merges: u64,
    /// Milliseconds requests spent in the device (`/proc/diskstats`).
    pub read_ticks: u64,
    pub write_ticks: u64,
    pub in_queue: u64,
    /// Share of the run with a request at the device, 0-100.
    pub util: f64,
}

/// When the report was made (`timestamp_ms`), and how fio names the
/// time (`ctime` format).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct When {
    pub timestamp_ms: u64,
    pub time: String,
}

/// The whole JSON document. `jobs` are in fio's order (one per thread,
/// or per group with group reporting); `plus` is `json+`.
pub fn render_json(
    version: &str,
    when: &When,
    global: &[(String, String)],
    jobs: &[FioStats],
    disks: &[DiskUtil],
    plus: bool,
) -> String {
    // Per group and direction, the aggregate bandwidth: all bytes over the
    // longest runtime (fio's `rs->agg`).
    let mut agg: std::collections::BTreeMap<u32, ([u64; 3], [u64; 3])> = Default::default();
    for j in jobs {
        let e = agg.entry(j.groupid).or_default();
        for d in 0..3 {
            e.0[d] += j.dirs[d].io_bytes;
            e.1[d] = e.1[d].max(j.dirs[d].runtime_ms);
        }
    }
    let jobs: Vec<Value> = jobs
        .iter()
        .map(|j| {
            let (bytes, run) = agg[&j.groupid];
            let a = [0, 1, 2].map(|d| (bytes[d] * 1000).checked_div(run[d]).unwrap_or(0));
            j.to_json(a, plus)
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
                "read_ticks": d.read_ticks,
                "write_ticks": d.write_ticks,
                "in_queue": d.in_queue,
                "util": d.util,
            })
        })
        .collect();
    let mut doc = json!({
        "fio version": version,
        "timestamp": when.timestamp_ms / 1000,
        "timestamp_ms": when.timestamp_ms,
        "time": when.time,
        "jobs": jobs,
    });
    if !global.is_empty() {
        let g: Map<String, Value> = global.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        doc["global options"] = Value::Object(g);
    }
    if !disks.is_empty() {
        doc["disk_util"] = Value::Array(disks);
    }
    let mut s = serde_json::to_string_pretty(&doc).expect("JSON values serialise");
    s.push('\n');
    s
}

/// Each count as a percentage of `total`, as fio's `show_*_dist` print them:
/// a count that is not zero shows at least `floor` (fio's 0.1 for depths,
/// 0.01 for latency buckets); all zero when `total` is.
fn percents(counts: &[u64], total: u64, floor: f64) -> Vec<f64> {
    counts
        .iter()
        .map(|&m| {
            if total == 0 {
                return 0.0;
            }
            let v = m as f64 / total as f64 * 100.0;
            if v < floor && m > 0 {
                floor
            } else {
                v
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_is_fios() {
        for v in [0u64, 1, 63, 64, 127, 128, 129, 1000, 123_456, 9_876_543_210] {
            let i = plat_val_to_idx(v);
            let back = plat_idx_to_val(i);
            // fio's bound on the error: 1/2^(PLAT_BITS+1) of the value.
            let err = (back as f64 - v as f64).abs();
            assert!(err <= v as f64 / 128.0 + 1.0, "{v} -> {i} -> {back}");
        }
        assert_eq!(plat_val_to_idx(127), 127);
        assert_eq!(plat_idx_to_val(128), 129, "128..130 stands for 129");
    }

    #[test]
    fn percentile_keys_and_figures_are_fios() {
        let mut s = FioStats {
            name: "j".into(),
            ..FioStats::default()
        };
        for i in 1..=100u64 {
            s.record(0, 4096, 0, i * 1000, 0, false);
        }
        s.dirs[0].runtime_ms = 500;
        s.job_runtime_ms = 500;
        let text = render_json("fio-3.33", &When::default(), &[], &[s], &[], true);
        let v: Value = serde_json::from_str(&text).unwrap();
        let read = &v["jobs"][0]["read"];
        assert_eq!(read["bw"], 800, "400 KiB in 0.5 s");
        assert_eq!(read["iops"], 200.0);
        let p99 = read["clat_ns"]["percentile"]["99.000000"].as_u64().unwrap();
        assert!((98_000..=100_000).contains(&p99), "{p99}");
        assert!(read["clat_ns"]["bins"].as_object().unwrap().len() > 50);
        assert!(v["jobs"][0]["write"]["clat_ns"].get("percentile").is_none());
        assert_eq!(v["jobs"][0]["latency_us"]["100"], 50.0, "50..99 us");
        assert!(!text.contains("NaN"));
    }

    #[test]
    fn merged_moments_equal_the_moments_of_all_samples() {
        let mut a = IoStat::default();
        let mut b = IoStat::default();
        let mut all = IoStat::default();
        for v in [3u64, 9, 27, 1, 5] {
            a.add(v);
            all.add(v);
        }
        for v in [100u64, 2, 40] {
            b.add(v);
            all.add(v);
        }
        a.merge(&b);
        assert!((a.mean() - all.mean()).abs() < 1e-9);
        assert!((a.stddev() - all.stddev()).abs() < 1e-9);
        assert_eq!((a.min, a.max, a.samples), (1, 100, 8));
    }
}
