use super::seek::sample_seek;
use super::*;

/// The blocks DiskSim leaves unmapped, by brute force: map every
/// logical block of the zone as `g1_ltop_sectperzonespare` does and
/// take the physical blocks nothing maps to.
fn brute_slipped(list: &[u64], front: u64, blocks: u64) -> Vec<u64> {
    let mapped = blocks - front - list.len() as u64;
    let mut used = vec![false; blocks as usize];
    for l in front..front + mapped {
        used[(l + slips_before(list, l)) as usize] = true;
    }
    (front..blocks).filter(|&p| !used[p as usize]).collect()
}

/// A small deterministic generator (no dependency for a test).
fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *state >> 33
}

#[test]
fn slips_in_any_order_are_laid_out_as_disksim_maps_them() {
    // Rising lists are themselves.
    let (laid, exact) = disksim_slipped(&[3, 9, 40], 2, 100).unwrap();
    assert_eq!((laid, exact), (vec![3, 9, 40], true));
    // Out of order, DiskSim's walk in file order decides: with [61,
    // 50] block 60 is moved by 50 only and lands on 61, the listed
    // slip, so 62 is the block left unmapped.
    assert_eq!(disksim_slipped(&[61, 50], 0, 100).unwrap().0, vec![50, 62]);
    assert_eq!(brute_slipped(&[61, 50], 0, 100), vec![50, 62]);
    // A repeat slips the block after it; past the zone's end, its
    // last block goes unused.
    assert_eq!(disksim_slipped(&[50, 50], 0, 100).unwrap().0, vec![50, 51]);
    assert_eq!(disksim_slipped(&[500], 0, 100).unwrap().0, vec![99]);
    // No block left: refused.
    assert!(disksim_slipped(&[1, 2], 98, 100).is_none());
    // A long list out of order is sorted, and says so.
    let long: Vec<u64> = (0..2_000).rev().map(|i| i * 3).collect();
    let (laid, exact) = disksim_slipped(&long, 0, 100_000).unwrap();
    assert!(!exact);
    assert_eq!(laid.len(), 2_000);
    assert_eq!(&laid[..3], &[0, 3, 6]);
    // Against brute force, for lists of every kind.
    let mut s = 7;
    for case in 0..2_000 {
        let blocks = 50 + lcg(&mut s) % 400;
        let front = lcg(&mut s) % 20;
        let n = (lcg(&mut s) % 12) as usize;
        let mut list: Vec<u64> = (0..n).map(|_| lcg(&mut s) % (blocks + 30)).collect();
        if case % 2 == 0 {
            list.sort_unstable();
            // Repeats, and entries in the empty front.
            if case % 4 == 0 && n > 1 {
                list[1] = list[0];
                list[0] = lcg(&mut s) % (front + 1);
                list.sort_unstable();
            }
        }
        if front + n as u64 >= blocks {
            continue;
        }
        let (laid, exact) = disksim_slipped(&list, front, blocks).unwrap();
        assert!(exact);
        assert_eq!(
            laid,
            brute_slipped(&list, front, blocks),
            "{list:?} {front} {blocks}"
        );
    }
}

#[test]
fn seek_equations_are_sampled_within_the_tolerance() {
    // The HP C3323A's HPL values (commented out in its DiskSim model):
    // V1 = 300 cylinders, 3.75 + 0.33·√d ms below, 7.69 + 0.0059·d ms
    // from there.
    let f = |d: u32| {
        let x = f64::from(d);
        if d < 300 {
            3.75 + 0.33 * x.sqrt()
        } else {
            7.69 + 0.0059 * x
        }
    };
    let points = sample_seek(&f, 2_000, &[300]);
    assert!(points.len() < 120, "{}", points.len());
    let table = crate::hdd::seek::Seek::Table(points.clone());
    for d in 1..2_000 {
        let err = (table.time_ms(d) - f(d)).abs();
        assert!(err <= SAMPLE_TOLERANCE_MS, "{d}: {err}");
    }
    // The jump at V1 is kept sharp: 299 and 300 are both points.
    assert!(points.iter().any(|p| p.0 == 299) && points.iter().any(|p| p.0 == 300));
}

#[test]
fn skews_follow_their_units_modulo_the_track() {
    assert_eq!(skew_sectors(20.7, false, 100), (20, false));
    assert_eq!(skew_sectors(0.25, true, 100), (25, false));
    assert_eq!(skew_sectors(0.255, true, 100), (26, true));
    assert_eq!(skew_sectors(-5.0, false, 100), (95, true));
    assert_eq!(skew_sectors(130.0, false, 100), (30, true));
}

#[test]
fn lists_over_several_lines_and_one_line_read_alike() {
    let text = "HPL seek equation values = [\n 300,\n\n 3.75, # root\n 0.33, 7.69,\n \
                0.0059, -1.0\n],\nslips = [ 4, 8 ],\nslips = [\n 1,\n 2 ],\nx = 1,\n";
    let (items, _) = assignments("t", text);
    let values: Vec<(&str, &str)> = items
        .iter()
        .map(|a| (a.key.as_str(), a.value.as_str()))
        .collect();
    assert_eq!(
        values,
        vec![
            (
                "HPL seek equation values",
                "[300,3.75,0.33,7.69,0.0059,-1.0]"
            ),
            ("slips", "[4,8]"),
            ("slips", "[1,2]"),
            ("x", "1"),
        ]
    );
}
