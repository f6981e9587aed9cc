//! What a policy may know about the device below it: the kernel's
//! `queue_limits` plus the `rotational` flag from sysfs.

use crate::Sector;
use serde::{Deserialize, Serialize};

/// Properties of the device queue that policies are allowed to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueLimits {
    /// Whether the device has moving heads (`queue/rotational`).
    pub rotational: bool,
    /// How many requests the device accepts at once (1 without TCQ/NCQ).
    pub queue_depth: u32,
    /// Largest request, in sectors (`max_sectors_kb * 2`): merges stop here.
    pub max_sectors: u32,
    /// Device size in sectors.
    pub capacity: Sector,
}

impl Default for QueueLimits {
    /// A 2003 IDE disk: rotational, no queueing, 128 KiB requests, 80 GB.
    fn default() -> Self {
        QueueLimits {
            rotational: true,
            queue_depth: 1,
            max_sectors: 256,
            capacity: 80_000_000_000 / 512,
        }
    }
}
