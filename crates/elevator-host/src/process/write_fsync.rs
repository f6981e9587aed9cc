//! `write-and-fsync -f -m N F` from Andrew Morton's ext3-tools: create F,
//! write N MB, fsync it, close. The seed times it (experiment 8). The
//! tool's write size is not documented in the sources we have; 64 KiB
//! writes are assumed (buffered writes of any size dirty the same pages).

use crate::fs::FileId;
use crate::syscall::{Ctx, Program, Syscall};

/// Bytes per write(2) [assumption, see the module docs].
pub const CHUNK: u64 = 64 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Create,
    Write,
    Fsync,
    Close,
    Exit,
}

#[derive(Debug)]
pub struct WriteAndFsync {
    dir: FileId,
    size: u64,
    chunk: u64,
    fsync: bool,
    file: Option<FileId>,
    pos: u64,
    state: State,
}

impl WriteAndFsync {
    /// Write `size` bytes to a new file in `dir`, then fsync if `fsync`.
    pub fn new(dir: FileId, size: u64, fsync: bool) -> Self {
        WriteAndFsync {
            dir,
            size,
            chunk: CHUNK,
            fsync,
            file: None,
            pos: 0,
            state: State::Create,
        }
    }
}

impl Program for WriteAndFsync {
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall {
        loop {
            match self.state {
                State::Create => {
                    self.state = State::Write;
                    return Syscall::Create {
                        parent: self.dir,
                        dir: false,
                    };
                }
                State::Write => {
                    let file = *self
                        .file
                        .get_or_insert_with(|| cx.last.file().expect("created"));
                    if self.pos >= self.size {
                        self.state = if self.fsync {
                            State::Fsync
                        } else {
                            State::Close
                        };
                        continue;
                    }
                    let len = self.chunk.min(self.size - self.pos);
                    let offset = self.pos;
                    self.pos += len;
                    return Syscall::Write { file, offset, len };
                }
                State::Fsync => {
                    self.state = State::Close;
                    return Syscall::Fsync(self.file.expect("created"));
                }
                State::Close => {
                    self.state = State::Exit;
                    return Syscall::Close(self.file.expect("created"));
                }
                State::Exit => return Syscall::Exit,
            }
        }
    }
}

use super::registry::{self, Args, Instance, ProgramType};

/// `kind = "write-and-fsync"`: `dir` (where the new file goes, default the
/// root), `size` and `sync` (fsync at the end, default yes).
pub const TYPE: ProgramType = ProgramType {
    name: "write-and-fsync",
    about: "Morton's write-and-fsync: write a new file of SIZE, then fsync",
    keys: &[
        registry::DIR,
        registry::bytes("size", registry::Default::Required),
        registry::flag("sync", true),
    ],
    period: None,
    tasks: registry::one_task,
    build,
};

fn build(args: &Args, at: &mut Instance<'_>) {
    let dir = at.dir_or_root(args.files_opt("dir"));
    let program = WriteAndFsync::new(dir, args.size("size"), args.flag("sync"));
    at.spawn(Box::new(program));
}
