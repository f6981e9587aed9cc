//! `elevator validate` on DiskSim's two validated drives, with profiles
//! made by the importer from DiskSim's own files (not by hand): prints
//! DiskSim's demerit beside DiskSim's figure and holds ours below a
//! committed ceiling, so a change that worsens the HDD model fails here.
//!
//! DiskSim's own demerits (its `runvalid`; reference §1.5): ibm18es 0.135
//! ms, hp_c3323a 0.306 ms. Ours: ibm18es 0.133 ms, hp_c3323a 0.291 ms.
//! Replayed beside DiskSim 4.0 itself, 99 % of our service times on
//! either trace are within 0.05 ms of DiskSim's, once the model took
//! DiskSim's layout (spare cylinders, empty zone fronts, slipped blocks,
//! spare tracks, the first block's offset), its stale-data rule (a write
//! empties the read segments it overlaps) and its sector-by-sector
//! write-through; the HP's demerit rose from 0.239 ms as the model came
//! closer to DiskSim's, while its per-request error fell (4.36 to 4.28
//! ms). `request_by_request_the_model_agrees_with_disksim` holds that
//! agreement against DiskSim's own times in `testdata/disksim/`.

use elevator_core::{Duration, Instant, Request};
use elevator_device::disksim::import_disksim;
use elevator_scenario::validate::validate_on;
use elevator_workload::trace::{open_trace, TraceFormat};
use std::path::PathBuf;

const DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/traces/disksim-validation"
);

fn check(name: &str, disksim_ms: f64, ceiling_ms: f64) {
    let parv = PathBuf::from(DIR).join(format!("{name}.parv"));
    assert!(
        parv.exists(),
        "{} is missing: the shared traces are needed",
        parv.display()
    );
    let imported = import_disksim(&parv).unwrap();
    let dev = elevator_device::parse(name, &imported.profile).unwrap();
    let trace = format!("{DIR}/{name}.trace");
    let reader = open_trace(&trace, Some(TraceFormat::DisksimValidate)).unwrap();
    let v = validate_on(reader, dev, name).unwrap();
    println!(
        "{name}: {} requests, mean model {:.3} ms / measured {:.3} ms, demerit {:.3} ms \
         (DiskSim {disksim_ms:.3} ms; ceiling {ceiling_ms}), unbinned {:.3}, per-request RMS {:.3}",
        v.requests,
        v.mean_model_ms,
        v.mean_measured_ms,
        v.demerit_ms,
        v.demerit_unbinned_ms,
        v.per_request_rms_ms
    );
    assert!(v.requests > 9000);
    assert!(
        v.demerit_ms <= ceiling_ms,
        "{name}: demerit {} ms",
        v.demerit_ms
    );
}

#[test]
fn ibm18es_imported_profile() {
    check("ibm18es", 0.135, 0.135);
}

#[test]
fn hp_c3323a_imported_profile() {
    check("hp_c3323a", 0.306, 0.30);
}

/// Our service time of each request of `name`'s validation trace, replayed
/// one at a time as `validate_on` does (each arrival the recorded gap after
/// the previous completion).
fn per_request(name: &str) -> Vec<f64> {
    let imported = import_disksim(&PathBuf::from(DIR).join(format!("{name}.parv"))).unwrap();
    let mut dev = elevator_device::parse(name, &imported.profile).unwrap();
    let trace = format!("{DIR}/{name}.trace");
    let reader = open_trace(&trace, Some(TraceFormat::DisksimValidate)).unwrap();
    let mut now = Instant::ZERO;
    let mut prev: Option<(Duration, Duration)> = None;
    let mut out = Vec::new();
    for (i, record) in reader.enumerate() {
        let r = record.unwrap();
        if let Some((time, service)) = prev {
            now += r.time.saturating_sub(time + service);
        }
        prev = Some((r.time, r.service.unwrap()));
        let mut request = Request::read(i as u64, 0, r.sector, r.sectors);
        request.op = r.op;
        dev.submit(&request, now);
        let done = dev.next_completion().unwrap();
        assert_eq!(dev.complete(done), Some(request.id));
        out.push(done.since(now).as_millis_f64());
        now = done;
    }
    out
}

/// Request by request, the model agrees with DiskSim 4.0 itself (its
/// simulated times for the same traces are in `testdata/disksim/`): a
/// change to the HDD model that drifts from DiskSim's mechanisms fails
/// here even when the demerit happens to stay under its ceiling.
#[test]
fn request_by_request_the_model_agrees_with_disksim() {
    for (name, at_least) in [("ibm18es", 0.985), ("hp_c3323a", 0.99)] {
        let file = format!(
            "{}/testdata/disksim/{name}.times",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&file).unwrap();
        let disksim: Vec<f64> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.parse().unwrap_or_else(|_| panic!("{file}: {l:?}")))
            .collect();
        let ours = per_request(name);
        assert_eq!(ours.len(), disksim.len(), "{name}");
        let close = ours
            .iter()
            .zip(&disksim)
            .filter(|(a, b)| (*a - *b).abs() < 0.05)
            .count();
        let share = close as f64 / ours.len() as f64;
        println!(
            "{name}: {close} of {} requests within 0.05 ms of DiskSim's",
            ours.len()
        );
        assert!(share >= at_least, "{name}: {share}");
    }
}
