//! Division by a number fixed when the disk is laid out, by one multiply.
//!
//! Every sector's place takes a few divisions by the same few numbers
//! (sectors per track of its zone, surfaces, the revolution in ns), and a
//! 64-bit hardware division costs several times a multiplication. This is
//! the method of Granlund & Montgomery, "Division by Invariant Integers
//! using Multiplication" (PLDI 1994), Figure 4.1, for N = 64:
//!
//! ```text
//! l  = ⌈log2 d⌉,  m' = ⌊2^64 · (2^l − d) / d⌋ + 1
//! t1 = ⌊m' · n / 2^64⌋,  n / d = (t1 + (n − t1) >> min(l, 1)) >> max(l − 1, 0)
//! ```
//!
//! exact for every `n < 2^64` and every `1 <= d < 2^64` (their Theorem
//! 4.2); `m'` fits in 64 bits because `2^l − d < d`. The tests check it
//! against the hardware's `/` and `%` at the edges and at random.

/// `d`, ready to divide by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Divisor {
    d: u64,
    m: u64,
    shift1: u32,
    shift2: u32,
}

impl Divisor {
    /// Prepare to divide by `d` (at least 1).
    pub(crate) fn new(d: u64) -> Self {
        assert!(d > 0, "division by zero");
        // ⌈log2 d⌉: 0 for 1, 64 above 2^63.
        let l = u64::BITS - (d - 1).leading_zeros();
        let num = (1u128 << 64) * ((1u128 << l) - u128::from(d));
        Divisor {
            d,
            m: (num / u128::from(d) + 1) as u64,
            shift1: l.min(1),
            shift2: l.saturating_sub(1),
        }
    }

    pub(crate) fn get(self) -> u64 {
        self.d
    }

    /// `n / d`, rounded down.
    #[inline]
    pub(crate) fn div(self, n: u64) -> u64 {
        let t1 = ((u128::from(self.m) * u128::from(n)) >> 64) as u64;
        (t1 + ((n - t1) >> self.shift1)) >> self.shift2
    }

    /// `(n / d, n % d)`.
    #[inline]
    pub(crate) fn div_rem(self, n: u64) -> (u64, u64) {
        let q = self.div(n);
        (q, n - q * self.d)
    }

    /// `n % d`.
    #[inline]
    pub(crate) fn rem(self, n: u64) -> u64 {
        self.div_rem(n).1
    }
}

impl std::ops::Div<Divisor> for u64 {
    type Output = u64;

    #[inline]
    fn div(self, d: Divisor) -> u64 {
        d.div(self)
    }
}

impl std::ops::Rem<Divisor> for u64 {
    type Output = u64;

    #[inline]
    fn rem(self, d: Divisor) -> u64 {
        d.rem(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use elevator_core::Prng;

    fn check(d: u64, n: u64) {
        let v = Divisor::new(d);
        assert_eq!(v.div_rem(n), (n / d, n % d), "{n} / {d}");
        assert_eq!((n / v, n % v), (n / d, n % d), "{n} / {d}");
    }

    #[test]
    fn divides_as_the_hardware_does() {
        let edges = [
            0,
            1,
            2,
            3,
            7,
            8,
            9,
            1 << 32,
            (1 << 32) - 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        let mut divisors: Vec<u64> = vec![1, 2, 3, 5, 7, 10, 63, 64, 65, 3, 8_333_333];
        divisors.extend((0..64).map(|k| 1u64 << k));
        divisors.extend((1..64).map(|k| (1u64 << k) - 1));
        divisors.extend((1..64).map(|k| (1u64 << k) + 1));
        divisors.extend([u64::MAX, u64::MAX - 1, (1 << 63) + 1]);
        let mut rng = Prng::derive(16, "divisor");
        for _ in 0..200 {
            let bits = rng.below(64) as u32 + 1;
            divisors.push((rng.next_u64() >> (64 - bits)).max(1));
        }
        for &d in &divisors {
            for &n in &edges {
                check(d, n);
            }
            for k in [1, 2, 1000] {
                check(d, d.saturating_mul(k));
                check(d, d.saturating_mul(k).saturating_sub(1));
                check(d, d.saturating_mul(k).saturating_add(1));
            }
            for _ in 0..200 {
                let bits = rng.below(64) as u32 + 1;
                check(d, rng.next_u64() >> (64 - bits));
            }
        }
    }
}
