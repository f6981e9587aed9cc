//! `find DIR -type f | xargs cat > /dev/null`: two processes and a pipe.
//!
//! `find` walks the tree depth first in readdir order, as GNU findutils 4.1
//! did: it reads each directory whole, then `lstat`s every entry (the
//! `-type f` test; 4.1 did not yet use `d_type`), printing files and
//! descending into directories as it meets them. Reading a directory and
//! each inode costs a dependent read unless cached, so `find` runs ahead
//! of `cat` warming the inode-table blocks.
//!
//! `xargs` collects names from the pipe into batches and runs `cat` on each
//! batch; while `cat` runs, nobody drains the pipe, so `find` blocks once
//! the pipe is full. Batch and pipe sizes are in names: a 4 KiB pipe holds
//! about 100 paths of a kernel tree (~40 bytes each), and findutils 4.1's
//! xargs built command lines of about 20 KiB by default, ~500 paths
//! [estimates from the path lengths; the exact limits only set how far
//! `find` runs ahead].

use crate::fs::FileId;
use crate::syscall::{Ctx, PipeId, Program, Ret, Syscall};
use elevator_core::Duration;
use std::collections::VecDeque;

/// Paths a 4 KiB pipe holds.
pub const PIPE_NAMES: usize = 100;
/// Paths per `cat` command line.
pub const XARGS_BATCH: usize = 500;
/// fork + exec of `cat` for each batch [estimate for a 2003 P4].
pub const EXEC_CPU: Duration = Duration::from_micros(500);

/// The `find` half.
#[derive(Debug)]
pub struct Find {
    pipe: PipeId,
    stat: bool,
    stack: Vec<(FileId, usize)>,
    queue: VecDeque<Syscall>,
    closed: bool,
}

impl Find {
    /// `find top -type f` writing names into `pipe`; `stat`: lstat every
    /// entry (findutils 4.1).
    pub fn new(top: FileId, pipe: PipeId, stat: bool) -> Self {
        let mut queue = VecDeque::new();
        queue.push_back(Syscall::Stat(top));
        queue.push_back(Syscall::ReadDir(top));
        Find {
            pipe,
            stat,
            stack: vec![(top, 0)],
            queue,
            closed: false,
        }
    }
}

impl Program for Find {
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall {
        loop {
            if let Some(call) = self.queue.pop_front() {
                return call;
            }
            let Some(&(dir, i)) = self.stack.last() else {
                if !self.closed {
                    self.closed = true;
                    return Syscall::PipeClose(self.pipe);
                }
                return Syscall::Exit;
            };
            let children = cx.fs.children(dir);
            if i >= children.len() {
                self.stack.pop();
                continue;
            }
            let child = children[i];
            if let Some(top) = self.stack.last_mut() {
                top.1 += 1;
            }
            if self.stat {
                self.queue.push_back(Syscall::Stat(child));
            }
            if cx.fs.is_dir(child) {
                self.queue.push_back(Syscall::ReadDir(child));
                self.stack.push((child, 0));
            } else {
                self.queue.push_back(Syscall::PipePut {
                    pipe: self.pipe,
                    item: u64::from(child.0),
                });
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Collect,
    Cat,
}

/// The `xargs cat` half.
#[derive(Debug)]
pub struct XargsCat {
    pipe: PipeId,
    batch: usize,
    bs: u64,
    names: Vec<FileId>,
    eof: bool,
    awaiting: bool,
    phase: Phase,
    i: usize,
    pos: Option<u64>,
    pub files_read: u64,
}

impl XargsCat {
    pub fn new(pipe: PipeId, batch: usize, bs: u64) -> Self {
        XargsCat {
            pipe,
            batch: batch.max(1),
            bs: bs.max(1),
            names: Vec::new(),
            eof: false,
            awaiting: false,
            phase: Phase::Collect,
            i: 0,
            pos: None,
            files_read: 0,
        }
    }
}

impl Program for XargsCat {
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall {
        if self.awaiting {
            self.awaiting = false;
            match cx.last.ret {
                Ret::Item(Some(x)) => self.names.push(FileId(x as u32)),
                _ => self.eof = true,
            }
            if self.names.len() >= self.batch || self.eof {
                self.phase = Phase::Cat;
                self.i = 0;
                self.pos = None;
                if !self.names.is_empty() {
                    return Syscall::Sleep(EXEC_CPU);
                }
            }
        }
        loop {
            match self.phase {
                Phase::Collect => {
                    if self.eof {
                        cx.stats
                            .extra
                            .insert("files".into(), self.files_read as f64);
                        return Syscall::Exit;
                    }
                    self.awaiting = true;
                    return Syscall::PipeGet(self.pipe);
                }
                Phase::Cat => {
                    let Some(&file) = self.names.get(self.i) else {
                        self.names.clear();
                        self.phase = Phase::Collect;
                        continue;
                    };
                    match self.pos {
                        None => {
                            self.pos = Some(0);
                            return Syscall::Open(file);
                        }
                        Some(p) if p > cx.fs.size(file) => {
                            self.pos = None;
                            self.i += 1;
                            self.files_read += 1;
                            return Syscall::Close(file);
                        }
                        Some(p) => {
                            self.pos = Some(p + self.bs);
                            return Syscall::Read {
                                file,
                                offset: p,
                                len: self.bs,
                            };
                        }
                    }
                }
            }
        }
    }
}

use super::registry::{self, Args, Instance, Key, KeyType, ProgramType, SetKind};

/// `kind = "find-cat"`: `files` (a tree or directory), `bs`, `batch`
/// (xargs' names per `cat`, default [`XARGS_BATCH`]), `pipe` (names the
/// pipe holds, default [`PIPE_NAMES`]) and `stat` (find stats every entry,
/// default yes). Two processes, find and xargs, in one row.
pub const TYPE: ProgramType = ProgramType {
    name: "find-cat",
    about: "find DIR -type f | xargs cat > /dev/null: two processes and a pipe",
    keys: &[
        registry::files(&[SetKind::Tree, SetKind::Dir]),
        registry::BS,
        Key {
            name: "batch",
            ty: KeyType::Int {
                min: 1,
                max: 1 << 20,
            },
            default: registry::Default::Int(XARGS_BATCH as i64),
        },
        Key {
            name: "pipe",
            ty: KeyType::Int {
                min: 1,
                max: 1 << 20,
            },
            default: registry::Default::Int(PIPE_NAMES as i64),
        },
        registry::flag("stat", true),
    ],
    period: None,
    tasks: |_| 2,
    build,
};

fn build(args: &Args, at: &mut Instance<'_>) {
    let top = at.top(args.files("files"));
    let pipe = at.host.new_pipe(args.int("pipe") as usize);
    at.spawn(Box::new(Find::new(top, pipe, args.flag("stat"))));
    let xargs = XargsCat::new(pipe, args.int("batch") as usize, args.size("bs"));
    at.spawn(Box::new(xargs));
}
