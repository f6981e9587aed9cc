//! Readahead for buffered reads as Linux 2.4 did it: mm/filemap.c
//! `generic_file_readahead` and the readahead part of
//! `do_generic_file_read`, 2.4.20/2.4.21 (Andrea Arcangeli's and Gérard
//! Roudier's read-ahead context of 2.2, with `vm_max_readahead` and
//! `vm_min_readahead` made tunable in 2.4.10).
//!
//! State per open file (`struct file`): `f_raend`, the page after the last
//! one read ahead; `f_ralen`, the length of the last read-ahead;
//! `f_rawin`, the read-ahead window (the last two read-aheads when the
//! last one was asynchronous); `f_ramax`, the next read-ahead's size.
//!
//! - **Each read() call** ([`Ra24::begin_read`]) first checks that it
//!   starts inside the window (`index <= f_raend` and `index + f_rawin >=
//!   f_raend`); if not, the context is reset and readahead is "not ok" for
//!   this call. `f_ramax` then grows to what the call needs (its pages plus
//!   one), to at least `vm_min_readahead` (3) when readahead is ok, and to
//!   at most the device's maximum (`vm_max_readahead`, 31). A call that
//!   stays in the first half of page 0 gets none.
//! - **A page that is being read** (just submitted by `readpage`, or in
//!   flight) and lies outside the last read-ahead starts a synchronous
//!   read-ahead: the `f_ramax` pages after it.
//! - **A page that is up to date** and lies in the last read-ahead
//!   (`index + f_ralen >= f_raend`) starts an asynchronous one: the
//!   `f_ramax + 1` pages after `f_raend - 1`, "about the same IO max size
//!   as synchronous read-ahead". A sequential `cat` thus submits the next
//!   window when it reaches the first page of the last one: after the
//!   first 4-page read, windows of 7, 13, 25 and then 32 pages (128 KiB),
//!   `f_ramax` doubling up to 31.
//! - A page the reader had to wait for gets no read-ahead call after the
//!   wait (`lock_page` and then `goto page_ok`); the next page does.
//! - **The last page of a file is never read ahead**: the loop stops at
//!   `raend + ahead >= end_index` with `end_index = i_size >>
//!   PAGE_CACHE_SHIFT`, so a file that does not end on a page boundary has
//!   its last, partial page read on its own, synchronously, when the
//!   reader gets there ("2.4 read ahead never reads the last page in a
//!   file", Chuck Lever, LKML, 3 Dec 2003, fixed in 2.4.24). The loop
//!   counts the page it stopped at as read ahead (`ahead++` comes before
//!   the test), so `f_raend` lies one page past what was read.
//! - Pages already cached count as read ahead (`page_cache_read` returns
//!   0 for them); nothing shrinks the window.
//!
//! Pure state machine: the caller submits the pages it is told to.

/// Read-ahead context of one open file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ra24 {
    /// `f_raend`: the page after the last one read ahead.
    pub raend: u64,
    /// `f_ramax`: pages of the next read-ahead.
    pub ramax: u64,
    /// `f_ralen`: pages of the last read-ahead.
    pub ralen: u64,
    /// `f_rawin`: pages of the read-ahead window.
    pub rawin: u64,
}

/// Pages to read ahead: `[start, start + len)` (`len` may be 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ahead {
    pub start: u64,
    pub len: u64,
    /// Started from an up-to-date page: the reader does not wait for it.
    pub async_: bool,
}

impl Ra24 {
    pub fn new() -> Self {
        Ra24::default()
    }

    /// The start of a read() of `count` bytes at byte `pos` (the top of
    /// `do_generic_file_read`); `max` and `min` are `vm_max_readahead` and
    /// `vm_min_readahead` in pages. Returns `reada_ok` for this call.
    pub fn begin_read(&mut self, pos: u64, count: u64, max: u64, min: u64) -> bool {
        let page = crate::params::PAGE_SIZE;
        let index = pos / page;
        let offset = pos % page;
        let reada_ok = !(index > self.raend || index + self.rawin < self.raend);
        if !reada_ok {
            *self = Ra24::default();
        }
        if index == 0 && offset + count <= page / 2 {
            self.ramax = 0;
        } else {
            let needed = (offset + count) / page + 1;
            self.ramax = self.ramax.max(needed);
            if reada_ok && self.ramax < min {
                self.ramax = min;
            }
            self.ramax = self.ramax.min(max);
        }
        reada_ok
    }

    /// `generic_file_readahead` for page `index` of a file of `end_index =
    /// i_size / PAGE_SIZE` full pages; `locked`: the page is being read.
    /// Returns the pages to submit (in this order, after the page itself).
    pub fn readahead(
        &mut self,
        reada_ok: bool,
        index: u64,
        locked: bool,
        end_index: u64,
        max: u64,
    ) -> Option<Ahead> {
        let mut raend = self.raend;
        let mut max_ahead = 0;
        let mut async_ = false;
        if locked {
            if self.ralen == 0 || index >= raend || index + self.rawin < raend {
                raend = index;
                if raend < end_index {
                    max_ahead = self.ramax;
                }
                self.rawin = 0;
                self.ralen = 1;
                if max_ahead == 0 {
                    self.raend = index + self.ralen;
                    self.rawin += self.ralen;
                }
            }
        } else if reada_ok
            && self.ramax > 0
            && raend >= 1
            && index <= raend
            && index + self.ralen >= raend
        {
            raend -= 1;
            if raend < end_index {
                max_ahead = self.ramax + 1;
            }
            if max_ahead > 0 {
                self.rawin = self.ralen;
                self.ralen = 0;
                async_ = true;
            }
        }
        // `ahead++` before the end test: the page it stops at counts.
        let mut ahead = 0;
        let mut read = 0;
        while ahead < max_ahead {
            ahead += 1;
            if raend + ahead >= end_index {
                break;
            }
            read += 1;
        }
        if ahead == 0 {
            return None;
        }
        self.ralen += ahead;
        self.rawin += self.ralen;
        self.raend = raend + ahead + 1;
        self.ramax = (self.ramax * 2).min(max);
        Some(Ahead {
            start: raend + 1,
            len: read,
            async_,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::PAGE_SIZE;

    /// A `cat` reading a `pages`-page file 4 KiB at a time, every page
    /// found in flight the first time (the reader outruns the disk):
    /// the read-aheads it submits, as (start, len, async).
    fn cat(pages: u64, size: u64) -> Vec<(u64, u64, bool)> {
        let mut ra = Ra24::new();
        let end_index = size / PAGE_SIZE;
        let mut cached = vec![false; pages as usize + 1];
        let mut out = Vec::new();
        for p in 0..pages {
            let ok = ra.begin_read(p * PAGE_SIZE, PAGE_SIZE, 31, 3);
            // Absent: readpage, then read-ahead as locked, then wait.
            // Cached: read-ahead as up to date (unless just waited for).
            let locked = !cached[p as usize];
            if let Some(a) = ra.readahead(ok, p, locked, end_index, 31) {
                for q in a.start..a.start + a.len {
                    cached[q as usize] = true;
                }
                out.push((a.start, a.len, a.async_));
            }
            cached[p as usize] = true;
        }
        out
    }

    #[test]
    fn a_sequential_reader_ramps_up_to_32_page_windows() {
        let w = cat(200, 200 * PAGE_SIZE);
        println!("2.4 read-aheads of a 200-page cat: {w:?}");
        // Page 0: read with 3 pages of synchronous read-ahead; page 1 then
        // starts the asynchronous windows: 7, 13, 25, then 32 pages.
        assert_eq!(w[0], (1, 3, false));
        assert_eq!(w[1], (4, 7, true));
        assert_eq!(w[2], (11, 13, true));
        assert_eq!(w[3], (24, 25, true));
        assert_eq!(w[4], (49, 32, true));
        assert!(w[5..].iter().all(|&(_, len, a)| a && len == 32 || len < 32));
        // Windows tile the file.
        for p in w.windows(2) {
            assert_eq!(p[0].0 + p[0].1, p[1].0);
        }
    }

    #[test]
    fn the_next_window_starts_at_the_first_page_of_the_last_one() {
        let mut ra = Ra24::new();
        let end = 1000;
        let ok = ra.begin_read(0, PAGE_SIZE, 31, 3);
        assert_eq!(ra.readahead(ok, 0, true, end, 31).unwrap().len, 3);
        for p in 1..49 {
            let ok = ra.begin_read(p * PAGE_SIZE, PAGE_SIZE, 31, 3);
            let _ = ra.readahead(ok, p, false, end, 31);
        }
        // Window [49, 81) is the last one; pages 49.. trigger the next.
        let ok = ra.begin_read(48 * PAGE_SIZE, PAGE_SIZE, 31, 3);
        assert_eq!(ra.readahead(ok, 48, false, end, 31), None);
        let ok = ra.begin_read(49 * PAGE_SIZE, PAGE_SIZE, 31, 3);
        let a = ra.readahead(ok, 49, false, end, 31).unwrap();
        assert_eq!((a.start, a.len, a.async_), (81, 32, true));
    }

    #[test]
    fn the_last_partial_page_is_never_read_ahead() {
        // 10 KiB: pages 0, 1 and a partial page 2 (end_index = 2).
        let w = cat(3, 10 * 1024);
        println!("2.4 read-aheads of a 10 KiB file: {w:?}");
        // Page 0's read-ahead gets page 1 only; page 2 is read when the
        // reader gets there.
        assert_eq!(w, vec![(1, 1, false)]);
        // A whole-page file has every page read ahead.
        let w = cat(3, 3 * PAGE_SIZE);
        assert_eq!(w, vec![(1, 2, false)]);
        // One page or less: nothing to read ahead.
        assert!(cat(1, 3000).is_empty());
    }

    #[test]
    fn a_jump_outside_the_window_resets_the_context() {
        let mut ra = Ra24::new();
        let ok = ra.begin_read(0, PAGE_SIZE, 31, 3);
        ra.readahead(ok, 0, true, 1000, 31);
        assert_eq!(ra.raend, 4);
        // Page 500 is far outside: not ok, context reset; the page is
        // read with `f_ramax` = what the call needs (2 pages) ahead.
        assert!(!ra.begin_read(500 * PAGE_SIZE, PAGE_SIZE, 31, 3));
        let a = ra.readahead(false, 500, true, 1000, 31).unwrap();
        assert_eq!((a.start, a.len), (501, 2));
        // An up-to-date page after a reset starts nothing.
        let mut ra = Ra24::new();
        assert!(!ra.begin_read(7 * PAGE_SIZE, PAGE_SIZE, 31, 3) || ra.raend == 0);
        assert_eq!(ra.readahead(false, 7, false, 1000, 31), None);
    }

    #[test]
    fn small_reads_of_page_zero_get_no_readahead() {
        let mut ra = Ra24::new();
        let ok = ra.begin_read(0, 100, 31, 3);
        assert_eq!(ra.ramax, 0);
        // The locked page alone: the context records it, nothing ahead.
        assert_eq!(ra.readahead(ok, 0, true, 1000, 31), None);
        assert_eq!((ra.raend, ra.ralen, ra.rawin), (1, 1, 1));
    }

    #[test]
    fn eight_kib_readahead_gives_three_page_windows() {
        let mut ra = Ra24::new();
        let mut lens = Vec::new();
        let mut cached = [false; 64];
        for p in 0..60u64 {
            let ok = ra.begin_read(p * PAGE_SIZE, PAGE_SIZE, 2, 3);
            if let Some(a) = ra.readahead(ok, p, !cached[p as usize], 1000, 2) {
                for q in a.start..a.start + a.len {
                    cached[q as usize] = true;
                }
                lens.push(a.len);
            }
            cached[p as usize] = true;
        }
        println!("2.4 read-ahead sizes with vm_max_readahead = 2: {lens:?}");
        assert_eq!(lens[0], 2);
        assert!(lens[1..].iter().all(|&l| l == 3));
    }
}
