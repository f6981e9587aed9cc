//! Creating files and directories: the inode, its bitmaps and the parent's
//! directory block, read in and dirtied.

use super::*;

impl Host {
    // ---------------------------------------------------------------
    // Creating files.

    pub(super) fn do_create(&mut self, pid: Pid, op: &mut CreateOp, io: &mut Io<'_>) -> Step {
        let f = match op.file {
            Some(f) => f,
            None => {
                let before = self.fs.inode(op.parent).nblocks();
                let kind = if op.dir { Kind::Dir } else { Kind::File };
                let colour = self.procs[pid].task.0;
                let Ok(f) = self.fs.create(op.parent, kind, colour) else {
                    return Step::Done {
                        ret: Ret::Err(Errno::NoSpace),
                        cpu: self.params.syscall_cpu,
                        io: None,
                    };
                };
                op.parent_grew = self.fs.inode(op.parent).nblocks() > before;
                op.file = Some(f);
                f
            }
        };
        let group = self.fs.inode(f).group;
        let geo = &self.fs.geo;
        let meta = [
            self.fs.inode_block(f),
            geo.inode_bitmap(group),
            geo.block_bitmap(group),
        ];
        for b in meta {
            if self.ensure_page(pid, FileId::BDEV, b, io).is_err() {
                return Step::Block;
            }
        }
        let last = self.fs.last_dir_block(op.parent);
        if !op.parent_grew && self.ensure_page(pid, op.parent, last, io).is_err() {
            return Step::Block;
        }
        let now = io.now();
        for b in meta {
            self.dirty_meta(b, Some(f), now, io);
        }
        self.cache.dirty_range(op.parent, last, last + 1, now);
        if op.dir {
            self.cache.dirty_range(f, 0, 1, now);
        }
        self.dir_dirtied(op.parent, last, f, now, io);
        Step::Done {
            ret: Ret::File(f),
            cpu: self.params.syscall_cpu,
            io: None,
        }
    }
}
