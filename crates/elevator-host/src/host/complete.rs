//! Completions and the flusher: a finished request wakes its waiters and
//! ends writeback of its pages; pdflush and the 2.6.32 flusher thread.

use super::*;

impl Host {
    // ---------------------------------------------------------------
    // Completions and the flusher.

    pub(super) fn on_complete(&mut self, done: &Completion, io: &mut Io<'_>) {
        let Some(tag) = self.tags.remove(&done.id) else {
            panic!("host: completion of unknown request {:?}", done.id);
        };
        let end = tag.page + tag.pages;
        if done.error.is_some() {
            self.count_error(tag.issuer);
        }
        if !tag.write {
            if done.error.is_some() {
                // The pages leave the cache; whoever waits for them wakes
                // and reads them again. (Linux retries once in `readpage`
                // and then returns EIO; here the retry repeats until the
                // read succeeds, which injected faults, each below one half,
                // let it do.)
                self.cache.fail_read(tag.file, tag.page, end);
            } else {
                self.cache.mark_uptodate(tag.file, tag.page, end);
            }
            let mut c = tag.page / CHUNK_PAGES;
            while c * CHUNK_PAGES < end {
                let key = (u64::from(tag.file.0) << 32) | c;
                if let Some(waiters) = self.page_waiters.remove(&key) {
                    for (pid, gen) in waiters {
                        self.wake(pid, gen);
                    }
                }
                c += 1;
            }
            return;
        }
        if tag.file != RAW {
            self.cache.end_writeback(tag.file, tag.page, end);
        }
        if tag.slot {
            self.writes_in_flight -= 1;
        }
        self.outstanding.remove(&tag.seq);
        if let Some(v) = self.file_writes.get_mut(&tag.owner.0) {
            v.remove(&tag.seq);
            if v.is_empty() {
                self.file_writes.remove(&tag.owner.0);
            }
        }
        if tag.issuer == Issuer::Flusher {
            let stats = &mut self.rows[self.pdflush_row].stats;
            stats.record(
                done.completed,
                false,
                tag.pages * PAGE_SIZE,
                done.completed.since(done.submitted),
            );
        }
        let cleared = match io.write_congested() {
            Some(bit) => !bit,
            None => self.writes_in_flight < self.params.congestion_off(),
        };
        if self.congested && cleared {
            self.congested = false;
            for (pid, gen) in std::mem::take(&mut self.congestion_waiters) {
                self.wake(pid, gen);
            }
            if self.flusher.waiting {
                self.flusher_woken(io);
            }
        }
        match self.fsl {
            FsLayer::Plain => {}
            FsLayer::Journal(_) => self.kjournald(io),
            FsLayer::Log(..) => self.segctor_step(io),
        }
        if !self.write_waiters.is_empty() {
            let waiters = std::mem::take(&mut self.write_waiters);
            for (pid, gen, cond) in waiters {
                if self.procs[pid].gen != gen || self.procs[pid].exited {
                    continue;
                }
                if self.satisfied(cond) {
                    self.wake(pid, gen);
                } else {
                    self.write_waiters.push((pid, gen, cond));
                }
            }
        }
        if self.bd.awake || self.bd.kupdate {
            self.bdflush_run(io);
        }
    }

    /// A request of `issuer` failed: the process's (or the flusher's) row
    /// counts it. A failed write's pages are clean anyway, their data lost,
    /// as after the kernel's `end_page_writeback` with an error (which
    /// also marks the mapping so that a later fsync returns EIO).
    pub(super) fn count_error(&mut self, issuer: Issuer) {
        let row = match issuer {
            Issuer::Proc(pid) => self.procs[pid].row,
            Issuer::Flusher | Issuer::Daemon => self.pdflush_row,
        };
        self.rows[row].stats.errors += 1;
    }

    pub(super) fn kick_flusher(&mut self, io: &mut Io<'_>) {
        if !self.flusher.waiting {
            self.flusher_run(io);
        }
    }

    pub(super) fn flusher_wait(&mut self, congested: bool, io: &mut Io<'_>) {
        self.flusher.waiting = true;
        self.flusher.wait_congested = congested;
        self.flusher.gen += 1;
        let gen = self.flusher.gen;
        self.arm(
            io.now() + CONGESTION_WAIT,
            TimerAction::FlusherWake(gen),
            io,
        );
    }

    pub(super) fn flusher_woken(&mut self, io: &mut Io<'_>) {
        self.flusher.waiting = false;
        self.flusher.gen += 1;
        if self.flusher.background && !self.flusher.wait_congested {
            // background_writeout: wrote less than asked, not congested.
            self.flusher.background = false;
        }
        self.flusher_run(io);
    }

    /// pdflush: background writeout first, then a pending kupdate pass.
    pub(super) fn flusher_run(&mut self, io: &mut Io<'_>) {
        let budget = self.params.max_writeback_pages;
        loop {
            if self.flusher.background {
                let (background, _) = self.params.dirty_limits();
                if self.cache.dirty() < background {
                    self.flusher.background = false;
                    continue;
                }
                let ctl = WbCtl {
                    budget,
                    nonblocking: true,
                    older_than: None,
                    issuer: Issuer::Flusher,
                    sync: false,
                };
                let (written, congested) = self.writeback_inodes(ctl, io);
                if written < budget {
                    self.flusher_wait(congested, io);
                    return;
                }
                continue;
            }
            if self.flusher.kupdate {
                if self.flusher.kupdate_left <= 0 {
                    self.finish_kupdate(io);
                    continue;
                }
                let oldest = Instant(
                    io.now()
                        .nanos()
                        .saturating_sub(self.params.dirty_expire().nanos()),
                );
                let ctl = WbCtl {
                    budget,
                    nonblocking: true,
                    older_than: Some(oldest),
                    issuer: Issuer::Flusher,
                    sync: false,
                };
                let (written, congested) = self.writeback_inodes(ctl, io);
                self.flusher.kupdate_left -= written as i64;
                if written < budget {
                    if congested {
                        self.flusher_wait(true, io);
                        return;
                    }
                    self.finish_kupdate(io);
                }
                continue;
            }
            return;
        }
    }

    pub(super) fn finish_kupdate(&mut self, io: &mut Io<'_>) {
        self.flusher.kupdate = false;
        let interval = self.params.dirty_writeback_interval();
        if interval > Duration::ZERO {
            let next =
                (self.flusher.kupdate_start + interval).max(io.now() + Duration::from_secs(1));
            self.arm(next, TimerAction::Kupdate, io);
        }
    }
}
