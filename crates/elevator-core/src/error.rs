//! How an I/O can fail, as the block layer reports it upward.

use std::fmt;

/// A failed request. A device fault is data, never a panic: the device
/// model (or the fault-injecting `Faulty` wrapper of elevator-device)
/// completes the request with one of these and the engine passes it to
/// the submitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoError {
    /// The device reported a media or transport error (`-EIO`).
    Io,
    /// The command timed out (the SCSI layer's `sd` timeout) and was
    /// failed; processes see `-EIO` as in Linux, reports count it apart.
    Timeout,
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoError::Io => "EIO",
            IoError::Timeout => "timeout",
        })
    }
}

impl std::error::Error for IoError {}
