//! `dd if=/dev/zero of=F bs=1M count=N conv=notrunc`: N buffered writes of
//! `bs` from the start of F, then close; in an endless loop it is the
//! seeds' streaming writer (`while true; do dd ...; done`). Nothing waits
//! for the disk but `balance_dirty_pages`.

use crate::fs::FileId;
use crate::syscall::{Ctx, Program, Syscall};

#[derive(Debug)]
pub struct Dd {
    file: FileId,
    bs: u64,
    count: u64,
    repeat: bool,
    i: u64,
    opened: bool,
}

impl Dd {
    pub fn new(file: FileId, bs: u64, count: u64, repeat: bool) -> Self {
        Dd {
            file,
            bs: bs.max(1),
            count,
            repeat,
            i: 0,
            opened: false,
        }
    }
}

impl Program for Dd {
    fn next(&mut self, _cx: &mut Ctx<'_>) -> Syscall {
        if !self.opened {
            self.opened = true;
            self.i = 0;
            return Syscall::Open(self.file);
        }
        if self.i < self.count {
            let offset = self.i * self.bs;
            self.i += 1;
            return Syscall::Write {
                file: self.file,
                offset,
                len: self.bs,
            };
        }
        if self.repeat {
            self.opened = false;
            return Syscall::Close(self.file);
        }
        if self.i == self.count {
            self.i += 1;
            return Syscall::Close(self.file);
        }
        Syscall::Exit
    }
}

use super::registry::{self, Args, Instance, ProgramType, SetKind};

/// `kind = "dd"`: `files` (a file or empty set), `bs` and `size` (the bytes
/// to write, `count = size / bs` rounded up).
pub const TYPE: ProgramType = ProgramType {
    name: "dd",
    about: "dd if=/dev/zero of=FILE bs=BS count=SIZE/BS conv=notrunc, once or looping",
    keys: &[
        registry::files(&[SetKind::File, SetKind::Empty]),
        registry::BS,
        registry::bytes("size", registry::Default::Required),
    ],
    period: None,
    tasks: registry::one_task,
    build,
};

fn build(args: &Args, at: &mut Instance<'_>) {
    let file = at.top(args.files("files"));
    let bs = args.size("bs");
    let count = args.size("size").div_ceil(bs);
    let looping = at.looping;
    at.spawn(Box::new(Dd::new(file, bs, count, looping)));
}
