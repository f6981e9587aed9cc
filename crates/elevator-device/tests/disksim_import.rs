//! `import_disksim` on DiskSim's two validated drives in
//! ../shared/traces/disksim-validation: the profiles load, carry the
//! drives' numbers, and list what the model does not support. The demerit
//! ceilings of the imported profiles are held in elevator-scenario's
//! `validate` test.

use elevator_device::disksim::import_disksim;
use std::path::PathBuf;

fn parv(name: &str) -> PathBuf {
    let p = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces/disksim-validation"
    ))
    .join(format!("{name}.parv"));
    assert!(
        p.exists(),
        "{} is missing: the shared traces are needed",
        p.display()
    );
    p
}

#[test]
fn both_drives_import_and_load() {
    for (name, rpm, zones) in [("ibm18es", 7200, 55), ("hp_c3323a", 5396, 8)] {
        let imported = import_disksim(&parv(name)).unwrap();
        let t = &imported.profile;
        assert!(t.contains(&format!("rpm = {rpm}")), "{t}");
        assert!(t.contains(&format!("{zones} zones")), "{name}");
        let dev = elevator_device::parse(name, t).unwrap_or_else(|e| panic!("{name}: {e}\n{t}"));
        assert!(dev.limits().capacity > 1_000_000);
        // Every number names its source.
        for line in t
            .lines()
            .filter(|l| l.contains(" = ") && !l.starts_with('#'))
        {
            if line.starts_with("kind") || line.starts_with("description") {
                continue;
            }
            let before = t[..t.find(line).unwrap()].lines().last().unwrap_or("");
            assert!(
                before.starts_with('#'),
                "{name}: `{line}` has no source comment"
            );
        }
        // The overheads after a write are carried; what the model cannot
        // carry is listed, never dropped.
        assert!(t.contains("read_hit_overhead_after_write_ms = "), "{t}");
        // Both validated drives stop read-ahead for the next command.
        assert!(t.contains("min_read_ahead_sectors = 0"), "{t}");
        assert!(!imported.warnings.is_empty());
        // The layout is DiskSim's: zones start at their own cylinders, the
        // empty zone front and the spares are laid out, not warned about.
        assert!(t.contains("zone_first_cylinders = ["), "{t}");
        for key in [
            "Empty space at zone front",
            "First cylinder number",
            "Sparing scheme",
        ] {
            assert!(
                !imported.warnings.iter().any(|w| w.contains(key)),
                "{name}: {key}: {:?}",
                imported.warnings
            );
        }
    }
    // The IBM 18ES: 122 slipped blocks in 31 zones ("Sparing scheme used
    // = 7"), one empty cylinder at the front of zone 0, a spare cylinder
    // between most zones (zone 1 starts at cylinder 258, not 257).
    let ibm = import_disksim(&parv("ibm18es")).unwrap();
    let t = &ibm.profile;
    assert!(t.contains("zone_front_empty = [[0, 1950]]"), "{t}");
    assert!(t.contains("  0, 258, 378, 515,"), "{t}");
    assert!(t.contains("zone_slips = [\n  [0, 199078], [0, 346029], [0, 384777], [2, 187771],"));
    let list = t.split("zone_slips = [").nth(1).unwrap();
    let list = &list[..list.find("\n]\n").unwrap()];
    assert_eq!(list.matches('[').count(), 122, "{list}");
    assert!(t.contains("write_empties_segment = true"));
    let dev = elevator_device::parse("ibm18es", t).unwrap();
    // 18,035,825 blocks in the zones, less the empty front and the slips.
    assert_eq!(dev.limits().capacity, 18_035_825 - 1950 - 122);
    assert!(!ibm.warnings.iter().any(|w| w.contains("slips")));
    // The HP C3323A spares whole tracks at each zone's end.
    let hp = import_disksim(&parv("hp_c3323a")).unwrap();
    assert!(hp
        .profile
        .contains("zone_spare_tracks = [\n  [0, 224], [1, 35],"));
    assert!(!hp.warnings.iter().any(|w| w.contains("Number of spares")));
    // ... and rotates each zone's first block ("Offset of first block").
    assert!(hp
        .profile
        .contains("zone_first_block_offset = [\n  [1, 48], [2, 23], [3, 47],"));
    assert!(!hp
        .warnings
        .iter()
        .any(|w| w.contains("Offset of first block")));
    assert!(hp.profile.contains("write_cache = false"));
    assert!(hp.profile.contains("read_completion_ms = 0.241"));
    assert!(hp
        .profile
        .contains("read_hit_overhead_after_write_ms = 1.387"));
    // Its read data waits until the whole request is buffered.
    assert!(
        hp.profile.contains("read_watermark = 1\n"),
        "{}",
        hp.profile
    );
    assert!(!hp
        .warnings
        .iter()
        .any(|w| w.contains("High (read) water mark")));
    // The bus's 0.1455 ms per block is the slower path: 3.519 MB/s.
    assert!(
        hp.profile.contains("transfer_mb_per_s = 3.5189"),
        "{}",
        hp.profile
    );
}

#[test]
fn errors_name_file_line_and_key() {
    let dir = std::env::temp_dir().join(format!("elevator-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = parv("hp_c3323a");
    let src_dir = src.parent().unwrap();
    for f in [
        "hp_c3323a.parv",
        "hp_c3323a_validate.diskspecs",
        "hp_c3323a_validate.seek",
    ] {
        std::fs::copy(src_dir.join(f), dir.join(f)).unwrap();
    }
    let model = std::fs::read_to_string(src_dir.join("hp_c3323a_validate.model")).unwrap();
    let broken = model.replacen("Blocks per track = 120", "Blocks per track = lots", 1);
    std::fs::write(dir.join("hp_c3323a_validate.model"), broken).unwrap();
    let e = import_disksim(&dir.join("hp_c3323a.parv")).unwrap_err();
    assert_eq!(e.key, "Blocks per track");
    assert!(
        e.line > 0 && e.file.ends_with("hp_c3323a_validate.model"),
        "{e}"
    );
    std::fs::remove_file(dir.join("hp_c3323a_validate.seek")).unwrap();
    std::fs::write(dir.join("hp_c3323a_validate.model"), model).unwrap();
    let e = import_disksim(&dir.join("hp_c3323a.parv")).unwrap_err();
    assert!(e.to_string().contains("hp_c3323a_validate.seek"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The built-in `ibm18es` profile is the importer's output for DiskSim's
/// ibm18es.parv, with the command that made it on top: regenerate it with
/// that command rather than edit it.
#[test]
fn the_built_in_ibm18es_profile_is_the_importers_output() {
    let built_in = include_str!("../profiles/ibm18es.toml");
    let imported = import_disksim(&parv("ibm18es")).unwrap().profile;
    // From the workspace root, as the header's command runs it.
    let imported = imported.replace(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared"),
        "../shared",
    );
    let body = built_in
        .split_once("\n\n")
        .map(|(header, body)| {
            assert!(header.contains("import-disksim"), "{header}");
            body
        })
        .unwrap();
    assert_eq!(body, imported);
}

/// One of the hand-made drives in `testdata/disksim/` (written for these
/// tests; not DiskSim's files).
fn testdata(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/disksim")).join(name)
}

/// The files of `parv` (a drive in `dir`) copied into a fresh directory,
/// `model` (a file name) rewritten by `edit`: a hand-made variant.
fn variant(
    dir: &std::path::Path,
    files: &[&str],
    model: &str,
    tag: &str,
    edit: &dyn Fn(String) -> String,
) -> PathBuf {
    let out = std::env::temp_dir().join(format!("elevator-disksim-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    for f in files {
        std::fs::copy(dir.join(f), out.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(dir.join(model)).unwrap();
    let edited = edit(text.clone());
    assert_ne!(edited, text, "{tag}: the edit changed nothing");
    std::fs::write(out.join(model), edited).unwrap();
    out
}

/// The profile's seek table read at distance `d` as the HDD model reads
/// it: linear interpolation between its `[d, ms]` points.
fn seek_point(profile: &str, d: u32) -> Option<f64> {
    let table = profile
        .split("seek_table = [")
        .nth(1)?
        .split("\n]")
        .next()?;
    let points: Vec<(u32, f64)> = table
        .split('[')
        .filter_map(|p| p.split(']').next())
        .filter_map(|p| p.split_once(','))
        .filter_map(|(dist, ms)| Some((dist.trim().parse().ok()?, ms.trim().parse().ok()?)))
        .collect();
    let i = points.iter().position(|p| p.0 >= d)?;
    let (hi_d, hi_ms) = points[i];
    if hi_d == d || i == 0 {
        return Some(hi_ms);
    }
    let (lo_d, lo_ms) = points[i - 1];
    Some(lo_ms + (hi_ms - lo_ms) * f64::from(d - lo_d) / f64::from(hi_d - lo_d))
}

#[test]
fn every_seek_type_disksim_takes_imports() {
    let dir = testdata("");
    let files = ["tiny.parv", "tiny.diskspecs", "tiny.seek"];
    // The measured curve: its stdev column read, its bogus line skipped
    // with a note.
    let extracted = import_disksim(&testdata("tiny.parv")).unwrap();
    assert_eq!(seek_point(&extracted.profile, 100), Some(3.5));
    assert!(extracted
        .warnings
        .iter()
        .any(|w| w.contains("approximated") && w.contains("line 5")));
    // Uncomment the parameter `key` of tiny.model, and the lines of its
    // list up to the closing `]`.
    fn uncomment(text: &str, key: &str) -> String {
        let mut out = String::new();
        let mut open = false;
        for line in text.lines() {
            let bare = line.trim_start_matches([' ', '#']);
            if bare.starts_with(key) || open {
                out.push_str("      ");
                out.push_str(bare);
                open = if open {
                    !bare.starts_with(']')
                } else {
                    bare.ends_with('[')
                };
            } else {
                out.push_str(line);
            }
            out.push('\n');
        }
        out
    }
    // (seek type, parameters to uncomment, [distance, ms] checks, words
    // of its note)
    type Case<'a> = (&'a str, &'a [&'a str], &'a [(u32, f64)], &'a str);
    let cases: [Case; 5] = [
        // V6 = 0.9 for one cylinder, 1.5 + 0.25·√d below V1 = 400,
        // 5.0 + 0.006·d from there.
        (
            "hpl",
            &["HPL seek equation values"],
            &[(1, 0.9), (16, 2.5), (400, 7.4)],
            "hpseek[0]",
        ),
        (
            "hplplus10",
            &["HPL seek equation values", "First ten seek times"],
            &[(2, 1.3), (10, 2.0), (16, 2.5), (400, 7.4)],
            "Full seek curve",
        ),
        // A third of 1200 cylinders: 1 + 3·399/1200·5 ms.
        ("linear", &[], &[(1, 1.0), (400, 5.9875)], "3pt_line"),
        ("curve", &[], &[(1, 1.0)], "Lee's curve"),
        (
            "constant",
            &["Constant seek time"],
            &[(1, 4.0)],
            "picoseconds",
        ),
    ];
    for (kind, keys, checks, note) in cases {
        let edit = |t: String| {
            let t = keys.iter().fold(t, |t, k| uncomment(&t, k));
            t.replace("Seek type = extracted", &format!("Seek type = {kind}"))
        };
        let parv = variant(&dir, &files, "tiny.model", kind, &edit).join("tiny.parv");
        let imported = import_disksim(&parv).unwrap_or_else(|e| panic!("{kind}: {e}"));
        let t = &imported.profile;
        elevator_device::parse(kind, t).unwrap_or_else(|e| panic!("{kind}: {e}\n{t}"));
        for &(d, ms) in checks {
            let got = seek_point(t, d).unwrap_or_else(|| panic!("{kind}: no point at {d}\n{t}"));
            assert!(
                (got - ms).abs() < 1e-3,
                "{kind} at {d}: {got} ms, want {ms}"
            );
        }
        assert!(
            imported
                .warnings
                .iter()
                .any(|w| w.starts_with("approximated") && w.contains(note)),
            "{kind}: {:?}",
            imported.warnings
        );
        // The note is in the profile too.
        assert!(
            t.contains("# Where this profile approximates DiskSim 4.0:"),
            "{kind}"
        );
        std::fs::remove_dir_all(parv.parent().unwrap()).unwrap();
    }
    // Lee's curve runs from the one-cylinder time to the full strobe.
    let parv = variant(&dir, &files, "tiny.model", "curve-ends", &|t: String| {
        t.replace("Seek type = extracted", "Seek type = curve")
    })
    .join("tiny.parv");
    let t = import_disksim(&parv).unwrap().profile;
    let last = seek_point(&t, 1199).unwrap();
    assert!((last - 12.0).abs() < 0.05, "{last}");
    std::fs::remove_dir_all(parv.parent().unwrap()).unwrap();
    // An unknown seek type is DiskSim's error too.
    let parv = variant(&dir, &files, "tiny.model", "bad-type", &|t: String| {
        t.replace("Seek type = extracted", "Seek type = spline")
    })
    .join("tiny.parv");
    let e = import_disksim(&parv).unwrap_err();
    assert_eq!(e.key, "Seek type", "{e}");
    assert!(e.line > 0, "{e}");
    std::fs::remove_dir_all(parv.parent().unwrap()).unwrap();
}

#[test]
fn an_inline_model_with_forms_once_refused_imports() {
    // Negative write settling, skews in revolutions, slips out of order,
    // repeated and past the zone's end, the hplplus10 seek, the model
    // inline in the disk spec.
    let imported = import_disksim(&testdata("inline.parv")).unwrap();
    let t = &imported.profile;
    assert!(t.contains("write_settle_ms = -0.2"), "{t}");
    // 1/8 and 1/4 of an 80-sector track; the first block half a turn round.
    assert!(t.contains("[1000, 80, 10, 20]"), "{t}");
    assert!(t.contains("zone_first_block_offset = [\n  [0, 40],"), "{t}");
    // [61, 50, 50, 70000, 400000] walked in file order, as DiskSim maps
    // them: block 60 lands on 61, so 63 is left; the last entry slips the
    // zone's last block.
    assert!(
        t.contains("zone_slips = [\n  [0, 50], [0, 51], [0, 63], [0, 70000], [0, 159999],"),
        "{t}"
    );
    assert_eq!(seek_point(t, 10), Some(2.0));
    let dev = elevator_device::parse("inline", t).unwrap();
    assert_eq!(dev.limits().capacity, 1000 * 2 * 80 - 5);
    assert!(imported
        .warnings
        .iter()
        .any(|w| w.contains("slips out of order")));
    // The inline model's keys are read, not listed as unsupported.
    assert!(
        !imported
            .warnings
            .iter()
            .any(|w| w.contains("Blocks per track") || w.contains("Seek type")),
        "{:?}",
        imported.warnings
    );
}

#[test]
fn variants_of_the_validated_drives_import() {
    let shared = parv("ibm18es");
    let dir = shared.parent().unwrap();
    let ibm_files = ["ibm18es.parv", "ibm18es.diskspecs", "ibm18es.seek"];
    // Zone 0's three slips in falling order: DiskSim's walk leaves other
    // blocks unmapped than the rising list (by brute force over the
    // zone's 501,150 blocks: 199078, 346030, 384779).
    let out = variant(
        dir,
        &ibm_files,
        "ibm18es.model",
        "ibm-slips",
        &|t: String| {
            t.replacen(
                "199078,\n               346029,\n               384777",
                "384777,\n               346029,\n               199078",
                1,
            )
        },
    );
    let ibm = import_disksim(&out.join("ibm18es.parv")).unwrap();
    assert!(
        ibm.profile
            .contains("zone_slips = [\n  [0, 199078], [0, 346030], [0, 384779], [2, 187771],"),
        "{}",
        ibm.profile
    );
    let dev = elevator_device::parse("ibm18es", &ibm.profile).unwrap();
    assert_eq!(dev.limits().capacity, 18_035_825 - 1950 - 122);
    std::fs::remove_dir_all(&out).unwrap();
    // A negative write settling delay.
    let out = variant(
        dir,
        &ibm_files,
        "ibm18es.model",
        "ibm-settle",
        &|t: String| {
            let at = t.find("Add. write settling delay = ").unwrap();
            let end = at + t[at..].find(',').unwrap();
            format!(
                "{}Add. write settling delay = -0.300000{}",
                &t[..at],
                &t[end..]
            )
        },
    );
    let ibm = import_disksim(&out.join("ibm18es.parv")).unwrap();
    assert!(
        ibm.profile.contains("write_settle_ms = -0.3\n"),
        "{}",
        ibm.profile
    );
    elevator_device::parse("ibm18es", &ibm.profile).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
    // The HP C3323A's model keeps HPL values, commented out: with them and
    // `Seek type = hpl` (V1 written whole, as DiskSim wants it).
    // (`parv` checks the shared files are there.)
    parv("hp_c3323a");
    let hp_files = [
        "hp_c3323a.parv",
        "hp_c3323a_validate.diskspecs",
        "hp_c3323a_validate.seek",
    ];
    let out = variant(
        dir,
        &hp_files,
        "hp_c3323a_validate.model",
        "hp-hpl",
        &|t: String| {
            let mut lines: Vec<String> = Vec::new();
            let mut open = false;
            for line in t.lines() {
                if line
                    .trim_start()
                    .starts_with("#      HPL seek equation values")
                {
                    open = true;
                }
                if open {
                    lines.push(line.replacen('#', " ", 1).replace("300.000000", "300"));
                    open = !line.contains("],");
                } else {
                    lines.push(line.replace("Seek type = extracted", "Seek type = hpl"));
                }
            }
            lines.join("\n")
        },
    );
    let imported = import_disksim(&out.join("hp_c3323a.parv")).unwrap();
    // 3.75 + 0.33·√100 ms; 7.69 + 0.0059·1000 ms.
    assert!((seek_point(&imported.profile, 100).unwrap_or(f64::NAN) - 7.05).abs() < 0.005);
    assert!((seek_point(&imported.profile, 2981).unwrap_or(f64::NAN) - 25.2779).abs() < 0.005);
    elevator_device::parse("hp", &imported.profile).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
}
