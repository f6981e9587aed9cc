//! Timers, waking and running processes: the system-call loop that steps
//! each program until it blocks.

use super::*;

impl Host {
    // ---------------------------------------------------------------
    // Timers, waking, running.

    pub(super) fn arm(&mut self, at: Instant, action: TimerAction, io: &mut Io<'_>) {
        let token = self.next_token;
        self.next_token += 1;
        self.timers.insert(token, action);
        io.wake_at(at, token);
    }

    pub(super) fn wake(&mut self, pid: Pid, gen: u64) {
        let p = &mut self.procs[pid];
        if p.blocked && !p.exited && p.gen == gen {
            p.gen += 1;
            p.blocked = false;
            self.ready.push_back(pid);
        }
    }

    pub(super) fn gen(&self, pid: Pid) -> u64 {
        self.procs[pid].gen
    }

    pub(super) fn sleep_until(&mut self, pid: Pid, at: Instant, io: &mut Io<'_>) {
        let gen = self.gen(pid);
        self.arm(at, TimerAction::Wake(pid, gen), io);
    }

    pub(super) fn wait_page(&mut self, pid: Pid, file: FileId, page: u64) {
        // `lock_page` → `sync_page` → `blk_run_backing_dev`: a process
        // that waits for a page unplugs the queue (pre-2.6.39).
        self.unplug = true;
        let key = (u64::from(file.0) << 32) | (page / CHUNK_PAGES);
        let gen = self.gen(pid);
        self.page_waiters.entry(key).or_default().push((pid, gen));
    }

    pub(super) fn wait_writes(&mut self, pid: Pid, cond: WaitCond) {
        // `wait_on_page_writeback` → `sync_page` unplugs as well.
        self.unplug = true;
        let gen = self.gen(pid);
        self.write_waiters.push((pid, gen, cond));
    }

    pub(super) fn congestion_wait(&mut self, pid: Pid, io: &mut Io<'_>) {
        let gen = self.gen(pid);
        self.congestion_waiters.push((pid, gen));
        self.arm(io.now() + CONGESTION_WAIT, TimerAction::Wake(pid, gen), io);
        self.stats.throttle_waits += 1;
    }

    pub(super) fn run_ready(&mut self, io: &mut Io<'_>) {
        while let Some(pid) = self.ready.pop_front() {
            self.run_proc(pid, io);
        }
        if std::mem::take(&mut self.unplug) {
            io.unplug();
        }
    }

    pub(super) fn run_proc(&mut self, pid: Pid, io: &mut Io<'_>) {
        loop {
            if self.procs[pid].exited || self.procs[pid].blocked {
                return;
            }
            if self.procs[pid].sys.is_none() {
                let debt = self.procs[pid].cpu_debt;
                if debt >= CPU_QUANTUM {
                    self.procs[pid].cpu_debt = Duration::ZERO;
                    self.procs[pid].blocked = true;
                    self.sleep_until(pid, io.now() + debt, io);
                    return;
                }
                let call = {
                    let p = &mut self.procs[pid];
                    let mut cx = Ctx {
                        now: io.now(),
                        fs: &self.fs,
                        params: &self.params,
                        last: p.last,
                        stats: &mut self.rows[p.row].stats,
                    };
                    match p.last.error() {
                        Some(errno) => p.program.failed(errno, &mut cx),
                        None => p.program.next(&mut cx),
                    }
                };
                let sys = self.begin(pid, call, io.now());
                let p = &mut self.procs[pid];
                p.sys = Some(sys);
                p.sys_start = io.now();
            }
            let mut sys = self.procs[pid].sys.take().expect("a call in progress");
            let step = self.advance(pid, &mut sys, io);
            match step {
                Step::Done { ret, cpu, io: kind } => {
                    let now = io.now();
                    let p = &mut self.procs[pid];
                    let latency = now.since(p.sys_start) + cpu;
                    p.cpu_debt += cpu;
                    p.last = SysResult { ret, latency };
                    match (kind, ret) {
                        (Some(read), Ret::Bytes(n)) => {
                            self.rows[p.row].stats.record(now, read, n, latency);
                        }
                        // The report counts each error its process saw.
                        (_, Ret::Err(errno)) => {
                            *self.rows[p.row]
                                .stats
                                .extra
                                .entry(errno.name().to_string())
                                .or_default() += 1.0;
                        }
                        _ => {}
                    }
                }
                Step::Block => {
                    let p = &mut self.procs[pid];
                    p.sys = Some(sys);
                    p.blocked = true;
                    return;
                }
                Step::Exit => {
                    let now = io.now();
                    let p = &mut self.procs[pid];
                    p.exited = true;
                    let task = p.task;
                    let row = &mut self.rows[p.row];
                    row.exited += 1;
                    if row.exited == row.procs {
                        row.stats.finished = Some(now);
                    }
                    io.task_exited(task);
                    return;
                }
            }
        }
    }

    /// Turn a call into its in-progress state.
    pub(super) fn begin(&mut self, pid: Pid, call: Syscall, now: Instant) -> Sys {
        match call {
            Syscall::Open(file) => Sys::Open { file, fresh: true },
            Syscall::Stat(file) => Sys::Open { file, fresh: false },
            Syscall::Close(file) => Sys::Close(file),
            Syscall::DropCache(file) => Sys::DropCache(file),
            Syscall::Read { file, offset, len } => {
                let end = (offset + len).min(self.fs.size(file));
                Sys::Read(ReadOp {
                    file,
                    start: offset.min(end),
                    pos: offset.min(end),
                    end,
                    ra_page: None,
                    pending: None,
                    missed: false,
                    reada_ok: None,
                    pending24: None,
                    count: len,
                })
            }
            Syscall::Fault { file, offset } => Sys::Fault {
                file,
                page: offset / PAGE_SIZE,
            },
            Syscall::Write { file, offset, len } => {
                // cgroup v2 writeback: the inode belongs to the group that
                // dirties it (the kernel switches an inode to the group
                // doing most of its writing; the last writer stands in).
                self.dirtier.insert(file.0, self.procs[pid].group);
                Sys::Write(WriteOp {
                    file,
                    start: offset,
                    pos: offset,
                    end: offset + len,
                    inode_done: false,
                    throttle: None,
                    balance: 0,
                    full: false,
                })
            }
            Syscall::Fsync(file) => Sys::Sync(SyncOp {
                target: Some(file),
                pass: 0,
                wait_for: 0,
                data_seq: 0,
            }),
            Syscall::Sync => Sys::Sync(SyncOp {
                target: None,
                pass: 0,
                wait_for: 0,
                data_seq: 0,
            }),
            Syscall::ReadDir(dir) => Sys::ReadDir { dir, next: 0 },
            Syscall::Create { parent, dir } => Sys::Create(CreateOp {
                parent,
                dir,
                file: None,
                parent_grew: false,
            }),
            Syscall::Sleep(d) => {
                let p = &mut self.procs[pid];
                let until = now + p.cpu_debt + d;
                p.cpu_debt = Duration::ZERO;
                Sys::Sleep {
                    until,
                    armed: false,
                }
            }
            Syscall::SleepUntil(t) => {
                let p = &mut self.procs[pid];
                let until = t.max(now + p.cpu_debt);
                p.cpu_debt = Duration::ZERO;
                Sys::Sleep {
                    until,
                    armed: false,
                }
            }
            Syscall::PipePut { pipe, item } => Sys::PipePut { pipe, item },
            Syscall::PipeGet(pipe) => Sys::PipeGet(pipe),
            Syscall::PipeClose(pipe) => Sys::PipeClose(pipe),
            Syscall::Barrier(id) => Sys::Barrier { id, arrived: false },
            Syscall::Exit => {
                // Finish the CPU work first, then exit.
                let p = &mut self.procs[pid];
                let until = now + p.cpu_debt;
                p.cpu_debt = Duration::ZERO;
                Sys::Exit {
                    until,
                    armed: false,
                }
            }
        }
    }

    pub(super) fn advance(&mut self, pid: Pid, sys: &mut Sys, io: &mut Io<'_>) -> Step {
        let syscall = self.params.syscall_cpu;
        let done = |ret: Ret| Step::Done {
            ret,
            cpu: syscall,
            io: None,
        };
        match sys {
            Sys::Open { file, fresh } => {
                let block = self.fs.inode_block(*file);
                if self.ensure_page(pid, FileId::BDEV, block, io).is_err() {
                    return Step::Block;
                }
                if *fresh {
                    self.procs[pid].ra.insert(file.0, RaState::new());
                    self.procs[pid].ra24.insert(file.0, Ra24::new());
                }
                done(Ret::None)
            }
            Sys::DropCache(file) => {
                self.cache.drop_clean(*file);
                done(Ret::None)
            }
            Sys::Close(file) => {
                self.procs[pid].ra.remove(&file.0);
                self.procs[pid].ra24.remove(&file.0);
                self.fs.discard_prealloc(*file);
                done(Ret::None)
            }
            Sys::Read(op) => self.do_read(pid, op, io),
            Sys::Fault { file, page } => {
                let (file, page) = (*file, *page);
                match self.cache.state(file, page) {
                    PageState::Uptodate => {
                        self.cache.touch(file, page);
                        done(Ret::None)
                    }
                    PageState::Locked => {
                        self.wait_page(pid, file, page);
                        Step::Block
                    }
                    PageState::Absent => {
                        let start = page - page % MMAP_READAROUND_PAGES;
                        if self
                            .submit_window(pid, file, start, MMAP_READAROUND_PAGES, io)
                            .is_err()
                        {
                            return Step::Block;
                        }
                        if self.cache.state(file, page) == PageState::Locked {
                            self.wait_page(pid, file, page);
                            return Step::Block;
                        }
                        // Past the end of the file.
                        done(Ret::None)
                    }
                }
            }
            Sys::Write(op) => self.do_write(pid, op, io),
            Sys::Sync(op) => self.do_sync(pid, op, io),
            Sys::ReadDir { dir, next } => {
                let dir = *dir;
                let blocks = self.fs.inode(dir).nblocks();
                while *next < blocks {
                    if self.ensure_page(pid, dir, *next, io).is_err() {
                        return Step::Block;
                    }
                    *next += 1;
                }
                let entries = self.fs.children(dir).len() as u64;
                Step::Done {
                    ret: Ret::None,
                    cpu: syscall + Duration(50 * entries),
                    io: None,
                }
            }
            Sys::Create(op) => self.do_create(pid, op, io),
            Sys::Sleep { until, armed } => {
                if io.now() >= *until {
                    return Step::Done {
                        ret: Ret::None,
                        cpu: Duration::ZERO,
                        io: None,
                    };
                }
                if !*armed {
                    *armed = true;
                    let until = *until;
                    self.sleep_until(pid, until, io);
                }
                Step::Block
            }
            Sys::PipePut { pipe, item } => {
                let p = &mut self.pipes[*pipe];
                if p.buf.len() < p.cap {
                    p.buf.push_back(*item);
                    if let Some((r, g)) = p.reader.take() {
                        self.wake(r, g);
                    }
                    done(Ret::None)
                } else {
                    let gen = self.procs[pid].gen;
                    self.pipes[*pipe].writer = Some((pid, gen));
                    Step::Block
                }
            }
            Sys::PipeGet(pipe) => {
                let p = &mut self.pipes[*pipe];
                if let Some(x) = p.buf.pop_front() {
                    if let Some((w, g)) = p.writer.take() {
                        self.wake(w, g);
                    }
                    done(Ret::Item(Some(x)))
                } else if p.closed {
                    done(Ret::Item(None))
                } else {
                    let gen = self.procs[pid].gen;
                    self.pipes[*pipe].reader = Some((pid, gen));
                    Step::Block
                }
            }
            Sys::PipeClose(pipe) => {
                let p = &mut self.pipes[*pipe];
                p.closed = true;
                if let Some((r, g)) = p.reader.take() {
                    self.wake(r, g);
                }
                done(Ret::None)
            }
            Sys::Barrier { id, arrived } => {
                if *arrived {
                    return done(Ret::None);
                }
                *arrived = true;
                let gen = self.procs[pid].gen;
                let b = &mut self.barriers[*id];
                if b.waiting.len() + 1 >= b.parties {
                    let others = std::mem::take(&mut b.waiting);
                    for (q, g) in others {
                        self.wake(q, g);
                    }
                    done(Ret::None)
                } else {
                    b.waiting.push((pid, gen));
                    Step::Block
                }
            }
            Sys::Exit { until, armed } => {
                if io.now() >= *until {
                    return Step::Exit;
                }
                if !*armed {
                    *armed = true;
                    let until = *until;
                    self.sleep_until(pid, until, io);
                }
                Step::Block
            }
        }
    }
}
