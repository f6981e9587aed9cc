//! The drive's buffer: read segments and the write-back set.
//!
//! Read segments follow DiskSim's segmented buffer: a few segments, each
//! holding one contiguous run of sectors (what was read plus what the
//! drive read ahead after it), replaced least recently used. The write-back
//! set holds the dirty runs the drive has acknowledged but not yet written
//! to the media, kept sorted and merged so the destage order can sweep
//! across the disk (C-LOOK) and adjacent writes combine ("Combine seq
//! writes" in DiskSim's spec).
//!
//! Both are fixed-size: no allocation after construction.
//!
//! Invariants: a segment's run is at most `segment_sectors` long; dirty
//! extents are sorted, disjoint and non-adjacent, and their total is at
//! most the write buffer size.

use elevator_core::Sector;

/// One read segment: sectors `start..end` are in the buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    pub start: Sector,
    pub end: Sector,
    /// Larger is more recent.
    pub used: u64,
}

/// What the segments hold of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// All of it, in this segment.
    Whole(usize),
    /// Its first sectors, in this segment.
    Front(usize),
    None,
}

/// The read segments.
#[derive(Clone, Debug)]
pub struct Segments {
    segs: Vec<Segment>,
    pub segment_sectors: u64,
    clock: u64,
    /// A write empties every segment it overlaps, as DiskSim's
    /// `disk_buffer_set_segment` (`disksim_diskcache.c`) empties each
    /// clean segment overlapping a write; otherwise a segment keeps its
    /// sectors before the write.
    empty_on_write: bool,
}

impl Segments {
    pub fn new(count: u32, segment_sectors: u64, empty_on_write: bool) -> Self {
        Segments {
            segs: vec![Segment::default(); count as usize],
            segment_sectors,
            clock: 0,
            empty_on_write,
        }
    }

    pub fn get(&self, i: usize) -> &Segment {
        &self.segs[i]
    }

    /// Which segment holds `start..end`: all of it, or only its front.
    pub fn lookup(&self, start: Sector, end: Sector) -> Lookup {
        let mut found = Lookup::None;
        for (i, s) in self.segs.iter().enumerate() {
            if s.start <= start && start < s.end {
                if end <= s.end {
                    return Lookup::Whole(i);
                }
                found = Lookup::Front(i);
            }
        }
        found
    }

    /// Mark segment `i` used now.
    pub fn touch(&mut self, i: usize) {
        self.clock += 1;
        self.segs[i].used = self.clock;
    }

    /// The least recently used segment, emptied.
    pub fn take_lru(&mut self) -> usize {
        let best = (0..self.segs.len())
            .min_by_key(|&i| self.segs[i].used)
            .unwrap_or(0);
        self.segs[best] = Segment::default();
        best
    }

    /// Segment `i` now holds `start..end`; keep at most one segment's
    /// worth, dropping the oldest sectors.
    pub fn set(&mut self, i: usize, start: Sector, end: Sector) {
        let start = start.max(end.saturating_sub(self.segment_sectors));
        self.segs[i].start = start;
        self.segs[i].end = end;
        self.touch(i);
    }

    /// Grow segment `i` to end at `end` (read-ahead arrived).
    pub fn extend(&mut self, i: usize, end: Sector) {
        let s = self.segs[i];
        if end > s.end {
            let start = s.start.max(end.saturating_sub(self.segment_sectors));
            self.segs[i].start = start;
            self.segs[i].end = end;
        }
    }

    /// New data was written to `start..end`: cached copies are stale. A
    /// segment keeps the part before the write (unless `empty_on_write`),
    /// or is emptied. Returns whether segment `watch` lost anything.
    pub fn invalidate(&mut self, start: Sector, end: Sector, watch: Option<usize>) -> bool {
        let mut hit_watch = false;
        for (i, s) in self.segs.iter_mut().enumerate() {
            if s.start < end && start < s.end {
                if Some(i) == watch {
                    hit_watch = true;
                }
                if s.start < start && !self.empty_on_write {
                    s.end = start;
                } else {
                    *s = Segment::default();
                }
            }
        }
        hit_watch
    }
}

/// Dirty runs in the write-back buffer, sorted by start.
#[derive(Clone, Debug)]
pub struct DirtySet {
    /// `(start, end)` pairs, sorted, disjoint, non-adjacent.
    runs: Vec<(Sector, Sector)>,
    sectors: u64,
    max_sectors: u64,
    max_runs: usize,
}

impl DirtySet {
    pub fn new(max_sectors: u64, max_runs: usize) -> Self {
        DirtySet {
            runs: Vec::with_capacity(max_runs + 1),
            sectors: 0,
            max_sectors,
            max_runs,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Dirty sectors held.
    pub fn sectors(&self) -> u64 {
        self.sectors
    }

    /// Separate dirty runs held.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The buffer's size in sectors.
    pub fn max_sectors(&self) -> u64 {
        self.max_sectors
    }

    /// The most separate runs the buffer holds.
    pub fn max_runs(&self) -> usize {
        self.max_runs
    }

    /// Whether `start..end` is entirely dirty (a read can be served from
    /// the buffer).
    pub fn contains(&self, start: Sector, end: Sector) -> bool {
        let i = self.runs.partition_point(|r| r.1 <= start);
        self.runs
            .get(i)
            .is_some_and(|&(s, e)| s <= start && end <= e)
    }

    /// Add `start..end`, merging with overlapping or adjacent runs.
    /// The caller checked that it fits (the disk model accounts for data
    /// still on its way in and for the run being written back).
    pub fn insert(&mut self, start: Sector, end: Sector) {
        if start >= end {
            return;
        }
        // Runs that touch start..end (overlap or adjacency) form the
        // index range lo..hi.
        let lo = self.runs.partition_point(|r| r.1 < start);
        let hi = self.runs.partition_point(|r| r.0 <= end);
        let (mut s, mut e) = (start, end);
        let mut removed = 0;
        for &(rs, re) in &self.runs[lo..hi] {
            s = s.min(rs);
            e = e.max(re);
            removed += re - rs;
        }
        self.runs.drain(lo..hi);
        self.runs.insert(lo, (s, e));
        self.sectors = self.sectors - removed + (e - s);
    }

    /// The next run to destage sweeping upward from `from` (C-LOOK),
    /// cut to at most `max_len` sectors, removed from the set.
    pub fn take_next(&mut self, from: Sector, max_len: u64) -> Option<(Sector, Sector)> {
        if self.runs.is_empty() {
            return None;
        }
        let mut i = self.runs.partition_point(|r| r.1 <= from);
        if i == self.runs.len() {
            i = 0;
        }
        let (s, e) = self.runs[i];
        let cut = e.min(s + max_len.max(1));
        if cut == e {
            self.runs.remove(i);
        } else {
            self.runs[i].0 = cut;
        }
        self.sectors -= cut - s;
        Some((s, cut))
    }

    /// Where [`DirtySet::take_next`] would start, without taking it.
    pub fn peek_next(&self, from: Sector) -> Option<Sector> {
        let i = self.runs.partition_point(|r| r.1 <= from);
        self.runs.get(i).or(self.runs.first()).map(|r| r.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_runs_merge_and_sweep() {
        let mut d = DirtySet::new(1000, 8);
        d.insert(100, 110);
        d.insert(120, 130);
        d.insert(110, 120); // bridges both
        assert_eq!(d.runs, vec![(100, 130)]);
        assert_eq!(d.sectors(), 30);
        d.insert(10, 20);
        d.insert(105, 140); // overlaps
        assert_eq!(d.runs, vec![(10, 20), (100, 140)]);
        assert_eq!(d.sectors(), 50);
        assert!(d.contains(100, 140));
        assert!(!d.contains(95, 105));
        // C-LOOK from 50: the run at 100 first, in pieces of 25.
        assert_eq!(d.take_next(50, 25), Some((100, 125)));
        assert_eq!(d.take_next(125, 25), Some((125, 140)));
        assert_eq!(d.take_next(140, 25), Some((10, 20)));
        assert!(d.is_empty());
        assert_eq!(d.sectors(), 0);
    }

    #[test]
    fn segments_keep_one_segment_and_drop_stale_data() {
        let mut s = Segments::new(2, 100, false);
        let a = s.take_lru();
        s.set(a, 0, 50);
        s.extend(a, 180);
        assert_eq!((s.get(a).start, s.get(a).end), (80, 180));
        assert_eq!(s.lookup(100, 120), Lookup::Whole(a));
        assert_eq!(s.lookup(170, 190), Lookup::Front(a));
        let b = s.take_lru();
        assert_ne!(a, b);
        s.set(b, 1000, 1010);
        assert!(s.invalidate(150, 160, Some(a)));
        assert_eq!(s.get(a).end, 150);
        s.invalidate(1000, 1001, None);
        assert_eq!(s.lookup(1005, 1006), Lookup::None);
    }

    #[test]
    fn as_disksim_a_write_empties_the_segments_it_overlaps() {
        let mut s = Segments::new(2, 100, true);
        let a = s.take_lru();
        s.set(a, 0, 80);
        let b = s.take_lru();
        s.set(b, 500, 520);
        // A write at 60..64: DiskSim empties the whole clean segment, so
        // its sectors before the write (0..60) are no longer hits.
        assert!(s.invalidate(60, 64, Some(a)));
        assert_eq!(s.lookup(10, 20), Lookup::None);
        // A segment the write does not touch stays.
        assert_eq!(s.lookup(505, 510), Lookup::Whole(b));
    }
}
