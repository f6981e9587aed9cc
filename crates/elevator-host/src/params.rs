//! Host parameters: the machine, the VM's knobs and the file system's
//! geometry, with the kernel's names and defaults.
//!
//! [`HostParams::linux_2_6`] is the Linux 2.5.6x/2.6.0 host the 2003
//! benchmarks ran on (P4-HT, 256 MB, ext2 with 4 KiB blocks). Every default
//! below is a named constant that says where it comes from. A preset is a
//! starting point: scenario files override single fields.

use crate::fs::registry::FsType;
use elevator_core::Duration;

/// Bytes per page on i386 (`PAGE_SIZE`).
pub const PAGE_SIZE: u64 = 4096;

/// `VM_MAX_READAHEAD`, 128 KiB: the default maximum readahead window
/// (include/linux/mm.h, 2.5/2.6), per device `read_ahead_kb`.
pub const VM_MAX_READAHEAD: u64 = 128 << 10;
/// `VM_MIN_READAHEAD`, 16 KiB (include/linux/mm.h, 2.5/2.6): the floor a
/// thrashing window shrinks to in `handle_ra_miss`.
pub const VM_MIN_READAHEAD: u64 = 16 << 10;
/// `vm_max_readahead`, 31 pages: 2.4's largest read-ahead (mm/filemap.c,
/// 2.4.10–2.4.2x); IDE sets the per-device `max_readahead` to it
/// (drivers/ide/ide-probe.c `init_gendisk`). An asynchronous read-ahead
/// is one page more: 32 pages, 128 KiB.
pub const VM_MAX_READAHEAD_24: u64 = 31;
/// `vm_min_readahead`, 3 pages: the smallest read-ahead of a reader that
/// stays in its window (mm/filemap.c, 2.4.10–2.4.2x).
pub const VM_MIN_READAHEAD_24: u64 = 3;
/// `MMAP_READAROUND`, 16 pages: the window a page fault on a file mapping
/// reads around the faulting page (mm/filemap.c, 2.6.0).
pub const MMAP_READAROUND_PAGES: u64 = 16;

/// `dirty_background_ratio`, 10 %: pdflush starts background writeback above
/// this share of memory dirty (mm/page-writeback.c, 2.5.x–2.6.21).
pub const DIRTY_BACKGROUND_RATIO: u32 = 10;
/// `vm_dirty_ratio`, 40 %: a writer is throttled in `balance_dirty_pages`
/// once dirty + writeback memory passes it (mm/page-writeback.c, 2.5.x–2.6.21;
/// lowered to 10/20 only in 2.6.22).
pub const DIRTY_RATIO: u32 = 40;
/// `dirty_expire_centisecs`, 30 s: data dirty for longer is written by the
/// periodic (kupdate) writeback (mm/page-writeback.c, `30 * HZ`).
pub const DIRTY_EXPIRE_CENTISECS: u32 = 3000;
/// `dirty_writeback_centisecs`, 5 s: the kupdate-style flush interval
/// (mm/page-writeback.c, `5 * HZ`).
pub const DIRTY_WRITEBACK_CENTISECS: u32 = 500;
/// `MAX_WRITEBACK_PAGES`, 1024: the pages one background or kupdate pass
/// writes before it looks at the thresholds again (mm/page-writeback.c).
pub const MAX_WRITEBACK_PAGES: u64 = 1024;
/// The sleep of `blk_congestion_wait(WRITE, HZ/10)` when no queue leaves
/// congestion first (mm/page-writeback.c callers, drivers/block/ll_rw_blk.c).
pub const CONGESTION_WAIT: Duration = Duration::from_millis(100);
/// `ratelimit` once `dirty_exceeded` is set: writers look at the limits every
/// 8 dirtied pages instead of every `ratelimit_pages`
/// (`balance_dirty_pages_ratelimited`, mm/page-writeback.c).
pub const RATELIMIT_EXCEEDED_PAGES: u64 = 8;
/// Request slots per direction, `BLKDEV_MAX_RQ` (include/linux/blkdev.h,
/// 2.6): the host uses it for the queue's congestion thresholds.
pub const NR_REQUESTS: u32 = 128;

/// `bdf_prm.nfract`, 30 %: above this share of `nr_free_buffer_pages()`
/// dirty, `balance_dirty` wakes bdflush (fs/buffer.c, 2.4.20–2.4.21).
pub const NFRACT: u32 = 30;
/// `bdf_prm.ndirty`, 500: the buffers bdflush writes per wake-up cycle
/// before it looks at `nfract_stop_bdflush` (fs/buffer.c, 2.4.20–2.4.21).
pub const NDIRTY: u64 = 500;
/// `bdf_prm.nfract_sync`, 60 %: above it the dirtying process writes
/// buffers itself in `balance_dirty` (fs/buffer.c, 2.4.20–2.4.21).
pub const NFRACT_SYNC: u32 = 60;
/// `bdf_prm.nfract_stop_bdflush`, 20 %: bdflush sleeps once dirty
/// buffers are below it (fs/buffer.c, 2.4.20–2.4.21; Andrew Morton's
/// "writeout scheduling" change of March 2002).
pub const NFRACT_STOP_BDFLUSH: u32 = 20;
/// `NRSYNC`, 32: the buffers one `write_some_buffers` call locks and
/// submits (fs/buffer.c, 2.4.20–2.4.21).
pub const NRSYNC: u64 = 32;
/// `DEF_PRIORITY`, 6: the first pass of 2.4's `try_to_free_pages` scans
/// `nr_inactive_pages / 6` pages of the inactive list (mm/vmscan.c, 2.4).
pub const DEF_PRIORITY: u64 = 6;
/// `zone_balance_ratio` 128, `zone_balance_min` 20, `zone_balance_max`
/// 255: a zone's `pages_min` is its size / 128 within [20, 255], and
/// `pages_high` three times that (mm/page_alloc.c 2.4,
/// `free_area_init_core`).
pub const ZONE_BALANCE: (u64, u64, u64) = (128, 20, 255);
/// `ZONE_DMA` on i386: the first 16 MiB (include/asm-i386/dma.h
/// `MAX_DMA_ADDRESS`); the rest of a 256 MB machine is `ZONE_NORMAL`.
pub const ZONE_DMA_BYTES: u64 = 16 << 20;

/// The 2003 test machine: "a fast P4-HT with 256MB of memory" (seed).
pub const MEMORY_2003: u64 = 256 << 20;
/// Memory the page cache cannot use (kernel text and data, slab, page
/// tables, the processes' anonymous memory). The seed's `vmstat 1` shows
/// `cache` at 222–234 MB and `buff` at 1–3 MB of the 256 MB during every
/// streaming test, so about 24 MiB is elsewhere.
pub const RESERVED_2003: u64 = 24 << 20;
/// A P4 with Hyper-Threading shows two CPUs; `set_ratelimit` divides by it.
pub const CPUS_2003: u32 = 2;

/// Block size of the 2003 ext2 file system (mke2fs picks 4 KiB on disks of
/// that size).
pub const BLOCK_SIZE: u64 = 4096;
/// Blocks per group: one bitmap block of 8 x 4096 bits, so 32768 blocks or
/// 128 MiB per group (ext2 on-disk format).
pub const BLOCKS_PER_GROUP: u64 = 32768;
/// Inodes per group: mke2fs's default of one inode per 8 KiB of disk gives
/// 16384 per 128 MiB group, a 2 MiB inode table of 128-byte inodes. The
/// e2fsprogs of the time used 4096 or 8192 depending on version; 8192 is
/// the later mke2fs.conf default [from memory; it only sets where the
/// inode table ends and how Orlov weighs free inodes].
pub const INODES_PER_GROUP: u32 = 16384;
/// Bytes per on-disk inode in ext2 revision 0/1 with default settings.
pub const INODE_SIZE: u64 = 128;
/// `EXT2_DEFAULT_PREALLOC_BLOCKS`, 8: blocks reserved past a file's last
/// allocation so that interleaved writers do not interleave block by block
/// (fs/ext2/ext2.h).
pub const PREALLOC_BLOCKS: u64 = 8;

/// CPU cost of a system call's entry and exit on a 2003 P4 [derived: a few
/// hundred ns for the trap plus VFS work; 1 µs keeps the order of magnitude].
pub const SYSCALL_CPU: Duration = Duration::from_micros(1);
/// CPU cost of copying one KiB between the page cache and user memory:
/// `cat` of a cached file ran at roughly 1 GB/s on such a machine [from
/// memory; it only matters for fully cached reads].
pub const COPY_CPU_PER_KIB: Duration = Duration::from_nanos(1000);
/// A process runs this much CPU time back to back before the simulation
/// advances its clock (it never delays an I/O by more than this).
pub const CPU_QUANTUM: Duration = Duration::from_micros(200);

/// How new directories are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocator {
    /// The Orlov allocator (fs/ext2/ialloc.c, merged in 2.5.4x): top-level
    /// directories spread out, others stay near their parent.
    Orlov,
    /// The 2.4 allocator (`find_group_dir`, the `oldalloc` mount option):
    /// every directory goes to the emptiest group with enough free inodes.
    Old,
}

/// The file system's geometry and allocation policy.
#[derive(Clone, Debug, PartialEq)]
pub struct FsParams {
    pub block_size: u64,
    pub blocks_per_group: u64,
    pub inodes_per_group: u32,
    pub allocator: Allocator,
    /// Size of the file system (bytes); `None`: the whole device.
    pub size: Option<u64>,
    /// Where the file system starts on the device (bytes).
    pub offset: u64,
    /// Share of each group's data blocks pre-filled in small scattered runs
    /// before any file is placed (an aged file system); 0 for a fresh one.
    pub fragmentation: f64,
    /// Which file system, with its mount options ([`crate::fs::registry`]).
    pub fs_type: FsType,
}

impl Default for FsParams {
    fn default() -> Self {
        FsParams {
            block_size: BLOCK_SIZE,
            blocks_per_group: BLOCKS_PER_GROUP,
            inodes_per_group: INODES_PER_GROUP,
            allocator: Allocator::Orlov,
            size: None,
            offset: 0,
            fragmentation: 0.0,
            fs_type: FsType::default(),
        }
    }
}

/// Which group buffered writeback is charged to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WritebackCharge {
    /// cgroup v2 writeback (Linux 4.2+, Tejun Heo): an inode's dirty pages
    /// are written back on behalf of the group that dirtied them, so the
    /// group's weight and `io.max` apply to its buffered writes.
    Dirtier,
    /// cgroup v1: the flusher writes everything from the root group, so
    /// buffered writes escape group limits (the complaint of `docker
    /// --device-write-bps` users, reference notes §9.5).
    Flusher,
}

/// Which of the host's own writes tell the block layer they are waited for
/// (the sync hint: a policy that splits sync from async puts them with the
/// reads). Only the anticipatory scheduler and the CFQ and BFQ of 2.6.30+
/// look at it; deadline, noop, linus24 and cfq-2003 sort by direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncWriteHint {
    /// None: the block layer of 2.5.61 and 2.5.62 carries no such hint.
    /// `PF_SYNCWRITE` first appears in the tree with the anticipatory
    /// scheduler's merge (Nick Piggin via Andrew Morton, "anticipatory I/O
    /// scheduler", 4 Jul 2003, 2.5.74), which calls it the way "we
    /// currently detect synchronous writes".
    Never,
    /// fsync(2) and fdatasync(2): `sys_fsync` and `sys_fdatasync` set
    /// `PF_SYNCWRITE` around `filemap_fdatawrite` (fs/buffer.c, 2.5.74 to
    /// 2.6.17), and AS marks the writes queued meanwhile sync
    /// (`as_add_request`). sync(2) stays async: `sys_sync` never set it.
    Fsync,
    /// Every data-integrity writeback (`WB_SYNC_ALL`: fsync and sync(2)):
    /// `WRITE_SYNC_PLUG` from 2.6.30 (fs/mpage.c `mpage_writepage`,
    /// fs/buffer.c `__block_write_full_page`).
    DataIntegrity,
}

impl SyncWriteHint {
    /// Whether the writes of fsync (`fsync`) or of sync(2) (`!fsync`)
    /// carry the hint.
    pub fn marks(self, fsync: bool) -> bool {
        match self {
            SyncWriteHint::Never => false,
            SyncWriteHint::Fsync => fsync,
            SyncWriteHint::DataIntegrity => true,
        }
    }
}

/// How ext3's `fsync(2)` gets the file's inode into the journal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ext3Fsync {
    /// 2.6.30 and 2.6.31: `vfs_fsync` (fs/sync.c) starts the file's data
    /// (`filemap_fdatawrite`, `WRITE_SYNC_PLUG`) without waiting, calls
    /// `ext3_sync_file`, which for a dirty inode runs `sync_inode` →
    /// `ext3_write_inode(wait = 1)` → `ext3_force_commit`
    /// (fs/ext3/fsync.c, fs/ext3/inode.c, fs/ext3/super.c of v2.6.30):
    /// `journal_force_commit` stops a handle with `h_sync`, which marks the
    /// running transaction `t_synchronous_commit`, starts its commit and
    /// waits for it (`journal_stop`, fs/jbd/transaction.c); then
    /// `filemap_fdatawait`. A synchronous commit writes its journal blocks
    /// (and in `data=ordered` the data it flushes) `WRITE_SYNC_PLUG`
    /// instead of `WRITE` (`journal_commit_transaction`, fs/jbd/commit.c
    /// v2.6.30: `if (commit_transaction->t_synchronous_commit) write_op =
    /// WRITE_SYNC_PLUG`).
    ForceCommit,
    /// 2.6.32+: `filemap_write_and_wait_range` first, then
    /// `log_start_commit` and `log_wait_commit` on the inode's last
    /// transaction (commit fe8bc91, Jan Kara): no `h_sync`, so the commit's
    /// journal writes stay `WRITE`; nothing to do if that transaction has
    /// committed.
    CommitTid,
}

/// Which kernel's readahead the host runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readahead {
    /// 2.5/2.6.0 `page_cache_readahead` ([`crate::readahead`]).
    Linux26,
    /// 2.4 `generic_file_readahead` ([`crate::readahead24`]).
    Linux24,
}

/// Which kernel's writeback the host runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writeback {
    /// 2.5/2.6.0: pdflush's background and kupdate writeback by file,
    /// `balance_dirty_pages` in the writer (mm/page-writeback.c); reclaim
    /// never writes.
    Pdflush,
    /// 2.4.20–2.4.21: bdflush and kupdated over the one list of dirty
    /// buffers oldest first, `balance_dirty` in the writer (fs/buffer.c),
    /// and page reclaim that writes the dirty pages it meets and waits
    /// for them (mm/vmscan.c `shrink_cache`); see [`crate::bdflush`].
    Bdflush(Bdflush),
}

/// bdflush's tunables (`/proc/sys/vm/bdflush`, `bdf_prm` in fs/buffer.c of
/// 2.4.20–2.4.21). `interval` and `age_buffer` are the host's
/// `dirty_writeback_centisecs` and `dirty_expire_centisecs` (5 s and 30 s
/// in both kernels).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bdflush {
    /// Percent of `nr_free_buffer_pages()` dirty that wakes bdflush.
    pub nfract: u32,
    /// Buffers bdflush writes per cycle before checking `nfract_stop_bdflush`.
    pub ndirty: u64,
    /// Percent dirty above which the dirtying process writes itself.
    pub nfract_sync: u32,
    /// Percent dirty below which bdflush goes back to sleep.
    pub nfract_stop_bdflush: u32,
}

impl Default for Bdflush {
    fn default() -> Self {
        Bdflush {
            nfract: NFRACT,
            ndirty: NDIRTY,
            nfract_sync: NFRACT_SYNC,
            nfract_stop_bdflush: NFRACT_STOP_BDFLUSH,
        }
    }
}

/// Everything about the host that is not a process.
#[derive(Clone, Debug, PartialEq)]
pub struct HostParams {
    /// The preset these values started from.
    pub preset: String,
    /// Physical memory (bytes).
    pub memory: u64,
    /// Memory the page cache cannot use (bytes).
    pub reserved: u64,
    pub cpus: u32,
    /// Largest readahead window (bytes): `read_ahead_kb`.
    pub readahead_max: u64,
    /// Smallest window a thrashing stream shrinks to (bytes); 2.4: the
    /// smallest read-ahead of a sequential reader (`vm_min_readahead`).
    pub readahead_min: u64,
    /// The readahead algorithm.
    pub readahead: Readahead,
    /// Submit each file-system block as its own request, in ascending
    /// order, and leave the merging to the block layer: 2.4's
    /// `block_read_full_page` and the buffer writeout paths call
    /// `submit_bh` once per buffer head, and each goes through
    /// `__make_request` (merge into a queued request, or a new request
    /// placed by the elevator). Off: one request per disk-contiguous run
    /// of at most `max_sectors`, as 2.6 builds bios.
    pub submit_buffers: bool,
    /// Processes woken by a completion run only once every part of the
    /// finished request has been ended, as after a completion interrupt
    /// (2.4's `end_that_request_first` ends the buffers one by one inside
    /// the IDE interrupt handler; the readers it wakes run after it).
    /// Off: a process runs as soon as its part completes, between the
    /// parts of a merged request (the 2.6 host's behaviour, kept so that
    /// its results do not move).
    pub wake_after_request: bool,
    pub dirty_background_ratio: u32,
    pub dirty_ratio: u32,
    pub dirty_expire_centisecs: u32,
    pub dirty_writeback_centisecs: u32,
    pub max_writeback_pages: u64,
    /// The writeback mechanism: 2.6's pdflush or 2.4's bdflush.
    pub writeback: Writeback,
    /// Who pays for buffered writeback (default: the dirtier, cgroup v2).
    pub writeback_charge: WritebackCharge,
    /// IO-less dirty throttling (Linux 3.2, Wu Fengguang): a writer over
    /// the dirty limit waits for the flusher instead of writing back pages
    /// itself. Off for the 2.4/2.6.0 presets, whose writers wrote.
    pub io_less_throttling: bool,
    /// A throttled writer stays in `balance_dirty_pages` until dirty plus
    /// writeback memory is under `dirty_ratio`, writing
    /// `sync_writeback_pages()` and sleeping in `blk_congestion_wait` by
    /// turns, whoever else keeps dirtying: the loop of 2.5.61 and 2.5.62
    /// (mm/page-writeback.c, `while (ps.nr_dirty + ps.nr_writeback >
    /// dirty_thresh)`), the kernels the 2003 benchmarks ran. Off: it also
    /// leaves once it has written `sync_writeback_pages()`, the exit added
    /// by "fix possible latency in balance_dirty_pages()" (Andrew Morton,
    /// 8 Mar 2003, 2.5.65) and kept through 2.6.x.
    pub throttle_until_below_limit: bool,
    /// Which of fsync's and sync's writes carry the sync hint.
    pub sync_write_hint: SyncWriteHint,
    /// How ext3's fsync commits (only ext3 looks at it).
    pub ext3_fsync: Ext3Fsync,
    /// Inode-table and directory-block reads carry `READ_META`
    /// (`REQ_META`): 2.6.32's ext3 reads the inode table through
    /// `__ext3_get_inode_loc` and directory blocks through `ext3_bread`,
    /// both with `READ_META` (fs/ext3/inode.c, v2.6.32; era reference §2),
    /// and CFQ serves a queue's META request first and lets it preempt.
    /// Indirect blocks and bitmaps stay plain `READ` (`sb_bread`). Off for
    /// 2.4 and 2.6.0, which had no such flag.
    pub read_meta: bool,
    /// Request slots per direction in the block queue below (`nr_requests`).
    pub nr_requests: u32,
    /// Largest request the device takes, sectors (`max_sectors`).
    pub max_sectors: u32,
    pub syscall_cpu: Duration,
    pub copy_cpu_per_kib: Duration,
    pub fs: FsParams,
}

impl Default for HostParams {
    fn default() -> Self {
        HostParams::linux_2_6()
    }
}

/// The preset names [`HostParams::preset`] accepts.
pub const PRESETS: &[&str] = &["linux-2.6", "linux-2.4", "linux-2.6.30", "linux-2.6.32"];

impl HostParams {
    /// The 2.5.6x/2.6.0 host of the 2003 benchmarks, with the kernel's
    /// defaults; where 2.5.61 and 2.6.0 differ it is 2.5.61, the kernel the
    /// seed measured: a throttled writer waits until dirty memory is under
    /// the limit ([`HostParams::throttle_until_below_limit`]) and no write
    /// carries a sync hint ([`SyncWriteHint::Never`]).
    pub fn linux_2_6() -> Self {
        HostParams {
            preset: "linux-2.6".to_string(),
            memory: MEMORY_2003,
            reserved: RESERVED_2003,
            cpus: CPUS_2003,
            readahead_max: VM_MAX_READAHEAD,
            readahead_min: VM_MIN_READAHEAD,
            readahead: Readahead::Linux26,
            submit_buffers: false,
            wake_after_request: false,
            dirty_background_ratio: DIRTY_BACKGROUND_RATIO,
            dirty_ratio: DIRTY_RATIO,
            dirty_expire_centisecs: DIRTY_EXPIRE_CENTISECS,
            dirty_writeback_centisecs: DIRTY_WRITEBACK_CENTISECS,
            max_writeback_pages: MAX_WRITEBACK_PAGES,
            writeback: Writeback::Pdflush,
            writeback_charge: WritebackCharge::Dirtier,
            io_less_throttling: false,
            throttle_until_below_limit: true,
            sync_write_hint: SyncWriteHint::Never,
            ext3_fsync: Ext3Fsync::CommitTid,
            read_meta: false,
            nr_requests: NR_REQUESTS,
            max_sectors: 256,
            syscall_cpu: SYSCALL_CPU,
            copy_cpu_per_kib: COPY_CPU_PER_KIB,
            fs: FsParams::default(),
        }
    }

    /// The 2.6 host with what 2.6.32 changed that it models so far: the
    /// metadata reads flagged `READ_META` ([`HostParams::read_meta`]).
    /// ext3 with jbd and nilfs2 are file systems to choose
    /// ([`FsParams::fs_type`]); per-bdi flusher threads are not built:
    /// this is the 2.6.0 host otherwise.
    pub fn linux_2_6_32() -> Self {
        HostParams {
            preset: "linux-2.6.32".to_string(),
            read_meta: true,
            throttle_until_below_limit: false,
            sync_write_hint: SyncWriteHint::DataIntegrity,
            ..HostParams::linux_2_6()
        }
    }

    /// The 2.6.32 host with 2.6.30's ext3 fsync ([`Ext3Fsync::ForceCommit`]),
    /// the kernel of the April 2009 threads (Zoccolo ran 2.6.30-rc2). What
    /// else this host models is the same in both: `READ_META` on ext3's
    /// inode-table and directory reads (fs/ext3/inode.c and namei.c of
    /// v2.6.30 use it too), `WRITE_SYNC_PLUG` on data-integrity writeback
    /// (fs/buffer.c `__block_write_full_page`, v2.6.30), pdflush-style
    /// writeback (2.6.30 still ran pdflush).
    pub fn linux_2_6_30() -> Self {
        HostParams {
            preset: "linux-2.6.30".to_string(),
            ext3_fsync: Ext3Fsync::ForceCommit,
            ..HostParams::linux_2_6_32()
        }
    }

    /// The 2.4.21 host on the same machine: 2.4's writeback, read-ahead
    /// and buffer-at-a-time submission:
    ///
    /// - bdflush, kupdated and writing reclaim ([`Writeback::Bdflush`],
    ///   [`crate::bdflush`]): bdflush woken at `nfract = 30` % dirty,
    ///   writing until `nfract_stop_bdflush = 20` %, the writer writing
    ///   itself above `nfract_sync = 60` % (fs/buffer.c, 2.4.21
    ///   `bdf_prm`; Andrew Morton quotes "dirty_ratio=60 and
    ///   dirty_async_ratio=30" as the 2.4 settings to compare 2.5 against),
    ///   kupdated every 5 s (`interval = 5*HZ`) writing buffers older than
    ///   30 s (`age_buffer = 30*HZ`), the same as 2.6's defaults;
    /// - a writer whose buffers find no free write request sleeps in
    ///   `__get_request_wait` (the scenario runner sets `nr_requests` to
    ///   the block layer's write list, 64 on 2.4's);
    /// - readahead up to 31 pages (`vm_max_readahead = 31`, mm/filemap.c
    ///   2.4.21), i.e. 124 KiB, at least 3 pages (`vm_min_readahead`),
    ///   with 2.4's own algorithm ([`crate::readahead24`]);
    /// - every block submitted on its own (`submit_bh`), the block layer
    ///   merging them, and readers woken by a completion running after
    ///   the whole request has been ended.
    ///
    /// `dirty_background_ratio` and `dirty_ratio` keep 30/60 for reports
    /// and overrides; bdflush reads its own [`Bdflush`] fractions.
    pub fn linux_2_4() -> Self {
        HostParams {
            preset: "linux-2.4".to_string(),
            readahead_max: VM_MAX_READAHEAD_24 * PAGE_SIZE,
            readahead_min: VM_MIN_READAHEAD_24 * PAGE_SIZE,
            readahead: Readahead::Linux24,
            submit_buffers: true,
            wake_after_request: true,
            dirty_background_ratio: NFRACT,
            dirty_ratio: NFRACT_SYNC,
            writeback: Writeback::Bdflush(Bdflush::default()),
            // 2.4's writers throttle in bdflush's `balance_dirty`; should
            // pdflush be chosen instead, 2.6.0's exit stands in, as before.
            throttle_until_below_limit: false,
            fs: FsParams {
                allocator: Allocator::Old,
                ..FsParams::default()
            },
            ..HostParams::linux_2_6()
        }
    }

    /// A preset by name.
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "linux-2.6" | "linux-2.5" => Some(HostParams::linux_2_6()),
            "linux-2.4" => Some(HostParams::linux_2_4()),
            "linux-2.6.30" => Some(HostParams::linux_2_6_30()),
            "linux-2.6.32" => Some(HostParams::linux_2_6_32()),
            _ => None,
        }
    }

    /// Pages the page cache may hold.
    pub fn cache_pages(&self) -> u64 {
        self.memory.saturating_sub(self.reserved) / PAGE_SIZE
    }

    /// `total_pages` of mm/page-writeback.c: the machine's pages, against
    /// which the dirty ratios are taken.
    pub fn total_pages(&self) -> u64 {
        self.memory / PAGE_SIZE
    }

    /// `nr_free_buffer_pages()` of 2.4 (mm/page_alloc.c, 2.4.10–2.4.21):
    /// the size of each zone a `GFP_USER` allocation may use, less its
    /// `pages_high`; bdflush's fractions are taken of it.
    pub fn buffer_pages(&self) -> u64 {
        let (ratio, min, max) = ZONE_BALANCE;
        let dma = (ZONE_DMA_BYTES / PAGE_SIZE).min(self.total_pages());
        let normal = self.total_pages() - dma;
        [dma, normal]
            .iter()
            .map(|&size| size.saturating_sub(3 * (size / ratio).clamp(min, max)))
            .sum()
    }

    /// `ratelimit_pages` as `set_ratelimit` computes it: total pages over 32
    /// per CPU, at least 16, at most 4 MiB worth.
    pub fn ratelimit_pages(&self) -> u64 {
        (self.total_pages() / (u64::from(self.cpus.max(1)) * 32)).clamp(16, (4 << 20) / PAGE_SIZE)
    }

    /// `sync_writeback_pages()`: what a throttled writer writes itself,
    /// 1.5 x `ratelimit_pages`.
    pub fn sync_writeback_pages(&self) -> u64 {
        let r = self.ratelimit_pages();
        r + r / 2
    }

    /// (background, dirty) thresholds in pages, as `get_dirty_limits`
    /// computes them (without the mapped-memory clamp: the simulated
    /// processes map little).
    pub fn dirty_limits(&self) -> (u64, u64) {
        let dirty_ratio = u64::from(self.dirty_ratio.max(5));
        let mut background_ratio = u64::from(self.dirty_background_ratio);
        if background_ratio >= dirty_ratio {
            background_ratio = dirty_ratio / 2;
        }
        let total = self.total_pages();
        (background_ratio * total / 100, dirty_ratio * total / 100)
    }

    /// The queue counts as write-congested from this many requests...
    pub fn congestion_on(&self) -> u32 {
        let n = self.nr_requests;
        (n - n / 8 + 1).min(n)
    }

    /// ...until it drains below this many (`blk_queue_congestion_threshold`,
    /// drivers/block/ll_rw_blk.c, 2.6).
    pub fn congestion_off(&self) -> u32 {
        let n = self.nr_requests;
        (n - n / 8).saturating_sub(n / 16 + 1).max(1)
    }

    pub fn readahead_max_pages(&self) -> u64 {
        self.readahead_max / PAGE_SIZE
    }

    pub fn readahead_min_pages(&self) -> u64 {
        (self.readahead_min / PAGE_SIZE).max(1)
    }

    pub fn dirty_expire(&self) -> Duration {
        Duration::from_millis(u64::from(self.dirty_expire_centisecs) * 10)
    }

    pub fn dirty_writeback_interval(&self) -> Duration {
        Duration::from_millis(u64::from(self.dirty_writeback_centisecs) * 10)
    }

    /// CPU time of a read() or write() moving `bytes`.
    pub fn copy_cost(&self, bytes: u64) -> Duration {
        Duration(self.syscall_cpu.nanos() + self.copy_cpu_per_kib.nanos() * bytes / 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_2003_machine() {
        let p = HostParams::linux_2_6();
        // 65536 pages / (2 CPUs * 32) = 1024, the 4 MiB cap.
        assert_eq!(p.ratelimit_pages(), 1024);
        assert_eq!(p.sync_writeback_pages(), 1536);
        assert_eq!(p.dirty_limits(), (6553, 26214));
        assert_eq!((p.congestion_on(), p.congestion_off()), (113, 103));
        assert_eq!(p.readahead_max_pages(), 32);
        assert_eq!(p.cache_pages(), (232 << 20) / 4096);
        let old = HostParams::linux_2_4();
        assert_eq!(old.dirty_limits(), (19660, 39321));
        // 4096 - 3 * 32 in ZONE_DMA, 61440 - 3 * 255 in ZONE_NORMAL.
        assert_eq!(old.buffer_pages(), 4000 + 60675);
    }
}
