//! Seek curves: DiskSim's seek equations (`hpl`, `hplplus10`, `linear`, `curve`,
//! `constant`) sampled into the table the HDD model interpolates, and `.seek` files read as
//! measured tables (`Seek type = extracted`).

use super::*;

/// Sample the seek equation `f` (ms by distance) at the distances up to
/// `max` where linear interpolation, as the HDD model reads a seek table,
/// keeps within [`SAMPLE_TOLERANCE_MS`] of it: every distance up to 16,
/// then steps that double while the chord stays close. `breaks` are the
/// distances where a piece of the equation starts; no chord spans one.
pub(super) fn sample_seek(f: &dyn Fn(u32) -> f64, max: u32, breaks: &[u32]) -> Vec<(u32, f64)> {
    let max = max.max(1);
    let mut points: Vec<(u32, f64)> = (1..=max.min(16)).map(|d| (d, f(d))).collect();
    let mut d0 = max.min(16);
    while d0 < max {
        // The next piece starts at `wall`: a chord may end just before it,
        // or at it when it starts right after `d0`.
        let wall = breaks
            .iter()
            .copied()
            .filter(|&b| b > d0)
            .min()
            .unwrap_or(u32::MAX);
        let reach = if wall == d0 + 1 {
            d0 + 1
        } else {
            max.min(wall.saturating_sub(1))
        };
        let chord_ok = |d1: u32| -> bool {
            let (y0, y1) = (f(d0), f(d1));
            let span = f64::from(d1 - d0);
            let probes: Vec<u32> = if d1 - d0 <= 8 {
                (d0 + 1..d1).collect()
            } else {
                (1..8u64)
                    .map(|q| d0 + (u64::from(d1 - d0) * q / 8) as u32)
                    .collect()
            };
            probes.iter().all(|&d| {
                let y = y0 + (y1 - y0) * f64::from(d - d0) / span;
                (y - f(d)).abs() <= SAMPLE_TOLERANCE_MS / 2.0
            })
        };
        let mut step = 1u32;
        while let Some(next) = step.checked_mul(2) {
            if d0.saturating_add(next) > reach || !chord_ok(d0 + next) {
                break;
            }
            step = next;
        }
        let d1 = (d0 + step).min(reach).max(d0 + 1);
        points.push((d1, f(d1)));
        d0 = d1;
    }
    points
}

/// DiskSim's seek model as `[distance, ms]` points, with the comment that
/// names where they came from.
pub(super) struct SeekPoints {
    pub(super) comment: String,
    pub(super) points: Vec<(u32, f64)>,
    /// Decimals to print: a measured table's three, a sampled equation's
    /// four.
    pub(super) decimals: usize,
}

pub(super) type Reader<'a> = &'a dyn Fn(&Path) -> Result<String, ImportError>;

/// A DiskSim seek file (`dm_mech_g1_read_extracted_seek_curve`): an
/// optional `Seek distances measured: N` line, then `distance, ms` lines
/// with an optional third number (the standard deviation). DiskSim skips
/// a line that is not of this form with a complaint, and scans the rest in
/// file order assuming rising distances; here bogus lines are skipped with
/// a note, the points sorted by distance (the first of equal distances
/// kept, as DiskSim's scan finds it), distances below 1 dropped and
/// negative times taken as 0.
pub(super) fn read_seek_file(
    name: &str,
    text: &str,
    notes: &mut Vec<String>,
) -> Result<Vec<(u32, f64)>, ImportError> {
    let mut points: Vec<(u32, f64)> = Vec::new();
    let (mut bogus, mut dropped, mut negative, mut disorder) = (Vec::new(), 0, 0, false);
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with("Seek distances measured") {
            continue;
        }
        let mut parts = line.split(',').map(str::trim);
        let d = parts.next().and_then(|d| d.parse::<i64>().ok());
        let ms = parts
            .next()
            .and_then(|m| m.parse::<f64>().ok())
            .filter(|m| m.is_finite());
        let extra_ok =
            parts.next().is_none_or(|s| s.parse::<f64>().is_ok()) && parts.next().is_none();
        let (Some(d), Some(ms), true) = (d, ms, extra_ok) else {
            bogus.push(i + 1);
            continue;
        };
        if ms > MAX_SEEK_MS {
            return Err(ImportError {
                file: name.to_string(),
                line: i + 1,
                key: "seek point".into(),
                message: format!("{ms} ms: no drive seeks longer than {MAX_SEEK_MS} ms"),
            });
        }
        let Ok(d) = u32::try_from(d) else {
            dropped += 1;
            continue;
        };
        if d == 0 {
            dropped += 1;
            continue;
        }
        if ms < 0.0 {
            negative += 1;
        }
        if points.last().is_some_and(|&(last, _)| d <= last) {
            disorder = true;
        }
        points.push((d, ms.max(0.0)));
    }
    if !bogus.is_empty() {
        let lines: Vec<String> = bogus.iter().take(8).map(usize::to_string).collect();
        notes.push(format!(
            "{name}: {} line(s) not of the form `distance, ms[, stdev]` skipped, as DiskSim \
             skips them (line {}{})",
            bogus.len(),
            lines.join(", "),
            if bogus.len() > 8 { ", ..." } else { "" }
        ));
    }
    if dropped > 0 {
        notes.push(format!(
            "{name}: {dropped} point(s) at a distance below 1 dropped (DiskSim seeks no time \
             over distance 0)"
        ));
    }
    if negative > 0 {
        notes.push(format!(
            "{name}: {negative} negative seek time(s) taken as 0 ms"
        ));
    }
    if disorder {
        // Stable: of equal distances the first in the file stays first.
        points.sort_by_key(|p| p.0);
        points.dedup_by_key(|p| p.0);
        notes.push(format!(
            "{name}: distances out of order or repeated: sorted, the first of each distance \
             kept (DiskSim scans the file in order and assumes rising distances)"
        ));
    }
    if points.is_empty() {
        // DiskSim's lookup finds no point and seeks in no time.
        notes.push(format!(
            "{name}: no seek points: every seek takes 0 ms, as in DiskSim's empty table"
        ));
        points.push((1, 0.0));
    }
    Ok(points)
}

/// The seek model `Seek type` names (mech_g1.modspec,
/// `dm_mech_g1_seekfns` in mech_g1_seektime.c), as points for the HDD
/// model's table. `cylinders` is the disk's cylinder count
/// (`dm_cyls`), which the three-point equations scale by.
pub(super) fn seek_points(
    model: &mut Spec,
    model_name: &str,
    dir: &Path,
    read: Reader<'_>,
    cylinders: u32,
    notes: &mut Vec<String>,
) -> Result<SeekPoints, ImportError> {
    let type_at = model.find("Seek type");
    let curve_at = model.find("Full seek curve");
    let kind = match (type_at, curve_at) {
        (Some(i), _) => {
            model.used[i] = true;
            model.items[i].value.clone()
        }
        // DiskSim reads the curve whatever the type says; without a type
        // the curve is all there is.
        (None, Some(_)) => "extracted".to_string(),
        (None, None) => return Err(model.missing(model_name, "Seek type")),
    };
    let type_src = type_at.map_or_else(String::new, |i| source_of(&model.items[i]));
    let type_line = type_at.map_or(0, |i| model.items[i].line);
    let max = cylinders.saturating_sub(1).max(1);
    // The three figures, where an equation needs them.
    let figure = |model: &mut Spec, key: &str| -> Result<(f64, String), ImportError> {
        let i = model.find(key).ok_or_else(|| ImportError {
            file: model_name.to_string(),
            line: type_line,
            key: key.to_string(),
            message: format!(
                "`Seek type = {kind}` needs it (DiskSim would seek with an unset value)"
            ),
        })?;
        let v = model.number(i)?;
        Ok((v, source_of(&model.items[i])))
    };
    // An equation's points: clamped at 0, refused beyond what a profile
    // holds.
    let sampled = |f: &dyn Fn(u32) -> f64,
                   breaks: &[u32],
                   key: &str,
                   notes: &mut Vec<String>|
     -> Result<Vec<(u32, f64)>, ImportError> {
        let mut points = sample_seek(f, max, breaks);
        if let Some(&(d, ms)) = points.iter().find(|p| p.1 > MAX_SEEK_MS) {
            return Err(ImportError {
                file: model_name.to_string(),
                line: type_line,
                key: key.to_string(),
                message: format!(
                    "the equation gives {ms:.1} ms at {d} cylinders: no drive seeks longer than \
                     {MAX_SEEK_MS} ms"
                ),
            });
        }
        let negative = points.iter().filter(|p| p.1 < 0.0).count();
        if negative > 0 {
            notes.push(format!(
                "{model_name}: the seek equation falls below 0 ms at {negative} sampled \
                 distance(s): taken as 0 ms"
            ));
            for p in &mut points {
                p.1 = p.1.max(0.0);
            }
        }
        Ok(points)
    };
    let sampled_note = |n: usize| {
        format!(
            "sampled at {n} distances up to {max} cylinders; linear interpolation between them \
             stays within {SAMPLE_TOLERANCE_MS} ms of it"
        )
    };
    match kind.as_str() {
        "extracted" => {
            let i = curve_at.ok_or_else(|| ImportError {
                file: model_name.to_string(),
                line: type_line,
                key: "Full seek curve".into(),
                message: "`Seek type = extracted` needs the file of measured seeks".into(),
            })?;
            let a = model.items[i].clone();
            let path = dir.join(&a.value);
            let name = path.display().to_string();
            let points = read_seek_file(&name, &read(&path)?, notes)?;
            // DiskSim's extracted seek reads neither figure.
            for key in ["Average seek time", "Full strobe seek time"] {
                if let Some(i) = model.find(key) {
                    model.used[i] = true;
                }
            }
            Ok(SeekPoints {
                comment: format!(
                    "{}:{} \"Full seek curve = {}\": {} measured [cylinders, ms] points.",
                    a.file,
                    a.line,
                    a.value,
                    points.len()
                ),
                points,
                decimals: 3,
            })
        }
        "hpl" | "hplplus10" => {
            let plus10 = kind == "hplplus10";
            let at = model
                .find("HPL seek equation values")
                .ok_or_else(|| ImportError {
                    file: model_name.to_string(),
                    line: type_line,
                    key: "HPL seek equation values".into(),
                    message: format!(
                    "`Seek type = {kind}` needs the six values (DiskSim would seek with unset ones)"
                ),
                })?;
            model.used[at] = true;
            let hpl_a = model.items[at].clone();
            let v = list_numbers(&hpl_a)?;
            let bad = |message: String| ImportError {
                file: hpl_a.file.clone(),
                line: hpl_a.line,
                key: hpl_a.key.clone(),
                message,
            };
            // do_hpl_seek (mech_g1_load.c): six values, V1 whole
            // cylinders, V2..V5 not negative, V6 a time or -1 (none).
            if v.len() < 6 {
                return Err(bad(format!("wants six values, has {}", v.len())));
            }
            if v[0] < 0.0 || v[0].fract() != 0.0 || v[0] > f64::from(u32::MAX) {
                return Err(bad(format!("V1 = {} must be whole cylinders", v[0])));
            }
            if let Some(x) = v[1..5].iter().find(|x| **x < 0.0) {
                return Err(bad(format!("V2..V5 must not be negative: {x}")));
            }
            let boundary = v[0] as u32;
            let (root0, root, lin0, lin) = (v[1], v[2], v[3], v[4]);
            let single = (v[5] != -1.0).then_some(v[5]);
            let first_ten = if plus10 {
                let at = model
                    .find("First ten seek times")
                    .ok_or_else(|| ImportError {
                        file: model_name.to_string(),
                        line: type_line,
                        key: "First ten seek times".into(),
                        message: "`Seek type = hplplus10` needs them".into(),
                    })?;
                model.used[at] = true;
                let a = model.items[at].clone();
                let t = list_numbers(&a)?;
                if t.len() < 10 || t.iter().any(|x| *x < 0.0) {
                    return Err(ImportError {
                        file: a.file.clone(),
                        line: a.line,
                        key: a.key.clone(),
                        message: "wants ten times, none negative (do_1st10_seeks)".into(),
                    });
                }
                Some((t, source_of(&a)))
            } else {
                if let Some(i) = model.find("First ten seek times") {
                    model.used[i] = true;
                    notes.push(format!(
                        "{}: unused with `Seek type = hpl`, as in DiskSim (do_1st10_seeks ignores \
                         it)",
                        source_of(&model.items[i])
                    ));
                }
                None
            };
            let first = first_ten.as_ref().map(|(t, _)| t.clone());
            let f = move |d: u32| -> f64 {
                let x = f64::from(d);
                match (&first, single) {
                    (Some(t), _) if d <= 10 => t[d as usize - 1],
                    (None, Some(one)) if d == 1 => one,
                    _ if d < boundary => root0 + root * x.sqrt(),
                    _ => lin0 + lin * x,
                }
            };
            let breaks: Vec<u32> = if plus10 {
                vec![11, boundary]
            } else {
                vec![2, boundary]
            };
            let points = sampled(&f, &breaks, "HPL seek equation values", notes)?;
            if !plus10 {
                notes.push(format!(
                    "{}: DiskSim 4.0's dm_mech_g1_seek_hpl compares the distance with \
                     hpseek[0], which do_hpl_seek never sets (V1 goes to hpseek_v1, which \
                     hplplus10 reads), so DiskSim's own hpl times rest on unset memory; \
                     imported as Ruemmler & Wilkes's equation with V1 as the boundary",
                    source_of(&hpl_a)
                ));
            }
            if let Some(i) = curve_at {
                model.used[i] = true;
                notes.push(format!(
                    "{}: not used: `Seek type = {kind}` chooses the seek function",
                    source_of(&model.items[i])
                ));
            }
            let mut comment = format!(
                "{type_src}: Ruemmler & Wilkes's seek equation ({}), t(d) = V2 + V3·√d for d < \
                 V1, V4 + V5·d from V1 on",
                source_of(&hpl_a)
            );
            match (&first_ten, single) {
                (Some((_, src)), _) => {
                    let _ = write!(comment, ", the first ten distances from {src}");
                }
                (None, Some(one)) => {
                    let _ = write!(comment, ", V6 = {one} ms for one cylinder");
                }
                (None, None) => {}
            }
            let _ = write!(comment, ";\n# {}.", sampled_note(points.len()));
            Ok(SeekPoints {
                comment,
                points,
                decimals: 4,
            })
        }
        "linear" | "curve" => {
            let (one, one_src) = figure(model, "Single cylinder seek time")?;
            let (avg, avg_src) = figure(model, "Average seek time")?;
            let (full, full_src) = figure(model, "Full strobe seek time")?;
            let n = f64::from(cylinders.max(2));
            let (points, equation, note) = if kind == "linear" {
                // dm_mech_g1_seek_3pt_line as documented: from the
                // one-cylinder time to the average at a third of the
                // cylinders, then to the full strobe at all of them.
                let third = (cylinders / 3).max(2);
                let f = |d: u32| -> f64 {
                    let x = f64::from(d);
                    if d <= 1 {
                        one
                    } else if d <= third {
                        one + 3.0 * (x - 1.0) / n * (avg - one)
                    } else {
                        avg + (3.0 * x - n) / (2.0 * n) * (full - avg)
                    }
                };
                let mut ds = vec![1, third, third + 1, max];
                ds.sort_unstable();
                ds.dedup();
                let points: Vec<(u32, f64)> = ds.into_iter().map(|d| (d, f(d).max(0.0))).collect();
                (
                    points,
                    "linear interpolation from the one-cylinder time to the average at a third of \
                     the cylinders, then to the full strobe"
                        .to_string(),
                    "DiskSim 4.0's dm_mech_g1_seek_3pt_line sets numcyls to the seek distance \
                     itself, so there every seek over one cylinder takes the full-strobe time; \
                     imported as its documented linear interpolation",
                )
            } else {
                // Lee's three-point curve (Lee & Katz 1993, as DiskSim's
                // manual cites it): t(d) = one + b·(d-1) + a·√(d-1).
                let a = (-10.0 * one + 15.0 * avg - 5.0 * full) / (3.0 * n.sqrt());
                let b = (7.0 * one - 15.0 * avg + 8.0 * full) / (3.0 * n);
                let f = move |d: u32| -> f64 {
                    let x = f64::from(d) - 1.0;
                    one + b * x + a * x.sqrt()
                };
                let points = sampled(&f, &[], "Average seek time", notes)?;
                let note = sampled_note(points.len());
                (
                    points,
                    format!(
                        "Lee's three-point curve t(d) = one + b·(d-1) + a·√(d-1), a = {a:.6}, \
                         b = {b:.8};\n# {note}"
                    ),
                    "DiskSim 4.0's dm_mech_g1_seek_3pt_curve uses the three figures as the \
                     curve's coefficients unconverted (dm_mech_g1_seek_init, which converted \
                     them, asserts it is deprecated); imported as Lee's curve through them",
                )
            };
            notes.push(format!("{type_src}: {note}"));
            if let Some(i) = curve_at {
                model.used[i] = true;
                notes.push(format!(
                    "{}: not used: `Seek type = {kind}` chooses the seek function",
                    source_of(&model.items[i])
                ));
            }
            Ok(SeekPoints {
                comment: format!(
                    "{type_src}: {equation}, from {one_src}, {avg_src}, {full_src} and {cylinders} \
                     cylinders."
                ),
                points,
                decimals: 4,
            })
        }
        "constant" => {
            let (c, c_src) = figure(model, "Constant seek time")?;
            if !(0.0..=MAX_SEEK_MS).contains(&c) {
                let i = model.find("Constant seek time").unwrap_or(0);
                return Err(ImportError {
                    file: model_name.to_string(),
                    line: model.items[i].line,
                    key: "Constant seek time".into(),
                    message: format!("{c} ms: want 0 to {MAX_SEEK_MS} ms"),
                });
            }
            notes.push(format!(
                "{c_src}: DiskSim 4.0 stores it in the seek-type field unconverted from ms \
                 (mech_g1.modspec), so its own constant seeks last picoseconds, and pays it on \
                 every access; imported as the documented constant, paid when the cylinder \
                 changes"
            ));
            for key in ["Average seek time", "Full strobe seek time"] {
                if let Some(i) = model.find(key) {
                    model.used[i] = true;
                }
            }
            Ok(SeekPoints {
                comment: format!("{type_src}: every seek takes {c_src}."),
                points: vec![(1, c)],
                decimals: 4,
            })
        }
        other => Err(ImportError {
            file: model_name.to_string(),
            line: type_line,
            key: "Seek type".into(),
            message: format!(
                "{other:?} is not a DiskSim seek type (constant, linear, curve, hpl, hplplus10, \
                 extracted)"
            ),
        }),
    }
}
