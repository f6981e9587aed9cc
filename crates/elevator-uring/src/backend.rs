//! What services the runtime's requests: an io_uring over one file
//! descriptor ([`Uring`]), or a wrapper that injects faults ([`Faulty`]).
//!
//! A backend owns the data buffers. The runtime pushes an operation (tag,
//! direction, byte offset, length, ioprio), optionally arms a timer, and
//! waits: `wait` submits what was pushed and blocks until at least one
//! operation or timer completes, then hands back each finished operation as
//! (tag, result), the result as the kernel gives it (bytes moved, or a
//! negative errno). Invariant: every pushed tag comes back from `wait`
//! exactly once; timers never do.

use elevator_core::Op;
use io_uring::{opcode, types, IoUring};
use rustc_hash::FxHashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// One operation for the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submission {
    pub tag: u64,
    pub op: Op,
    /// Byte offset on the target.
    pub offset: u64,
    /// Bytes.
    pub len: u32,
    /// The `ioprio` field of the SQE (class << 13 | level), as
    /// `ioprio_set(2)` encodes it; the kernel's scheduler below sees it.
    pub ioprio: u16,
}

/// A queue of operations on one target.
pub trait Backend: std::fmt::Debug {
    /// Queue `sub`; it reaches the kernel at the next [`Backend::wait`].
    fn push(&mut self, sub: Submission) -> io::Result<()>;
    /// Make the next [`Backend::wait`] return after `after` at the latest.
    fn arm_timer(&mut self, after: std::time::Duration) -> io::Result<()>;
    /// Submit what was pushed, block until an operation or a timer
    /// completes, and append the finished operations to `out`.
    fn wait(&mut self, out: &mut Vec<(u64, i32)>) -> io::Result<()>;
    /// Operations pushed and not yet handed back.
    fn in_flight(&self) -> usize;
    /// Hand what was pushed to the device now rather than at the next
    /// wait (no-op where pushing already does).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// Make `wait` also return whenever `fd` (an eventfd) is written: how
    /// client threads wake an engine that sleeps in the kernel.
    fn doorbell(&mut self, fd: RawFd) -> io::Result<()> {
        let _ = fd;
        Err(io::Error::other("this backend has no doorbell"))
    }
    /// As [`Backend::push`], with `fill` writing the bytes of a write
    /// first (a backend that moves no bytes ignores it).
    fn push_filled(&mut self, sub: Submission, fill: &mut dyn FnMut(&mut [u8])) -> io::Result<()> {
        let _ = fill;
        self.push(sub)
    }
    /// As [`Backend::wait`], showing `check` the bytes each finished read
    /// brought in (tag, bytes) before its buffer is reused.
    fn wait_checked(
        &mut self,
        out: &mut Vec<(u64, i32)>,
        check: &mut dyn FnMut(u64, &[u8]),
    ) -> io::Result<()> {
        let _ = check;
        self.wait(out)
    }
}

/// One file of a [`Uring`]: requests at byte offsets `[base, base + len)`
/// go to it at `offset - base`.
#[derive(Debug)]
pub struct Slot {
    pub file: File,
    pub base: u64,
    pub len: u64,
    /// Writes carry `RWF_ATOMIC` (fio's `atomic=1`).
    pub atomic: bool,
}

/// `RWF_ATOMIC` (include/uapi/linux/fs.h, Linux 6.11): the write is
/// either all on the medium or none of it.
const RWF_ATOMIC: i32 = 0x40;

/// Buffers are aligned for O_DIRECT: 4 KiB covers the logical block size of
/// every disk and NVMe namespace we target (512 B or 4 KiB) and the page size.
pub const BUFFER_ALIGN: usize = 4096;

/// Tags with this bit set are the runtime's own timers.
const TIMER_TAG: u64 = 1 << 63;
/// The doorbell's read.
const DOORBELL_TAG: u64 = TIMER_TAG - 1;

/// One aligned buffer, reused across requests of its size.
#[derive(Debug)]
struct Buffer {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
}

impl Buffer {
    fn new(len: usize) -> Self {
        // Over-allocate and start at the first aligned byte: safe code, and
        // the heap block never moves while the Vec is alive.
        let bytes = vec![0u8; len + BUFFER_ALIGN];
        let start = bytes.as_ptr().align_offset(BUFFER_ALIGN);
        Buffer { bytes, start, len }
    }

    fn slice(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + self.len]
    }
}

/// An io_uring on one open file or block device.
pub struct Uring {
    ring: IoUring,
    /// The files, by ascending base.
    slots: Vec<Slot>,
    /// Buffers of the operations in flight (and their direction), by tag.
    busy: FxHashMap<u64, (Buffer, Op)>,
    /// Free buffers by length.
    free: FxHashMap<usize, Vec<Buffer>>,
    /// Timespecs of armed timers, by tag: the kernel reads a timer's
    /// timespec when it prepares the SQE, and we keep it until the timer's
    /// CQE to be sure.
    timers: FxHashMap<u64, Box<types::Timespec>>,
    next_timer: u64,
    /// SQEs pushed since the last submit.
    unsubmitted: usize,
    /// The eventfd clients ring, and the 8 bytes its pending read fills.
    doorbell: Option<(RawFd, Box<[u8; 8]>)>,
}

impl std::fmt::Debug for Uring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uring")
            .field("slots", &self.slots)
            .field("in_flight", &self.busy.len())
            .field("timers", &self.timers.len())
            .finish_non_exhaustive()
    }
}

impl Uring {
    /// A ring of `entries` submission slots over `file` (opened by the
    /// caller, with O_DIRECT or without).
    pub fn new(file: File, entries: u32) -> io::Result<Self> {
        Uring::with_files(
            vec![Slot {
                file,
                base: 0,
                len: u64::MAX,
                atomic: false,
            }],
            entries,
        )
    }

    /// A ring over several files laid side by side in one byte space (a
    /// fio job file's files): `slots` by ascending `base`, not
    /// overlapping. With none, only timers run (every job's I/O reaches no
    /// device: fio's null engine).
    pub fn with_files(slots: Vec<Slot>, entries: u32) -> io::Result<Self> {
        let entries = entries.next_power_of_two().max(8);
        // COOP_TASKRUN (Linux 5.19): completions do not interrupt this
        // thread while it runs; they wait for its next io_uring_enter. With
        // one submission per request (see `Runtime::run`), the interrupts
        // otherwise cost more than they save: 160 k against 325 k IOPS at
        // QD32 on a loop device. Older kernels refuse the flag and get a
        // plain ring.
        let ring = match IoUring::builder().setup_coop_taskrun().build(entries) {
            Ok(ring) => ring,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => IoUring::new(entries)?,
            Err(e) => return Err(e),
        };
        Ok(Uring {
            ring,
            slots,
            busy: FxHashMap::default(),
            free: FxHashMap::default(),
            timers: FxHashMap::default(),
            next_timer: 0,
            unsubmitted: 0,
            doorbell: None,
        })
    }

    /// Keep a read pending on the doorbell.
    fn arm_doorbell(&mut self) -> io::Result<()> {
        let Some((fd, buf)) = self.doorbell.as_mut() else {
            return Ok(());
        };
        // Offset -1: read(2) semantics, as an eventfd has no position.
        let entry = opcode::Read::new(types::Fd(*fd), buf.as_mut_ptr(), 8)
            .offset(u64::MAX)
            .build()
            .user_data(DOORBELL_TAG);
        self.push_entry(&entry)
    }

    fn push_entry(&mut self, entry: &io_uring::squeue::Entry) -> io::Result<()> {
        if self.ring.submission().is_full() {
            self.ring.submit()?;
            self.unsubmitted = 0;
        }
        // SAFETY: every buffer or timespec `entry` points to is owned by
        // `self.busy`, `self.timers` or `self.doorbell` until its CQE has
        // been reaped (the doorbell's for as long as `self`), so it
        // stays valid (heap blocks do not move) for as long as the kernel
        // may use it; `Drop` reaps every operation in flight before the
        // buffers are freed.
        unsafe {
            self.ring
                .submission()
                .push(entry)
                .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        }
        self.unsubmitted += 1;
        Ok(())
    }
}

impl Uring {
    /// The slot holding byte `offset`, and the offset within it.
    fn slot(&self, offset: u64) -> io::Result<(&Slot, u64)> {
        let i = self.slots.partition_point(|s| s.base <= offset);
        let s = i
            .checked_sub(1)
            .map(|i| &self.slots[i])
            .filter(|s| offset - s.base < s.len)
            .ok_or_else(|| io::Error::other(format!("no file at byte {offset}")))?;
        Ok((s, offset - s.base))
    }
}

impl Backend for Uring {
    fn push(&mut self, sub: Submission) -> io::Result<()> {
        self.push_filled(sub, &mut |_| {})
    }

    fn push_filled(&mut self, sub: Submission, fill: &mut dyn FnMut(&mut [u8])) -> io::Result<()> {
        debug_assert!(sub.tag & TIMER_TAG == 0);
        let len = sub.len as usize;
        let mut buf = self
            .free
            .get_mut(&len)
            .and_then(Vec::pop)
            .unwrap_or_else(|| Buffer::new(len));
        if sub.op == Op::Write {
            fill(buf.slice());
        }
        let (slot, offset) = self.slot(sub.offset)?;
        let fd = types::Fd(slot.file.as_raw_fd());
        let atomic = slot.atomic;
        let ptr = buf.slice().as_mut_ptr();
        let entry = match sub.op {
            Op::Read => opcode::Read::new(fd, ptr, sub.len)
                .offset(offset)
                .ioprio(sub.ioprio)
                .build(),
            Op::Write => opcode::Write::new(fd, ptr, sub.len)
                .offset(offset)
                .ioprio(sub.ioprio)
                .rw_flags(if atomic { RWF_ATOMIC } else { 0 })
                .build(),
            Op::Flush => opcode::Fsync::new(fd).build(),
        }
        .user_data(sub.tag);
        self.busy.insert(sub.tag, (buf, sub.op));
        if let Err(e) = self.push_entry(&entry) {
            self.busy.remove(&sub.tag);
            return Err(e);
        }
        Ok(())
    }

    fn arm_timer(&mut self, after: std::time::Duration) -> io::Result<()> {
        let tag = TIMER_TAG | self.next_timer;
        self.next_timer += 1;
        let ts = Box::new(types::Timespec::from(after));
        let entry = opcode::Timeout::new(&*ts as *const types::Timespec)
            .build()
            .user_data(tag);
        self.timers.insert(tag, ts);
        if let Err(e) = self.push_entry(&entry) {
            self.timers.remove(&tag);
            return Err(e);
        }
        Ok(())
    }

    fn wait(&mut self, out: &mut Vec<(u64, i32)>) -> io::Result<()> {
        self.wait_checked(out, &mut |_, _| {})
    }

    fn wait_checked(
        &mut self,
        out: &mut Vec<(u64, i32)>,
        check: &mut dyn FnMut(u64, &[u8]),
    ) -> io::Result<()> {
        match self.ring.submit_and_wait(1) {
            Ok(_) => {}
            // A signal (Ctrl-C): return, so the caller can look.
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            // The completion queue is full: reap first.
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            Err(e) => return Err(e),
        }
        self.unsubmitted = 0;
        let mut rang = false;
        for cqe in self.ring.completion() {
            let tag = cqe.user_data();
            if tag == DOORBELL_TAG {
                rang = true;
                continue;
            }
            if tag & TIMER_TAG != 0 {
                self.timers.remove(&tag);
                continue;
            }
            let result = cqe.result();
            if let Some((mut buf, op)) = self.busy.remove(&tag) {
                if op == Op::Read && result > 0 {
                    let n = (result as usize).min(buf.len);
                    check(tag, &buf.slice()[..n]);
                }
                self.free.entry(buf.len).or_default().push(buf);
            }
            out.push((tag, result));
        }
        if rang {
            self.arm_doorbell()?;
        }
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.busy.len()
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.unsubmitted > 0 {
            self.ring.submit()?;
            self.unsubmitted = 0;
        }
        Ok(())
    }

    fn doorbell(&mut self, fd: RawFd) -> io::Result<()> {
        if self.doorbell.is_some() {
            return Err(io::Error::other("a doorbell is already set"));
        }
        self.doorbell = Some((fd, Box::new([0; 8])));
        self.arm_doorbell()
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        // The kernel may still write into the buffers of operations in
        // flight: wait for them before the buffers go. The doorbell's read
        // stays pending until the ring is torn down: its 8 bytes are leaked.
        if let Some((_, buf)) = self.doorbell.take() {
            Box::leak(buf);
        }
        let mut out = Vec::new();
        while !self.busy.is_empty() {
            if self.wait(&mut out).is_err() {
                // Cannot tell when the kernel is done with them: leak.
                std::mem::forget(std::mem::take(&mut self.busy));
                break;
            }
        }
    }
}

/// Which operations fail and how. Counts are over reads (or writes) in the
/// order they complete; 0 disables a fault.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Every n-th read fails with EIO.
    pub read_eio_every: u64,
    /// Every n-th read (not failed) returns half its bytes, rounded down to
    /// a sector, as a read past the end of a file does.
    pub short_read_every: u64,
    /// Every n-th write fails with ENOSPC.
    pub write_enospc_every: u64,
}

/// A backend whose completions are rewritten by a [`FaultPlan`]: the
/// fault-injecting file backend of the tests (the I/O really happens; its
/// result is replaced).
#[derive(Debug)]
pub struct Faulty<B> {
    inner: B,
    plan: FaultPlan,
    ops: FxHashMap<u64, Submission>,
    reads: u64,
    writes: u64,
    /// Faults injected so far: (EIO, short reads, ENOSPC).
    pub injected: (u64, u64, u64),
}

impl<B: Backend> Faulty<B> {
    pub fn new(inner: B, plan: FaultPlan) -> Self {
        Faulty {
            inner,
            plan,
            ops: FxHashMap::default(),
            reads: 0,
            writes: 0,
            injected: (0, 0, 0),
        }
    }

    fn rewrite(&mut self, sub: Submission, result: i32) -> i32 {
        let every = |n: u64, k: u64| k != 0 && n.is_multiple_of(k);
        match sub.op {
            Op::Read => {
                self.reads += 1;
                if every(self.reads, self.plan.read_eio_every) {
                    self.injected.0 += 1;
                    -libc::EIO
                } else if every(self.reads, self.plan.short_read_every) && result > 0 {
                    self.injected.1 += 1;
                    (result / 2) & !511
                } else {
                    result
                }
            }
            Op::Write => {
                self.writes += 1;
                if every(self.writes, self.plan.write_enospc_every) {
                    self.injected.2 += 1;
                    -libc::ENOSPC
                } else {
                    result
                }
            }
            Op::Flush => result,
        }
    }
}

impl<B: Backend> Backend for Faulty<B> {
    fn push(&mut self, sub: Submission) -> io::Result<()> {
        self.inner.push(sub)?;
        self.ops.insert(sub.tag, sub);
        Ok(())
    }

    fn push_filled(&mut self, sub: Submission, fill: &mut dyn FnMut(&mut [u8])) -> io::Result<()> {
        self.inner.push_filled(sub, fill)?;
        self.ops.insert(sub.tag, sub);
        Ok(())
    }

    fn arm_timer(&mut self, after: std::time::Duration) -> io::Result<()> {
        self.inner.arm_timer(after)
    }

    fn wait(&mut self, out: &mut Vec<(u64, i32)>) -> io::Result<()> {
        let from = out.len();
        self.inner.wait(out)?;
        for done in &mut out[from..] {
            let sub = self
                .ops
                .remove(&done.0)
                .expect("a completion for a pushed tag");
            done.1 = self.rewrite(sub, done.1);
        }
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    fn doorbell(&mut self, fd: RawFd) -> io::Result<()> {
        self.inner.doorbell(fd)
    }
}
