//! The project's shared inputs (`../shared/` beside the repository: real
//! traces, the mutation-fuzz repros), as tests find them.
//!
//! A test whose input is missing must not pass silently: it fails, unless
//! [`SKIP_SHARED`] is set to 1, which skips it with a printed note.

use std::path::Path;

/// Set to 1 to skip the tests whose input lives in `../shared`.
pub const SKIP_SHARED: &str = "ELEVATOR_SKIP_SHARED";

/// Whether `path` (under `../shared`) is there: panics when it is not,
/// unless [`SKIP_SHARED`] is 1, when it prints a note and says no.
pub fn shared_present(path: &Path) -> bool {
    if path.exists() {
        return true;
    }
    if std::env::var(SKIP_SHARED).is_ok_and(|v| v == "1") {
        println!(
            "note: {} missing; skipped ({SKIP_SHARED}=1)",
            path.display()
        );
        return false;
    }
    panic!(
        "{} is missing: put the shared folder beside the repository, or set {SKIP_SHARED}=1",
        path.display()
    );
}
