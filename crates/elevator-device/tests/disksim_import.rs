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
