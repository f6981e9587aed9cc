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
        assert!(imported
            .warnings
            .iter()
            .any(|w| w.contains("slips") || w.contains("Number of spares")));
    }
    let hp = import_disksim(&parv("hp_c3323a")).unwrap();
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
