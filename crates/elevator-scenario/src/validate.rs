//! `elevator validate`: replay a DiskSim validation trace on a device model
//! and score it as DiskSim scores itself.
//!
//! DiskSim's validation traces (`valid/<disk>.trace`) hold, per request,
//! the real drive's measured service time and the gap from its completion
//! to the next arrival. DiskSim replays them one request at a time
//! (`disksim … validate trace 0`), and its `rms` tool compares the
//! simulated "Physical access time distribution" with the trace's
//! "VALIDATE Trace access time distribution" (`runvalid`: `rms outv outv
//! -1 -1 1`). Both distributions are binned by `valid/statdefs`: 1750 bins
//! on a scale of 1000 per ms, `Start 0 step 1 grow 1`, so bin k is k+1 µs
//! wide (edges at 1, 3, 6, 10 … µs: 1 µs resolution near zero, about 100
//! µs at 5 ms). `rms` reads each distribution as cumulative fractions at
//! the bins' upper edges, and for every fraction p = 0.0001, 0.0002, … 1
//! interpolates linearly the time at which each curve reaches p; the
//! demerit is the root mean square of the differences (DiskSim 4.0
//! `src/rms.c`, `compute_rms`). We compute exactly that, and beside it the
//! unbinned version (sorted samples paired), the mean and the
//! per-request RMS error.
//!
//! The replay is DiskSim's closed loop: no scheduler, one request at a
//! time, each arriving its recorded gap after the previous completion.
//!
//! Speed: a second thread parses the trace a batch ahead of the replay
//! (the records arrive in order, so the result is the same); the replay
//! keeps the response times in integer nanoseconds, and after it each
//! side's sum, bins and radix sort run on a thread of their own.

use crate::ScenarioError;
use elevator_core::{Duration, Instant, Request, RequestId};
use elevator_workload::trace::{open_trace, TraceFormat, TraceReader};
use std::io::BufRead;
use std::sync::mpsc::sync_channel;

/// Bins of DiskSim's "Physical access time" distribution (statdefs:
/// `Distribution size: 1750`).
pub const DISKSIM_BINS: usize = 1750;
/// Its scale: 1000 bin units per ms (statdefs `Scale/Equals: 1000/0`).
const DISKSIM_UNITS_PER_MS: f64 = 1000.0;
/// `rms.c`'s `RMS_INCR`: the step between compared fractions.
const RMS_INCR: f64 = 0.0001;

/// The scores of one validation replay (times in ms).
#[derive(Clone, Debug, PartialEq)]
pub struct Validation {
    pub trace: String,
    pub device: String,
    pub requests: usize,
    pub mean_model_ms: f64,
    pub mean_measured_ms: f64,
    /// RMS of the per-request differences.
    pub per_request_rms_ms: f64,
    /// DiskSim's demerit: binned as DiskSim bins, compared as `rms` does.
    pub demerit_ms: f64,
    /// The same comparison without bins (sorted samples paired).
    pub demerit_unbinned_ms: f64,
}

/// Upper edges of DiskSim's bins, in ms.
fn disksim_edges() -> Vec<f64> {
    let mut edges = Vec::with_capacity(DISKSIM_BINS);
    let mut edge = 0.0;
    for k in 0..DISKSIM_BINS {
        edge += (k + 1) as f64;
        edges.push(edge / DISKSIM_UNITS_PER_MS);
    }
    edges
}

/// Slices of a millisecond in which [`Bins`] remembers the first bin.
const SLICES_PER_MS: f64 = 64.0;
/// Milliseconds [`Bins`] covers with its table (beyond, a binary search).
const TABLE_MS: usize = 64;

/// DiskSim's bins, and where to find a sample's bin fast.
#[derive(Clone, Debug)]
struct Bins {
    edges: Vec<f64>,
    /// For each slice of `1 / SLICES_PER_MS` ms up to `TABLE_MS`, the bin
    /// of the slice's start.
    first: Vec<u16>,
}

impl Bins {
    fn new() -> Self {
        let edges = disksim_edges();
        let first = (0..TABLE_MS * SLICES_PER_MS as usize)
            .map(|i| Self::search(&edges, i as f64 / SLICES_PER_MS) as u16)
            .collect();
        Bins { edges, first }
    }

    /// The first bin whose upper edge is above `ms` (the last bin takes
    /// everything beyond).
    fn search(edges: &[f64], ms: f64) -> usize {
        edges.partition_point(|&e| e <= ms).min(edges.len() - 1)
    }

    /// [`Bins::search`], starting from the bin of the sample's slice and
    /// walking up the step or two to its own: the same answer.
    fn of(&self, ms: f64) -> usize {
        // Non-negative, so truncation is the floor.
        let slice = (ms * SLICES_PER_MS) as usize;
        let Some(&first) = self.first.get(slice) else {
            return Self::search(&self.edges, ms);
        };
        let mut k = usize::from(first);
        while k + 1 < self.edges.len() && self.edges[k] <= ms {
            k += 1;
        }
        k
    }
}

/// Samples counted into DiskSim's bins.
#[derive(Clone, Debug)]
struct Histogram {
    counts: Vec<u64>,
    n: u64,
}

impl Histogram {
    fn new() -> Self {
        Histogram {
            counts: vec![0; DISKSIM_BINS],
            n: 0,
        }
    }

    fn add(&mut self, ms: f64, bins: &Bins) {
        self.counts[bins.of(ms)] += 1;
        self.n += 1;
    }

    /// The distribution as `rms` reads it: (upper edge, cumulative
    /// fraction) per bin, up to the first bin where the fraction reaches 1.
    fn cdf(&self, edges: &[f64]) -> Vec<(f64, f64)> {
        let n = self.n.max(1) as f64;
        let mut cdf = Vec::new();
        let mut sum = 0u64;
        for (k, &c) in self.counts.iter().enumerate() {
            sum += c;
            let y = sum as f64 / n;
            cdf.push((edges[k], y));
            if y >= 1.0 {
                break;
            }
        }
        cdf
    }
}

/// The time at which a piecewise-linear CDF reaches `p`.
fn time_at(cdf: &[(f64, f64)], p: f64) -> f64 {
    let i = cdf.partition_point(|&(_, y)| y < p);
    if i == 0 {
        // Reached within the first bin: interpolate from the origin.
        let (x, y) = cdf[0];
        return if y > 0.0 { x * p / y } else { x };
    }
    let i = i.min(cdf.len() - 1);
    let (x0, y0) = cdf[i - 1];
    let (x1, y1) = cdf[i];
    if y1 > y0 {
        x0 + (p - y0) / (y1 - y0) * (x1 - x0)
    } else {
        x1
    }
}

/// DiskSim's demerit of `model` against `measured` (ms samples).
pub fn disksim_demerit(model: &[f64], measured: &[f64]) -> f64 {
    let bins = Bins::new();
    let (mut a, mut b) = (Histogram::new(), Histogram::new());
    model.iter().for_each(|&s| a.add(s, &bins));
    measured.iter().for_each(|&s| b.add(s, &bins));
    histogram_demerit(&a, &b, &bins.edges)
}

/// DiskSim's demerit of two binned distributions.
fn histogram_demerit(model: &Histogram, measured: &Histogram, edges: &[f64]) -> f64 {
    if model.n == 0 || measured.n == 0 {
        return 0.0;
    }
    let (a, b) = (model.cdf(edges), measured.cdf(edges));
    let (mut squares, mut count) = (0.0, 0u32);
    // Integer steps avoid `rms.c`'s drifting float sum; the points are the
    // same 10 000 fractions.
    for step in 1..=10_000u32 {
        let p = f64::from(step) * RMS_INCR;
        let d = time_at(&a, p) - time_at(&b, p);
        squares += d * d;
        count += 1;
    }
    (squares / f64::from(count)).sqrt()
}

/// RMS of paired sorted samples: the demerit without bins.
pub fn unbinned_demerit(model: &[f64], measured: &[f64]) -> f64 {
    let (mut a, mut b) = (model.to_vec(), measured.to_vec());
    a.sort_unstable_by(f64::total_cmp);
    b.sort_unstable_by(f64::total_cmp);
    rms(&a, &b)
}

/// What one side's samples (whole nanoseconds, in trace order) give on
/// their own: the sum of their milliseconds, added in trace order (as the
/// mean always added them), and their bins; then they are sorted.
fn side_scores(ns: &mut [u64], bins: &Bins) -> (f64, Histogram) {
    let (mut sum, mut histogram) = (0.0, Histogram::new());
    for &t in ns.iter() {
        let ms = Duration(t).as_millis_f64();
        sum += ms;
        histogram.add(ms, bins);
    }
    radix_sort(ns, &mut vec![0; ns.len()]);
    (sum, histogram)
}

/// [`unbinned_demerit`] of sorted samples in whole nanoseconds.
/// Milliseconds are `ns / 1e6`, which keeps the order, so sorting the
/// integers sorts the milliseconds.
fn unbinned_demerit_sorted_ns(model: &[u64], measured: &[u64]) -> f64 {
    let ms = |ns: &u64| Duration(*ns).as_millis_f64();
    let squares = model
        .iter()
        .map(ms)
        .zip(measured.iter().map(ms))
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>();
    if model.is_empty() {
        0.0
    } else {
        (squares / model.len() as f64).sqrt()
    }
}

/// Sort `v` by least-significant-digit radix sort, only as many passes
/// of at most 13 bits as its largest value needs, the bits shared evenly
/// among them (two passes below 67 ms in ns, three below 550 s): a
/// million samples sort in a few milliseconds, several times faster than
/// a comparison sort. `scratch` is at least as long as `v`.
fn radix_sort(v: &mut [u64], scratch: &mut [u64]) {
    const MAX_BITS: u32 = 13;
    const BUCKETS: usize = 1 << MAX_BITS;
    let max = v.iter().copied().max().unwrap_or(0);
    let bits = u64::BITS - max.leading_zeros();
    let passes = bits.div_ceil(MAX_BITS);
    let width = bits.div_ceil(passes.max(1));
    let scratch = &mut scratch[..v.len()];
    // Each pass moves the values from one of the two to the other.
    let (mut from, mut to) = (&mut *v, &mut *scratch);
    for pass in 0..passes {
        let shift = pass * width;
        let digit = |x: u64| ((x >> shift) as usize) & ((1 << width) - 1);
        let mut start = vec![0usize; BUCKETS];
        for &x in from.iter() {
            start[digit(x)] += 1;
        }
        let mut sum = 0;
        for s in start.iter_mut() {
            (*s, sum) = (sum, sum + *s);
        }
        for &x in from.iter() {
            let d = digit(x);
            to[start[d]] = x;
            start[d] += 1;
        }
        std::mem::swap(&mut from, &mut to);
    }
    if passes % 2 == 1 {
        v.copy_from_slice(scratch);
    }
}

fn rms(a: &[f64], b: &[f64]) -> f64 {
    if a.is_empty() {
        return 0.0;
    }
    (a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>() / a.len() as f64).sqrt()
}

fn trace_error(e: elevator_workload::TraceError) -> ScenarioError {
    ScenarioError {
        file: e.file,
        line: (e.line > 0).then_some(e.line),
        key: Some(e.field.to_string()),
        message: e.message,
    }
}

/// Records a batch carries from the parsing thread to the replay.
const BATCH: usize = 4096;

/// Call `each` on every item of `items`, in order, while a second thread
/// reads the items a batch or two ahead, so that parsing a trace and
/// replaying it overlap. Stops at the first error `each` returns (the
/// reading thread then stops at its next batch); batches are recycled.
fn parsed_ahead<I, E>(items: I, mut each: impl FnMut(I::Item) -> Result<(), E>) -> Result<(), E>
where
    I: Iterator + Send,
    I::Item: Send,
{
    let (full_tx, full_rx) = sync_channel::<Vec<I::Item>>(2);
    let (empty_tx, empty_rx) = sync_channel::<Vec<I::Item>>(4);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut items = items;
            loop {
                let mut batch = empty_rx
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(BATCH));
                batch.extend(items.by_ref().take(BATCH));
                // A short batch is the last: the reader has ended.
                let last = batch.len() < BATCH;
                if batch.is_empty() || full_tx.send(batch).is_err() || last {
                    return;
                }
            }
        });
        for mut batch in full_rx {
            for item in batch.drain(..) {
                each(item)?;
            }
            // The reader may have stopped: then the batch is dropped.
            let _ = empty_tx.try_send(batch);
        }
        Ok(())
    })
}

/// Replay DiskSim validation trace `trace` on `device`.
pub fn validate(trace: &str, device: &str) -> Result<Validation, ScenarioError> {
    let reader = open_trace(trace, Some(TraceFormat::DisksimValidate)).map_err(trace_error)?;
    validate_reader(reader, device)
}

/// Replay what `reader` reads (a DiskSim validation trace) on `device`.
pub fn validate_reader<R: BufRead + Send>(
    reader: TraceReader<R>,
    device: &str,
) -> Result<Validation, ScenarioError> {
    let dev = elevator_device::open(device)
        .map_err(|e| ScenarioError::command_line(None, format!("device {device:?}: {e}")))?;
    validate_on(reader, dev, device)
}

/// Replay what `reader` reads on the device model `dev` (named `device`).
pub fn validate_on<R: BufRead + Send>(
    reader: TraceReader<R>,
    mut dev: Box<dyn elevator_device::Device>,
    device: &str,
) -> Result<Validation, ScenarioError> {
    let capacity = dev.limits().capacity;
    let trace = reader.file().to_string();
    let trace = trace.as_str();
    let mut now = Instant::ZERO;
    // Per request: the response times in ns, and the squared difference
    // summed in trace order as the per-request RMS always summed it.
    let (mut model_ns, mut measured_ns) = (Vec::new(), Vec::new());
    let mut squares = 0.0;
    let mut prev: Option<(Duration, Duration)> = None;
    let mut i = 0u64;
    parsed_ahead(reader, |record| {
        let r = record.map_err(trace_error)?;
        if r.sector + u64::from(r.sectors) > capacity {
            return Err(ScenarioError::new(
                trace,
                Some(r.line),
                Some("blkno"),
                format!(
                    "sectors {}..{} are past the end of {device} ({capacity} sectors): \
                     is this the trace of another drive?",
                    r.sector,
                    r.sector + u64::from(r.sectors)
                ),
            ));
        }
        // The recorded gap from the previous completion to this arrival.
        if let Some((prev_time, prev_service)) = prev {
            now += r.time.saturating_sub(prev_time + prev_service);
        }
        let service = r.service.unwrap_or(Duration::ZERO);
        prev = Some((r.time, service));
        let mut request = Request::read(i, 0, r.sector, r.sectors);
        request.id = RequestId(i);
        request.op = r.op;
        i += 1;
        dev.submit(&request, now);
        let done = dev
            .next_completion()
            .expect("a submitted request completes");
        let id = dev.complete(done);
        debug_assert_eq!(id, Some(request.id));
        let (model_time, measured_time) = (done.since(now), service);
        let (x, y) = (model_time.as_millis_f64(), measured_time.as_millis_f64());
        model_ns.push(model_time.nanos());
        measured_ns.push(measured_time.nanos());
        squares += (x - y) * (x - y);
        now = done;
        Ok(())
    })?;
    if model_ns.is_empty() {
        return Err(ScenarioError::new(
            trace,
            None,
            None,
            "no requests in the trace",
        ));
    }
    // Each side's sum, bins and sort, the two sides side by side.
    let bins = Bins::new();
    let (model, measured) = std::thread::scope(|scope| {
        let model = scope.spawn(|| side_scores(&mut model_ns, &bins));
        let measured = side_scores(&mut measured_ns, &bins);
        (model.join().expect("scoring does not panic"), measured)
    });
    let ((model_sum, model_bins), (measured_sum, measured_bins)) = (model, measured);
    let n = model_ns.len() as f64;
    Ok(Validation {
        trace: trace.to_string(),
        device: device.to_string(),
        requests: model_ns.len(),
        mean_model_ms: model_sum / n,
        mean_measured_ms: measured_sum / n,
        per_request_rms_ms: (squares / n).sqrt(),
        demerit_ms: histogram_demerit(&model_bins, &measured_bins, &bins.edges),
        demerit_unbinned_ms: unbinned_demerit_sorted_ns(&model_ns, &measured_ns),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_samples_score_zero_and_a_shift_scores_the_shift() {
        let a: Vec<f64> = (0..1000).map(|i| 2.0 + f64::from(i) * 0.01).collect();
        assert!(disksim_demerit(&a, &a) < 1e-12);
        // Shifted by exactly 0.5 ms: the binned curves differ by about
        // that much (bins near 7-12 ms are 0.12-0.15 ms wide).
        let b: Vec<f64> = a.iter().map(|x| x + 0.5).collect();
        let d = disksim_demerit(&a, &b);
        assert!((d - 0.5).abs() < 0.1, "{d}");
        assert!((unbinned_demerit(&a, &b) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn the_bin_shortcut_and_the_radix_sort_agree_with_search_and_sort() {
        let bins = Bins::new();
        let edges = &bins.edges;
        let mut rng = elevator_core::Prng::derive(16, "validate-bins");
        // Every edge and its neighbours to the nanosecond, then samples up
        // to past the last bin (1.53 s) and far beyond.
        let near_edges = edges.iter().flat_map(|&e| {
            let ns = (e * 1e6).round() as u64;
            [ns.saturating_sub(1), ns, ns + 1]
        });
        let random = (0..20_000).map(|i| rng.below([3_000_000, 40_000_000, 2_000_000_000][i % 3]));
        let mut samples: Vec<u64> = near_edges
            .chain(random)
            .chain([0, u64::MAX >> 12])
            .collect();
        for &ns in &samples {
            let ms = Duration(ns).as_millis_f64();
            let searched = edges.partition_point(|&e| e <= ms).min(edges.len() - 1);
            assert_eq!(bins.of(ms), searched, "{ns} ns");
        }
        let mut sorted = samples.clone();
        sorted.sort_unstable();
        radix_sort(&mut samples, &mut vec![0; 1 << 16]);
        assert_eq!(samples, sorted);
    }

    /// Errors found past the first batches (by the parsing thread, and by
    /// the replay) still stop the replay and name their line.
    #[test]
    fn errors_deep_in_a_trace_name_their_line() {
        let run = |bad_at: usize, bad: &str| {
            let mut text = String::new();
            for line in 1..=3 * BATCH {
                let good = format!("R Miss {} 8 5000.0 1000.0", line * 1000);
                text.push_str(if line == bad_at { bad } else { &good });
                text.push('\n');
            }
            let reader = TraceReader::new("deep", text.as_bytes(), TraceFormat::DisksimValidate);
            validate_reader(reader, "ibm18es")
        };
        let e = run(2 * BATCH + 7, "R Miss 1000 8 soon 1000.0").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2 * BATCH + 7), Some("service"))
        );
        let e = run(BATCH + 1, "W Hit 99999999999 8 5000.0 1000.0").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(BATCH + 1), Some("blkno")));
        assert_eq!(run(0, "").unwrap().requests, 3 * BATCH);
    }

    #[test]
    fn bins_grow_by_a_microsecond_each() {
        let e = disksim_edges();
        assert_eq!(&e[..4], &[0.001, 0.003, 0.006, 0.010]);
        assert_eq!(e.len(), DISKSIM_BINS);
    }
}
