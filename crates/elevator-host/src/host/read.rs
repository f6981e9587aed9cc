//! Reading: `read(2)` through the page cache with readahead, and waiting
//! for a page.

use super::*;

impl Host {
    // ---------------------------------------------------------------
    // Reading.

    /// Make `page` of `file` up to date, reading it (alone) if absent.
    pub(super) fn ensure_page(
        &mut self,
        pid: Pid,
        file: FileId,
        page: u64,
        io: &mut Io<'_>,
    ) -> Wait<()> {
        match self.cache.state(file, page) {
            PageState::Uptodate => {
                self.cache.touch(file, page);
                Ok(())
            }
            PageState::Locked => {
                self.wait_page(pid, file, page);
                Err(Blocked)
            }
            PageState::Absent => {
                self.submit_window(pid, file, page, 1, io)?;
                if self.cache.state(file, page) == PageState::Locked {
                    self.wait_page(pid, file, page);
                }
                Err(Blocked)
            }
        }
    }

    /// Pages of `file` (its size rounded up).
    pub(super) fn pages_of(&self, file: FileId) -> u64 {
        self.fs.size(file).div_ceil(PAGE_SIZE)
    }

    /// Read the absent pages of `[start, start + len)` (clipped to the
    /// file): `__do_page_cache_readahead`. Reading the indirect blocks that
    /// map them comes first and may block. Returns the pages read.
    pub(super) fn submit_window(
        &mut self,
        pid: Pid,
        file: FileId,
        start: u64,
        len: u64,
        io: &mut Io<'_>,
    ) -> Wait<u64> {
        let end = (start + len).min(self.pages_of(file));
        if start >= end {
            return Ok(0);
        }
        let mut runs = std::mem::take(&mut self.runs);
        self.cache.absent_runs(file, start, end, &mut runs);
        if runs.is_empty() {
            self.runs = runs;
            return Ok(0);
        }
        // The indirect blocks mapping the first and last page of each run
        // (a run is at most a window, so it spans at most two).
        if file != FileId::BDEV {
            for &(s, n) in &runs {
                for b in [s, s + n - 1] {
                    for meta in self.fs.meta_path(file, b).into_iter().flatten() {
                        if let Err(e) = self.ensure_page(pid, FileId::BDEV, meta, io) {
                            self.runs = runs;
                            return Err(e);
                        }
                    }
                }
            }
        }
        let need = runs.iter().map(|&(_, n)| n).sum();
        if let Err(e) = self.reclaim24(pid, need, io) {
            self.runs = runs;
            return Err(e);
        }
        let mut total = 0;
        for &(s, n) in &runs {
            total += self.cache.insert_locked(file, s, s + n);
            self.issue(Issuer::Proc(pid), file, s, n, false, true, file, io);
        }
        self.runs = runs;
        Ok(total)
    }

    pub(super) fn do_read(&mut self, pid: Pid, op: &mut ReadOp, io: &mut Io<'_>) -> Step {
        if self.params.readahead == Readahead::Linux24 {
            return self.do_read24(pid, op, io);
        }
        let max = self.params.readahead_max_pages();
        let min = self.params.readahead_min_pages();
        let file = op.file;
        while op.pos < op.end {
            let page = op.pos / PAGE_SIZE;
            if op.ra_page != Some(page) {
                op.ra_page = Some(page);
                op.missed = false;
                let ra = self.procs[pid].ra.entry(file.0).or_default();
                op.pending = ra.on_read(page, max, min);
            }
            if let Some(w) = op.pending {
                match self.submit_window(pid, file, w.start, w.len, io) {
                    Ok(actual) => {
                        op.pending = None;
                        if let Some(ra) = self.procs[pid].ra.get_mut(&file.0) {
                            ra.submitted(&w, actual);
                        }
                    }
                    Err(Blocked) => return Step::Block,
                }
            }
            match self.cache.state(file, page) {
                PageState::Uptodate => {
                    self.cache.touch(file, page);
                    op.pos = ((page + 1) * PAGE_SIZE).min(op.end);
                }
                PageState::Locked => {
                    self.wait_page(pid, file, page);
                    return Step::Block;
                }
                PageState::Absent => {
                    if !op.missed {
                        op.missed = true;
                        if let Some(ra) = self.procs[pid].ra.get_mut(&file.0) {
                            ra.on_miss(page, max, min);
                        }
                    }
                    let _ = self.ensure_page(pid, file, page, io);
                    return Step::Block;
                }
            }
        }
        let n = op.end - op.start;
        Step::Done {
            ret: Ret::Bytes(n),
            cpu: self.params.copy_cost(n),
            io: Some(true),
        }
    }

    /// `do_generic_file_read` of 2.4 (mm/filemap.c, 2.4.20): per call,
    /// the read-ahead context is checked and `f_ramax` sized; per page, an
    /// up-to-date page calls `generic_file_readahead` (which may start an
    /// asynchronous read-ahead) and is copied; a page being read calls it
    /// as locked and waits; a missing page is read alone (`readpage`),
    /// then read-ahead runs as for a locked page, then the reader waits.
    /// After a wait the page is copied without another read-ahead call.
    pub(super) fn do_read24(&mut self, pid: Pid, op: &mut ReadOp, io: &mut Io<'_>) -> Step {
        let max = self.params.readahead_max_pages();
        let min = self.params.readahead_min_pages();
        let file = op.file;
        let end_index = self.fs.size(file) / PAGE_SIZE;
        let reada_ok = *op.reada_ok.get_or_insert_with(|| {
            let ra = self.procs[pid].ra24.entry(file.0).or_default();
            ra.begin_read(op.start, op.count, max, min)
        });
        loop {
            if let Some((start, len)) = op.pending24 {
                if self.submit_window(pid, file, start, len, io).is_err() {
                    return Step::Block;
                }
                op.pending24 = None;
            }
            if op.pos >= op.end {
                break;
            }
            let page = op.pos / PAGE_SIZE;
            let state = self.cache.state(file, page);
            let first_look = op.ra_page != Some(page);
            match state {
                PageState::Uptodate => {
                    if first_look {
                        op.ra_page = Some(page);
                        let ra = self.procs[pid].ra24.entry(file.0).or_default();
                        if let Some(a) = ra.readahead(reada_ok, page, false, end_index, max) {
                            op.pending24 = (a.len > 0).then_some((a.start, a.len));
                            continue;
                        }
                    }
                    self.cache.touch(file, page);
                    op.pos = ((page + 1) * PAGE_SIZE).min(op.end);
                }
                PageState::Locked => {
                    if first_look {
                        op.ra_page = Some(page);
                        let ra = self.procs[pid].ra24.entry(file.0).or_default();
                        if let Some(a) = ra.readahead(reada_ok, page, true, end_index, max) {
                            op.pending24 = (a.len > 0).then_some((a.start, a.len));
                            continue;
                        }
                    }
                    self.wait_page(pid, file, page);
                    return Step::Block;
                }
                PageState::Absent => {
                    // readpage: this page on its own (its indirect blocks
                    // first); then read-ahead sees it locked.
                    if self.submit_window(pid, file, page, 1, io).is_err() {
                        return Step::Block;
                    }
                    op.ra_page = Some(page);
                    let ra = self.procs[pid].ra24.entry(file.0).or_default();
                    if let Some(a) = ra.readahead(reada_ok, page, true, end_index, max) {
                        op.pending24 = (a.len > 0).then_some((a.start, a.len));
                    }
                }
            }
        }
        let n = op.end - op.start;
        Step::Done {
            ret: Ret::Bytes(n),
            cpu: self.params.copy_cost(n),
            io: Some(true),
        }
    }
}
