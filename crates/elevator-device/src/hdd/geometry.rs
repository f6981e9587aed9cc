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
//! Invariants: zones tile `0..capacity` without gaps; every sector has one
//! (cylinder, head, angle); `run_end` is monotone in the sector count.

use elevator_core::{Duration, Instant, Sector};

// Divisions by the sectors per track of a zone, the surfaces and the
// revolution are multiplications (`u64 / Divisor`, exact): a replay asks
// where sectors are several times per request.
mod divisor;
use divisor::Divisor;

/// Zone-lookup buckets per zone: enough that most buckets lie in one
/// zone, few enough for the table to stay in a cache line or two.
const BUCKETS_PER_ZONE: u64 = 4;

/// One zone as the profile describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneSpec {
    pub cylinders: u32,
    pub sectors_per_track: u32,
    /// Sectors the first sector moves by at a head switch.
    pub track_skew: u32,
    /// Sectors the first sector moves by at a cylinder switch.
    pub cylinder_skew: u32,
}

#[derive(Clone, Copy, Debug)]
struct Zone {
    first_lba: Sector,
    end_lba: Sector,
    first_cylinder: u32,
    spt: Divisor,
    track_skew: u64,
    cylinder_skew: u64,
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
    /// The zone holding LBA `b << bucket_shift`, for each bucket `b`: a
    /// zone is found with one load and a step or two, not a binary
    /// search.
    bucket_zone: Vec<u32>,
    bucket_shift: u32,
    surfaces: Divisor,
    rev_ns: u64,
    rev: Divisor,
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
            let sectors = u64::from(z.cylinders) * surfaces * spt;
            out.push(Zone {
                first_lba: lba,
                end_lba: lba + sectors,
                first_cylinder: cylinder,
                spt: Divisor::new(spt),
                track_skew: u64::from(z.track_skew) % spt,
                cylinder_skew: u64::from(z.cylinder_skew) % spt,
            });
            lba += sectors;
            cylinder += z.cylinders;
        }
        let (bucket_zone, bucket_shift) = buckets(&out);
        let rev_ns = revolution_ns(rpm);
        Geometry {
            zones: out,
            bucket_zone,
            bucket_shift,
            surfaces: Divisor::new(surfaces),
            rev_ns,
            rev: Divisor::new(rev_ns),
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

    /// Sectors per track at `lba`.
    #[cfg(test)]
    pub fn sectors_per_track(&self, lba: Sector) -> u64 {
        self.zones[self.zone_index(lba)].spt.get()
    }

    /// The zone holding `lba` (the last one past the end): the first whose
    /// end is above it, found from its bucket.
    fn zone_index(&self, lba: Sector) -> usize {
        let b = (lba >> self.bucket_shift).min(self.bucket_zone.len() as u64 - 1);
        let mut i = self.bucket_zone[b as usize] as usize;
        while i + 1 < self.zones.len() && self.zones[i].end_lba <= lba {
            i += 1;
        }
        i
    }

    /// The physical address of `lba` (clamped to the last sector).
    pub fn locate(&self, lba: Sector) -> Place {
        let lba = lba.min(self.capacity().saturating_sub(1));
        let z = &self.zones[self.zone_index(lba)];
        let offset = lba - z.first_lba;
        let track = offset / z.spt;
        let sector = offset % z.spt;
        let cyl_in_zone = track / self.surfaces;
        let head = track % self.surfaces;
        // Each earlier head switch in the zone added `track_skew`, each
        // cylinder switch `cylinder_skew`.
        let head_switches = track - cyl_in_zone;
        // Products stay far below 2^64: tracks per zone times a skew.
        let slot = (head_switches * z.track_skew + cyl_in_zone * z.cylinder_skew + sector) % z.spt;
        Place {
            cylinder: z.first_cylinder + cyl_in_zone as u32,
            head: head as u32,
            angle_ns: mul_div(slot, self.rev_ns, z.spt),
        }
    }

    /// How long after `t` the start of a sector at `angle_ns` comes round.
    pub fn rotational_wait(&self, angle_ns: u64, t: Instant) -> Duration {
        let now = t.nanos() % self.rev;
        let wait = (angle_ns + self.rev_ns - now) % self.rev;
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
        let first = lba - z.first_lba;
        let last = first + n - 1;
        let (t0, t1) = (first / z.spt, last / z.spt);
        let cylinder_switches = t1 / self.surfaces - t0 / self.surfaces;
        let head_switches = (t1 - t0) - cylinder_switches;
        let slots = n + head_switches * z.track_skew + cylinder_switches * z.cylinder_skew;
        mul_div(slots, self.rev_ns, z.spt)
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
        let t = self.run_end(lba, n, start);
        let next = lba + n;
        if n == 0 || next >= self.capacity() {
            return t;
        }
        let z = &self.zones[self.zone_index(next)];
        if next == z.first_lba {
            let t = t + Duration(self.cylinder_switch_ns);
            return t + self.rotational_wait(self.locate(next).angle_ns, t);
        }
        let track = (next - z.first_lba) / z.spt;
        if (next - z.first_lba) % z.spt != 0 {
            return t;
        }
        // The first sector of a track comes one skew after the last one of
        // the track before.
        let skew = if track % self.surfaces == 0 {
            z.cylinder_skew
        } else {
            z.track_skew
        };
        t + Duration(mul_div(skew, self.rev_ns, z.spt))
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
            let slots = match (elapsed + 1).checked_mul(z.spt.get()) {
                Some(p) => (p - 1) / self.rev,
                None => ((u128::from(elapsed) + 1) * u128::from(z.spt.get()) - 1)
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
        let first = lba - z.first_lba;
        let (spt, s) = (z.spt.get(), self.surfaces.get());
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
        let (spt, surfaces) = (z.spt.get(), self.surfaces.get());
        let per_cyl = spt * surfaces;
        let slots = per_cyl + (surfaces - 1) * z.track_skew + z.cylinder_skew;
        let secs = slots as f64 * self.rev_ns as f64 / spt as f64 / 1e9;
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
fn mul_div(a: u64, b: u64, c: Divisor) -> u64 {
    match a.checked_mul(b) {
        Some(p) => p / c,
        None => (u128::from(a) * u128::from(b) / u128::from(c.get())) as u64,
    }
}

/// The zone-lookup table of `zones`: for each bucket of `1 << shift`
/// LBAs (the smallest power of two that keeps the table within
/// `BUCKETS_PER_ZONE` entries per zone), the zone holding its first LBA.
fn buckets(zones: &[Zone]) -> (Vec<u32>, u32) {
    let capacity = zones.last().map_or(0, |z| z.end_lba);
    let want = BUCKETS_PER_ZONE * zones.len().max(1) as u64;
    let mut shift = 0;
    while capacity >> shift >= want {
        shift += 1;
    }
    let mut table = Vec::with_capacity((capacity >> shift) as usize + 1);
    let mut zi = 0;
    for b in 0..=(capacity >> shift) {
        while zi + 1 < zones.len() && zones[zi].end_lba <= b << shift {
            zi += 1;
        }
        table.push(zi as u32);
    }
    (table, shift)
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
