//! Ctrl-C as a flag: a long real-device run (`tune --verify --kernel`)
//! catches SIGINT, checks [`interrupted`] between its steps and returns an
//! error, so that whatever it changed is put back as the stack unwinds
//! (a guard's `Drop`) rather than left behind by a killed process.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Catch SIGINT from here on. Child processes in the same process group
/// (fio) get the terminal's SIGINT too and stop their own run.
pub fn catch_sigint() -> std::io::Result<()> {
    let handler = on_sigint as extern "C" fn(libc::c_int);
    // SAFETY: the handler only stores to an atomic (async-signal-safe) and
    // has the signature signal(2) expects.
    let old = unsafe { libc::signal(libc::SIGINT, handler as libc::sighandler_t) };
    if old == libc::SIG_ERR {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether SIGINT came since [`catch_sigint`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}
