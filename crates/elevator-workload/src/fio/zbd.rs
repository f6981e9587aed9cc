//! `zonemode=zbd` on a device or file without zones: fio's emulation
//! (`zbd.c`, `init_zone_info` for `ZBD_NONE`): the range is cut into
//! zones of `zonesize`, each a sequential-write-required zone with a write
//! pointer starting empty.
//!
//! Writes go to a zone's write pointer (a random write picks the zone by
//! its offset, `pick_random_zone_idx`); at most `max_open_zones` zones
//! take writes at once (the write-target set, shared by the jobs on the
//! file); a full zone leaves the set and is reset (emptied) when written
//! again. With `zone_reset_frequency`, once the valid data reaches
//! `zone_reset_threshold` of the range, that share of writes resets their
//! zone first. Reads (unless `read_beyond_wp`) only touch written data: a
//! read aimed at an empty zone moves to the next zone holding some (the
//! nearest, for random reads), and a job finding none ends.
//!
//! A reset of an emulated zone is bookkeeping: fio sends nothing to a
//! device without zones, and neither do we. Resets are counted.

use elevator_core::Prng;

/// The zones of one file.
#[derive(Clone, Debug)]
pub struct Zones {
    pub size: u64,
    /// Write pointer of each zone (bytes from the file's start).
    wp: Vec<u64>,
    /// Zones taking writes, in the order they were opened.
    write_set: Vec<u32>,
    pub max_open: u32,
    /// Bytes between zone starts and write pointers.
    pub valid_bytes: u64,
    pub resets: u64,
}

impl Zones {
    /// Zones of `size` bytes over a file of `file_bytes`.
    pub fn new(file_bytes: u64, size: u64, max_open: u32) -> Self {
        let n = file_bytes.div_ceil(size.max(1)) as usize;
        Zones {
            size: size.max(1),
            wp: (0..n).map(|i| i as u64 * size).collect(),
            write_set: Vec::new(),
            max_open,
            valid_bytes: 0,
            resets: 0,
        }
    }

    fn zone(&self, off: u64) -> usize {
        ((off / self.size) as usize).min(self.wp.len().saturating_sub(1))
    }

    fn start(&self, z: usize) -> u64 {
        z as u64 * self.size
    }

    fn end(&self, z: usize) -> u64 {
        self.start(z) + self.size
    }

    fn reset(&mut self, z: usize) {
        self.valid_bytes -= self.wp[z] - self.start(z);
        self.wp[z] = self.start(z);
        self.resets += 1;
    }

    fn full(&self, z: usize, min_bs: u64) -> bool {
        self.wp[z] + min_bs > self.end(z)
    }

    /// The zones `[first, last)` of a thread's range.
    pub fn range(&self, offset: u64, io_size: u64) -> (usize, usize) {
        let first = self.zone(offset);
        let last = ((offset + io_size).div_ceil(self.size) as usize).min(self.wp.len());
        (first, last.max(first + 1))
    }

    /// Where a write aimed at `off` of `len` bytes goes: its zone's write
    /// pointer. `None`: no zone can take it.
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &mut self,
        off: u64,
        len: u64,
        min_bs: u64,
        range: (usize, usize),
        io_size: u64,
        reset: (f64, f64),
        rng: &mut Prng,
    ) -> Option<(u64, u64)> {
        if len > self.size {
            return None;
        }
        let (first, last) = range;
        let mut z = self.zone(off).clamp(first, last - 1);
        let open = |zs: &Self, z: usize| zs.write_set.contains(&(z as u32));
        if !open(self, z) {
            let room = self.max_open == 0 || self.write_set.len() < self.max_open as usize;
            if room {
                self.write_set.push(z as u32);
            } else {
                // pick_random_zone_idx: the offset's place in the range
                // picks one of the open zones.
                let in_range: Vec<u32> = self
                    .write_set
                    .iter()
                    .copied()
                    .filter(|&w| (first..last).contains(&(w as usize)))
                    .collect();
                if in_range.is_empty() {
                    return None;
                }
                let span = ((last - first) as u64 * self.size).max(1);
                let i = ((off.saturating_sub(self.start(first))) as u128 * in_range.len() as u128
                    / span as u128) as usize;
                z = in_range[i.min(in_range.len() - 1)] as usize;
            }
        }
        let (threshold, frequency) = reset;
        if frequency > 0.0
            && self.valid_bytes as f64 >= io_size as f64 * threshold
            && rng.unit() < frequency
        {
            self.reset(z);
        }
        if self.full(z, min_bs) {
            // A full zone is emptied before it is written again.
            self.reset(z);
        }
        let at = self.wp[z];
        let room = self.end(z) - at;
        let new_len = len.min(room) / min_bs.max(1) * min_bs.max(1);
        if new_len == 0 {
            return None;
        }
        self.wp[z] += new_len;
        self.valid_bytes += new_len;
        if self.full(z, min_bs) {
            self.write_set.retain(|&w| w as usize != z);
        }
        Some((at, new_len))
    }

    /// Where a read aimed at `off` of `len` bytes goes, within written
    /// data; `None`: nothing is written where the job may read.
    pub fn read(
        &self,
        off: u64,
        len: u64,
        min_bs: u64,
        random: bool,
        range: (usize, usize),
    ) -> Option<(u64, u64)> {
        let (first, last) = range;
        let orig = self.zone(off).clamp(first, last - 1);
        let mut z = orig;
        let mut off = off;
        let data = |z: usize| self.wp[z] - self.start(z);
        if data(z) < min_bs || (!random && off + min_bs > self.wp[z]) {
            // zbd_find_zone: the next zone with data; for random I/O the
            // nearest on either side.
            let mut found = None;
            for d in 1..=(last - first) {
                let up = z + d;
                if up < last && data(up) >= min_bs {
                    found = Some(up);
                    break;
                } else if up >= last && !random {
                    break;
                }
                if random && z >= first + d && data(z - d) >= min_bs {
                    found = Some(z - d);
                    break;
                }
            }
            z = found?;
            if !random {
                off = self.start(z);
            }
        }
        let range_bytes = data(z);
        if range_bytes <= len {
            off = self.start(z);
        } else if random {
            let within = off.saturating_sub(self.start(orig)) % (range_bytes - len);
            off = self.start(z) + within / min_bs.max(1) * min_bs.max(1);
        }
        let new_len = len.min(self.wp[z].saturating_sub(off)) / min_bs.max(1) * min_bs.max(1);
        (new_len > 0).then_some((off, new_len))
    }

    /// Whether any zone of the range holds data.
    pub fn written(&self, range: (usize, usize)) -> bool {
        (range.0..range.1).any(|z| self.wp[z] > self.start(z))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_land_at_write_pointers_and_reads_only_where_written() {
        let mut z = Zones::new(4 << 20, 1 << 20, 2);
        let mut rng = Prng::new(1);
        let r = z.range(0, 4 << 20);
        assert_eq!(
            z.read(0, 4096, 4096, true, r),
            None,
            "empty zones hold nothing"
        );
        assert_eq!(
            z.write(3 << 20, 4096, 4096, r, 4 << 20, (1.0, 0.0), &mut rng),
            Some((3 << 20, 4096))
        );
        assert_eq!(
            z.write(
                (3 << 20) + 65536,
                4096,
                4096,
                r,
                4 << 20,
                (1.0, 0.0),
                &mut rng
            ),
            Some(((3 << 20) + 4096, 4096)),
            "a random write in an open zone goes to its write pointer"
        );
        assert_eq!(
            z.write(0, 4096, 4096, r, 4 << 20, (1.0, 0.0), &mut rng),
            Some((0, 4096))
        );
        // Two zones are open: a write aimed at a third goes to one of them.
        let (at, _) = z
            .write(2 << 20, 4096, 4096, r, 4 << 20, (1.0, 0.0), &mut rng)
            .unwrap();
        assert!(!((1 << 20)..3 << 20).contains(&at), "{at}");
        let (roff, rlen) = z.read(1 << 20, 4096, 4096, true, r).unwrap();
        assert!(roff + rlen <= (3 << 20) + 8192, "{roff}");
    }
}
