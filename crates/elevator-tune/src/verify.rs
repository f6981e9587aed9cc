//! Does the simulated ranking hold on the real device? Kendall's tau
//! between predicted and measured values of the same settings.

/// Kendall's tau-b of two equally long lists (ties in either count as
/// neither concordant nor discordant, and shrink the denominator); `None`
/// with fewer than two pairs or when either list is all ties.
pub fn kendall_tau(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len().min(b.len());
    let (mut conc, mut disc, mut ties_a, mut ties_b) = (0i64, 0i64, 0i64, 0i64);
    for i in 0..n {
        for j in i + 1..n {
            let da = a[i] - a[j];
            let db = b[i] - b[j];
            if da == 0.0 && db == 0.0 {
                continue;
            } else if da == 0.0 {
                ties_a += 1;
            } else if db == 0.0 {
                ties_b += 1;
            } else if (da > 0.0) == (db > 0.0) {
                conc += 1;
            } else {
                disc += 1;
            }
        }
    }
    let n0 = (conc + disc + ties_a) as f64;
    let n1 = (conc + disc + ties_b) as f64;
    if n0 == 0.0 || n1 == 0.0 {
        return None;
    }
    Some((conc - disc) as f64 / (n0 * n1).sqrt())
}

/// The median of `v` (`None` if empty).
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    Some(if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tau_of_known_orders() {
        assert_eq!(
            kendall_tau(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]),
            Some(1.0)
        );
        assert_eq!(kendall_tau(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        // One swap of four: (6 - 2 * 1) / 6.
        let t = kendall_tau(&[1.0, 2.0, 3.0, 4.0], &[1.0, 3.0, 2.0, 4.0]).unwrap();
        assert!((t - 4.0 / 6.0).abs() < 1e-12);
        assert_eq!(kendall_tau(&[1.0, 1.0], &[2.0, 3.0]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}
