//! An ext2-like file system: where files lie on the device.
//!
//! The device is cut into block groups of `blocks_per_group` 4 KiB blocks
//! (128 MiB). Each group starts with its metadata — a superblock backup and
//! the group descriptors in groups 0, 1 and powers of 3, 5 and 7 (the
//! `sparse_super` layout), a block bitmap, an inode bitmap and the inode
//! table — and then holds data. A file is a list of extents (runs of
//! contiguous blocks) plus the indirect blocks ext2 needs to find blocks
//! past the twelfth: one indirect block for blocks 12..1036, then a double
//! indirect block and one indirect block per 1024 blocks after that. The
//! allocator writes those metadata blocks in line with the data, as ext2's
//! `ext2_alloc_branch` does, so a sequentially written file reads
//! `data, IND, data, DIND, IND, data, IND, data, ...`.
//!
//! Placement follows fs/ext2/ialloc.c and balloc.c of 2.5/2.6 (see
//! [`alloc`]): directories by the Orlov allocator (or the 2.4 one), files in
//! their directory's group, data blocks from a goal near the previous block
//! of the file (or, for the first block, at the group's start plus a
//! "colour" of `pid % 16` sixteenths of the group), with 8-block
//! preallocation per open file.
//!
//! Nothing here costs time: the host charges I/O when it reads or writes
//! these blocks through the page cache.
//!
//! Invariants: extents of a file cover file blocks `0..nblocks` in order
//! without gaps; a block is either free (in `free`) or used by exactly one
//! file, directory, metadata area or preallocation window.

pub mod alloc;
pub mod ext3;
pub mod gen;
pub mod nilfs2;
pub mod registry;

use crate::params::{FsParams, INODE_SIZE};
use elevator_core::{Prng, Sector, SECTOR_SIZE};
use registry::Alloc;
use std::collections::BTreeMap;

/// The file system is full (`ENOSPC`). `meta` holds the indirect blocks
/// allocated before it filled, which the caller must still dirty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoSpace {
    pub meta: Vec<u64>,
}

impl std::fmt::Display for NoSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no space left on the file system (ENOSPC)")
    }
}

impl std::error::Error for NoSpace {}

/// A file or directory; `FileId(0)` is the block device itself, whose
/// "pages" are the file system's metadata blocks (inode tables, bitmaps,
/// indirect blocks), as in Linux, where ext2 keeps them in the block
/// device's page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u32);

impl FileId {
    /// The block device: page `n` is file-system block `n`.
    pub const BDEV: FileId = FileId(0);
    /// The root directory (inode 2).
    pub const ROOT: FileId = FileId(1);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
}

/// A run of contiguous blocks of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub file_block: u64,
    pub disk_block: u64,
    pub len: u64,
}

/// Direct block pointers in an ext2 inode.
pub const NDIR_BLOCKS: u64 = 12;

/// Bytes of a directory entry for a name of about ten characters (8-byte
/// header plus the name, rounded to 4).
pub const DIRENT_BYTES: u64 = 20;

/// One inode.
#[derive(Clone, Debug)]
pub struct Inode {
    pub kind: Kind,
    /// ext2 inode number (1-based, 2 is the root).
    pub ino: u32,
    pub group: u32,
    pub parent: FileId,
    /// Bytes (for directories, blocks x block size).
    pub size: u64,
    pub extents: Vec<Extent>,
    /// Indirect blocks in the order ext2 allocates them: `[IND, DIND,
    /// IND under DIND #0, #1, ...]`.
    pub meta: Vec<u64>,
    /// Directory entries in readdir (creation) order.
    pub children: Vec<FileId>,
    /// ext2's `EXT2_TOPDIR_FL`: Orlov spreads this directory's children as
    /// it spreads the root's.
    pub topdir: bool,
    /// Where the next block of this file should go (`i_next_alloc_goal`).
    goal: Option<u64>,
    /// Preallocated blocks `[start, start + len)` owned by this inode.
    prealloc: Option<(u64, u64)>,
    /// ext3: the inode's reservation window, and its goal size in blocks
    /// (`rsv_goal_size`, 0 until the first allocation) ([`ext3`]).
    rsv: Option<ext3::Rsv>,
    rsv_goal: u64,
}

impl Inode {
    /// Data blocks in use.
    pub fn nblocks(&self) -> u64 {
        self.extents.last().map_or(0, |e| e.file_block + e.len)
    }

    pub fn is_dir(&self) -> bool {
        self.kind == Kind::Dir
    }
}

/// Where the groups and their metadata lie.
#[derive(Clone, Debug, PartialEq)]
pub struct Geometry {
    pub block_size: u64,
    /// Blocks in the file system (whole groups only).
    pub blocks: u64,
    pub blocks_per_group: u64,
    pub inodes_per_group: u32,
    pub groups: u32,
    /// Device sector of block 0.
    pub first_sector: Sector,
    /// Blocks of one group's inode table.
    pub itable_blocks: u64,
    /// Blocks of the group descriptor table (in groups with a superblock).
    pub gdt_blocks: u64,
}

impl Geometry {
    pub fn sectors_per_block(&self) -> u64 {
        self.block_size / SECTOR_SIZE
    }

    pub fn sector_of(&self, block: u64) -> Sector {
        self.first_sector + block * self.sectors_per_block()
    }

    pub fn group_start(&self, g: u32) -> u64 {
        u64::from(g) * self.blocks_per_group
    }

    pub fn group_of(&self, block: u64) -> u32 {
        (block / self.blocks_per_group) as u32
    }

    /// `ext2_group_sparse`: groups 0, 1 and powers of 3, 5 and 7 carry a
    /// superblock backup and the descriptors.
    pub fn has_super(&self, g: u32) -> bool {
        fn power_of(mut x: u32, b: u32) -> bool {
            while x.is_multiple_of(b) && x > 1 {
                x /= b;
            }
            x == 1
        }
        g <= 1 || power_of(g, 3) || power_of(g, 5) || power_of(g, 7)
    }

    pub fn block_bitmap(&self, g: u32) -> u64 {
        self.group_start(g)
            + if self.has_super(g) {
                1 + self.gdt_blocks
            } else {
                0
            }
    }

    pub fn inode_bitmap(&self, g: u32) -> u64 {
        self.block_bitmap(g) + 1
    }

    pub fn inode_table(&self, g: u32) -> u64 {
        self.block_bitmap(g) + 2
    }

    /// Whether `block` lies in its group's inode table.
    pub fn is_inode_table(&self, block: u64) -> bool {
        let g = self.group_of(block);
        (self.inode_table(g)..self.data_start(g)).contains(&block)
    }

    /// First data block of group `g`.
    pub fn data_start(&self, g: u32) -> u64 {
        self.inode_table(g) + self.itable_blocks
    }

    /// The inode-table block holding inode `ino`.
    pub fn inode_block(&self, ino: u32) -> u64 {
        let ipg = self.inodes_per_group;
        let g = (ino - 1) / ipg;
        let index = u64::from((ino - 1) % ipg);
        self.inode_table(g) + index * INODE_SIZE / self.block_size
    }

    /// Pointers per indirect block.
    pub fn ptrs_per_block(&self) -> u64 {
        self.block_size / 4
    }
}

/// Per-group counters the allocators consult (the group descriptor plus
/// Orlov's `s_debts`).
#[derive(Clone, Copy, Debug, Default)]
pub struct GroupState {
    pub free_blocks: u64,
    pub used_inodes: u32,
    pub dirs: u32,
    pub debt: u32,
}

/// The file system.
#[derive(Clone, Debug)]
pub struct FileSystem {
    pub geo: Geometry,
    pub params: FsParams,
    inodes: Vec<Inode>,
    /// Free extents, start block -> length; never crossing a group boundary.
    free: BTreeMap<u64, u64>,
    groups: Vec<GroupState>,
    free_blocks: u64,
    ndirs: u32,
    rng: Prng,
    /// ext3's reservation windows of all inodes: start -> (last block,
    /// owner), never overlapping (`s_rsv_window_root`).
    windows: BTreeMap<u64, (u64, FileId)>,
}

impl FileSystem {
    /// A fresh file system (mke2fs) on a device of `capacity` sectors.
    pub fn new(params: &FsParams, capacity: Sector, seed: u64) -> Self {
        let device_bytes = capacity * SECTOR_SIZE;
        let start = params.offset.min(device_bytes);
        let size = params
            .size
            .unwrap_or(device_bytes - start)
            .min(device_bytes - start);
        let bpg = params.blocks_per_group;
        let group_bytes = bpg * params.block_size;
        let groups = (size / group_bytes).max(1) as u32;
        let itable_blocks =
            (u64::from(params.inodes_per_group) * INODE_SIZE).div_ceil(params.block_size);
        // 32-byte group descriptors.
        let gdt_blocks = (u64::from(groups) * 32).div_ceil(params.block_size);
        let geo = Geometry {
            block_size: params.block_size,
            blocks: u64::from(groups) * bpg,
            blocks_per_group: bpg,
            inodes_per_group: params.inodes_per_group,
            groups,
            first_sector: start / SECTOR_SIZE,
            itable_blocks,
            gdt_blocks,
        };
        assert!(
            geo.data_start(0) + 64 < geo.group_start(1),
            "block group too small for its metadata"
        );
        let mut free = BTreeMap::new();
        let mut group_state = Vec::with_capacity(groups as usize);
        let mut free_blocks = 0;
        for g in 0..groups {
            let lo = geo.data_start(g);
            let hi = geo.group_start(g) + bpg;
            free.insert(lo, hi - lo);
            free_blocks += hi - lo;
            group_state.push(GroupState {
                free_blocks: hi - lo,
                ..GroupState::default()
            });
        }
        let mut fs = FileSystem {
            geo,
            params: params.clone(),
            inodes: Vec::new(),
            free,
            groups: group_state,
            free_blocks,
            ndirs: 0,
            rng: Prng::derive(seed, "ext2-orlov"),
            windows: BTreeMap::new(),
        };
        // Inode 1 (bad blocks) and the reserved inodes up to 10, the root
        // (inode 2) and lost+found (inode 11): group 0 starts with 11 used.
        fs.groups[0].used_inodes = 11;
        fs.inodes.push(Inode {
            kind: Kind::File,
            ino: 0,
            group: 0,
            parent: FileId::BDEV,
            size: fs.geo.blocks * fs.geo.block_size,
            extents: vec![Extent {
                file_block: 0,
                disk_block: 0,
                len: fs.geo.blocks,
            }],
            meta: Vec::new(),
            children: Vec::new(),
            topdir: false,
            goal: None,
            prealloc: None,
            rsv: None,
            rsv_goal: 0,
        });
        fs.inodes.push(Inode {
            kind: Kind::Dir,
            ino: 2,
            group: 0,
            parent: FileId::ROOT,
            size: 0,
            extents: Vec::new(),
            meta: Vec::new(),
            children: Vec::new(),
            topdir: true,
            goal: None,
            prealloc: None,
            rsv: None,
            rsv_goal: 0,
        });
        fs.groups[0].dirs = 1;
        fs.ndirs = 1;
        fs.extend_to(FileId::ROOT, fs.geo.block_size, 0)
            .expect("a fresh file system has room for its root");
        if params.fragmentation > 0.0 {
            fs.age(params.fragmentation, seed);
        }
        fs
    }

    pub fn inode(&self, f: FileId) -> &Inode {
        &self.inodes[f.0 as usize]
    }

    pub fn files(&self) -> usize {
        self.inodes.len()
    }

    pub fn size(&self, f: FileId) -> u64 {
        self.inode(f).size
    }

    pub fn children(&self, d: FileId) -> &[FileId] {
        &self.inode(d).children
    }

    pub fn is_dir(&self, f: FileId) -> bool {
        self.inode(f).is_dir()
    }

    pub fn group_state(&self, g: u32) -> GroupState {
        self.groups[g as usize]
    }

    pub fn free_blocks(&self) -> u64 {
        self.free_blocks
    }

    /// The inode-table block of `f` (a page of [`FileId::BDEV`]).
    pub fn inode_block(&self, f: FileId) -> u64 {
        self.geo.inode_block(self.inode(f).ino)
    }

    /// The disk block of file block `b`, if allocated.
    pub fn map(&self, f: FileId, b: u64) -> Option<u64> {
        if f == FileId::BDEV {
            return (b < self.geo.blocks).then_some(b);
        }
        let ext = &self.inode(f).extents;
        let i = ext.partition_point(|e| e.file_block + e.len <= b);
        ext.get(i)
            .filter(|e| e.file_block <= b)
            .map(|e| e.disk_block + (b - e.file_block))
    }

    /// Calls `each(file_block, disk_block, len)` for the disk-contiguous
    /// pieces of file blocks `[first, first + count)` that are allocated.
    pub fn for_runs(&self, f: FileId, first: u64, count: u64, mut each: impl FnMut(u64, u64, u64)) {
        let end = first + count;
        if f == FileId::BDEV {
            let end = end.min(self.geo.blocks);
            if first < end {
                each(first, first, end - first);
            }
            return;
        }
        let ext = &self.inode(f).extents;
        let mut i = ext.partition_point(|e| e.file_block + e.len <= first);
        let mut b = first;
        while b < end {
            let Some(e) = ext.get(i) else { break };
            if e.file_block >= end {
                break;
            }
            let lo = b.max(e.file_block);
            let hi = end.min(e.file_block + e.len);
            each(lo, e.disk_block + (lo - e.file_block), hi - lo);
            b = hi;
            i += 1;
        }
    }

    /// The indirect blocks ext2 must read to map file block `b` (outermost
    /// first), as indices into `meta` of the inode.
    pub fn meta_path(&self, f: FileId, b: u64) -> [Option<u64>; 2] {
        if f == FileId::BDEV || b < NDIR_BLOCKS {
            return [None, None];
        }
        let meta = &self.inode(f).meta;
        let ptrs = self.geo.ptrs_per_block();
        let b = b - NDIR_BLOCKS;
        if b < ptrs {
            return [meta.first().copied(), None];
        }
        let k = ((b - ptrs) / ptrs) as usize;
        [meta.get(1).copied(), meta.get(2 + k).copied()]
    }

    /// Index into `meta` of the indirect block that must exist before file
    /// block `b` can be allocated, and whether a double indirect block must
    /// be allocated first (`b` is the first block it maps).
    fn meta_boundary(&self, b: u64) -> Option<bool> {
        let ptrs = self.geo.ptrs_per_block();
        if b == NDIR_BLOCKS {
            Some(false)
        } else if b >= NDIR_BLOCKS + ptrs && (b - NDIR_BLOCKS - ptrs).is_multiple_of(ptrs) {
            Some(b == NDIR_BLOCKS + ptrs)
        } else {
            None
        }
    }

    /// The first file block after `b` that needs a new indirect block.
    fn next_meta_boundary(&self, b: u64) -> u64 {
        let ptrs = self.geo.ptrs_per_block();
        if b < NDIR_BLOCKS {
            NDIR_BLOCKS
        } else if b < NDIR_BLOCKS + ptrs {
            NDIR_BLOCKS + ptrs
        } else {
            NDIR_BLOCKS + ptrs + ((b - NDIR_BLOCKS - ptrs) / ptrs + 1) * ptrs
        }
    }

    /// Grow `f` to `size` bytes, allocating blocks as ext2 does on write
    /// (`ext2_get_block` with create). `pid` picks the colour of a file's
    /// first block. Returns the indirect blocks it allocated (new metadata
    /// the caller must dirty). When the file system fills up, the file
    /// keeps the blocks it got (its size stops at the last of them) and
    /// the error carries the indirect blocks allocated before: `write(2)`
    /// then returns a short count or `ENOSPC`.
    pub fn extend_to(&mut self, f: FileId, size: u64, pid: u32) -> Result<Vec<u64>, NoSpace> {
        let bs = self.geo.block_size;
        let want = size.div_ceil(bs);
        let have = self.inode(f).nblocks();
        let mut new_meta = Vec::new();
        let mut b = have;
        let mut full = false;
        'grow: while b < want {
            if let Some(with_dind) = self.meta_boundary(b) {
                // The indirect blocks and one data block behind them, or
                // nothing: an indirect block without data would be taken
                // again by the next write.
                if self.available(f) < 2 + u64::from(with_dind) {
                    full = true;
                    break;
                }
                if with_dind {
                    let d = self.alloc_for(f, 1, pid);
                    self.inodes[f.0 as usize].meta.push(d.0);
                    new_meta.push(d.0);
                }
                let m = self.alloc_for(f, 1, pid);
                self.inodes[f.0 as usize].meta.push(m.0);
                new_meta.push(m.0);
            }
            // Up to the next metadata boundary.
            let stop = want.min(self.next_meta_boundary(b));
            while b < stop {
                if self.available(f) == 0 {
                    full = true;
                    break 'grow;
                }
                let (start, len) = self.alloc_for(f, stop - b, pid);
                let inode = &mut self.inodes[f.0 as usize];
                match inode.extents.last_mut() {
                    Some(e) if e.disk_block + e.len == start => e.len += len,
                    _ => inode.extents.push(Extent {
                        file_block: b,
                        disk_block: start,
                        len,
                    }),
                }
                b += len;
            }
        }
        let inode = &mut self.inodes[f.0 as usize];
        let reached = if full { size.min(b * bs) } else { size };
        inode.size = inode.size.max(reached);
        if inode.kind == Kind::Dir {
            inode.size = inode.nblocks() * bs;
        }
        if full {
            Err(NoSpace { meta: new_meta })
        } else {
            Ok(new_meta)
        }
    }

    /// Blocks `f` could still get: the free ones and its own preallocation.
    fn available(&self, f: FileId) -> u64 {
        self.free_blocks + self.inode(f).prealloc.map_or(0, |(_, n)| n)
    }

    /// Whether a new inode can be had, and the blocks a new directory and
    /// its parent's growth may need (a directory block, a parent block and
    /// the parent's indirect blocks).
    fn room_to_create(&self) -> bool {
        let inode_free = (0..self.geo.groups)
            .any(|g| self.groups[g as usize].used_inodes < self.geo.inodes_per_group);
        inode_free && self.free_blocks >= 4
    }

    /// Allocate up to `want` contiguous blocks for `f` from its goal, using
    /// and refilling its preallocation window.
    fn alloc_for(&mut self, f: FileId, want: u64, pid: u32) -> (u64, u64) {
        let goal = self.goal_of(f, pid);
        if self.params.fs_type.alloc == Alloc::Reservations {
            // ext3: reservation windows for regular files, none for
            // directories (`ext3_init_block_alloc_info` only for S_ISREG).
            if self.inode(f).is_dir() {
                let (start, len) = self.take_near(goal, want);
                self.inodes[f.0 as usize].goal = Some(start + len);
                return (start, len);
            }
            return self.alloc_rsv(f, goal, want);
        }
        let inode = &mut self.inodes[f.0 as usize];
        let (start, len) = match inode.prealloc {
            Some((p, n)) if p == goal => {
                let take = want.min(n);
                inode.prealloc = (n > take).then_some((p + take, n - take));
                (p, take)
            }
            _ => {
                self.discard_prealloc(f);
                // Reserve up to a multiple of the preallocation window.
                let ask = want.next_multiple_of(crate::params::PREALLOC_BLOCKS);
                let (s, l) = self.take_near(goal, ask);
                let got = l.min(want);
                if l > got {
                    self.inodes[f.0 as usize].prealloc = Some((s + got, l - got));
                }
                (s, got)
            }
        };
        self.inodes[f.0 as usize].goal = Some(start + len);
        (start, len)
    }

    /// Where `f`'s next block should go: after its last one, or for its
    /// first block the inode's group plus a colour of `pid % 16` sixteenths
    /// (`ext2_find_near`, `ext3_find_near`).
    fn goal_of(&self, f: FileId, pid: u32) -> u64 {
        match self.inode(f).goal {
            Some(g) => g,
            None => {
                let g = self.inode(f).group;
                let colour = u64::from(pid % 16) * (self.geo.blocks_per_group / 16);
                self.geo.group_start(g) + colour
            }
        }
    }

    /// Give back `f`'s preallocated blocks (`ext2_discard_prealloc`, on the
    /// last close of the file) and drop its ext3 reservation window
    /// (`ext3_discard_reservation` from `ext3_release_file`).
    pub fn discard_prealloc(&mut self, f: FileId) {
        if let Some((start, len)) = self.inodes[f.0 as usize].prealloc.take() {
            self.release(start, len);
        }
        if let Some(w) = self.inodes[f.0 as usize].rsv.take() {
            self.windows.remove(&w.start);
        }
    }

    /// Remove `[start, start + len)` from the free map (it must be free).
    fn take(&mut self, start: u64, len: u64) {
        let (&s, &l) = self
            .free
            .range(..=start)
            .next_back()
            .expect("taking a block that is not free");
        debug_assert!(s + l >= start + len, "taking a block that is not free");
        self.free.remove(&s);
        if start > s {
            self.free.insert(s, start - s);
        }
        if s + l > start + len {
            self.free.insert(start + len, s + l - start - len);
        }
        let g = self.geo.group_of(start) as usize;
        self.groups[g].free_blocks -= len;
        self.free_blocks -= len;
    }

    /// Return `[start, start + len)` to the free map, coalescing.
    fn release(&mut self, start: u64, len: u64) {
        let mut s = start;
        let mut l = len;
        if let Some((&ps, &pl)) = self.free.range(..start).next_back() {
            if ps + pl == start && self.geo.group_of(ps) == self.geo.group_of(start) {
                self.free.remove(&ps);
                s = ps;
                l += pl;
            }
        }
        if let Some(&nl) = self.free.get(&(start + len)) {
            if self.geo.group_of(start + len) == self.geo.group_of(start) {
                self.free.remove(&(start + len));
                l += nl;
            }
        }
        self.free.insert(s, l);
        let g = self.geo.group_of(start) as usize;
        self.groups[g].free_blocks += len;
        self.free_blocks += len;
    }

    /// The first free run at or after `lo` and before `hi`.
    fn first_free(&self, lo: u64, hi: u64) -> Option<(u64, u64)> {
        if let Some((&s, &l)) = self.free.range(..=lo).next_back() {
            if s + l > lo {
                return Some((lo, s + l - lo));
            }
        }
        self.free.range(lo..hi).next().map(|(&s, &l)| (s, l))
    }

    /// `ext2_new_block`: the goal if free, else the next free block in the
    /// goal's group, else the first free block of the next group with free
    /// blocks; then as many following blocks as are free, up to `want`.
    fn take_near(&mut self, goal: u64, want: u64) -> (u64, u64) {
        let goal = goal.min(self.geo.blocks - 1);
        let g = self.geo.group_of(goal);
        let group_end = self.geo.group_start(g) + self.geo.blocks_per_group;
        let found = self
            .first_free(goal, group_end)
            .filter(|&(s, _)| s < group_end)
            .or_else(|| {
                (1..=self.geo.groups).find_map(|i| {
                    let g2 = (g + i) % self.geo.groups;
                    if self.groups[g2 as usize].free_blocks == 0 {
                        return None;
                    }
                    let lo = self.geo.group_start(g2);
                    self.first_free(lo, lo + self.geo.blocks_per_group)
                })
            });
        // Callers check `available` first: a free block exists.
        let (start, run) = found.expect("a free block in some group");
        let len = run.min(want).max(1);
        self.take(start, len);
        (start, len)
    }

    /// Create a file or directory in `parent` (no I/O). Directories get
    /// their first block at once, as `ext2_mkdir` writes "." and "..".
    /// Fails with [`NoSpace`] (`ENOSPC`), changing nothing, when no inode
    /// or too few blocks are left.
    pub fn create(&mut self, parent: FileId, kind: Kind, pid: u32) -> Result<FileId, NoSpace> {
        if !self.room_to_create() {
            return Err(NoSpace { meta: Vec::new() });
        }
        let group = match kind {
            Kind::Dir => match self.params.allocator {
                crate::params::Allocator::Orlov => self.find_group_orlov(parent),
                crate::params::Allocator::Old => self.find_group_dir(),
            },
            Kind::File => self.find_group_other(parent),
        };
        let gs = &mut self.groups[group as usize];
        let ino = group * self.geo.inodes_per_group + gs.used_inodes + 1;
        gs.used_inodes += 1;
        if kind == Kind::Dir {
            gs.dirs += 1;
            gs.debt = (gs.debt + 1).min(255);
            self.ndirs += 1;
        } else {
            gs.debt = gs.debt.saturating_sub(1);
        }
        let id = FileId(self.inodes.len() as u32);
        self.inodes.push(Inode {
            kind,
            ino,
            group,
            parent,
            size: 0,
            extents: Vec::new(),
            meta: Vec::new(),
            children: Vec::new(),
            topdir: false,
            goal: None,
            prealloc: None,
            rsv: None,
            rsv_goal: 0,
        });
        self.add_entry(parent, id, pid);
        if kind == Kind::Dir {
            self.extend_to(id, self.geo.block_size, pid)
                .expect("room_to_create: a block for the directory");
            self.discard_prealloc(id);
        }
        Ok(id)
    }

    /// Bytes a directory with `entries` entries (plus "." and "..") needs.
    fn dir_bytes(&self, entries: usize) -> u64 {
        (entries as u64 + 2) * DIRENT_BYTES
    }

    /// Link `child` into `dir`, growing the directory by a block when its
    /// last one is full. Returns whether a block was added.
    fn add_entry(&mut self, dir: FileId, child: FileId, pid: u32) -> bool {
        let d = &mut self.inodes[dir.0 as usize];
        d.children.push(child);
        let need = self.dir_bytes(self.inodes[dir.0 as usize].children.len());
        let have = self.inodes[dir.0 as usize].nblocks() * self.geo.block_size;
        if need > have {
            self.extend_to(dir, have + self.geo.block_size, pid)
                .expect("room_to_create: blocks for the parent directory");
            self.discard_prealloc(dir);
            true
        } else {
            false
        }
    }

    /// The directory block holding the entry for `dir`'s newest child.
    pub fn last_dir_block(&self, dir: FileId) -> u64 {
        self.inode(dir).nblocks().saturating_sub(1)
    }

    /// Mark `f` as a top-level directory for Orlov (`EXT2_TOPDIR_FL`).
    pub fn set_topdir(&mut self, f: FileId) {
        self.inodes[f.0 as usize].topdir = true;
    }

    /// Pre-fill `fraction` of every group's data blocks in short scattered
    /// runs, so that later files fragment as on an aged file system.
    fn age(&mut self, fraction: f64, seed: u64) {
        let mut rng = Prng::derive(seed, "ext2-age");
        let fraction = fraction.clamp(0.0, 0.95);
        for g in 0..self.geo.groups {
            let lo = self.geo.data_start(g);
            let hi = self.geo.group_start(g) + self.geo.blocks_per_group;
            let target = ((hi - lo) as f64 * fraction) as u64;
            let mut used = 0;
            let mut tries = 0;
            while used < target && tries < 100_000 {
                tries += 1;
                let at = lo + rng.below(hi - lo);
                let len = 1 + rng.below(32);
                if let Some((s, l)) = self.first_free(at, hi) {
                    if s == at {
                        let take = len.min(l);
                        self.take(s, take);
                        used += take;
                    }
                }
            }
        }
    }

    /// ext3's journal: `blocks` blocks taken as one run from the first
    /// free extent at or after the group holding the middle block, as
    /// e2fsprogs' `write_journal_inode` sets its goal (lib/ext2fs/
    /// mkjournal.c, 1.41). A group's data area is less than a group, so a
    /// journal longer than one takes the following groups' free runs too;
    /// returns the runs in journal order. Call before any file is placed.
    pub fn reserve_journal(&mut self, blocks: u64) -> Vec<(u64, u64)> {
        let mut runs = Vec::new();
        let mut left = blocks;
        let mut from = self.geo.group_start(self.geo.groups / 2);
        while left > 0 {
            let Some((s, l)) = self
                .free
                .range(from..)
                .next()
                .or_else(|| self.free.iter().next())
                .map(|(&s, &l)| (s, l))
            else {
                break;
            };
            let k = l.min(left);
            self.take(s, k);
            runs.push((s, k));
            left -= k;
            from = s + k;
        }
        runs
    }

    /// nilfs2: file blocks `[first, first + count)` of `f` now lie at disk
    /// blocks `[disk, disk + count)` (a log wrote them there). The blocks
    /// must be allocated; the old places are not returned to the free map
    /// (under nilfs2 the allocator hands out virtual block numbers).
    pub fn relocate(&mut self, f: FileId, first: u64, count: u64, disk: u64) {
        assert!(f != FileId::BDEV, "the block device is not relocated");
        let end = first + count;
        let inode = &mut self.inodes[f.0 as usize];
        assert!(end <= inode.nblocks(), "relocating unallocated blocks");
        let mut out: Vec<Extent> = Vec::with_capacity(inode.extents.len() + 2);
        let mut push = |e: Extent| {
            if let Some(last) = out.last_mut() {
                if last.disk_block + last.len == e.disk_block {
                    last.len += e.len;
                    return;
                }
            }
            out.push(e);
        };
        let mut placed = false;
        for e in &inode.extents {
            let (lo, hi) = (e.file_block, e.file_block + e.len);
            if hi <= first || lo >= end {
                if lo >= end && !placed {
                    placed = true;
                    push(Extent {
                        file_block: first,
                        disk_block: disk,
                        len: count,
                    });
                }
                push(*e);
                continue;
            }
            if lo < first {
                push(Extent {
                    len: first - lo,
                    ..*e
                });
            }
            if !placed {
                placed = true;
                push(Extent {
                    file_block: first,
                    disk_block: disk,
                    len: count,
                });
            }
            if hi > end {
                push(Extent {
                    file_block: end,
                    disk_block: e.disk_block + (end - lo),
                    len: hi - end,
                });
            }
        }
        if !placed {
            push(Extent {
                file_block: first,
                disk_block: disk,
                len: count,
            });
        }
        inode.extents = out;
    }

    /// The highest block in use plus one (where a log may start).
    pub fn used_end(&self) -> u64 {
        let mut end = self.geo.data_start(0);
        for i in self.inodes.iter().skip(1) {
            for e in &i.extents {
                end = end.max(e.disk_block + e.len);
            }
            for &m in &i.meta {
                end = end.max(m + 1);
            }
        }
        end
    }

    /// Check the free map against the group counters (tests).
    pub fn check(&self) {
        let mut per_group = vec![0u64; self.geo.groups as usize];
        let mut prev_end = 0;
        for (&s, &l) in &self.free {
            assert!(s >= prev_end, "free extents overlap");
            assert_eq!(
                self.geo.group_of(s),
                self.geo.group_of(s + l - 1),
                "free extent crosses a group"
            );
            per_group[self.geo.group_of(s) as usize] += l;
            prev_end = s + l;
        }
        for (g, n) in per_group.iter().enumerate() {
            assert_eq!(*n, self.groups[g].free_blocks, "group {g} free count");
        }
        for (i, inode) in self.inodes.iter().enumerate().skip(1) {
            let mut next = 0;
            for e in &inode.extents {
                assert_eq!(e.file_block, next, "file {i}: extents have a gap");
                next += e.len;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::FsParams;

    fn small_fs() -> FileSystem {
        // 16 groups of 128 MiB.
        FileSystem::new(&FsParams::default(), 16 * (128 << 20) / 512, 1)
    }

    #[test]
    fn a_full_file_system_gives_enospc_and_keeps_what_fit() {
        // Two groups: 256 MiB, a little less for data.
        let mut fs = FileSystem::new(&FsParams::default(), 2 * (128 << 20) / 512, 1);
        let f = fs.create(FileId::ROOT, Kind::File, 0).unwrap();
        let err = fs.extend_to(f, 300 << 20, 0).unwrap_err();
        assert_eq!(fs.free_blocks(), 0);
        let got = fs.inode(f).nblocks() * fs.geo.block_size;
        assert!(got > 200 << 20 && got < 256 << 20, "{got}");
        assert_eq!(fs.size(f), got, "the size stops at the last block had");
        assert!(
            !err.meta.is_empty(),
            "the indirect blocks allocated are returned"
        );
        // Nothing more fits: neither another block nor a new file.
        assert_eq!(
            fs.extend_to(f, got + 4096, 0),
            Err(NoSpace { meta: Vec::new() })
        );
        assert!(fs.create(FileId::ROOT, Kind::Dir, 0).is_err());
        assert!(fs.create(FileId::ROOT, Kind::File, 0).is_err());
        fs.check();
    }

    #[test]
    fn geometry_of_a_group() {
        let fs = small_fs();
        let g = &fs.geo;
        assert_eq!(g.groups, 16);
        assert_eq!(g.itable_blocks, 512);
        assert!(g.has_super(0) && g.has_super(1) && g.has_super(9) && g.has_super(7));
        assert!(!g.has_super(2) && !g.has_super(6));
        assert_eq!(g.block_bitmap(2), 2 * 32768);
        assert_eq!(g.data_start(2), 2 * 32768 + 2 + 512);
        assert_eq!(g.inode_block(2), g.inode_table(0));
        assert_eq!(g.inode_block(33), g.inode_table(0) + 1);
    }

    #[test]
    fn a_big_file_is_contiguous_with_inline_indirect_blocks() {
        let mut fs = small_fs();
        let f = fs.create(FileId::ROOT, Kind::File, 0).unwrap();
        let meta = fs.extend_to(f, 100 << 20, 0).unwrap();
        fs.discard_prealloc(f);
        fs.check();
        let inode = fs.inode(f);
        assert_eq!(inode.nblocks(), 25600);
        // IND, DIND, and one IND per 1024 blocks past block 1036:
        // (25600 - 1036) / 1024 rounded up = 24.
        assert_eq!(meta.len(), 2 + 24);
        // Blocks 0..12 then the indirect block then block 12.
        let b11 = fs.map(f, 11).unwrap();
        assert_eq!(inode.meta[0], b11 + 1);
        assert_eq!(fs.map(f, 12).unwrap(), b11 + 2);
        // Pieces are separated only by metadata blocks (and group metadata).
        let mut pieces = 0;
        fs.for_runs(f, 0, 25600, |_, _, _| pieces += 1);
        assert!(pieces <= 30, "{pieces} pieces");
        assert_eq!(fs.meta_path(f, 5), [None, None]);
        assert_eq!(fs.meta_path(f, 100), [Some(inode.meta[0]), None]);
        assert_eq!(
            fs.meta_path(f, 1036),
            [Some(inode.meta[1]), Some(inode.meta[2])]
        );
        assert_eq!(
            fs.meta_path(f, 2060),
            [Some(inode.meta[1]), Some(inode.meta[3])]
        );
    }

    #[test]
    fn files_of_a_directory_sit_together() {
        let mut fs = small_fs();
        let d = fs.create(FileId::ROOT, Kind::Dir, 0).unwrap();
        let files: Vec<FileId> = (0..20)
            .map(|_| {
                let f = fs.create(d, Kind::File, 7).unwrap();
                fs.extend_to(f, 5000, 7).unwrap();
                fs.discard_prealloc(f);
                f
            })
            .collect();
        fs.check();
        let g = fs.inode(d).group;
        for w in files.windows(2) {
            assert_eq!(fs.inode(w[0]).group, g);
            let a = fs.map(w[0], 1).unwrap();
            let b = fs.map(w[1], 0).unwrap();
            assert_eq!(b, a + 1, "next file starts right after the previous one");
        }
    }

    #[test]
    fn orlov_spreads_top_level_directories_and_old_alloc_spreads_all() {
        let mut fs = small_fs();
        let tops: Vec<u32> = (0..4)
            .map(|_| {
                let d = fs.create(FileId::ROOT, Kind::Dir, 0).unwrap();
                fs.inode(d).group
            })
            .collect();
        let mut uniq = tops.clone();
        uniq.sort_unstable();
        uniq.dedup();
        assert_eq!(uniq.len(), 4, "top-level dirs in distinct groups: {tops:?}");
        let sub = fs.create(FileId(2), Kind::Dir, 0).unwrap();
        assert_eq!(
            fs.inode(sub).group,
            tops[0],
            "a subdirectory stays with its parent"
        );

        let params = FsParams {
            allocator: crate::params::Allocator::Old,
            ..FsParams::default()
        };
        let mut old = FileSystem::new(&params, 16 * (128 << 20) / 512, 1);
        let a = old.create(FileId::ROOT, Kind::Dir, 0).unwrap();
        let b = old.create(a, Kind::Dir, 0).unwrap();
        assert_ne!(
            old.inode(a).group,
            old.inode(b).group,
            "2.4 spreads every directory"
        );
    }
}
