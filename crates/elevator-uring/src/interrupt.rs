//! Ctrl-C for a run: the first SIGINT sets a flag the run looks at (and
//! interrupts a wait in the kernel, so it looks at once); the handler then
//! resets itself, so a second Ctrl-C ends the process as usual.
//!
//! A fio job stops its threads and reports what it measured; a long
//! real-device run (`tune --verify --kernel`) checks [`interrupted`]
//! between its steps and returns an error, so that whatever it changed is
//! put back as the stack unwinds (a guard's `Drop`). Child processes in the
//! same process group (fio) get the terminal's SIGINT too.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the first SIGINT after [`install`].
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Catch the next SIGINT in [`INTERRUPTED`] (without `SA_RESTART`, so a
/// wait in `io_uring_enter` returns EINTR; with `SA_RESETHAND`, so the
/// one after ends the process).
pub fn install() -> io::Result<&'static AtomicBool> {
    // SAFETY: `sigaction` is given a zeroed struct with a valid handler
    // (an `extern "C"` fn that only stores to an atomic) and an empty
    // mask; the old action is not read.
    let rc = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESETHAND;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(&INTERRUPTED)
}

/// [`install`], for callers that only poll [`interrupted`].
pub fn catch_sigint() -> io::Result<()> {
    install().map(|_| ())
}

/// Whether SIGINT came since [`install`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}
