//! Readahead for buffered reads, as `page_cache_readahead` in
//! mm/readahead.c of Linux 2.6.0 (the 2.5.6x algorithm of the 2003
//! benchmarks, before the 2.6.10 rework).
//!
//! State per open file: the *current* window `[start, start + size)`, the
//! *ahead* window `[ahead_start, ahead_start + ahead_size)` and `next_size`,
//! the size of the next window.
//!
//! - The first read of a file, at page 0, assumes a whole-file read: the
//!   window is `max / 2` (64 KiB with the 128 KiB default) and is read at
//!   once.
//! - Each read of a page inside the current window (or one past it) grows
//!   `next_size` by 2 pages, up to `max`; any other read shrinks it by 2;
//!   at zero readahead is off for this open file ("maximally shrunk"), so
//!   a random reader gets none. A first read that is not at page 0 counts
//!   as such a miss.
//! - While the reader is inside the current window and no ahead window
//!   exists, the ahead window — the `next_size` pages after the current
//!   window — is submitted asynchronously. When the reader reaches it, it
//!   becomes the current window, and the next read inside it submits the
//!   next ahead window. A sequential `cat` thus keeps one window in flight
//!   beyond the one it reads, and the disk sees 128 KiB requests.
//! - If a window found every page already cached, `next_size` shrinks by
//!   one page (`check_ra_success`).
//! - A page the reader needs but readahead did not bring in
//!   (`handle_ra_miss`): with readahead off, a run of `max` sequential
//!   misses turns it back on; otherwise the window shrinks by `min` (it is
//!   thrashing).
//!
//! Pure state machine: [`RaState::on_read`] says which window to submit;
//! the caller submits it and reports how many pages it really read.

/// Readahead state of one open file (`struct file_ra_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaState {
    pub start: u64,
    pub size: u64,
    /// Pages of the next window; `None` once readahead is off.
    pub next_size: Option<u64>,
    pub ahead_start: u64,
    pub ahead_size: u64,
    pub prev_page: Option<u64>,
    /// Whether any read happened yet (the kernel's `next_size == 0`).
    started: bool,
}

/// A window the caller must submit: pages `[start, start + len)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub start: u64,
    pub len: u64,
    /// `true` for the ahead window (the reader does not wait for it).
    pub ahead: bool,
    orig_next_size: Option<u64>,
    first: bool,
}

impl RaState {
    pub fn new() -> Self {
        RaState::default()
    }

    pub fn is_off(&self) -> bool {
        self.started && self.next_size.is_none()
    }

    /// The reader is about to read page `offset`; `max` and `min` are the
    /// device's readahead limits in pages. Returns the window to submit.
    pub fn on_read(&mut self, offset: u64, max: u64, min: u64) -> Option<Window> {
        let _ = min;
        // Sub-page reads of the same page do not move the window.
        if self.started && self.prev_page == Some(offset) {
            return None;
        }
        if self.is_off() || max == 0 {
            return None;
        }
        let orig = self.next_size;
        if !self.started && offset == 0 {
            // First read from the first page: assume a whole-file read.
            self.started = true;
            self.next_size = Some(max / 2);
            self.prev_page = Some(offset);
            return self.do_io(offset, orig, true);
        }
        self.started = true;
        self.prev_page = Some(offset);
        let mut next = self.next_size.unwrap_or(0) as i64;
        if offset >= self.start && offset <= self.start + self.size {
            next += 2;
        } else {
            next -= 2;
        }
        let next = next.min(max as i64);
        if next <= 0 {
            self.next_size = None;
            self.size = 0;
            return None;
        }
        self.next_size = Some(next as u64);

        if offset < self.start || offset >= self.start + self.size {
            if self.ahead_size > 0 && offset == self.ahead_start {
                // Advanced into the ahead window: it becomes current.
                self.start = self.ahead_start;
                self.size = self.ahead_size;
                self.prev_page = Some(self.start);
                self.ahead_start = 0;
                self.ahead_size = 0;
                return None;
            }
            return self.do_io(offset, orig, false);
        }
        if self.ahead_size == 0 {
            self.ahead_start = self.start + self.size;
            self.ahead_size = next as u64;
            return Some(Window {
                start: self.ahead_start,
                len: self.ahead_size,
                ahead: true,
                orig_next_size: orig,
                first: false,
            });
        }
        None
    }

    /// The "unusual path": start a new current window at `offset`.
    fn do_io(&mut self, offset: u64, orig: Option<u64>, first: bool) -> Option<Window> {
        let size = self.next_size.unwrap_or(0);
        self.start = offset;
        self.size = size;
        self.ahead_start = 0;
        self.ahead_size = 0;
        Some(Window {
            start: offset,
            len: size,
            ahead: false,
            orig_next_size: orig,
            first,
        })
    }

    /// The caller submitted `window` and `actual` of its pages needed a
    /// read (`check_ra_success`; not applied to the first window, whose
    /// pages may all be cached without saying anything about the stream).
    pub fn submitted(&mut self, window: &Window, actual: u64) {
        if actual > 0 || window.first {
            return;
        }
        match window.orig_next_size {
            Some(n) if n > 1 => {
                self.next_size = Some(n - 1);
                if self.ahead_size > 0 {
                    self.ahead_size = n - 1;
                }
            }
            _ => {
                self.next_size = None;
                self.size = 0;
            }
        }
    }

    /// Page `offset` was needed and not in the cache (`handle_ra_miss`).
    pub fn on_miss(&mut self, offset: u64, max: u64, min: u64) {
        if self.is_off() {
            if self.prev_page.is_some_and(|p| offset == p + 1) {
                self.size += 1;
                if self.size >= max {
                    self.start = offset.saturating_sub(max);
                    self.next_size = Some(max);
                    self.size = max;
                    self.ahead_start = 0;
                    self.ahead_size = 0;
                }
            } else {
                self.size = self.size.saturating_sub(1);
            }
            self.prev_page = Some(offset);
        } else if let Some(n) = self.next_size {
            self.next_size = Some(n.saturating_sub(min).max(min));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed a sequential reader page by page; return the windows submitted.
    fn sequential(max: u64, pages: u64) -> Vec<Window> {
        let mut ra = RaState::new();
        let mut out = Vec::new();
        for p in 0..pages {
            if let Some(w) = ra.on_read(p, max, 4) {
                ra.submitted(&w, w.len);
                out.push(w);
            }
        }
        out
    }

    #[test]
    fn window_grows_to_the_maximum() {
        let ws = sequential(32, 300);
        let sizes: Vec<(u64, u64, bool)> = ws.iter().map(|w| (w.start, w.len, w.ahead)).collect();
        println!("128 KiB readahead windows: {sizes:?}");
        // First window: max/2 = 16 pages at once, for the reader to wait on.
        assert_eq!(sizes[0], (0, 16, false));
        // Second page read inside it: the ahead window, grown by 2.
        assert_eq!(sizes[1], (16, 18, true));
        // Then windows grow by 2 per page read until they reach max = 32.
        assert!(sizes[2].1 > 18 && sizes[2].1 <= 32);
        assert!(sizes[3..].iter().all(|&(_, len, ahead)| len == 32 && ahead));
        // Windows tile the file without gaps or overlaps.
        for w in ws.windows(2) {
            assert_eq!(w[0].start + w[0].len, w[1].start);
        }
    }

    #[test]
    fn eight_kib_readahead() {
        let ws = sequential(2, 20);
        let sizes: Vec<(u64, u64)> = ws.iter().map(|w| (w.start, w.len)).collect();
        println!("8 KiB readahead windows: {sizes:?}");
        assert_eq!(sizes[0], (0, 1));
        assert!(ws[2..].iter().all(|w| w.len == 2), "steady 8 KiB windows");
        for w in ws.windows(2) {
            assert_eq!(w[0].start + w[0].len, w[1].start);
        }
    }

    #[test]
    fn random_reads_turn_readahead_off() {
        let mut ra = RaState::new();
        let mut submitted = 0;
        for p in [5000u64, 17, 9000, 333, 12, 80000, 4242, 777] {
            if let Some(w) = ra.on_read(p, 32, 4) {
                submitted += w.len;
            }
        }
        assert_eq!(submitted, 0);
        assert!(ra.is_off());
        // A run of `max` sequential misses turns it back on (the first miss
        // at 100 is not sequential with page 777).
        let mut p = 100;
        while ra.is_off() {
            ra.on_miss(p, 32, 4);
            p += 1;
        }
        assert_eq!(p, 133);
        assert_eq!(ra.next_size, Some(32));
    }

    #[test]
    fn a_window_that_found_everything_cached_shrinks() {
        let mut ra = RaState::new();
        let w0 = ra.on_read(0, 32, 4).unwrap();
        ra.submitted(&w0, 16);
        let w1 = ra.on_read(1, 32, 4).unwrap();
        assert_eq!((w1.start, w1.len), (16, 18));
        ra.submitted(&w1, 0);
        // check_ra_success: next_size = the size before this call, minus one.
        assert_eq!(ra.next_size, Some(15));
        assert_eq!(ra.ahead_size, 15);
    }
}
