//! nilfs2: log-structured placement, as Linux 2.6.30-2.6.32 and
//! nilfs-utils 2.0 made it (Documentation/filesystems/nilfs2.txt of
//! 2.6.30; fs/nilfs2/segment.c; reference §6).
//!
//! Files are named and grown as in [`super`] (their block numbers stand
//! for nilfs2's virtual block numbers, which the DAT maps to places on
//! disk); where data lies is decided when it is written: the segment
//! constructor (`segctord`) appends every dirty block to the log, so a
//! file block's disk place is where the last log that carried it put it,
//! and reads go there. This module keeps the log's head and the
//! constructor's triggers; the host writes the pages.
//!
//! - **Segments** of `NILFS_DEF_BLOCKS_PER_SEGMENT` (2048) 4 KiB blocks,
//!   8 MiB (nilfs-utils 2.0.14 mkfs.h). Each log starts with a segment
//!   summary block, and a log that reaches the end of a segment continues
//!   in the next one with a new summary (`nilfs_segctor_begin_construction`,
//!   fs/nilfs2/segment.c). Segment 0 begins after the super block.
//! - **Payload** in log order: the files' data blocks, then the metadata
//!   blocks dirtied with them (here the ext2-like indirect and inode blocks
//!   stand in for the files' B-tree nodes and ifile blocks), then one DAT
//!   block per 128 blocks written (a `nilfs_dat_entry` is four 64-bit
//!   words, 32 bytes; include/linux/nilfs2_fs.h), the sufile block, and
//!   with a checkpoint the cpfile block and the super root.
//! - **When**: a transaction's end arms a timer of
//!   `NILFS_SC_DEFAULT_TIMEOUT` (5 s) whose expiry writes a log with a
//!   super root, a checkpoint; more than `NILFS_SC_DEFAULT_WATERMARK`
//!   (3600) dirty blocks start a data-only log at once, with a super root
//!   only if `NILFS_SC_DEFAULT_SR_FREQ` (30 s) passed since the last one
//!   (fs/nilfs2/segment.h, `nilfs_segctor_flush_mode`); `fsync` builds a
//!   log with a super root and waits for it (`nilfs_sync_file` →
//!   `nilfs_construct_segment`). The flusher cannot clean nilfs2 pages:
//!   `nilfs_writepages` ignores `WB_SYNC_NONE` and `nilfs_writepage` only
//!   redirties, so only the constructor writes.
//! - **Flags**: log blocks are `WRITE`; the last bio of a construction
//!   adds `SYNCIO` (fs/nilfs2/segbuf.c, 2.6.30).
//!
//! Not modelled: the cleaner (`nilfs_cleanerd`, which copies live blocks
//! out of old segments): when the log reaches the end of the volume it
//! continues at segment 0, as if the cleaner had freed it (the runs here
//! write less than a volume).
//!
//! Invariants: the head only moves forward (modulo the wrap); every block
//! of a log is inside one segment; a segment's first log block is its
//! summary.

use elevator_core::{Duration, Instant};

/// `NILFS_DEF_BLOCKS_PER_SEGMENT`, 2048 blocks (8 MiB of 4 KiB blocks):
/// mkfs.nilfs2's default (nilfs-utils 2.0.14 mkfs.h, man page).
pub const BLOCKS_PER_SEGMENT: u64 = 2048;
/// `NILFS_SC_DEFAULT_TIMEOUT`, 5 s: from a transaction's end to the
/// checkpoint it arms (fs/nilfs2/segment.h).
pub const SC_DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// `NILFS_SC_DEFAULT_WATERMARK`, 3600 dirty blocks: above it the
/// constructor writes at once (fs/nilfs2/segment.h).
pub const SC_DEFAULT_WATERMARK: u64 = 3600;
/// `NILFS_SC_DEFAULT_SR_FREQ`, 30 s: the least time between super roots
/// of watermark-triggered logs (fs/nilfs2/segment.h).
pub const SC_DEFAULT_SR_FREQ: Duration = Duration::from_secs(30);
/// DAT entries per 4 KiB block: `struct nilfs_dat_entry` is 32 bytes
/// (include/linux/nilfs2_fs.h).
pub const DAT_ENTRIES_PER_BLOCK: u64 = 4096 / 32;

/// Validated nilfs2 options (mkfs's segment size; nilfs2's mount options
/// of 2.6.3x change nothing this model sees).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nilfs2Options {
    pub blocks_per_segment: u64,
}

impl Default for Nilfs2Options {
    fn default() -> Self {
        Nilfs2Options {
            blocks_per_segment: BLOCKS_PER_SEGMENT,
        }
    }
}

/// Validate nilfs2's mount options (`blocks_per_segment=`); the
/// registry's `build` for nilfs2 (`fs/registry.rs`).
pub fn parse_options(options: &[(&str, &str)]) -> Result<Nilfs2Options, String> {
    let mut o = Nilfs2Options::default();
    for &(k, v) in options {
        match k {
            // mkfs.nilfs2 -B: at least 16 blocks per segment (the
            // kernel's NILFS_SEG_MIN_BLOCKS), at most 65536 here.
            "blocks_per_segment" => {
                o.blocks_per_segment = v
                    .parse()
                    .ok()
                    .filter(|n| (16..=65536).contains(n))
                    .ok_or_else(|| format!("blocks_per_segment={v:?}: 16 to 65536"))?;
            }
            _ => {
                return Err(format!(
                    "unknown nilfs2 option {k:?} (blocks_per_segment=N, mkfs -B)"
                ))
            }
        }
    }
    Ok(o)
}

/// One placed run of a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub block: u64,
    pub len: u64,
    /// A segment summary block (one block, no payload).
    pub summary: bool,
}

/// Counters of log activity.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogStats {
    pub logs: u64,
    pub checkpoints: u64,
    pub blocks: u64,
}

/// The log and the segment constructor's state.
#[derive(Clone, Debug)]
pub struct Log {
    pub options: Nilfs2Options,
    /// First block of segment 0 and the end of the volume.
    first: u64,
    end: u64,
    head: u64,
    /// The next block placed starts a log (needs a summary).
    new_log: bool,
    /// A checkpoint timer is armed (its generation).
    pub timer: Option<u64>,
    timer_gen: u64,
    pub last_super_root: Option<Instant>,
    /// Constructions started and finished.
    pub started: u64,
    pub done: u64,
    /// The write sequence number the running construction waits for.
    pub waiting_seq: Option<u64>,
    /// Another construction was asked for while one ran (with a super
    /// root if true).
    pub again: Option<bool>,
    pub stats: LogStats,
}

impl Log {
    /// A log over blocks `[first, end)` of the volume, starting at the
    /// segment boundary at or after `used` (what mkfs and the files placed
    /// before the run occupy).
    pub fn new(options: Nilfs2Options, first: u64, end: u64, used: u64) -> Self {
        let seg = options.blocks_per_segment;
        let head = first + (used.max(first) - first).div_ceil(seg) * seg;
        assert!(end >= first + 2 * seg, "a nilfs2 volume holds two segments");
        Log {
            options,
            first,
            end,
            head: if head + seg > end { first } else { head },
            new_log: true,
            timer: None,
            timer_gen: 0,
            last_super_root: None,
            started: 0,
            done: 0,
            waiting_seq: None,
            again: None,
            stats: LogStats::default(),
        }
    }

    /// A transaction ended at `now`: the checkpoint timer to arm (its
    /// expiry and generation), if none is armed.
    pub fn transaction_end(&mut self, now: Instant) -> Option<(Instant, u64)> {
        if self.timer.is_some() {
            return None;
        }
        self.timer_gen += 1;
        self.timer = Some(self.timer_gen);
        Some((now + SC_DEFAULT_TIMEOUT, self.timer_gen))
    }

    /// Whether a watermark-triggered log at `now` carries a super root.
    pub fn super_root_due(&self, now: Instant) -> bool {
        self.last_super_root
            .is_none_or(|t| now.since(t) >= SC_DEFAULT_SR_FREQ)
    }

    /// A construction starts; `super_root` if it ends with a checkpoint.
    pub fn begin(&mut self, super_root: bool, now: Instant) {
        self.new_log = true;
        self.started += 1;
        self.stats.logs += 1;
        if super_root {
            self.stats.checkpoints += 1;
            self.last_super_root = Some(now);
            self.timer = None;
        }
    }

    /// Place `n` payload blocks at the head, in log order: runs inside
    /// segments, each segment's part of the log led by a summary block.
    pub fn place(&mut self, n: u64, out: &mut Vec<Run>) {
        let seg = self.options.blocks_per_segment;
        let mut left = n;
        while left > 0 {
            if self.head + seg > self.end {
                // Past the last whole segment: back to segment 0.
                self.head = self.first;
                self.new_log = true;
            }
            let seg_end = self.first + (self.head - self.first) / seg * seg + seg;
            if self.new_log || self.head == seg_end - seg {
                if self.head + 1 >= seg_end {
                    self.head = seg_end;
                    continue;
                }
                out.push(Run {
                    block: self.head,
                    len: 1,
                    summary: true,
                });
                self.head += 1;
                self.stats.blocks += 1;
                self.new_log = false;
            }
            let k = left.min(seg_end - self.head);
            out.push(Run {
                block: self.head,
                len: k,
                summary: false,
            });
            self.head += k;
            self.stats.blocks += k;
            left -= k;
            if self.head == seg_end {
                self.new_log = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_fills_segments_in_order_with_a_summary_each() {
        let mut log = Log::new(Nilfs2Options::default(), 1, 1 + 4 * 2048, 100);
        log.begin(false, Instant::ZERO);
        let mut runs = Vec::new();
        log.place(3000, &mut runs);
        let s1 = 1 + 2048;
        assert_eq!(
            runs,
            vec![
                Run {
                    block: s1,
                    len: 1,
                    summary: true
                },
                Run {
                    block: s1 + 1,
                    len: 2047,
                    summary: false
                },
                Run {
                    block: s1 + 2048,
                    len: 1,
                    summary: true
                },
                Run {
                    block: s1 + 2049,
                    len: 953,
                    summary: false
                },
            ]
        );
        runs.clear();
        log.place(5, &mut runs);
        assert_eq!(
            runs,
            vec![Run {
                block: s1 + 3002,
                len: 5,
                summary: false
            }]
        );
    }
}
