//! `cat FILE... > /dev/null`: open, read(2) in `bs` pieces until read
//! returns 0, close; optionally forever (`while true; do cat F; done`, the
//! seeds' streaming reader). Each read waits for its page: the stream is
//! synchronous and dependent, and readahead does the rest.

use crate::fs::FileId;
use crate::syscall::{Ctx, Program, Syscall};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    Read,
}

/// `cat` of a list of files.
#[derive(Debug)]
pub struct Cat {
    files: Vec<FileId>,
    bs: u64,
    repeat: bool,
    i: usize,
    pos: u64,
    state: State,
}

impl Cat {
    pub fn new(files: Vec<FileId>, bs: u64, repeat: bool) -> Self {
        Cat {
            files,
            bs: bs.max(1),
            repeat,
            i: 0,
            pos: 0,
            state: State::Open,
        }
    }
}

impl Program for Cat {
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall {
        match self.state {
            State::Open => {
                if self.i >= self.files.len() {
                    if !self.repeat || self.files.is_empty() {
                        return Syscall::Exit;
                    }
                    self.i = 0;
                }
                self.state = State::Read;
                self.pos = 0;
                Syscall::Open(self.files[self.i])
            }
            State::Read => {
                let file = self.files[self.i];
                // Read until a read returns 0 (one read at end of file).
                if self.pos > cx.fs.size(file) {
                    self.state = State::Open;
                    self.i += 1;
                    return Syscall::Close(file);
                }
                let offset = self.pos;
                self.pos += self.bs;
                Syscall::Read {
                    file,
                    offset,
                    len: self.bs,
                }
            }
        }
    }
}

use super::registry::{self, Args, Instance, Key, KeyType, ProgramType, SetKind, Share};

/// `kind = "cat"`: `files` (a file or app set; one instance each, or one
/// process reading every instance) and `bs`.
pub const TYPE: ProgramType = ProgramType {
    name: "cat",
    about: "cat FILE... > /dev/null, once or looping (background)",
    keys: &[
        Key {
            name: "files",
            ty: KeyType::Files {
                kinds: &[SetKind::File, SetKind::App],
                share: Share::PerInstanceOrAll,
            },
            default: registry::Default::Required,
        },
        registry::BS,
    ],
    period: None,
    tasks: registry::one_task,
    build,
};

fn build(args: &Args, at: &mut Instance<'_>) {
    let files = at.files_of(args.files("files"));
    let looping = at.looping;
    at.spawn(Box::new(Cat::new(files, args.size("bs"), looping)));
}
