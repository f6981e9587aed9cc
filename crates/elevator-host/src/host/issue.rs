//! Issuing writeback: congestion, one file's dirty pages, and the requests
//! their runs of blocks become (`submit_bh` for 2.4, pieces of at most
//! `max_sectors` for 2.6).

use super::*;

impl Host {
    /// Whether writeback should back off the queue: the engine's async
    /// congestion bit where it models one (the 2.6.32 preset:
    /// `bdi_write_congested`, v2.6.32 include/linux/backing-dev.h, tested
    /// by `writeback_inodes_wb` for non-blocking writeback), else the
    /// host's own count of its write requests in flight against the
    /// thresholds.
    pub(super) fn is_congested(&self, io: &Io<'_>) -> bool {
        io.write_congested()
            .unwrap_or(self.writes_in_flight >= self.params.congestion_on())
    }

    /// Write up to `budget` dirty pages of `file`, cyclically from its
    /// cursor (`writeback_index`).
    pub(super) fn write_file(
        &mut self,
        file: FileId,
        ctl: WbCtl,
        budget: u64,
        owner: FileId,
        io: &mut Io<'_>,
    ) -> (u64, bool) {
        let max_req = u64::from(self.params.max_sectors) * 512 / PAGE_SIZE;
        let cursor = self.wb_cursor.get(&file.0).copied().unwrap_or(0);
        let mut written = 0;
        let mut congested = false;
        'ranges: for (lo, hi) in [(cursor, u64::MAX), (0, cursor)] {
            let mut from = lo;
            while written < budget {
                if ctl.nonblocking && self.is_congested(io) {
                    congested = true;
                    break 'ranges;
                }
                let Some((s, n)) = self.cache.start_writeback(
                    file,
                    from,
                    hi,
                    (budget - written).min(max_req.max(1)),
                ) else {
                    break;
                };
                self.issue(ctl.issuer, file, s, n, true, ctl.sync, owner, io);
                written += n;
                from = s + n;
                self.wb_cursor.insert(file.0, from);
            }
            if written >= budget {
                break;
            }
        }
        (written, congested)
    }

    /// Submit the disk requests for pages `[page, page + pages)` of `file`:
    /// one per disk-contiguous piece, at most `max_sectors` each.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn issue(
        &mut self,
        issuer: Issuer,
        file: FileId,
        page: u64,
        pages: u64,
        write: bool,
        sync: bool,
        owner: FileId,
        io: &mut Io<'_>,
    ) {
        let (task, prio, group) = match issuer {
            Issuer::Proc(pid) => {
                let p = &self.procs[pid];
                (p.task, p.prio, p.group)
            }
            Issuer::Flusher => {
                let group = match self.params.writeback_charge {
                    WritebackCharge::Dirtier => {
                        self.dirtier.get(&owner.0).copied().unwrap_or(GroupId::ROOT)
                    }
                    WritebackCharge::Flusher => GroupId::ROOT,
                };
                (self.pdflush, IoPrio::default(), group)
            }
            Issuer::Daemon => (self.daemon_task(), IoPrio::default(), GroupId::ROOT),
        };
        let read_meta = !write && matches!(self.fsl, FsLayer::Journal(_));
        let max_pages = (u64::from(self.params.max_sectors) * 512 / PAGE_SIZE).max(1);
        let spb = self.fs.geo.sectors_per_block();
        let mut pieces = std::mem::take(&mut self.pieces);
        pieces.clear();
        self.fs.for_runs(file, page, pages, |fb, db, n| {
            let mut off = 0;
            while off < n {
                let k = (n - off).min(max_pages);
                pieces.push((fb + off, db + off, k, true));
                off += k;
            }
        });
        // 2.4: one request per block (`submit_bh`), merged below. The
        // blocks of a piece count as one request for the host's estimate
        // of the queue's write slots (they merge into one).
        if self.params.submit_buffers {
            let per_piece = std::mem::take(&mut pieces);
            for (fb, db, n, _) in per_piece {
                pieces.extend((0..n).map(|k| (fb + k, db + k, 1, k == 0)));
            }
        }
        for &(fb, db, n, first) in &pieces {
            let id = io.submit(BlockIo {
                op: if write { Op::Write } else { Op::Read },
                sync: !write || sync,
                sector: self.fs.geo.sector_of(db),
                sectors: (n * spb) as u32,
                task,
                prio,
                group,
                // READ_META on inode-table and directory reads where the
                // preset's kernel had it (2.6.32), and always on ext3,
                // which sets it itself (`__ext3_get_inode_loc`,
                // `ext3_bread`); never on indirect blocks or bitmaps.
                meta: (read_meta || (!write && self.params.read_meta))
                    && (self.fs.is_dir(file)
                        || (file == FileId::BDEV && self.fs.geo.is_inode_table(db))),
                // Sync writes here are fsync's and sync's (WB_SYNC_ALL):
                // WRITE_SYNC_PLUG from 2.6.30, sync + REQ_NOIDLE (commits
                // a64c861, aeb6faf). Writeback is async and never NOIDLE.
                noidle: write && sync,
            });
            let mut seq = 0;
            if write {
                self.write_seq += 1;
                seq = self.write_seq;
                self.outstanding.insert(seq);
                self.file_writes.entry(owner.0).or_default().insert(seq);
                if first {
                    self.writes_in_flight += 1;
                    if self.is_congested(io) {
                        self.congested = true;
                    }
                    self.stats.write_requests += 1;
                }
                self.stats.pages_written += n;
            } else {
                if first {
                    self.stats.read_requests += 1;
                }
                self.stats.pages_read += n;
            }
            self.tags.insert(
                id,
                Tag {
                    file,
                    page: fb,
                    pages: n,
                    write,
                    seq,
                    owner,
                    issuer,
                    slot: first,
                },
            );
        }
        self.pieces = pieces;
    }
}
