//! 2.4's writeback: bdflush, kupdated, `balance_dirty` and the page
//! reclaim that writes, as 2.4.20–2.4.21 had them. The host runs it under
//! [`Writeback::Bdflush`](crate::params::Writeback::Bdflush) (the
//! `linux-2.4` preset); this module holds the decisions, `host.rs` the
//! I/O.
//!
//! What 2.4 did (fs/buffer.c and mm/vmscan.c of 2.4.20/2.4.21):
//!
//! - **One list of dirty buffers.** File data written by `write(2)` is
//!   dirtied buffer by buffer (`__block_commit_write` → `__mark_dirty`),
//!   and every dirty buffer, data or metadata, of every file sits on
//!   `lru_list[BUF_DIRTY]` in the order it was dirtied. Writing takes
//!   buffers from its head: `write_some_buffers` locks up to `NRSYNC` = 32
//!   dirty buffers, skipping locked ones, and submits each (`submit_bh`),
//!   sleeping in `__get_request_wait` while the queue has no free
//!   request. The host keeps the list at the page cache's chunk grain
//!   (32 pages, [`crate::cache::PageCache::next_dirty_chunk`]).
//! - **`balance_dirty`**, after each page a writer dirties: with `dirty`
//!   the dirty buffers (not those under I/O) and `tot` =
//!   `nr_free_buffer_pages()`, above `nfract` % it wakes bdflush, above
//!   `nfract_sync` % the writer also calls `write_some_buffers` itself.
//!   Andrew Morton's "writeout scheduling" change (lkml, March 2002; the
//!   fs/buffer.c of 2.4.20) dropped the `wait_for_some_buffers` that
//!   followed: the writer is throttled by the request queue alone.
//! - **bdflush** writes `ndirty` = 500 buffers per cycle in calls of 32;
//!   it sleeps when the list runs dry or when, after a cycle, dirty
//!   buffers are at most `nfract_stop_bdflush` %. Unlike pdflush it never
//!   backs off a congested queue: it sleeps for a request like anyone.
//! - **kupdated** wakes every `interval` (5 s) and, while the buffer at
//!   the head of the list is older than `age_buffer` (30 s, its
//!   `b_flushtime`), calls `write_some_buffers` (`sync_old_buffers`).
//! - **Reclaim.** An allocation that finds too few free pages scans the
//!   inactive list from its tail (`shrink_cache`); a page with dirty
//!   buffers gets them written by the allocating process
//!   (`try_to_free_buffers` → `sync_page_buffers` → `submit_bh`, or
//!   `writepage` for a dirty page) and, when no clean page is left to
//!   free, the allocator waits on a page under I/O (`wait_on_buffer`,
//!   `wait_on_page` of a laundered page) and scans again. The seed: "The
//!   2.4 page allocator has a tendency to cause 5-10 second stalls for a
//!   single page allocation when the system is under writeout load."
//!
//! Simplifications: the host's one LRU stands for 2.4's inactive list
//! (streamed pages are touched once and never reach the active list);
//! the three passes of `sync_page_buffers` (mark, write, wait) are one:
//! reclaim writes the dirty pages it meets and waits only when the clean
//! pages it met fall short; kupdated and bdflush issue as one task;
//! `sync_unlocked_inodes` is the inode blocks on the dirty list.
//!
//! Invariant: the pdflush host never calls into this module, so the 2.6
//! results are the same with or without it.

use crate::params::Bdflush;

/// `balance_dirty_state()`: -1, 0 and 1 in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirtyState {
    /// At most `nfract` % dirty: nothing to do.
    Balanced,
    /// Above `nfract` %: wake bdflush.
    Async,
    /// Above `nfract_sync` %: wake bdflush and write buffers yourself.
    Sync,
}

/// `balance_dirty_state` for `dirty` dirty pages out of `tot` =
/// `nr_free_buffer_pages()`, compared in percent as the kernel does
/// (`dirty * 100 > tot * nfract`).
pub fn balance_dirty_state(p: &Bdflush, dirty: u64, tot: u64) -> DirtyState {
    let dirty = dirty * 100;
    if dirty <= tot * u64::from(p.nfract) {
        DirtyState::Balanced
    } else if dirty > tot * u64::from(p.nfract_sync) {
        DirtyState::Sync
    } else {
        DirtyState::Async
    }
}

/// `bdflush_stop`: after a cycle bdflush sleeps unless more than
/// `nfract_stop_bdflush` % are dirty.
pub fn bdflush_stop(p: &Bdflush, dirty: u64, tot: u64) -> bool {
    dirty * 100 <= tot * u64::from(p.nfract_stop_bdflush)
}

/// bdflush's state between events.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bdflushd {
    /// Awake (woken by `wakeup_bdflush` and not yet asleep again).
    pub awake: bool,
    /// Buffers left in this cycle (`ndirty`, counted down by `NRSYNC`).
    pub ndirty: i64,
    /// kupdated is in `sync_old_buffers` (it sleeps `interval` after).
    pub kupdate: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_percent_of_buffer_pages() {
        let p = Bdflush::default();
        let tot = 1000;
        assert_eq!(balance_dirty_state(&p, 300, tot), DirtyState::Balanced);
        assert_eq!(balance_dirty_state(&p, 301, tot), DirtyState::Async);
        assert_eq!(balance_dirty_state(&p, 600, tot), DirtyState::Async);
        assert_eq!(balance_dirty_state(&p, 601, tot), DirtyState::Sync);
        assert!(bdflush_stop(&p, 200, tot));
        assert!(!bdflush_stop(&p, 201, tot));
    }
}
