//! Where a sector is, and when it passes under the head.
//!
//! Zoned recording: the platter is cut into zones of whole cylinders, and
//! the number of sectors per track falls from the outer zone (LBA 0) to
//! the inner one, since the linear bit density is about constant and the
//! tracks get shorter. Within a zone LBAs fill a track, then the next
//! surface of the same cylinder (a head switch), then the next cylinder (a
//! cylinder switch, a one-cylinder seek).
//!
//! Track skew: the first sector of each track is shifted by the number of
//! sectors that pass during a head switch (or a cylinder switch), so a long
//! transfer loses exactly the switch time at each boundary and never a
//! whole revolution (Ruemmler & Wilkes 1994, §"Data layout"; DiskSim's
//! "Skew for track switch" and "Skew for cylinder switch").
//!
//! Rotation is a pure function of time: the angle at time `t` is
//! `(t mod T) / T` with `T = 60 s / rpm`, so the platter is at angle 0 at
//! time zero and no random draw is ever made. Angles are kept as the
//! offset in nanoseconds within one revolution.
//!
//! Spares and slips (DiskSim's `dm_layout_g1`, `layout_g1.c` of DiskSim
//! 4.0: `g1_ltop_sectpercylspare`, `dm_layout_g1_compute_blksinband`,
//! `g1_map_pbn_skew`): a zone may start at a given cylinder, leaving the
//! cylinders between it and the zone before unmapped (spare cylinders, as
//! the IBM 18ES's extracted model has one between most zones); it may hold
//! unmapped blocks at its front ("Empty space at zone front", DiskSim's
//! `deadspace`); and it may list slipped blocks (DiskSim's `slips`, by
//! physical block number from the zone's first block): a slipped block
//! holds no data, the LBAs from it on move up by one block, and the zone
//! loses one block at its end for each ("Sparing scheme used = 7",
//! `SECTATEND_SPARING`, slips slip to the end of the zone). With track
//! sparing ("Sparing scheme used = 1", `g1_ltop_trackspare`) a zone's
//! "Number of spares" tracks at its end are not mapped. A zone's first
//! block may be rotated from angle 0 ("Offset of first block", in sectors:
//! `firstblkangle` in `g1_map_pbn_skew`). Slips do not
//! move the skew (DiskSim adds slip offsets to the skew only for the
//! per-cylinder and per-track sparing schemes). One departure: DiskSim
//! counts the slips of the cylinder an LBA falls on before slipping, so an
//! LBA pushed into the next cylinder skips none of that cylinder's slips;
//! we skip every slipped block at or before it (the two differ only for
//! the few LBAs that slips push across a cylinder boundary onto another
//! slip). All in-zone arithmetic is
//! done on physical block numbers, so a run across a slipped block takes
//! one more sector time, as the head passes the slipped block.
//!
//! Invariants: zones tile `0..capacity` without gaps; every sector has one
//! (cylinder, head, angle); `run_end` is monotone in the sector count;
//! the physical block of an LBA is strictly increasing with the LBA within
//! a zone and never a slipped one.

use elevator_core::{Duration, Instant, Sector};

/// One zone as the profile describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneSpec {
    pub cylinders: u32,
    pub sectors_per_track: u32,
    /// Sectors the first sector moves by at a head switch.
    pub track_skew: u32,
    /// Sectors the first sector moves by at a cylinder switch.
    pub cylinder_skew: u32,
    /// The zone's first cylinder; `None`: right after the zone before.
    pub first_cylinder: Option<u32>,
    /// Unmapped blocks at the zone's front (DiskSim's "Empty space at zone
    /// front").
    pub front_empty: u64,
    /// Slipped blocks, by physical block number in the zone (counting the
    /// empty front), sorted and distinct.
    pub slips: Vec<u64>,
    /// Unmapped blocks at the zone's end (DiskSim's spare tracks,
    /// "Number of spares" with "Sparing scheme used = 1").
    pub end_spare: u64,
    /// Sectors by which the zone's first block is rotated from angle 0
    /// (DiskSim's "Offset of first block", `firstblkangle`, in sectors).
    pub first_block_offset: u32,
}

#[derive(Clone, Debug)]
struct Zone {
    first_lba: Sector,
    end_lba: Sector,
    first_cylinder: u32,
    spt: u64,
    track_skew: u64,
    cylinder_skew: u64,
    front_empty: u64,
    slips: Vec<u64>,
    first_block_offset: u64,
}

impl Zone {
    /// The physical block, in the zone, of the zone's `offset`-th LBA:
    /// past the empty front, and one further for each slipped block at or
    /// before it.
    fn physical(&self, offset: u64) -> u64 {
        let base = offset + self.front_empty;
        if self.slips.is_empty() {
            return base;
        }
        let mut k = self.slips.partition_point(|&s| s <= base);
        while k < self.slips.len() && self.slips[k] <= base + k as u64 {
            k += 1;
        }
        base + k as u64
    }

    /// LBAs among the physical blocks `p..p + m` of the zone (`p` mapped).
    fn mapped_in(&self, p: u64, m: u64) -> u64 {
        let lo = self.slips.partition_point(|&s| s < p);
        let hi = self.slips.partition_point(|&s| s < p + m);
        m - (hi - lo) as u64
    }
}

/// A sector's physical address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub cylinder: u32,
    pub head: u32,
    /// When, within a revolution, the sector's start passes the head (ns).
    pub angle_ns: u64,
}

/// The layout of a zoned disk.
#[derive(Clone, Debug)]
pub struct Geometry {
    zones: Vec<Zone>,
    surfaces: u64,
    rev_ns: u64,
    cylinder_switch_ns: u64,
}

impl Geometry {
    /// Lay out `zones` (outer first) on `surfaces` surfaces.
    pub fn new(zones: &[ZoneSpec], surfaces: u32, rpm: u32, cylinder_switch: Duration) -> Self {
        let surfaces = u64::from(surfaces.max(1));
        let mut out = Vec::with_capacity(zones.len());
        let (mut lba, mut cylinder) = (0u64, 0u32);
        for z in zones {
            let spt = u64::from(z.sectors_per_track.max(1));
            let blocks = u64::from(z.cylinders) * surfaces * spt;
            // The profile loader checked that the empty front and the slips
            // leave the zone at least one LBA.
            let unmapped = z.front_empty + z.slips.len() as u64 + z.end_spare;
            let sectors = blocks.saturating_sub(unmapped);
            let first_cylinder = z.first_cylinder.unwrap_or(cylinder).max(cylinder);
            out.push(Zone {
                first_lba: lba,
                end_lba: lba + sectors,
                first_cylinder,
                spt,
                track_skew: u64::from(z.track_skew) % spt,
                cylinder_skew: u64::from(z.cylinder_skew) % spt,
                front_empty: z.front_empty,
                slips: z.slips.clone(),
                first_block_offset: u64::from(z.first_block_offset) % spt,
            });
            lba += sectors;
            cylinder = first_cylinder + z.cylinders;
        }
        Geometry {
            zones: out,
            surfaces,
            rev_ns: revolution_ns(rpm),
            cylinder_switch_ns: cylinder_switch.nanos(),
        }
    }

    /// Sectors on the disk.
    pub fn capacity(&self) -> Sector {
        self.zones.last().map_or(0, |z| z.end_lba)
    }

    /// One revolution in nanoseconds.
    #[cfg(test)]
    pub fn revolution_ns(&self) -> u64 {
        self.rev_ns
    }

    /// The angle of physical block `p` of zone `zone` (tests).
    #[cfg(test)]
    fn locate_physical_for_test(&self, zone: usize, p: u64) -> u64 {
        let z = &self.zones[zone];
        let track = p / z.spt;
        let cyl = track / self.surfaces;
        let slot = (z.first_block_offset
            + (track - cyl) * z.track_skew
            + cyl * z.cylinder_skew
            + p % z.spt)
            % z.spt;
        mul_div(slot, self.rev_ns, z.spt)
    }

    /// Sectors per track at `lba`.
    #[cfg(test)]
    pub fn sectors_per_track(&self, lba: Sector) -> u64 {
        self.zones[self.zone_index(lba)].spt
    }

    fn zone_index(&self, lba: Sector) -> usize {
        let i = self.zones.partition_point(|z| z.end_lba <= lba);
        i.min(self.zones.len() - 1)
    }

    /// The physical address of `lba` (clamped to the last sector).
    pub fn locate(&self, lba: Sector) -> Place {
        let lba = lba.min(self.capacity().saturating_sub(1));
        let z = &self.zones[self.zone_index(lba)];
        let offset = z.physical(lba - z.first_lba);
        let track = offset / z.spt;
        let sector = offset % z.spt;
        let cyl_in_zone = track / self.surfaces;
        let head = track % self.surfaces;
        // Each earlier head switch in the zone added `track_skew`, each
        // cylinder switch `cylinder_skew`.
        let head_switches = track - cyl_in_zone;
        // Products stay far below 2^64: tracks per zone times a skew.
        let slot = (z.first_block_offset
            + head_switches * z.track_skew
            + cyl_in_zone * z.cylinder_skew
            + sector)
            % z.spt;
        Place {
            cylinder: z.first_cylinder + cyl_in_zone as u32,
            head: head as u32,
            angle_ns: mul_div(slot, self.rev_ns, z.spt),
        }
    }

    /// How long after `t` the start of a sector at `angle_ns` comes round.
    pub fn rotational_wait(&self, angle_ns: u64, t: Instant) -> Duration {
        let now = t.nanos() % self.rev_ns;
        let wait = (angle_ns + self.rev_ns - now) % self.rev_ns;
        // Rounding of angles to whole nanoseconds must not turn "just in
        // time" into a lost revolution.
        if wait + 16 >= self.rev_ns {
            Duration::ZERO
        } else {
            Duration(wait)
        }
    }

    /// Media time of `n` consecutive sectors from `lba` inside one zone,
    /// including the skew gaps at track and cylinder boundaries.
    fn in_zone_ns(&self, z: &Zone, lba: Sector, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let first = z.physical(lba - z.first_lba);
        let last = z.physical(lba - z.first_lba + n - 1);
        mul_div(self.slots(z, first, last) + 1, self.rev_ns, z.spt)
    }

    /// Sector times from the start of physical block `p0` of zone `z` to
    /// the start of block `p1` (`p0 <= p1`): the blocks between, slipped
    /// ones included, and the skews of the track boundaries crossed.
    fn slots(&self, z: &Zone, p0: u64, p1: u64) -> u64 {
        let (t0, t1) = (p0 / z.spt, p1 / z.spt);
        let cylinder_switches = t1 / self.surfaces - t0 / self.surfaces;
        let head_switches = (t1 - t0) - cylinder_switches;
        (p1 - p0) + head_switches * z.track_skew + cylinder_switches * z.cylinder_skew
    }

    /// When the last of `n` sectors from `lba` has passed the head, if the
    /// head is on `lba`'s track and the start of `lba` passes it at
    /// `start`. A zone boundary costs a cylinder switch and the rotational
    /// wait for the next zone's first sector.
    pub fn run_end(&self, lba: Sector, n: u64, start: Instant) -> Instant {
        let end = (lba + n).min(self.capacity());
        let mut lba = lba.min(end);
        let mut t = start;
        let mut zi = self.zone_index(lba);
        loop {
            let z = &self.zones[zi];
            let part = end.min(z.end_lba) - lba;
            t += Duration(self.in_zone_ns(z, lba, part));
            lba += part;
            if lba >= end || zi + 1 >= self.zones.len() {
                return t;
            }
            zi += 1;
            t += Duration(self.cylinder_switch_ns);
            t += self.rotational_wait(self.locate(lba).angle_ns, t);
        }
    }

    /// When the start of sector `lba + n` passes the head, in a run from
    /// `lba` whose first sector started at `start` (crossing into a new
    /// zone adds the cylinder switch and the wait for its first sector).
    pub fn run_start(&self, lba: Sector, n: u64, start: Instant) -> Instant {
        let next = lba + n;
        if n == 0 || next >= self.capacity() {
            return self.run_end(lba, n, start);
        }
        let z = &self.zones[self.zone_index(next)];
        if !z.slips.is_empty() && lba >= z.first_lba && next > z.first_lba {
            // Within one zone with slips: one rounding, as `run_end` makes
            // (the skew-only path below rounds the skew on its own).
            let p0 = z.physical(lba - z.first_lba);
            let p1 = z.physical(next - z.first_lba);
            return start + Duration(mul_div(self.slots(z, p0, p1), self.rev_ns, z.spt));
        }
        let t = self.run_end(lba, n, start);
        if next == z.first_lba {
            let t = t + Duration(self.cylinder_switch_ns);
            return t + self.rotational_wait(self.locate(next).angle_ns, t);
        }
        // Between the end of the last sector and the start of the next:
        // slipped blocks and a track boundary's skew, if any.
        let last = z.physical(next - 1 - z.first_lba);
        let gap = self.slots(z, last, z.physical(next - z.first_lba)) - 1;
        if gap == 0 {
            return t;
        }
        t + Duration(mul_div(gap, self.rev_ns, z.spt))
    }

    /// How many whole sectors from `lba` (at most `limit`) have passed the
    /// head by `t`, if the start of `lba` passed it at `start`: the inverse
    /// of [`Geometry::run_end`], in closed form per zone.
    pub fn sectors_done(&self, lba: Sector, start: Instant, t: Instant, limit: u64) -> u64 {
        let end = (lba + limit).min(self.capacity());
        let mut pos = lba.min(end);
        let mut at = start;
        let mut zi = self.zone_index(pos);
        while pos < end && at < t {
            let z = &self.zones[zi];
            let zone_end = end.min(z.end_lba);
            // The most slots whose time, rounded down as in `in_zone_ns`,
            // fits in the elapsed time.
            // floor(slots · rev / spt) <= elapsed  <=>  slots <= ((elapsed + 1) · spt - 1) / rev
            let elapsed = t.since(at).nanos();
            let slots = match (elapsed + 1).checked_mul(z.spt) {
                Some(p) => (p - 1) / self.rev_ns,
                None => ((u128::from(elapsed) + 1) * u128::from(z.spt) - 1)
                    .div_euclid(u128::from(self.rev_ns))
                    .min(u128::from(u64::MAX)) as u64,
            };
            let n = self.in_zone_fit(z, pos, slots).min(zone_end - pos);
            if pos + n < zone_end || zi + 1 >= self.zones.len() {
                return pos + n - lba;
            }
            // The whole rest of the zone passed: cross into the next one.
            at += Duration(self.in_zone_ns(z, pos, n));
            pos += n;
            zi += 1;
            at += Duration(self.cylinder_switch_ns);
            at += self.rotational_wait(self.locate(pos).angle_ns, at);
        }
        pos - lba
    }

    /// The most sectors from `lba` whose media time, skews included, is at
    /// most `slots` sector times (not capped at the zone's end).
    fn in_zone_fit(&self, z: &Zone, lba: Sector, slots: u64) -> u64 {
        let first = z.physical(lba - z.first_lba);
        let m = self.physical_fit(z, first, slots);
        z.mapped_in(first, m)
    }

    /// [`Geometry::in_zone_fit`] in physical blocks from block `first`.
    fn physical_fit(&self, z: &Zone, first: u64, slots: u64) -> u64 {
        let (spt, s) = (z.spt, self.surfaces);
        let mut track = first / spt;
        let head_room = spt - first % spt;
        if slots < head_room {
            return slots;
        }
        let mut n = head_room;
        let mut rem = slots - head_room;
        let cylinder_slots = s * spt + (s - 1) * z.track_skew + z.cylinder_skew;
        loop {
            let next = track + 1;
            if next % s == 0 && rem >= cylinder_slots {
                // Whole cylinders at once.
                let k = rem / cylinder_slots;
                n += k * s * spt;
                rem -= k * cylinder_slots;
                track += k * s;
                continue;
            }
            let skew = if next % s == 0 {
                z.cylinder_skew
            } else {
                z.track_skew
            };
            if rem <= skew {
                return n;
            }
            rem -= skew;
            if rem < spt {
                return n + rem;
            }
            n += spt;
            rem -= spt;
            track = next;
        }
    }

    /// Sustained media rate at `lba` in bytes per second, counting head
    /// and cylinder switches: the datasheet formula A / (B + C + D).
    #[cfg(test)]
    pub fn sustained_rate(&self, lba: Sector) -> f64 {
        let z = &self.zones[self.zone_index(lba)];
        let per_cyl = z.spt * self.surfaces;
        let slots = per_cyl + (self.surfaces - 1) * z.track_skew + z.cylinder_skew;
        let secs = slots as f64 * self.rev_ns as f64 / z.spt as f64 / 1e9;
        per_cyl as f64 * 512.0 / secs
    }
}

/// One revolution at `rpm`, in whole nanoseconds (7200 rpm: 8 333 333 ns;
/// the rounding is 0.04 ppm).
pub fn revolution_ns(rpm: u32) -> u64 {
    60_000_000_000 / u64::from(rpm.max(1))
}

/// `a * b / c` rounded down, without overflow (in 64 bits when the
/// product fits, which is every in-zone case).
fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    let c = c.max(1);
    match a.checked_mul(b) {
        Some(p) => p / c,
        None => (u128::from(a) * u128::from(b) / u128::from(c)) as u64,
    }
}

/// Skew in sectors covering `switch` at `spt` sectors per track.
pub fn skew_for(switch: Duration, rpm: u32, spt: u32) -> u32 {
    let rev = revolution_ns(rpm);
    let s = (u128::from(switch.nanos()) * u128::from(spt)).div_ceil(u128::from(rev));
    s.min(u128::from(spt.saturating_sub(1))) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_zone() -> Geometry {
        let z = |cylinders, spt| ZoneSpec {
            cylinders,
            sectors_per_track: spt,
            track_skew: skew_for(Duration::from_micros(1000), 7200, spt),
            cylinder_skew: skew_for(Duration::from_micros(1500), 7200, spt),
            ..ZoneSpec::default()
        };
        Geometry::new(
            &[z(10, 600), z(10, 400)],
            2,
            7200,
            Duration::from_micros(1500),
        )
    }

    #[test]
    fn lays_out_zones_outer_first() {
        let g = two_zone();
        assert_eq!(g.capacity(), 10 * 2 * 600 + 10 * 2 * 400);
        assert_eq!(g.locate(g.capacity() - 1).cylinder, 19);
        assert_eq!(g.locate(0).cylinder, 0);
        assert_eq!(g.locate(600).head, 1);
        assert_eq!(g.locate(1200).cylinder, 1);
        assert_eq!(g.locate(12_000).cylinder, 10);
        assert_eq!(g.sectors_per_track(12_000), 400);
        assert!(g.sustained_rate(0) > g.sustained_rate(12_000));
    }

    #[test]
    fn a_track_boundary_costs_the_skew_not_a_revolution() {
        let g = two_zone();
        let rev = g.revolution_ns();
        let one_track = g.run_end(0, 600, Instant::ZERO).nanos();
        assert_eq!(one_track, rev);
        let two_tracks = g.run_end(0, 1200, Instant::ZERO).nanos();
        let skew = u64::from(skew_for(Duration::from_micros(1000), 7200, 600));
        assert_eq!(two_tracks, (1200 + skew) * rev / 600);
        // The skewed first sector of track 1 is exactly where the head is
        // after one revolution plus the skew.
        let start_of_track1 = g.run_end(0, 600, Instant::ZERO) + Duration(skew * rev / 600);
        assert_eq!(
            g.rotational_wait(g.locate(600).angle_ns, start_of_track1),
            Duration::ZERO
        );
    }

    #[test]
    fn sectors_done_matches_run_end_at_every_instant() {
        let g = two_zone();
        for lba in [0u64, 17, 599, 1199, 11_990] {
            let start = Instant(777);
            let mut n_prev = 0;
            for step in 0..4000u64 {
                let t = Instant(777 + step * 9_999);
                let n = g.sectors_done(lba, start, t, 5000);
                assert!(n >= n_prev);
                n_prev = n;
                assert!(g.run_end(lba, n, start) <= t, "lba {lba} t {t}");
                if n < 5000 && lba + n < g.capacity() {
                    assert!(g.run_end(lba, n + 1, start) > t, "lba {lba} t {t} n {n}");
                }
            }
        }
    }

    #[test]
    fn a_run_can_be_restarted_from_any_sector() {
        let g = two_zone();
        let start = Instant(5);
        for (lba, n, m) in [(0u64, 300u64, 900u64), (590, 10, 2000), (11_000, 1000, 500)] {
            let whole = g.run_end(lba, n + m, start);
            let split = g.run_end(lba + n, m, g.run_start(lba, n, start));
            assert!(whole.nanos().abs_diff(split.nanos()) <= 1, "{lba} {n} {m}");
        }
    }

    /// Two zones as DiskSim's IBM 18ES model has them: a spare cylinder
    /// between them, an empty front and slips in the first, spare tracks
    /// at the end of the second.
    fn spared() -> Geometry {
        let z = |cylinders, spt| ZoneSpec {
            cylinders,
            sectors_per_track: spt,
            track_skew: 7,
            cylinder_skew: 11,
            ..ZoneSpec::default()
        };
        let first = ZoneSpec {
            front_empty: 600,
            slips: vec![650, 700, 2_400],
            ..z(10, 600)
        };
        let second = ZoneSpec {
            first_cylinder: Some(11),
            end_spare: 2 * 400,
            first_block_offset: 48,
            ..z(10, 400)
        };
        Geometry::new(&[first, second], 2, 7200, Duration::from_micros(1500))
    }

    #[test]
    fn spares_and_slips_move_lbas_as_disksim_lays_them_out() {
        let g = spared();
        let rev = g.revolution_ns();
        // Zone 0 loses its empty front and its three slipped blocks, zone
        // 1 its two spare tracks.
        assert_eq!(g.capacity(), (12_000 - 600 - 3) + (8_000 - 800));
        // LBA 0 is the first block past the empty front: track 1 (head 1).
        let p = g.locate(0);
        assert_eq!((p.cylinder, p.head), (0, 1));
        assert_eq!(p.angle_ns, g.locate_physical_for_test(0, 600));
        // Physical block 650 is slipped: LBA 49 is block 649, LBA 50 block
        // 651; block 700 too: LBA 98 is block 699, LBA 99 block 701.
        assert_eq!(g.locate(49).angle_ns, g.locate_physical_for_test(0, 649));
        assert_eq!(g.locate(50).angle_ns, g.locate_physical_for_test(0, 651));
        assert_eq!(g.locate(99).angle_ns, g.locate_physical_for_test(0, 701));
        // The second zone starts on cylinder 11: cylinder 10 is a spare;
        // its first block is 48 sectors round from angle 0.
        let second = g.locate(12_000 - 603);
        assert_eq!(second.cylinder, 11);
        assert_eq!(second.angle_ns, 48 * rev / 400);
        assert_eq!(second.angle_ns, g.locate_physical_for_test(1, 0));
        // Reading over a slipped block takes one more sector time.
        let over_slip = g.run_end(40, 20, Instant::ZERO).nanos();
        assert_eq!(over_slip, 21 * rev / 600);
        let clear = g.run_end(200, 20, Instant::ZERO).nanos();
        assert_eq!(clear, 20 * rev / 600);
    }

    #[test]
    fn sectors_done_and_run_start_agree_with_run_end_over_slips() {
        let g = spared();
        let start = Instant(4_321);
        for n in [
            0u64, 1, 49, 50, 51, 99, 100, 1_799, 1_800, 1_801, 5_000, 11_396,
        ] {
            let end = g.run_end(0, n, start);
            assert_eq!(g.sectors_done(0, start, end, 20_000), n, "n={n}");
        }
        for (lba, n, m) in [(0u64, 50u64, 100u64), (30, 20, 2_000), (1_700, 100, 300)] {
            let whole = g.run_end(lba, n + m, start);
            let split = g.run_end(lba + n, m, g.run_start(lba, n, start));
            assert!(whole.nanos().abs_diff(split.nanos()) <= 1, "{lba} {n} {m}");
        }
    }

    #[test]
    fn sectors_done_inverts_run_end() {
        let g = two_zone();
        let start = Instant(12_345);
        for n in [0u64, 1, 599, 600, 601, 5000, 11_999, 12_001] {
            let end = g.run_end(100, n, start);
            assert_eq!(g.sectors_done(100, start, end, 20_000), n, "n={n}");
        }
    }
}
