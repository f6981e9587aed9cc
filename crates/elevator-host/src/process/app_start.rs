//! An application's start-up: a list of (file, offset, length, think)
//! steps, each a dependent read (or write) followed by computation; the
//! figure of merit is the time from the first to the last (`startup_s`).
//! The seed's `time ssh testbox xterm -e true` is the start-up of an
//! xterm-sized file set ([`crate::fs::gen::xterm_startup`]); real traces
//! can be replayed by building the list from them.

use crate::fs::gen::AppOp;
use crate::fs::FileId;
use crate::syscall::{Ctx, Program, Syscall};
use elevator_core::Instant;
use rustc_hash::FxHashSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    Io,
    Think,
}

#[derive(Debug)]
pub struct AppStart {
    ops: Vec<AppOp>,
    i: usize,
    next: Next,
    opened: FxHashSet<FileId>,
    started: Option<Instant>,
}

impl AppStart {
    pub fn new(ops: Vec<AppOp>) -> Self {
        AppStart {
            ops,
            i: 0,
            next: Next::Io,
            opened: FxHashSet::default(),
            started: None,
        }
    }
}

impl Program for AppStart {
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall {
        let t0 = *self.started.get_or_insert(cx.now);
        let Some(op) = self.ops.get(self.i).copied() else {
            cx.stats
                .extra
                .insert("startup_s".into(), cx.now.since(t0).as_secs_f64());
            return Syscall::Exit;
        };
        if self.opened.insert(op.file) {
            return Syscall::Open(op.file);
        }
        match self.next {
            Next::Io => {
                self.next = Next::Think;
                if op.write {
                    Syscall::Write {
                        file: op.file,
                        offset: op.offset,
                        len: op.len,
                    }
                } else {
                    Syscall::Read {
                        file: op.file,
                        offset: op.offset,
                        len: op.len,
                    }
                }
            }
            Next::Think => {
                self.next = Next::Io;
                self.i += 1;
                Syscall::Sleep(op.think)
            }
        }
    }
}

use super::registry::{self, Args, Instance, Key, KeyType, ProgramType, SetKind, Share};

/// `kind = "app-start"`: `files` (an app set, whose recorded operations it
/// replays).
pub const TYPE: ProgramType = ProgramType {
    name: "app-start",
    about: "an application's start-up: its recorded reads with think times",
    keys: &[Key {
        name: "files",
        ty: KeyType::Files {
            kinds: &[SetKind::App],
            share: Share::PerInstance,
        },
        default: registry::Default::Required,
    }],
    period: None,
    tasks: registry::one_task,
    build,
};

fn build(args: &Args, at: &mut Instance<'_>) {
    let ops = at.pick(args.files("files")).ops.clone();
    at.spawn(Box::new(AppStart::new(ops)));
}
