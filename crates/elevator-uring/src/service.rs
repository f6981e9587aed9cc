//! Client threads in front of one runtime: the small API for programs that
//! are not written as a `Workload`.
//!
//! [`Service::start`] moves a [`Runtime`] onto its own engine thread.
//! Clients ([`Client`], cloneable, `Send`) submit a request and get a
//! [`Ticket`] whose `wait` returns the request's [`Done`]. A submission
//! travels over a channel and rings an eventfd that the engine keeps a read
//! pending on in its io_uring, so an engine asleep in the kernel (waiting
//! for completions or a policy's timer) wakes at once. Invariant: every
//! accepted submission is answered exactly once; at shutdown the engine
//! drains what is outstanding before it stops.

use crate::backend::Backend;
use crate::runtime::{Done, Runtime, RuntimeStats, Submit, SubmitError};
use elevator_core::TaskId;
use rustc_hash::FxHashMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

type Reply = Sender<Result<Done, SubmitError>>;

enum Message {
    Submit(Submit, Reply),
    TaskExited(TaskId),
}

/// The engine thread and the way to reach it.
#[derive(Debug)]
pub struct Service {
    client: Client,
    engine: JoinHandle<io::Result<RuntimeStats>>,
}

/// A handle to submit through; clone one per thread.
#[derive(Clone, Debug)]
pub struct Client {
    tx: Sender<Message>,
    bell: Arc<File>,
}

/// The answer to one submission.
#[derive(Debug)]
pub struct Ticket(Receiver<Result<Done, SubmitError>>);

impl Ticket {
    /// Block until the request is done. `Err` only if it was refused
    /// (misaligned) or the engine died.
    pub fn wait(self) -> Result<Done, SubmitError> {
        self.0.recv().unwrap_or(Err(SubmitError::EngineGone))
    }
}

impl Client {
    /// Queue `s`; the ticket returns its result.
    pub fn submit(&self, s: Submit) -> Ticket {
        let (reply, rx) = mpsc::channel();
        if self.tx.send(Message::Submit(s, reply)).is_ok() {
            self.ring();
        }
        Ticket(rx)
    }

    /// `task` submits no more (anticipation and idling stop waiting for it).
    pub fn task_exited(&self, task: TaskId) {
        if self.tx.send(Message::TaskExited(task)).is_ok() {
            self.ring();
        }
    }

    fn ring(&self) {
        // An eventfd adds the 8-byte count written; it cannot fail short of
        // overflow after 2^64 - 2 unread rings.
        let _ = (&*self.bell).write(&1u64.to_ne_bytes());
    }
}

fn eventfd() -> io::Result<OwnedFd> {
    #[allow(unsafe_code)]
    // SAFETY: eventfd(2) takes no pointers; a negative return is an error.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(unsafe_code)]
    // SAFETY: `fd` was just returned by eventfd(2), is open and owned by
    // nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Service {
    /// Start the engine thread for `runtime`.
    pub fn start<B: Backend + Send + 'static>(mut runtime: Runtime<B>) -> io::Result<Service> {
        let bell = Arc::new(File::from(eventfd()?));
        runtime.doorbell(bell.as_raw_fd())?;
        let (tx, rx) = mpsc::channel();
        let keep = Arc::clone(&bell);
        let engine = std::thread::Builder::new()
            .name("elevator-uring".into())
            .spawn(move || {
                let stats = serve(&mut runtime, &rx);
                drop(keep);
                stats
            })?;
        Ok(Service {
            client: Client { tx, bell },
            engine,
        })
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Stop taking submissions once every client is dropped, answer what is
    /// outstanding, and return the runtime's counters.
    pub fn shutdown(self) -> io::Result<RuntimeStats> {
        let Service { client, engine } = self;
        let bell = Arc::clone(&client.bell);
        drop(client);
        let _ = (&*bell).write(&1u64.to_ne_bytes());
        engine
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the engine thread panicked")))
    }
}

fn serve<B: Backend>(rt: &mut Runtime<B>, rx: &Receiver<Message>) -> io::Result<RuntimeStats> {
    let mut replies: FxHashMap<u64, Reply> = FxHashMap::default();
    let mut done = Vec::new();
    let mut open = true;
    loop {
        // Take everything waiting; block on the channel only when the
        // runtime has nothing to do.
        loop {
            let msg = if open && rt.outstanding() == 0 {
                rx.recv().map_err(|_| TryRecvError::Disconnected)
            } else if open {
                rx.try_recv()
            } else {
                Err(TryRecvError::Disconnected)
            };
            match msg {
                Ok(Message::Submit(s, reply)) => match rt.submit(s) {
                    Ok(id) => {
                        replies.insert(id.0, reply);
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                },
                Ok(Message::TaskExited(task)) => rt.task_exited(task),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        if !open && rt.outstanding() == 0 {
            return Ok(rt.stats());
        }
        done.clear();
        if !rt.poll(None, &mut done)? && rt.outstanding() > 0 {
            return Err(io::Error::other(format!(
                "{} holds {} requests and dispatches none",
                rt.policy().name(),
                rt.outstanding()
            )));
        }
        for d in &done {
            if let Some(reply) = replies.remove(&d.id.0) {
                // A client that dropped its ticket no longer wants the answer.
                let _ = reply.send(Ok(*d));
            }
        }
    }
}
