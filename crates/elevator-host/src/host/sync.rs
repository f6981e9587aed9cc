//! fsync and sync, resumable: issue, wait, issue what was under writeback
//! the first time, wait; and the conditions a waiting task waits for.

use super::*;

impl Host {
    /// fsync and sync, resumable: issue, wait, issue what was under
    /// writeback the first time, wait.
    pub(super) fn do_sync(&mut self, pid: Pid, op: &mut SyncOp, io: &mut Io<'_>) -> Step {
        // data=journal and nilfs2 write no data home here: the commit or
        // the log carries it.
        let skip_data = match &self.fsl {
            FsLayer::Plain => false,
            FsLayer::Journal(j) => j.options.data == DataMode::Journal,
            FsLayer::Log(..) => true,
        };
        // 2.6.30's ext3 fsync: start the data, commit, then wait for the
        // data (vfs_fsync; `Ext3Fsync::ForceCommit`).
        let force_commit = op.target.is_some()
            && self.params.ext3_fsync == Ext3Fsync::ForceCommit
            && matches!(self.fsl, FsLayer::Journal(_));
        loop {
            match op.pass {
                0..=3 if skip_data => op.pass = 4,
                1..=3 if force_commit => op.pass = 4,
                0 | 2 => {
                    let ctl = WbCtl {
                        budget: u64::MAX,
                        nonblocking: false,
                        older_than: None,
                        issuer: Issuer::Proc(pid),
                        sync: self.params.sync_write_hint.marks(op.target.is_some()),
                    };
                    match op.target {
                        Some(f) => {
                            self.write_file(f, ctl, u64::MAX, f, io);
                            op.data_seq = self.write_seq;
                            if !matches!(self.fsl, FsLayer::Plain) {
                                // ext3: the commit carries the metadata.
                                op.pass += 1;
                                continue;
                            }
                            // Its indirect blocks and inode, if dirty.
                            let mut meta = self.fs.inode(f).meta.clone();
                            meta.push(self.fs.inode_block(f));
                            for b in meta {
                                if self.cache.is_dirty(FileId::BDEV, b) {
                                    if let Some((s, n)) =
                                        self.cache.start_writeback(FileId::BDEV, b, b + 1, 1)
                                    {
                                        self.issue(
                                            Issuer::Proc(pid),
                                            FileId::BDEV,
                                            s,
                                            n,
                                            true,
                                            ctl.sync,
                                            f,
                                            io,
                                        );
                                    }
                                }
                            }
                        }
                        None => {
                            self.writeback_inodes(ctl, io);
                        }
                    }
                    op.pass += 1;
                }
                1 | 3 => {
                    let seq = self.write_seq;
                    let cond = match op.target {
                        Some(file) => WaitCond::FileWrites { file, seq },
                        None => WaitCond::AllWrites { seq },
                    };
                    if !self.satisfied(cond) {
                        self.wait_writes(pid, cond);
                        // Re-check this pass when woken.
                        return Step::Block;
                    }
                    op.pass += 1;
                }
                4 => {
                    op.pass = 5;
                    match &mut self.fsl {
                        FsLayer::Plain => op.pass = 6,
                        FsLayer::Journal(j) if force_commit => {
                            // 2.6.30: sync_inode → ext3_write_inode →
                            // ext3_force_commit if the inode is dirty
                            // (data=journal: ext3_force_commit always).
                            let f = op.target.expect("fsync has a file");
                            let always = j.options.data == DataMode::Journal;
                            let (tid, timer) = j.force_commit(f, always, io.now());
                            match tid {
                                Some(tid) => {
                                    op.wait_for = tid;
                                    if let Some(at) = timer {
                                        self.arm(at, TimerAction::JournalCommit(tid), io);
                                    }
                                    self.kjournald(io);
                                }
                                None => op.pass = 6,
                            }
                        }
                        FsLayer::Journal(j) => {
                            // ext3_sync_file: commit the inode's
                            // transaction and wait (sync(2): the running
                            // one).
                            let tid = match op.target {
                                Some(f) => j.sync_tid(f),
                                None if j.running.started.is_some() => j.running.tid,
                                None => j.committed,
                            };
                            op.wait_for = tid;
                            if tid > j.committed {
                                j.request(tid, Reason::Fsync);
                                self.kjournald(io);
                            }
                        }
                        FsLayer::Log(..) => {
                            op.wait_for = self.segctor_construct(true, io);
                        }
                    }
                }
                5 => {
                    let cond = match self.fsl {
                        FsLayer::Log(..) => WaitCond::Logged(op.wait_for),
                        _ => WaitCond::Committed(op.wait_for),
                    };
                    if !self.satisfied(cond) {
                        self.wait_writes(pid, cond);
                        return Step::Block;
                    }
                    op.pass = 6;
                }
                6 if force_commit => {
                    // filemap_fdatawait after ->fsync (2.6.30 vfs_fsync).
                    let file = op.target.expect("fsync has a file");
                    let cond = WaitCond::FileWrites {
                        file,
                        seq: op.data_seq,
                    };
                    if !self.satisfied(cond) {
                        self.wait_writes(pid, cond);
                        return Step::Block;
                    }
                    op.pass = 7;
                }
                _ => {
                    return Step::Done {
                        ret: Ret::None,
                        cpu: self.params.syscall_cpu,
                        io: None,
                    }
                }
            }
        }
    }

    pub(super) fn satisfied(&self, cond: WaitCond) -> bool {
        match cond {
            WaitCond::SlotsBelow(n) => self.writes_in_flight <= n,
            WaitCond::FileWrites { file, seq } => self
                .file_writes
                .get(&file.0)
                .is_none_or(|v| v.first().is_none_or(|&s| s > seq)),
            WaitCond::AllWrites { seq } => self.outstanding.first().is_none_or(|&s| s > seq),
            WaitCond::Committed(tid) => match &self.fsl {
                FsLayer::Journal(j) => j.committed >= tid,
                _ => true,
            },
            WaitCond::Logged(n) => self.nilfs_log().is_none_or(|l| l.done >= n),
        }
    }
}
