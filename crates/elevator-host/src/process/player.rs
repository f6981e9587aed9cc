//! A media player: reads `frame` bytes of a file every `period`, in
//! order; frame `i` is due `buffer` periods after its slot opens (a
//! player's read-ahead buffer), and a frame read that completes later is
//! *missed*. Extras: `frames`, `frames_missed`, `worst_frame_ms` (the
//! longest frame read).

use crate::fs::FileId;
use crate::syscall::{Ctx, Program, Syscall};
use elevator_core::{Duration, Instant};

#[derive(Debug)]
pub struct Player {
    file: FileId,
    frame: u64,
    period: Duration,
    frames: u64,
    buffer: u64,
    repeat: bool,
    t0: Option<Instant>,
    i: u64,
    pos: u64,
    reading: bool,
    opened: bool,
    missed: u64,
    worst: Duration,
}

impl Player {
    /// `frames` frames of `frame` bytes every `period`; `buffer` periods of
    /// slack (1: each frame must arrive within its own period).
    pub fn new(
        file: FileId,
        frame: u64,
        period: Duration,
        frames: u64,
        buffer: u64,
        repeat: bool,
    ) -> Self {
        Player {
            file,
            frame: frame.max(1),
            period,
            frames,
            buffer: buffer.max(1),
            repeat,
            t0: None,
            i: 0,
            pos: 0,
            reading: false,
            opened: false,
            missed: 0,
            worst: Duration::ZERO,
        }
    }
}

impl Program for Player {
    fn next(&mut self, cx: &mut Ctx<'_>) -> Syscall {
        if !self.opened {
            self.opened = true;
            return Syscall::Open(self.file);
        }
        let t0 = *self.t0.get_or_insert(cx.now);
        if self.reading {
            self.reading = false;
            let due = t0 + self.period.mul(self.i + self.buffer);
            if cx.now > due {
                self.missed += 1;
            }
            self.worst = self.worst.max(cx.last.latency);
            self.i += 1;
            cx.stats.extra.insert("frames".into(), self.i as f64);
            cx.stats
                .extra
                .insert("frames_missed".into(), self.missed as f64);
            cx.stats
                .extra
                .insert("worst_frame_ms".into(), self.worst.as_millis_f64());
            if self.i >= self.frames && !self.repeat {
                return Syscall::Exit;
            }
            // The next frame's slot.
            return Syscall::SleepUntil(t0 + self.period.mul(self.i));
        }
        let size = cx.fs.size(self.file);
        if self.pos + self.frame > size {
            self.pos = 0;
        }
        let offset = self.pos;
        self.pos += self.frame;
        self.reading = true;
        Syscall::Read {
            file: self.file,
            offset,
            len: self.frame,
        }
    }
}

use super::registry::{self, Args, Instance, Key, KeyType, ProgramType, SetKind};

/// A frame of 16 KiB every 40 ms: a 3.2 Mbit/s stream at 25 frames per
/// second, the PAL frame rate.
const FRAME: u64 = 16 << 10;
const PERIOD: Duration = Duration::from_millis(40);
/// One minute of frames at 25 per second.
const FRAMES: i64 = 1500;

/// `kind = "player"`: `files` (the media file), `frame` (bytes per frame),
/// `period`, `frames` and `buffer` (frames read ahead).
pub const TYPE: ProgramType = ProgramType {
    name: "player",
    about: "a media player reading a frame per period against a deadline",
    keys: &[
        registry::files(&[SetKind::File]),
        registry::bytes("frame", registry::Default::Size(FRAME)),
        Key {
            name: "period",
            ty: KeyType::Time,
            default: registry::Default::Time(PERIOD),
        },
        Key {
            name: "frames",
            ty: KeyType::Int {
                min: 1,
                max: 100_000_000,
            },
            default: registry::Default::Int(FRAMES),
        },
        Key {
            name: "buffer",
            ty: KeyType::Int {
                min: 1,
                max: 1_000_000,
            },
            default: registry::Default::Int(1),
        },
    ],
    period: Some("period"),
    tasks: registry::one_task,
    build,
};

fn build(args: &Args, at: &mut Instance<'_>) {
    let file = at.top(args.files("files"));
    let program = Player::new(
        file,
        args.size("frame"),
        args.time("period"),
        args.int("frames") as u64,
        args.int("buffer") as u64,
        at.looping,
    );
    at.spawn(Box::new(program));
}
