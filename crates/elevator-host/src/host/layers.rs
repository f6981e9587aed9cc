//! What ext3 and nilfs2 add to ext2's behaviour ([`crate::fs::ext3`],
//! [`crate::fs::nilfs2`]): metadata dirtied into the running transaction,
//! kjournald's commits, and nilfs2's segment constructor (segctord).

use super::*;

impl Host {
    // ---------------------------------------------------------------
    // What ext3 and nilfs2 add (fs::ext3, fs::nilfs2).

    /// Metadata block `block` is dirtied (for `file`): the page cache in
    /// every file system, and ext3's running transaction.
    pub(super) fn dirty_meta(
        &mut self,
        block: u64,
        file: Option<FileId>,
        now: Instant,
        io: &mut Io<'_>,
    ) {
        self.cache.dirty_range(FileId::BDEV, block, block + 1, now);
        if let FsLayer::Journal(j) = &mut self.fsl {
            let tid = j.running.tid;
            if let Some(at) = j.dirty_meta(block, file, now) {
                self.arm(at, TimerAction::JournalCommit(tid), io);
            }
            self.kjournald(io);
        }
    }

    /// ext3: the log write to wait for before modifying metadata block
    /// `block`, if a commit has it in flight ([`ext3::Journal::shadowed`]); counts
    /// the wait.
    pub(super) fn journal_shadowed(&mut self, block: u64) -> Option<u64> {
        let FsLayer::Journal(j) = &mut self.fsl else {
            return None;
        };
        let seq = j.shadowed(block)?;
        j.stats.shadow_waits += 1;
        Some(seq)
    }

    /// ext3: does a `write(2)` of `file` at `now` (extending it or not)
    /// modify the inode ([`ext3::Journal::mtime_changes`])? If so the
    /// mtime is taken as set: the caller either waits and asks again or
    /// goes on to dirty the inode.
    pub(super) fn inode_update_waits(&mut self, file: FileId, extends: bool, now: Instant) -> bool {
        let FsLayer::Journal(j) = &mut self.fsl else {
            return false;
        };
        let changes = extends || j.mtime_changes(file, now);
        if changes {
            j.set_mtime(file, now);
        }
        changes
    }

    /// A directory block `page` of `dir` got an entry for `file`: ext3
    /// journals it; nilfs2's transaction ends.
    pub(super) fn dir_dirtied(
        &mut self,
        dir: FileId,
        page: u64,
        file: FileId,
        now: Instant,
        io: &mut Io<'_>,
    ) {
        match &mut self.fsl {
            FsLayer::Plain => {}
            FsLayer::Journal(j) => {
                let block = self.fs.map(dir, page).unwrap_or(0);
                let tid = j.running.tid;
                if let Some(at) = j.dirty_meta(block, Some(file), now) {
                    self.arm(at, TimerAction::JournalCommit(tid), io);
                }
                self.kjournald(io);
            }
            FsLayer::Log(..) => self.segctor_dirtied(now, io),
        }
    }

    /// `write(2)` dirtied `pages` pages of `file`: ext3 files them in the
    /// running transaction and dirties the inode (`file_update_time`);
    /// nilfs2's transaction ends (timer, watermark).
    pub(super) fn data_dirtied(&mut self, file: FileId, pages: u64, now: Instant, io: &mut Io<'_>) {
        match &mut self.fsl {
            FsLayer::Plain => {}
            FsLayer::Journal(j) => {
                let tid = j.running.tid;
                let timer = j.dirty_data(file, pages, now);
                if let Some(at) = timer {
                    self.arm(at, TimerAction::JournalCommit(tid), io);
                }
                let ib = self.fs.inode_block(file);
                self.dirty_meta(ib, Some(file), now, io);
            }
            FsLayer::Log(..) => self.segctor_dirtied(now, io),
        }
    }

    /// Write `n` blocks from disk block `disk` as requests of `issuer`,
    /// each at most `max_sectors`: pages `[page, page + n)` of `cache` if
    /// given (their writeback ends on completion), else no page ([`RAW`]).
    /// `mark` says which of the requests carry the sync hint.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn issue_at(
        &mut self,
        issuer: Issuer,
        cache: Option<(FileId, u64)>,
        disk: u64,
        n: u64,
        mark: SyncMark,
        owner: FileId,
        io: &mut Io<'_>,
    ) {
        let max_pages = (u64::from(self.params.max_sectors) * 512 / PAGE_SIZE).max(1);
        let spb = self.fs.geo.sectors_per_block();
        let mut off = 0;
        while off < n {
            let k = (n - off).min(max_pages);
            let last = off + k == n;
            let (sync, noidle) = match mark {
                SyncMark::Async => (false, false),
                SyncMark::Last { noidle } => (last, noidle && last),
                SyncMark::Every => (true, true),
            };
            let id = io.submit(BlockIo {
                op: Op::Write,
                sync,
                sector: self.fs.geo.sector_of(disk + off),
                sectors: (k * spb) as u32,
                task: self.daemon_task(),
                prio: IoPrio::default(),
                group: GroupId::ROOT,
                meta: false,
                noidle,
            });
            self.write_seq += 1;
            let seq = self.write_seq;
            self.outstanding.insert(seq);
            self.file_writes.entry(owner.0).or_default().insert(seq);
            self.writes_in_flight += 1;
            if self.is_congested(io) {
                self.congested = true;
            }
            self.stats.write_requests += 1;
            self.stats.pages_written += k;
            let (file, page) = cache.map_or((RAW, 0), |(f, p)| (f, p + off));
            self.tags.insert(
                id,
                Tag {
                    file,
                    page,
                    pages: k,
                    write: true,
                    seq,
                    owner,
                    issuer,
                    slot: true,
                },
            );
            off += k;
        }
    }

    /// kjournald: move the committing transaction through its phases as
    /// its writes complete, and start the next commit when one is asked
    /// for (`journal_commit_transaction`, fs/jbd/commit.c 2.6.32).
    pub(super) fn kjournald(&mut self, io: &mut Io<'_>) {
        loop {
            let FsLayer::Journal(j) = &mut self.fsl else {
                return;
            };
            let Some(c) = &j.committing else {
                let seq = self.write_seq;
                let FsLayer::Journal(j) = &mut self.fsl else {
                    return;
                };
                let Some(c) = j.start_commit(seq) else {
                    return;
                };
                // Ordered mode: the transaction's data first from kjournald
                // (journal_submit_data_buffers): WRITE, or WRITE_SYNC_PLUG
                // for a synchronous commit.
                let files = c.files.clone();
                let synchronous = c.synchronous;
                if !files.is_empty() {
                    let ctl = WbCtl {
                        budget: u64::MAX,
                        nonblocking: false,
                        older_than: None,
                        issuer: Issuer::Daemon,
                        sync: synchronous,
                    };
                    for &f in &files {
                        self.write_file(f, ctl, u64::MAX, f, io);
                    }
                    let seq = self.write_seq;
                    if let FsLayer::Journal(j) = &mut self.fsl {
                        j.committing.as_mut().expect("committing").seq = seq;
                    }
                } else {
                    self.journal_log_phase(io);
                }
                continue;
            };
            let (phase, seq) = (c.phase, c.seq);
            let done = match phase {
                Phase::Data => {
                    let files = c.files.clone();
                    files
                        .iter()
                        .all(|&file| self.satisfied(WaitCond::FileWrites { file, seq }))
                }
                Phase::Log | Phase::CommitBlock => {
                    self.satisfied(WaitCond::FileWrites { file: JOURNAL, seq })
                }
            };
            if !done {
                return;
            }
            match phase {
                Phase::Data => self.journal_log_phase(io),
                Phase::Log => {
                    // The commit block: sync_dirty_buffer, WRITE_SYNC.
                    let FsLayer::Journal(j) = &mut self.fsl else {
                        return;
                    };
                    let runs = j.take_log(1);
                    for (b, n) in runs {
                        self.issue_at(Issuer::Daemon, None, b, n, SyncMark::Every, JOURNAL, io);
                    }
                    let seq = self.write_seq;
                    if let FsLayer::Journal(j) = &mut self.fsl {
                        let c = j.committing.as_mut().expect("committing");
                        c.phase = Phase::CommitBlock;
                        c.seq = seq;
                    }
                }
                Phase::CommitBlock => {
                    if let FsLayer::Journal(j) = &mut self.fsl {
                        j.finish_commit();
                    }
                }
            }
        }
    }

    /// A commit writes its descriptors and block copies at the journal's
    /// head: `WRITE`, or `WRITE_SYNC_PLUG` for a synchronous commit
    /// (2.6.30's fsync).
    pub(super) fn journal_log_phase(&mut self, io: &mut Io<'_>) {
        let FsLayer::Journal(j) = &mut self.fsl else {
            return;
        };
        let c = j.committing.as_ref().expect("committing");
        let (n, synchronous) = (c.log_blocks, c.synchronous);
        let runs = j.take_log(n);
        let mark = if synchronous {
            SyncMark::Every
        } else {
            SyncMark::Async
        };
        for (b, k) in runs {
            self.issue_at(Issuer::Daemon, None, b, k, mark, JOURNAL, io);
        }
        let seq = self.write_seq;
        if let FsLayer::Journal(j) = &mut self.fsl {
            let c = j.committing.as_mut().expect("committing");
            c.phase = Phase::Log;
            c.seq = seq;
        }
    }

    /// nilfs2: lay the log out at the first use, past the segments the
    /// file sets placed before the run occupy (segment 0 starts after the
    /// super block, block 1).
    pub(super) fn nilfs_mount(&mut self) {
        if let FsLayer::Log(o, log @ None) = &mut self.fsl {
            let used = self.fs.used_end();
            *log = Some(Box::new(Log::new(*o, 1, self.fs.geo.blocks, used)));
        }
    }

    /// nilfs2: the construction a `write(2)` must wait for, if one is
    /// running. `nilfs_write_begin` starts a transaction, which takes
    /// `ns_segctor_sem` for reading (`nilfs_transaction_begin`); segctord
    /// holds it for writing through a whole construction, including the
    /// wait for its log's I/O (`nilfs_segctor_thread_construct` →
    /// `nilfs_transaction_lock`; `nilfs_segctor_write` → `nilfs_segbuf_wait`;
    /// fs/nilfs2/segment.c of v2.6.30). The semaphore queues in order, so a
    /// writer that waited goes on once that construction is done, even if
    /// another was queued behind it.
    pub(super) fn segctor_lock_held(&self) -> Option<u64> {
        let l = self.nilfs_log()?;
        l.waiting_seq.map(|_| l.started)
    }

    /// nilfs2: a transaction ended at `now`: arm the checkpoint timer, and
    /// above the watermark start a log at once.
    pub(super) fn segctor_dirtied(&mut self, now: Instant, io: &mut Io<'_>) {
        self.nilfs_mount();
        let FsLayer::Log(_, Some(l)) = &mut self.fsl else {
            return;
        };
        if let Some((at, gen)) = l.transaction_end(now) {
            self.arm(at, TimerAction::SegctorTimer(gen), io);
        }
        if self.cache.dirty() > nilfs2::SC_DEFAULT_WATERMARK {
            let sr = self.nilfs_log().is_some_and(|l| l.super_root_due(now));
            self.segctor_construct(sr, io);
        }
    }

    /// segctord builds a log of every dirty block, in log order, with a
    /// super root (a checkpoint) if `super_root`; if one is being written
    /// the next is queued. Returns the construction count to wait for.
    pub(super) fn segctor_construct(&mut self, super_root: bool, io: &mut Io<'_>) -> u64 {
        let now = io.now();
        self.nilfs_mount();
        let FsLayer::Log(_, Some(l)) = &mut self.fsl else {
            return 0;
        };
        if l.waiting_seq.is_some() {
            l.again = Some(l.again.unwrap_or(false) || super_root);
            return l.started + 1;
        }
        l.begin(super_root, now);
        let mut l = match &mut self.fsl {
            FsLayer::Log(_, log) => log.take().expect("the log"),
            _ => unreachable!("nilfs2"),
        };
        // Data files first, then the block device's metadata (the files'
        // B-tree nodes and inodes), as a log orders its payload.
        let mut files = Vec::new();
        let mut after = None;
        while let Some((since, file)) = self.cache.next_dirty_file(after) {
            after = Some((since, file.0));
            files.push(file);
        }
        files.sort_by_key(|&f| (f == FileId::BDEV, f));
        // (the page-cache pages it writes, if any; disk block; blocks)
        type Piece = (Option<(FileId, u64)>, u64, u64);
        let mut plan: Vec<Piece> = Vec::new();
        let mut runs: Vec<Run> = Vec::new();
        let mut payload = 0;
        for f in files {
            while let Some((s, n)) = self.cache.start_writeback(f, 0, u64::MAX, u64::MAX) {
                runs.clear();
                l.place(n, &mut runs);
                let mut off = 0;
                for r in &runs {
                    if r.summary {
                        plan.push((None, r.block, 1));
                        continue;
                    }
                    if f != FileId::BDEV {
                        self.fs.relocate(f, s + off, r.len, r.block);
                    }
                    plan.push((Some((f, s + off)), r.block, r.len));
                    off += r.len;
                }
                payload += n;
            }
        }
        // The DAT entries of the blocks written, the sufile, and with a
        // checkpoint the cpfile and the super root.
        let extra =
            payload.div_ceil(nilfs2::DAT_ENTRIES_PER_BLOCK) + 1 + if super_root { 2 } else { 0 };
        runs.clear();
        l.place(extra, &mut runs);
        plan.extend(runs.iter().map(|r| (None, r.block, r.len)));
        let last = plan.len() - 1;
        for (i, (cache, disk, n)) in plan.into_iter().enumerate() {
            // The last bio of the construction is SYNCIO (segbuf.c).
            let mark = if i == last {
                SyncMark::Last { noidle: false }
            } else {
                SyncMark::Async
            };
            self.issue_at(Issuer::Daemon, cache, disk, n, mark, LOG, io);
        }
        l.waiting_seq = Some(self.write_seq);
        let started = l.started;
        if let FsLayer::Log(_, log) = &mut self.fsl {
            *log = Some(l);
        }
        started
    }

    /// A write completed: finish the running construction if all its
    /// writes are done, and start a queued one.
    pub(super) fn segctor_step(&mut self, io: &mut Io<'_>) {
        let Some(seq) = self.nilfs_log().and_then(|l| l.waiting_seq) else {
            return;
        };
        if !self.satisfied(WaitCond::FileWrites { file: LOG, seq }) {
            return;
        }
        let FsLayer::Log(_, Some(l)) = &mut self.fsl else {
            return;
        };
        l.waiting_seq = None;
        l.done += 1;
        if let Some(sr) = l.again.take() {
            self.segctor_construct(sr, io);
        }
    }
}
