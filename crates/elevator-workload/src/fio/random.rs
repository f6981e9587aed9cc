//! Random offsets as fio draws them: the random map (every block once per
//! pass), the full-period generator (`random_generator=lfsr`), and the
//! skewed distributions (`lib/zipf.c`, `lib/gauss.c`, `io_u.c`'s zoned
//! ones).
//!
//! fio's uniform draw is `lastb * (r / (max + 1))` from its Tausworthe
//! generator; ours draws from the job's seeded `Prng`: the same
//! distribution, a different sequence. With the random map a block that
//! is taken moves the draw to the next free block after it, wrapping
//! (`axmap_next_free`), so a pass touches every block exactly once.

use elevator_core::Prng;

/// fio's `__hash_u64`: spreads a rank over the range (`hash.h`).
const GOLDEN_RATIO_64: u64 = 0x61c8_8646_80b5_83eb;
/// fio's `ZIPF_MAX_GEN`: the zeta sum covers at most this many ranks.
const ZIPF_MAX_GEN: u64 = 10_000_000;
/// fio's `GAUSS_ITERS`.
const GAUSS_ITERS: u64 = 12;

/// A bitmap of blocks, with a summary of full words for the search.
#[derive(Clone, Debug)]
pub struct RandomMap {
    bits: u64,
    words: Vec<u64>,
    /// Bit per word of `words`: the word is full.
    full: Vec<u64>,
    set: u64,
}

impl RandomMap {
    pub fn new(bits: u64) -> Self {
        let nwords = bits.div_ceil(64) as usize;
        RandomMap {
            bits,
            words: vec![0; nwords],
            full: vec![0; nwords.div_ceil(64)],
            set: 0,
        }
    }

    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
        self.full.iter_mut().for_each(|w| *w = 0);
        self.set = 0;
    }

    pub fn is_set(&self, b: u64) -> bool {
        b < self.bits && self.words[(b / 64) as usize] & (1 << (b % 64)) != 0
    }

    fn word_mask(&self, w: usize) -> u64 {
        let last = self.bits.div_ceil(64) as usize - 1;
        if w == last && self.bits % 64 != 0 {
            (1u64 << (self.bits % 64)) - 1
        } else {
            u64::MAX
        }
    }

    fn mark(&mut self, b: u64) {
        let w = (b / 64) as usize;
        self.words[w] |= 1 << (b % 64);
        self.set += 1;
        if self.words[w] == self.word_mask(w) {
            self.full[w / 64] |= 1 << (w % 64);
        }
    }

    /// Set up to `n` free blocks from `b`, stopping at the first taken
    /// one (`axmap_set_nr`); returns how many were set.
    pub fn set_nr(&mut self, b: u64, n: u64) -> u64 {
        let mut k = 0;
        while k < n && b + k < self.bits && !self.is_set(b + k) {
            self.mark(b + k);
            k += 1;
        }
        k
    }

    /// Whether every block is taken.
    pub fn is_full(&self) -> bool {
        self.set >= self.bits
    }

    /// The first free block after `b`, wrapping; `None` if none is free.
    pub fn next_free(&self, b: u64) -> Option<u64> {
        if self.bits == 0 || self.is_full() {
            return None;
        }
        let start = if b + 1 >= self.bits { 0 } else { b + 1 };
        self.first_free_from(start)
            .or_else(|| (start != 0).then(|| self.first_free_from(0)).flatten())
    }

    fn first_free_from(&self, b: u64) -> Option<u64> {
        let mut w = (b / 64) as usize;
        let free = !self.words[w] & self.word_mask(w) & (u64::MAX << (b % 64));
        if free != 0 {
            return Some(w as u64 * 64 + u64::from(free.trailing_zeros()));
        }
        w += 1;
        while w < self.words.len() {
            // Skip 64 full words at once through the summary.
            if w % 64 == 0 && self.full[w / 64] == u64::MAX {
                w += 64;
                continue;
            }
            let free = !self.words[w] & self.word_mask(w);
            if free != 0 {
                return Some(w as u64 * 64 + u64::from(free.trailing_zeros()));
            }
            w += 1;
        }
        None
    }
}

/// A full-period walk over `0..n` in a scrambled order: each block once
/// per period, no map needed. fio uses a maximal LFSR for
/// `random_generator=lfsr`; this is a bijection on the next power of two
/// with values past `n` skipped, which has the same property.
#[derive(Clone, Debug)]
pub struct FullPeriod {
    n: u64,
    bits: u32,
    mult: u64,
    add: u64,
    i: u64,
}

impl FullPeriod {
    pub fn new(n: u64, rng: &mut Prng) -> Self {
        let bits = 64 - n.max(2).saturating_sub(1).leading_zeros();
        FullPeriod {
            n: n.max(1),
            bits,
            // An odd multiplier and any addend: x -> (a x + c) mod 2^k is
            // a bijection.
            mult: rng.next_u64() | 1,
            add: rng.next_u64(),
            i: 0,
        }
    }

    fn mask(&self) -> u64 {
        if self.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }

    /// The next block, or `None` when the period is over.
    pub fn next_block(&mut self) -> Option<u64> {
        let m = self.mask();
        while self.i <= m {
            let mut x = self.i;
            self.i += 1;
            // Two rounds of odd multiply and xor-shift, each a bijection
            // on k-bit values.
            x = x.wrapping_mul(self.mult).wrapping_add(self.add) & m;
            x ^= x >> (self.bits / 2).max(1);
            x = x.wrapping_mul(self.mult | 1) & m;
            if x < self.n {
                return Some(x);
            }
        }
        None
    }

    pub fn reset(&mut self) {
        self.i = 0;
    }
}

/// zipf (`lib/zipf.c`): rank from Gray's method, hashed over the range.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    theta: f64,
    zetan: f64,
    zeta2: f64,
    rand_off: u64,
}

impl Zipf {
    pub fn new(n: u64, theta: f64, center: Option<f64>, rng: &mut Prng) -> Self {
        let n = n.max(1);
        let zetan = (0..n.min(ZIPF_MAX_GEN))
            .map(|i| (1.0 / (i as f64 + 1.0)).powf(theta))
            .sum();
        Zipf {
            n,
            theta,
            zetan,
            zeta2: 1.0 + 0.5f64.powf(theta),
            rand_off: offset(n, center, rng),
        }
    }

    pub fn next(&self, rng: &mut Prng) -> u64 {
        let n = self.n as f64;
        let alpha = 1.0 / (1.0 - self.theta);
        let eta = (1.0 - (2.0 / n).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan);
        let u = rng.unit();
        let z = u * self.zetan;
        let val = if z < 1.0 {
            1
        } else if z < 1.0 + 0.5f64.powf(self.theta) {
            2
        } else {
            1 + (n * (eta * u - eta + 1.0).powf(alpha)) as u64
        };
        (val - 1)
            .wrapping_mul(GOLDEN_RATIO_64)
            .wrapping_add(self.rand_off)
            % self.n
    }
}

/// pareto (`lib/zipf.c` `pareto_next`).
#[derive(Clone, Debug)]
pub struct Pareto {
    n: u64,
    pow: f64,
    rand_off: u64,
}

impl Pareto {
    pub fn new(n: u64, h: f64, center: Option<f64>, rng: &mut Prng) -> Self {
        let n = n.max(1);
        Pareto {
            n,
            pow: h.ln() / (1.0 - h).ln(),
            rand_off: offset(n, center, rng),
        }
    }

    pub fn next(&self, rng: &mut Prng) -> u64 {
        let v = ((self.n - 1) as f64 * rng.unit().powf(self.pow)) as u64;
        v.wrapping_mul(GOLDEN_RATIO_64).wrapping_add(self.rand_off) % self.n
    }
}

/// normal/gauss (`lib/gauss.c`): the mean of 12 uniform draws, shifted
/// by a deviation, hashed.
#[derive(Clone, Debug)]
pub struct Gauss {
    n: u64,
    stddev: u64,
    rand_off: u64,
}

impl Gauss {
    pub fn new(n: u64, dev: f64, center: Option<f64>) -> Self {
        let n = n.max(1);
        let mut stddev = 0;
        if dev != 0.0 {
            stddev = ((n as f64 * dev) / 100.0).ceil() as u64;
            stddev = stddev.min(n / 2);
        }
        let rand_off = match center {
            None => 0,
            Some(c) => ((n as f64) * (c - 0.5)).rem_euclid(n as f64) as u64,
        };
        Gauss {
            n,
            stddev,
            rand_off,
        }
    }

    pub fn next(&self, rng: &mut Prng) -> u64 {
        let mut sum = 0u64;
        for _ in 0..GAUSS_ITERS {
            sum += rng.below(self.n + 1);
        }
        sum = sum.div_ceil(GAUSS_ITERS);
        if self.stddev > 0 {
            let mut dev = rng.below(self.stddev) as i64 - (self.stddev / 2) as i64;
            while dev + sum as i64 >= self.n as i64 {
                dev /= 2;
            }
            sum = (sum as i64 + dev).max(0) as u64;
        }
        sum.wrapping_mul(GOLDEN_RATIO_64)
            .wrapping_add(self.rand_off)
            % self.n
    }
}

fn offset(n: u64, center: Option<f64>, rng: &mut Prng) -> u64 {
    match center {
        Some(c) => (n as f64 * c) as u64,
        None => rng.next_u64() % n.max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_hands_out_every_block_once() {
        let mut m = RandomMap::new(1000);
        let mut rng = Prng::new(3);
        let mut seen = 0;
        while !m.is_full() {
            let mut b = rng.below(1000);
            if m.is_set(b) {
                b = m.next_free(b).unwrap();
            }
            assert_eq!(m.set_nr(b, 1), 1);
            seen += 1;
        }
        assert_eq!(seen, 1000);
        assert_eq!(m.next_free(5), None);
        m.clear();
        assert_eq!(m.set_nr(998, 4), 2, "stops at the end");
        assert_eq!(m.next_free(999), Some(0), "wraps");
    }

    #[test]
    fn the_full_period_walk_is_a_permutation() {
        for n in [1u64, 2, 7, 64, 1000, 4097] {
            let mut f = FullPeriod::new(n, &mut Prng::new(9));
            let mut seen = vec![false; n as usize];
            while let Some(b) = f.next_block() {
                assert!(!seen[b as usize], "{b} twice for n={n}");
                seen[b as usize] = true;
            }
            assert!(seen.iter().all(|s| *s), "n={n}");
        }
    }

    #[test]
    fn zipf_concentrates_and_gauss_stays_in_range() {
        let mut rng = Prng::new(1);
        let z = Zipf::new(10_000, 1.2, None, &mut rng);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..20_000 {
            *counts.entry(z.next(&mut rng)).or_insert(0u32) += 1;
        }
        let top = counts.values().max().unwrap();
        assert!(*top > 2000, "the hottest block gets a large share: {top}");
        let g = Gauss::new(1000, 10.0, Some(0.5));
        for _ in 0..1000 {
            assert!(g.next(&mut rng) < 1000);
        }
    }
}
