//! `cp -a SRC DST` (or `cp FILE DST`), then optionally `sync`.
//!
//! fileutils 4.1 `cp` walks the source depth first in readdir order. For a
//! directory it `lstat`s the entry, makes the new directory and recurses;
//! for a file it opens the source, creates the destination, and copies
//! with read(2)/write(2) of `st_blksize` (4 KiB on this ext2), then closes
//! both (`-a`'s chmod/chown/utimes only dirty the cached inode). Reads are
//! dependent; writes only dirty the page cache until `balance_dirty_pages`
//! makes the copier write back itself. The new files and directories are
//! placed by the file system's allocator (Orlov for `DST`'s subdirectories),
//! so the copy lies elsewhere than the source.

use crate::fs::FileId;
use crate::syscall::{Ctx, Program, Syscall};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug)]
enum Pending {
    /// A Create for the copy of directory `src` is out.
    Dir(FileId),
    /// A Create for the copy of file `src` is out.
    File(FileId),
}

#[derive(Clone, Copy, Debug)]
struct Copying {
    src: FileId,
    dst: FileId,
    pos: u64,
    read_next: bool,
}

/// `cp` of a tree or a file.
#[derive(Debug)]
pub struct Cp {
    bs: u64,
    sync: bool,
    /// (source directory, its copy, next entry).
    stack: Vec<(FileId, FileId, usize)>,
    queue: VecDeque<(Syscall, Option<Pending>)>,
    pending: Option<Pending>,
    copying: Option<Copying>,
    synced: bool,
    pub files_copied: u64,
}

impl Cp {
    /// Copy `src` (a file or a directory tree) into directory `dst_parent`.
    pub fn new(src: FileId, src_is_dir: bool, dst_parent: FileId, bs: u64, sync: bool) -> Self {
        let mut queue = VecDeque::new();
        queue.push_back((Syscall::Stat(src), None));
        let pending = if src_is_dir {
            Pending::Dir(src)
        } else {
            Pending::File(src)
        };
        queue.push_back((
            Syscall::Create {
                parent: dst_parent,
                dir: src_is_dir,
            },
            Some(pending),
        ));
        if !src_is_dir {
            queue.push_front((Syscall::Open(src), None));
        }
        Cp {
            bs: bs.max(1),
            sync,
            stack: Vec::new(),
            queue,
            pending: None,
            copying: None,
            synced: false,
            files_copied: 0,
        }
    }

    fn copy_step(&mut self, cx: &Ctx<'_>) -> Option<Syscall> {
        let c = self.copying.as_mut()?;
        let size = cx.fs.size(c.src);
        if c.read_next {
            if c.pos > size {
                // The read at end of file returned 0: done with this file.
                let (src, dst) = (c.src, c.dst);
                self.copying = None;
                self.files_copied += 1;
                self.queue.push_front((Syscall::Close(dst), None));
                return Some(Syscall::Close(src));
            }
            c.read_next = c.pos >= size;
            let offset = c.pos;
            if c.pos >= size {
                c.pos += 1;
            }
            return Some(Syscall::Read {
                file: c.src,
                offset,
                len: self.bs,
            });
        }
        let n = self.bs.min(size - c.pos);
        let call = Syscall::Write {
            file: c.dst,
            offset: c.pos,
            len: n,
        };
        c.pos += n;
        c.read_next = true;
        Some(call)
    }
}

impl Program for Cp {
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall {
        if let Some(p) = self.pending.take() {
            let new = cx.last.file().expect("Create returns the new file");
            match p {
                Pending::Dir(src) => {
                    self.stack.push((src, new, 0));
                    self.queue.push_front((Syscall::ReadDir(src), None));
                }
                Pending::File(src) => {
                    self.copying = Some(Copying {
                        src,
                        dst: new,
                        pos: 0,
                        read_next: true,
                    });
                }
            }
        }
        loop {
            if let Some((call, pending)) = self.queue.pop_front() {
                self.pending = pending;
                return call;
            }
            if let Some(call) = self.copy_step(cx) {
                return call;
            }
            let Some(&(src_dir, dst_dir, i)) = self.stack.last() else {
                if self.sync && !self.synced {
                    self.synced = true;
                    return Syscall::Sync;
                }
                cx.stats
                    .extra
                    .insert("files".into(), self.files_copied as f64);
                return Syscall::Exit;
            };
            let children = cx.fs.children(src_dir);
            if i >= children.len() {
                self.stack.pop();
                continue;
            }
            let child = children[i];
            if let Some(top) = self.stack.last_mut() {
                top.2 += 1;
            }
            self.queue.push_back((Syscall::Stat(child), None));
            if cx.fs.is_dir(child) {
                self.queue.push_back((
                    Syscall::Create {
                        parent: dst_dir,
                        dir: true,
                    },
                    Some(Pending::Dir(child)),
                ));
            } else {
                self.queue.push_back((Syscall::Open(child), None));
                self.queue.push_back((
                    Syscall::Create {
                        parent: dst_dir,
                        dir: false,
                    },
                    Some(Pending::File(child)),
                ));
            }
        }
    }
}

use super::registry::{self, Args, Instance, ProgramType, SetKind};

/// `kind = "cp"`: `files` (a file, tree or directory to copy), `dir` (where
/// to, default the root), `bs`, and `sync` (run `sync` after, default yes).
pub const TYPE: ProgramType = ProgramType {
    name: "cp",
    about: "cp -a SRC DST (a file or a tree), then sync",
    keys: &[
        registry::files(&[SetKind::File, SetKind::Tree, SetKind::Dir]),
        registry::DIR,
        registry::BS,
        registry::flag("sync", true),
    ],
    period: None,
    tasks: registry::one_task,
    build,
};

fn build(args: &Args, at: &mut Instance<'_>) {
    let src = at.top(args.files("files"));
    let is_dir = at.host.fs().is_dir(src);
    let dst = at.dir_or_root(args.files_opt("dir"));
    let program = Cp::new(src, is_dir, dst, args.size("bs"), args.flag("sync"));
    at.spawn(Box::new(program));
}
