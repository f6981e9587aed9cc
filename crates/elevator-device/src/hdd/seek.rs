//! Seek time as a function of distance, after Ruemmler & Wilkes (1994).
//!
//! Short seeks are dominated by acceleration and deceleration of the arm,
//! so time grows with the square root of the distance; long seeks coast at
//! full speed, so time grows linearly. The curve is
//!
//! ```text
//! t(d) = a + b·√d   for 1 <= d <= x
//! t(d) = c + e·d    for d > x
//! ```
//!
//! and it is fitted to three datasheet figures: track-to-track `t(1)`,
//! full stroke `t(D)` and the average over all seek pairs. The average of
//! two independent uniform cylinders weighs distance `d` by the triangular
//! density `2(D-d)/D²` (the IBM/Hitachi datasheets define their average
//! this way). Continuity of value and slope at `x` (C¹) leaves one free
//! number, the boundary `x`, which a bisection picks so the average comes
//! out right: with both ends pinned, a larger `x` bows the curve up and
//! raises the average, so the average is monotone in `x`.
//!
//! Invariants: `t(0) = 0`, `t` is continuous, non-decreasing and C¹ on
//! `[1, D]`, `t(1)` and `t(D)` are the datasheet values.
//!
//! Where a measured curve exists (DiskSim's "extracted" seek files),
//! [`Seek::Table`] interpolates it linearly instead: real arms have a
//! settle-time floor that makes short seeks slower than any √ curve through
//! the track-to-track time.

/// Seek time from distance: fitted from datasheet figures, or measured.
#[derive(Clone, Debug, PartialEq)]
pub enum Seek {
    Fitted(SeekCurve),
    /// `(distance, ms)` points with increasing distances from 1;
    /// interpolated linearly, extrapolated from the last two points.
    Table(Vec<(u32, f64)>),
}

impl Seek {
    /// Seek time in milliseconds for a move of `distance` cylinders.
    pub fn time_ms(&self, distance: u32) -> f64 {
        match self {
            Seek::Fitted(c) => c.time_ms(distance),
            Seek::Table(points) => table_time(points, distance),
        }
    }

    /// Seek time in whole nanoseconds (to the nearest) for a move of
    /// `distance` cylinders.
    pub fn time_ns(&self, distance: u32) -> u64 {
        // Non-negative, so adding a half and truncating rounds.
        (self.time_ms(distance) * 1e6 + 0.5) as u64
    }

    /// [`Seek::time_ns`] for every distance up to `max_distance`, for a
    /// measured table, whose interpolation costs a binary search per seek
    /// (a drive's worth, 10^4 distances, is a few hundred microseconds of
    /// work once); empty for a fitted curve, quicker to evaluate than to
    /// look up.
    pub fn times_ns(&self, max_distance: u32) -> Vec<u64> {
        match self {
            Seek::Fitted(_) => Vec::new(),
            Seek::Table(_) => (0..=max_distance).map(|d| self.time_ns(d)).collect(),
        }
    }
}

fn table_time(points: &[(u32, f64)], distance: u32) -> f64 {
    if distance == 0 || points.is_empty() {
        return 0.0;
    }
    let i = points.partition_point(|p| p.0 < distance);
    let (lo, hi) = match i {
        0 => return points[0].1,
        i if i < points.len() => (points[i - 1], points[i]),
        _ if points.len() == 1 => return points[0].1,
        _ => (points[points.len() - 2], points[points.len() - 1]),
    };
    let frac = f64::from(distance - lo.0) / f64::from(hi.0 - lo.0);
    lo.1 + (hi.1 - lo.1) * frac
}

/// A fitted seek curve; times in milliseconds, distances in cylinders.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeekCurve {
    a: f64,
    b: f64,
    c: f64,
    e: f64,
    /// Where the square-root part hands over to the linear part.
    boundary: f64,
    /// The full-stroke distance `D` (cylinders - 1).
    max_distance: f64,
}

/// Why three seek figures do not make a curve.
#[derive(Clone, Debug, PartialEq)]
pub enum SeekFitError {
    /// The figures are not increasing: track-to-track < average < full.
    NotIncreasing,
    /// No C¹ √/linear curve between these end points has this average;
    /// the achievable range is given.
    AverageOutOfReach { lowest: f64, highest: f64 },
}

impl SeekCurve {
    /// Fit a curve for a disk with `cylinders` cylinders.
    pub fn fit(
        cylinders: u32,
        track_to_track_ms: f64,
        average_ms: f64,
        full_stroke_ms: f64,
    ) -> Result<Self, SeekFitError> {
        let (t1, avg, tf) = (track_to_track_ms, average_ms, full_stroke_ms);
        if !(t1 > 0.0 && t1 < avg && avg < tf) || cylinders < 3 {
            return Err(SeekFitError::NotIncreasing);
        }
        let d = f64::from(cylinders - 1);
        let lowest = Self::with_boundary(d, t1, tf, 1.0).average();
        let highest = Self::with_boundary(d, t1, tf, d).average();
        if !(lowest..=highest).contains(&avg) {
            return Err(SeekFitError::AverageOutOfReach { lowest, highest });
        }
        // Bisection on the boundary: 100 halvings of [1, D] is far below
        // a cylinder, and the result does not depend on the platform.
        let (mut lo, mut hi) = (1.0, d);
        for _ in 0..100 {
            let mid = 0.5 * (lo + hi);
            if Self::with_boundary(d, t1, tf, mid).average() < avg {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(Self::with_boundary(d, t1, tf, 0.5 * (lo + hi)))
    }

    /// The C¹ curve through `t(1) = t1` and `t(D) = tf` with boundary `x`.
    fn with_boundary(d: f64, t1: f64, tf: f64, x: f64) -> Self {
        let sx = x.sqrt();
        // From a + b = t1, e = b / (2√x), c = a + b√x - e·x = a + b√x/2
        // and c + e·D = tf.
        let b = (tf - t1) / (sx / 2.0 + d / (2.0 * sx) - 1.0);
        let a = t1 - b;
        let e = b / (2.0 * sx);
        let c = a + b * sx / 2.0;
        SeekCurve {
            a,
            b,
            c,
            e,
            boundary: x,
            max_distance: d,
        }
    }

    /// Seek time in milliseconds for a move of `distance` cylinders.
    pub fn time_ms(&self, distance: u32) -> f64 {
        if distance == 0 {
            return 0.0;
        }
        let d = f64::from(distance);
        if d <= self.boundary {
            self.a + self.b * d.sqrt()
        } else {
            self.c + self.e * d
        }
    }

    /// The average over two uniform random cylinders (triangular density
    /// of the distance), in closed form.
    pub fn average(&self) -> f64 {
        let (dd, x) = (self.max_distance, self.boundary);
        let d2 = dd * dd;
        // ∫0^x (a + b√s)·2(D-s)/D² ds
        let w_sqrt_part = (2.0 * dd * x - x * x) / d2;
        let sqrt_moment = 2.0 / d2 * (dd * 2.0 / 3.0 * x.powf(1.5) - 2.0 / 5.0 * x.powf(2.5));
        // ∫x^D (c + e·s)·2(D-s)/D² ds
        let w_lin_part = (dd - x) * (dd - x) / d2;
        let lin_moment = 2.0 / d2 * (dd * dd * dd / 6.0 - dd * x * x / 2.0 + x * x * x / 3.0);
        self.a * w_sqrt_part + self.b * sqrt_moment + self.c * w_lin_part + self.e * lin_moment
    }

    /// Where the square-root part ends, in cylinders.
    #[cfg(test)]
    pub fn boundary(&self) -> f64 {
        self.boundary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Average by brute force over the discrete triangular weights.
    fn brute_average(c: &SeekCurve, cylinders: u32) -> f64 {
        let n = u64::from(cylinders);
        let (mut sum, mut weight) = (0.0, 0.0);
        for d in 1..n {
            let w = (n - d) as f64;
            sum += w * c.time_ms(d as u32);
            weight += w;
        }
        sum / weight
    }

    #[test]
    fn modern_disk_fit_is_c1_and_hits_the_three_figures() {
        let cyl = 200_000;
        let c = SeekCurve::fit(cyl, 1.0, 8.5, 18.0).unwrap();
        assert!((c.time_ms(1) - 1.0).abs() < 1e-9);
        assert!((c.time_ms(cyl - 1) - 18.0).abs() < 1e-6);
        assert!((c.average() - 8.5).abs() < 1e-6);
        assert!((brute_average(&c, cyl) - 8.5).abs() < 0.01);
        // The reference notes put the boundary near 0.22·D for these figures.
        let frac = c.boundary() / f64::from(cyl - 1);
        assert!((0.15..0.30).contains(&frac), "boundary at {frac}");
        // C¹: value and slope agree across the boundary.
        let x = c.boundary();
        let left = c.a + c.b * x.sqrt();
        let right = c.c + c.e * x;
        assert!((left - right).abs() < 1e-9);
        assert!((c.b / (2.0 * x.sqrt()) - c.e).abs() < 1e-12);
        // Monotone.
        let mut last = 0.0;
        for d in (0..cyl).step_by(997) {
            let t = c.time_ms(d);
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn precomputed_times_are_the_evaluated_ones() {
        let table = Seek::Table(vec![(1, 1.062), (2, 1.477), (10, 2.0), (500, 4.187)]);
        let times = table.times_ns(700);
        assert_eq!(times.len(), 701);
        for (d, &ns) in times.iter().enumerate() {
            assert_eq!(ns, table.time_ns(d as u32));
        }
        assert_eq!((times[0], times[2]), (0, 1_477_000));
        let fitted = Seek::Fitted(SeekCurve::fit(10_000, 1.0, 8.0, 15.0).unwrap());
        assert!(fitted.times_ns(9_999).is_empty());
    }

    #[test]
    fn tables_interpolate_and_extrapolate() {
        let t = Seek::Table(vec![(1, 1.0), (3, 2.0), (5, 4.0)]);
        assert_eq!(t.time_ms(0), 0.0);
        assert_eq!(t.time_ms(1), 1.0);
        assert_eq!(t.time_ms(2), 1.5);
        assert_eq!(t.time_ms(5), 4.0);
        assert_eq!(t.time_ms(7), 6.0);
    }

    #[test]
    fn unreachable_average_is_an_error() {
        assert!(matches!(
            SeekCurve::fit(60_000, 1.1, 12.0, 15.0),
            Err(SeekFitError::AverageOutOfReach { .. })
        ));
        assert_eq!(
            SeekCurve::fit(60_000, 5.0, 4.0, 15.0),
            Err(SeekFitError::NotIncreasing)
        );
    }
}
