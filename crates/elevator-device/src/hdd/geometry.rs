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
    spt: u64,
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
            let sectors = u64::from(z.cylinders) * surfaces * spt;
            out.push(Zone {
                first_lba: lba,
                end_lba: lba + sectors,
                first_cylinder: cylinder,
                spt,
                track_skew: u64::from(z.track_skew) % spt,
                cylinder_skew: u64::from(z.cylinder_skew) % spt,
            });
            lba += sectors;
            cylinder += z.cylinders;
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
        let offset = lba - z.first_lba;
        let track = offset / z.spt;
        let sector = offset % z.spt;
        let cyl_in_zone = track / self.surfaces;
        let head = track % self.surfaces;
        // Each earlier head switch in the zone added `track_skew`, each
        // cylinder switch `cylinder_skew`.
        let head_switches = track - cyl_in_zone;
        let skew = (head_switches % z.spt) * z.track_skew + (cyl_in_zone % z.spt) * z.cylinder_skew;
        let slot = (skew + sector) % z.spt;
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

    /// How many whole sectors from `lba` (at most `limit`) have passed the
    /// head by `t`, if the start of `lba` passed it at `start`.
    pub fn sectors_done(&self, lba: Sector, start: Instant, t: Instant, limit: u64) -> u64 {
        if t <= start {
            return 0;
        }
        if self.run_end(lba, limit, start) <= t {
            return limit;
        }
        // Binary search: run_end is monotone in n.
        let (mut lo, mut hi) = (0u64, limit);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.run_end(lba, mid, start) <= t {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
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

/// `a * b / c` without overflow.
fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    (u128::from(a) * u128::from(b) / u128::from(c.max(1))) as u64
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
    fn sectors_done_inverts_run_end() {
        let g = two_zone();
        let start = Instant(12_345);
        for n in [0u64, 1, 599, 600, 601, 5000, 11_999, 12_001] {
            let end = g.run_end(100, n, start);
            assert_eq!(g.sectors_done(100, start, end, 20_000), n, "n={n}");
        }
    }
}
