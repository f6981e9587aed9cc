//! Where a thread's next I/O lies and how long it is: fio's offset
//! generators (`get_next_seq_offset`, the random map and distributions,
//! strided zones) and block sizes (`get_next_buflen`).

use super::*;

impl Thread {
    /// `setup_strided_zone_mode`: read `zonesize` bytes of each zone,
    /// then skip `zoneskip`.
    pub(super) fn strided(&mut self, fi: usize, d: usize, job: &Job) {
        let o = &job.o;
        let range = o.zonerange.max(1);
        let skip = match o.zoneskip {
            super::super::value::Size::Bytes(b) => b,
            _ => 0,
        };
        let f = &mut self.files[fi];
        if self.zone_bytes >= o.zonesize {
            self.zone_bytes = 0;
            f.offset += range + skip;
            if f.offset >= f.real {
                f.offset = f.start;
            }
            f.last_pos[d] = f.offset;
            if let Some(m) = &mut f.map {
                m.clear();
            }
        }
        if f.last_pos[d] >= f.offset + range {
            f.last_pos[d] = f.offset;
        }
        if self.zone_bytes % range == 0 {
            if let Some(m) = &mut f.map {
                m.clear();
            }
        }
    }

    /// `get_next_offset`: the offset and whether it was random.
    pub(super) fn next_offset(&mut self, fi: usize, d: usize, job: &Job) -> Option<(u64, bool)> {
        let o = &job.o;
        let mut rw_seq_hit = false;
        self.seq_nr_left -= 1;
        if self.seq_nr_left == 0 {
            rw_seq_hit = true;
            self.seq_nr_left = job.seq_nr.max(1);
        }
        let (rel, random) = if rw_seq_hit {
            if o.rw.random {
                let perc = o.percentage_random[d];
                let do_random = perc == 100 || self.rng.seqrand.below(100) < u64::from(perc);
                if do_random {
                    (self.rand_block(fi, d, job)? * job.ba[d], true)
                } else {
                    match self.seq_offset(fi, d, job) {
                        Some(p) => (p, false),
                        None => (self.rand_block(fi, d, job)? * job.ba[d], true),
                    }
                }
            } else {
                (self.seq_offset(fi, d, job)?, false)
            }
        } else if !o.rw_sequencer_identical {
            match self.seq_offset(fi, d, job) {
                Some(p) => (p, false),
                None => (self.rand_block(fi, d, job)? * job.ba[d], false),
            }
        } else {
            let f = &self.files[fi];
            (f.last_start[d].map_or(0, |s| s - f.offset), false)
        };
        let f = &self.files[fi];
        if rel >= f.io_size {
            return None;
        }
        let off = rel + f.offset;
        if off >= f.real {
            return None;
        }
        Some((off, random))
    }

    /// `get_next_seq_offset`: a position relative to the file's range.
    pub(super) fn seq_offset(&mut self, fi: usize, d: usize, job: &Job) -> Option<u64> {
        let o = &job.o;
        let nfiles = self.files.len();
        let f = &mut self.files[fi];
        let end = f.io_size + f.start;
        if f.last_pos[d] >= end && o.time_based && nfiles == 1 {
            f.last_pos[d] = f.offset;
        }
        let limit = self.limit;
        if o.rw.write && limit > self.size && f.last_pos[d] >= end {
            f.last_pos[d] = f.offset;
        }
        if f.last_pos[d] >= f.real {
            return None;
        }
        let add = job.seq_add;
        if f.last_pos[d] == f.offset && f.offset != 0 && add < 0 {
            f.last_pos[d] = f.real.min(f.io_size);
        }
        let mut pos = f.last_pos[d].saturating_sub(f.offset) as i128;
        if pos != 0 && add != 0 {
            pos += i128::from(add);
            if pos < 0 || pos >= f.real as i128 {
                pos = if add > 0 {
                    0
                } else {
                    f.real.min(f.io_size) as i128 + i128::from(add)
                };
            }
        }
        Some(pos.max(0) as u64)
    }

    /// `get_next_rand_block`: a block number (in `ba` units).
    pub(super) fn rand_block(&mut self, fi: usize, d: usize, job: &Job) -> Option<u64> {
        if let Some(b) = self.rand_offset(fi, d, job) {
            return Some(b);
        }
        if job.o.time_based || matches!(job.o.file_service, FileService::Random(_)) {
            let f = &mut self.files[fi];
            if let Some(m) = &mut f.map {
                m.clear();
            }
            if let Some(l) = &mut f.lfsr {
                l.reset();
            }
            return self.rand_offset(fi, d, job);
        }
        None
    }

    /// `get_next_rand_offset`.
    pub(super) fn rand_offset(&mut self, fi: usize, d: usize, job: &Job) -> Option<u64> {
        let o = &job.o;
        let lastb = last_block(job, &self.files[fi], d, o.zonerange);
        match (&o.distribution, &self.dists[fi]) {
            (_, Dist::Zipf(z)) => return Some(z.next(&mut self.rng.offset)),
            (_, Dist::Pareto(p)) => return Some(p.next(&mut self.rng.offset)),
            (_, Dist::Gauss(g)) => return Some(g.next(&mut self.rng.offset)),
            (Distribution::Zoned(z), _) => {
                let zones = &z[d];
                if lastb == 0 {
                    return None;
                }
                if zones.is_empty() {
                    return self.uniform(fi, lastb);
                }
                let v = self.rng.zone.below(100) as u32 + 1;
                let (mut acc, mut sprev) = (0u32, 0u32);
                let mut pick = (0u32, 100u32);
                for (a, s) in zones {
                    acc += a;
                    if v <= acc {
                        pick = (sprev, sprev + s);
                        break;
                    }
                    sprev += s;
                }
                let off = u64::from(pick.0) * lastb / 100;
                let span = (lastb * u64::from(pick.1.saturating_sub(pick.0)) / 100).max(1);
                let b = self.uniform(fi, span)?;
                return Some(b + off);
            }
            (Distribution::ZonedAbs(z), _) => {
                let zones = &z[d];
                if lastb == 0 {
                    return None;
                }
                if zones.is_empty() {
                    return self.uniform(fi, lastb);
                }
                let v = self.rng.zone.below(100) as u32 + 1;
                let (mut acc, mut prev) = (0u32, 0u64);
                let mut pick = (0u64, 0u64);
                for (a, s) in zones {
                    acc += a;
                    if v <= acc {
                        pick = (prev, prev + s);
                        break;
                    }
                    prev += s;
                }
                let ba = job.ba[d].max(1);
                let (stotal, send) = (pick.0 / ba, pick.1 / ba);
                if send > lastb {
                    return None;
                }
                let b = self.uniform(fi, (send - stotal).max(1))?;
                return Some(b + stotal);
            }
            (Distribution::Sequence(seq), _) => {
                let n = seq.len() as u64;
                let count = self.io_issues[d];
                let idx = (count % n) as usize;
                let b = if o.random_sequence_stride {
                    count / n * n + seq[idx]
                } else {
                    seq[idx]
                };
                let f = &self.files[fi];
                let max_blocks = f.io_size / job.min_bs[d].max(1);
                if b >= max_blocks {
                    return None;
                }
                return Some(b);
            }
            _ => {}
        }
        if lastb == 0 {
            return None;
        }
        self.uniform(fi, lastb)
    }

    /// A uniform block below `lastb`, through the map or the full-period
    /// walk when the job keeps one.
    pub(super) fn uniform(&mut self, fi: usize, lastb: u64) -> Option<u64> {
        let f = &mut self.files[fi];
        if let Some(l) = &mut f.lfsr {
            return l.next_block();
        }
        let b = self.rng.offset.below(lastb.max(1));
        match &f.map {
            Some(m) if m.is_set(b) => m.next_free(b),
            Some(m) if m.is_full() => None,
            _ => Some(b),
        }
    }

    /// `get_next_buflen`.
    pub(super) fn next_buflen(
        &mut self,
        fi: usize,
        d: usize,
        offset: u64,
        random: bool,
        job: &Job,
    ) -> Option<u64> {
        let o = &job.o;
        let d = if o.bs_is_seq_rand {
            if random {
                WRITE
            } else {
                READ
            }
        } else {
            d
        };
        let (minbs, maxbs) = (job.min_bs[d], job.max_bs[d]);
        let f = &self.files[fi];
        let fits = |len: u64| offset + len <= f.io_size + f.start;
        if minbs == maxbs {
            return Some(minbs);
        }
        if !fits(minbs) {
            return None;
        }
        for _ in 0..1000 {
            let u = self.rng.bs.unit();
            let mut len = if o.bssplit[d].is_empty() {
                minbs + (maxbs as f64 * u) as u64
            } else {
                let mut entries = o.bssplit[d].clone();
                entries.sort_by_key(|e| e.perc);
                let mut acc = 0u32;
                let mut pick = minbs;
                for e in &entries {
                    let p = e.perc.unwrap_or(0);
                    if p == 0 {
                        continue;
                    }
                    pick = e.value;
                    acc += p;
                    if u <= f64::from(acc) / 100.0 && fits(pick) {
                        break;
                    }
                }
                pick
            };
            if !o.bs_unaligned {
                if minbs.is_power_of_two() {
                    len &= !(minbs - 1);
                } else {
                    len -= len % minbs;
                }
            }
            len = len.clamp(minbs, maxbs);
            if fits(len) {
                return Some(len);
            }
        }
        Some(minbs)
    }
}
