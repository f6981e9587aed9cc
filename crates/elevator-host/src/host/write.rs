//! Writing: `write(2)` into the page cache, dirty-page throttling
//! (2.6's `balance_dirty_pages`, 2.4's `balance_dirty` and bdflush), 2.4's
//! reclaim and `writeback_inodes`.

use super::*;

impl Host {
    // ---------------------------------------------------------------
    // Writing.

    pub(super) fn do_write(&mut self, pid: Pid, op: &mut WriteOp, io: &mut Io<'_>) -> Step {
        let file = op.file;
        if !op.inode_done {
            let ib = self.fs.inode_block(file);
            if self.ensure_page(pid, FileId::BDEV, ib, io).is_err() {
                return Step::Block;
            }
            op.inode_done = true;
        }
        loop {
            if let Some(mut th) = op.throttle {
                let r = self.balance_dirty_pages(pid, &mut th, io);
                op.throttle = Some(th);
                if r.is_err() {
                    return Step::Block;
                }
                op.throttle = None;
            }
            if op.balance > 0 && self.balance_dirty(pid, &mut op.balance, io).is_err() {
                return Step::Block;
            }
            if op.pos >= op.end {
                break;
            }
            if let Some(n) = self.segctor_lock_held() {
                self.wait_writes(pid, WaitCond::Logged(n));
                return Step::Block;
            }
            // ext3: a write(2) that modifies the inode (a new mtime second,
            // or `i_disksize`) does so through `ext3_mark_inode_dirty` →
            // `journal_get_write_access` on its inode table block, which
            // sleeps while a commit writes that block to the log.
            if self.inode_update_waits(file, op.end > self.fs.size(file), io.now()) {
                let ib = self.fs.inode_block(file);
                if let Some(seq) = self.journal_shadowed(ib) {
                    self.wait_writes(pid, WaitCond::FileWrites { file: JOURNAL, seq });
                    return Step::Block;
                }
            }
            let page = op.pos / PAGE_SIZE;
            let chunk_end = (page / CHUNK_PAGES + 1) * CHUNK_PAGES * PAGE_SIZE;
            let mut stop = op.end.min(chunk_end);
            let mut last = (stop - 1) / PAGE_SIZE;
            let old_size = self.fs.size(file);
            let old_blocks = self.fs.inode(file).nblocks();
            // Mapping already-allocated blocks needs their indirect blocks.
            if page < old_blocks {
                for b in [page, last.min(old_blocks - 1)] {
                    for meta in self.fs.meta_path(file, b).into_iter().flatten() {
                        if self.ensure_page(pid, FileId::BDEV, meta, io).is_err() {
                            return Step::Block;
                        }
                    }
                }
            }
            // A page being read must finish first; a partly overwritten page
            // of old data is read first.
            for p in page..=last {
                if self.cache.state(file, p) == PageState::Locked {
                    self.wait_page(pid, file, p);
                    return Step::Block;
                }
            }
            // 2.4: the pages to allocate may cost reclaim I/O first (the
            // count is only needed there).
            if self.params.writeback != Writeback::Pdflush {
                let absent = (page..=last)
                    .filter(|&p| self.cache.state(file, p) == PageState::Absent)
                    .count() as u64;
                if self.reclaim24(pid, absent, io).is_err() {
                    return Step::Block;
                }
            }
            for (p, partial) in [
                (page, !op.pos.is_multiple_of(PAGE_SIZE)),
                (last, !stop.is_multiple_of(PAGE_SIZE)),
            ] {
                if partial
                    && p * PAGE_SIZE < old_size
                    && self.ensure_page(pid, file, p, io).is_err()
                {
                    return Step::Block;
                }
            }
            let now = io.now();
            if stop > old_size {
                let colour = self.procs[pid].task.0;
                let (new_meta, full) = match self.fs.extend_to(file, stop, colour) {
                    Ok(meta) => (meta, false),
                    Err(NoSpace { meta }) => (meta, true),
                };
                for m in new_meta {
                    self.dirty_meta(m, Some(file), now, io);
                }
                let ib = self.fs.inode_block(file);
                self.dirty_meta(ib, Some(file), now, io);
                if full {
                    // Data goes only where blocks were had: the write ends
                    // there, short, or fails with ENOSPC if nothing fit.
                    let room = self.fs.inode(file).nblocks() * self.fs.geo.block_size;
                    op.end = room.clamp(op.pos, op.end);
                    op.full = true;
                    stop = op.end;
                    if stop <= op.pos {
                        break;
                    }
                    last = (stop - 1) / PAGE_SIZE;
                }
            }
            let n = self.cache.dirty_range(file, page, last + 1, now);
            self.data_dirtied(file, n, now, io);
            self.stats.peak_dirty_pages = self.stats.peak_dirty_pages.max(self.cache.dirty());
            self.stats.peak_dirty_writeback_pages = self
                .stats
                .peak_dirty_writeback_pages
                .max(self.cache.dirty() + self.cache.writeback());
            op.pos = stop;
            if let Writeback::Bdflush(_) = self.params.writeback {
                // `__block_commit_write` calls `balance_dirty` once per
                // page that got a newly dirty buffer.
                op.balance = n;
                continue;
            }
            self.ratelimit_count += n;
            let limit = if self.dirty_exceeded {
                RATELIMIT_EXCEEDED_PAGES
            } else {
                self.params.ratelimit_pages()
            };
            if self.ratelimit_count >= limit {
                self.ratelimit_count = 0;
                op.throttle = Some(Throttle {
                    pages_written: 0,
                    written: 0,
                    stage: ThrottleStage::Check,
                });
            }
        }
        let n = op.end - op.start;
        if op.full && n == 0 {
            return Step::Done {
                ret: Ret::Err(Errno::NoSpace),
                cpu: self.params.syscall_cpu,
                io: None,
            };
        }
        Step::Done {
            ret: Ret::Bytes(n),
            cpu: self.params.copy_cost(n),
            io: Some(false),
        }
    }

    /// `balance_dirty_pages`, resumable.
    pub(super) fn balance_dirty_pages(
        &mut self,
        pid: Pid,
        th: &mut Throttle,
        io: &mut Io<'_>,
    ) -> Wait<()> {
        let (background, thresh) = self.params.dirty_limits();
        let chunk = self.params.sync_writeback_pages();
        loop {
            let over = self.cache.dirty() + self.cache.writeback() > thresh;
            match th.stage {
                ThrottleStage::Check => {
                    if !over {
                        break;
                    }
                    self.dirty_exceeded = true;
                    if self.params.io_less_throttling {
                        // 3.2+: the writer only waits; the flusher writes.
                        if !self.flusher.background && !self.flusher.kupdate {
                            self.flusher.background = true;
                            self.kick_flusher(io);
                        }
                        self.stats.throttle_waits += 1;
                        self.congestion_wait(pid, io);
                        return Err(Blocked);
                    }
                    if self.cache.dirty() > 0 {
                        let ctl = WbCtl {
                            budget: chunk,
                            nonblocking: false,
                            older_than: None,
                            issuer: Issuer::Proc(pid),
                            sync: false,
                        };
                        let (written, _) = self.writeback_inodes(ctl, io);
                        self.stats.pages_written_by_writers += written;
                        th.written = written;
                        th.stage = ThrottleStage::AfterWrite;
                        if self.writes_in_flight > self.params.nr_requests {
                            // get_request_wait: no free request for the last ones.
                            self.wait_writes(pid, WaitCond::SlotsBelow(self.params.nr_requests));
                            self.stats.throttle_waits += 1;
                            return Err(Blocked);
                        }
                        continue;
                    }
                    self.congestion_wait(pid, io);
                    return Err(Blocked);
                }
                ThrottleStage::AfterWrite => {
                    if !over {
                        break;
                    }
                    th.pages_written += th.written;
                    th.written = 0;
                    if th.pages_written >= chunk && !self.params.throttle_until_below_limit {
                        // 2.5.65+: "We've done our duty".
                        self.stats.throttle_exits_over_limit += 1;
                        break;
                    }
                    th.stage = ThrottleStage::Check;
                    self.congestion_wait(pid, io);
                    return Err(Blocked);
                }
            }
        }
        if self.cache.dirty() + self.cache.writeback() <= thresh {
            self.dirty_exceeded = false;
        }
        if !self.flusher.background && !self.flusher.kupdate && self.cache.dirty() > background {
            self.flusher.background = true;
            self.kick_flusher(io);
        }
        Ok(())
    }

    // ---------------------------------------------------------------
    // 2.4's writeback (crate::bdflush): bdflush, kupdated, balance_dirty,
    // reclaim that writes.

    /// Whether the host's write requests fill the queue's write list: a
    /// 2.4 submitter sleeps in `__get_request_wait`.
    pub(super) fn write_slots_full(&self) -> bool {
        self.writes_in_flight >= self.params.nr_requests
    }

    /// Whether bdflush or kupdated must sleep for a request: the list is
    /// full, or a process sleeps for one already (`__get_request_wait`
    /// queues sleepers first come, first served).
    pub(super) fn daemon_must_wait(&self) -> bool {
        self.write_slots_full()
            || self
                .write_waiters
                .iter()
                .any(|&(_, _, c)| matches!(c, WaitCond::SlotsBelow(_)))
    }

    /// `write_some_buffers`: start writeback of up to `NRSYNC` dirty pages
    /// from the head of the dirty list, skipping pages already under I/O,
    /// as requests of `issuer`. Returns the pages submitted.
    pub(super) fn write_some_buffers(&mut self, issuer: Issuer, io: &mut Io<'_>) -> u64 {
        let mut written = 0;
        let mut after = None;
        while written < NRSYNC {
            let Some((pos, file, base)) = self.cache.next_dirty_chunk(after) else {
                break;
            };
            after = Some(pos);
            let mut from = base;
            while written < NRSYNC {
                let Some((s, n)) =
                    self.cache
                        .start_writeback(file, from, base + CHUNK_PAGES, NRSYNC - written)
                else {
                    break;
                };
                self.issue(issuer, file, s, n, true, false, file, io);
                written += n;
                from = s + n;
            }
        }
        written
    }

    /// `balance_dirty`, resumable: `calls` is what is left of one call per
    /// page the writer dirtied. Above `nfract_sync` each call writes
    /// `NRSYNC` buffers itself, and sleeps while its requests wait for a
    /// free one.
    pub(super) fn balance_dirty(&mut self, pid: Pid, calls: &mut u64, io: &mut Io<'_>) -> Wait<()> {
        let Writeback::Bdflush(p) = self.params.writeback else {
            *calls = 0;
            return Ok(());
        };
        let tot = self.params.buffer_pages();
        while *calls > 0 {
            match bdflush::balance_dirty_state(&p, self.cache.dirty(), tot) {
                // Dirty pages only fall during these calls: the rest would
                // find the same.
                DirtyState::Balanced => *calls = 0,
                DirtyState::Async => {
                    self.wakeup_bdflush(io);
                    *calls = 0;
                }
                DirtyState::Sync => {
                    self.wakeup_bdflush(io);
                    let n = self.write_some_buffers(Issuer::Proc(pid), io);
                    self.stats.pages_written_by_writers += n;
                    *calls = if n == 0 { 0 } else { *calls - 1 };
                    if self.writes_in_flight > self.params.nr_requests {
                        // Its buffers wait for requests in the block layer,
                        // and so does it.
                        let free = self.params.nr_requests.saturating_sub(1);
                        self.wait_writes(pid, WaitCond::SlotsBelow(free));
                        self.stats.throttle_waits += 1;
                        return Err(Blocked);
                    }
                }
            }
        }
        Ok(())
    }

    /// `wakeup_bdflush`: a sleeping bdflush starts a cycle.
    pub(super) fn wakeup_bdflush(&mut self, io: &mut Io<'_>) {
        if let Writeback::Bdflush(p) = self.params.writeback {
            if !self.bd.awake {
                self.bd.awake = true;
                self.bd.ndirty = p.ndirty as i64;
                self.bdflush_run(io);
            }
        }
    }

    /// kupdated's `sync_old_buffers`, then bdflush's cycles, as far as free
    /// requests let them (both sleep for one in `__get_request_wait` and go
    /// on from a write completion).
    pub(super) fn bdflush_run(&mut self, io: &mut Io<'_>) {
        let Writeback::Bdflush(p) = self.params.writeback else {
            return;
        };
        let age = self.params.dirty_expire();
        while self.bd.kupdate {
            let expired = self
                .cache
                .next_dirty_chunk(None)
                .is_some_and(|((dirtied, _), _, _)| dirtied + age <= io.now());
            if !expired {
                self.finish_kupdated(io);
                break;
            }
            if self.daemon_must_wait() {
                return;
            }
            if self.write_some_buffers(Issuer::Flusher, io) < NRSYNC {
                self.finish_kupdated(io);
            }
        }
        let tot = self.params.buffer_pages();
        while self.bd.awake {
            if self.bd.ndirty <= 0 {
                if bdflush::bdflush_stop(&p, self.cache.dirty(), tot) {
                    self.bd.awake = false;
                    break;
                }
                self.bd.ndirty = p.ndirty as i64;
            }
            if self.daemon_must_wait() {
                return;
            }
            if self.write_some_buffers(Issuer::Flusher, io) < NRSYNC {
                // The list ran dry before the cycle ended: sleep.
                self.bd.awake = false;
                break;
            }
            self.bd.ndirty -= NRSYNC as i64;
        }
    }

    /// kupdated sleeps `interval` after a pass.
    pub(super) fn finish_kupdated(&mut self, io: &mut Io<'_>) {
        self.bd.kupdate = false;
        let interval = self.params.dirty_writeback_interval();
        if interval > Duration::ZERO {
            self.arm(io.now() + interval, TimerAction::Kupdate, io);
        }
    }

    /// 2.4's page reclaim before `need` pages are allocated
    /// (`__alloc_pages` → `try_to_free_pages` → `shrink_cache`): the
    /// allocating process writes the dirty pages it meets in the first
    /// pass's share of the LRU tail (`sync_page_buffers`, `writepage`)
    /// and, when the clean pages it met there do not cover the
    /// allocation, waits for the page under writeback nearest the tail
    /// and scans again. The pdflush host never writes
    /// from reclaim: it returns at once.
    pub(super) fn reclaim24(&mut self, pid: Pid, need: u64, io: &mut Io<'_>) -> Wait<()> {
        if self.params.writeback == Writeback::Pdflush
            || self.cache.present() + need <= self.cache.capacity()
        {
            return Ok(());
        }
        // The first pass of `try_to_free_pages` scans 1/DEF_PRIORITY of
        // the inactive list (`max_scan = nr_inactive_pages / priority`).
        let max_scan = self.cache.present() / DEF_PRIORITY;
        let scan = self.cache.tail_scan(need, max_scan);
        for &(file, base) in &scan.busy {
            let mut from = base;
            while let Some((s, n)) =
                self.cache
                    .start_writeback(file, from, base + CHUNK_PAGES, CHUNK_PAGES)
            {
                self.issue(Issuer::Proc(pid), file, s, n, true, false, file, io);
                self.stats.reclaim_pages_written += n;
                from = s + n;
            }
        }
        // `try_to_free_buffers` on a busy page wakes bdflush when dirty
        // buffers are past `nfract`.
        if let Writeback::Bdflush(p) = self.params.writeback {
            let tot = self.params.buffer_pages();
            if !scan.busy.is_empty()
                && bdflush::balance_dirty_state(&p, self.cache.dirty(), tot) != DirtyState::Balanced
            {
                self.wakeup_bdflush(io);
            }
        }
        if scan.enough {
            return Ok(());
        }
        // Too few clean pages: wait for the write of the page under
        // writeback nearest the tail (its own, or bdflush's).
        let oldest = scan.busy.iter().find_map(|&(file, base)| {
            self.tags
                .values()
                .filter(|t| {
                    t.write
                        && t.file == file
                        && t.page < base + CHUNK_PAGES
                        && t.page + t.pages > base
                })
                .map(|t| (t.owner, t.seq))
                .min_by_key(|&(_, seq)| seq)
        });
        match oldest {
            Some((file, seq)) => {
                self.wait_writes(pid, WaitCond::FileWrites { file, seq });
                self.stats.reclaim_stalls += 1;
                Err(Blocked)
            }
            // Nothing under writeback to wait for: the cache grows
            // (`make_room` counts an overcommit).
            None => Ok(()),
        }
    }

    /// `writeback_inodes`: dirty files oldest first (file data before the
    /// block device's metadata, as the kernel walks the ext2 superblock
    /// before the block device's), each from where its last writeback
    /// stopped. Returns pages written and whether it stopped at congestion.
    pub(super) fn writeback_inodes(&mut self, ctl: WbCtl, io: &mut Io<'_>) -> (u64, bool) {
        if matches!(self.fsl, FsLayer::Log(..)) {
            // nilfs_writepages ignores WB_SYNC_NONE; segctord writes.
            return (0, false);
        }
        let mut written = 0;
        for metadata in [false, true] {
            let mut after = None;
            while let Some((since, file)) = self.cache.next_dirty_file(after) {
                after = Some((since, file.0));
                if (file == FileId::BDEV) != metadata {
                    continue;
                }
                if ctl.older_than.is_some_and(|t| since > t) {
                    break;
                }
                let (n, congested) = self.write_file(file, ctl, ctl.budget - written, file, io);
                written += n;
                if congested {
                    return (written, true);
                }
                if written >= ctl.budget {
                    return (written, false);
                }
            }
        }
        (written, false)
    }
}
