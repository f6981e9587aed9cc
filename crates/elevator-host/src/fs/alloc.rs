//! Which group a new inode goes to: fs/ext2/ialloc.c of Linux 2.5/2.6.
//!
//! - `FileSystem::find_group_orlov` places directories (the Orlov
//!   allocator, merged in 2.5.4x). A child of the root (or of a directory
//!   flagged `EXT2_TOPDIR_FL`) goes, starting from a random group, to the
//!   group with the fewest directories among those with at least average
//!   free inodes and free blocks: top-level trees spread over the disk. Any
//!   other directory stays in its parent's group unless that group has too
//!   many directories (`ndirs / ngroups + inodes_per_group / 16`), too few
//!   free inodes (`avefreei - inodes_per_group / 4`) or blocks
//!   (`avefreeb - blocks_per_group / 4`), or too much "debt" (directories
//!   created there minus files, against `max_debt` from `INODE_COST` 64 and
//!   `BLOCK_COST` 256); then the next acceptable group in cyclic order.
//! - `FileSystem::find_group_dir` is the 2.4 directory allocator (kept in
//!   2.5 as the `oldalloc` mount option): the group with the most free
//!   blocks among those with at least average free inodes. Every directory
//!   lands in a different group, which is why Morton notes that Orlov "is
//!   worth a 4x speedup" reading a tree.
//! - `FileSystem::find_group_other` places files: the parent's group if
//!   it has a free inode and free blocks, else a quadratic hash from
//!   `parent_group + parent_ino`, else a linear search.
//!
//! The random start for top-level directories comes from the file system's
//! seeded `Prng` (the kernel uses `get_random_bytes`).

use super::{FileId, FileSystem};

/// ialloc.c's weights for Orlov's directory debt.
const INODE_COST: i64 = 64;
const BLOCK_COST: i64 = 256;

impl FileSystem {
    fn free_inodes(&self, g: u32) -> i64 {
        i64::from(self.geo.inodes_per_group) - i64::from(self.groups[g as usize].used_inodes)
    }

    fn free_blocks_of(&self, g: u32) -> i64 {
        self.groups[g as usize].free_blocks as i64
    }

    fn averages(&self) -> (i64, i64) {
        let n = i64::from(self.geo.groups);
        let free_inodes: i64 = (0..self.geo.groups).map(|g| self.free_inodes(g)).sum();
        (free_inodes / n, self.free_blocks as i64 / n)
    }

    /// `find_group_orlov`.
    pub(crate) fn find_group_orlov(&mut self, parent: FileId) -> u32 {
        let ngroups = self.geo.groups;
        let ipg = i64::from(self.geo.inodes_per_group);
        let bpg = self.geo.blocks_per_group as i64;
        let (avefreei, avefreeb) = self.averages();
        let parent_inode = self.inode(parent);
        let parent_group = parent_inode.group;

        if parent == FileId::ROOT || parent_inode.topdir {
            let start = self.rng.below(u64::from(ngroups)) as u32;
            let mut best: Option<u32> = None;
            let mut best_ndir = i64::from(self.geo.inodes_per_group);
            for i in 0..ngroups {
                let g = (start + i) % ngroups;
                let dirs = i64::from(self.groups[g as usize].dirs);
                if self.free_inodes(g) == 0
                    || dirs >= best_ndir
                    || self.free_inodes(g) < avefreei
                    || self.free_blocks_of(g) < avefreeb
                {
                    continue;
                }
                best = Some(g);
                best_ndir = dirs;
            }
            if let Some(g) = best {
                return g;
            }
            return self.orlov_fallback(parent_group, avefreei);
        }

        let ndirs = i64::from(self.ndirs);
        let used_blocks = self.geo.blocks as i64 - self.free_blocks as i64;
        let blocks_per_dir = used_blocks / ndirs.max(1);
        let max_dirs = ndirs / i64::from(ngroups) + ipg / 16;
        let min_inodes = avefreei - ipg / 4;
        let min_blocks = avefreeb - bpg / 4;
        let mut max_debt = bpg / blocks_per_dir.max(BLOCK_COST);
        if max_debt * INODE_COST > ipg {
            max_debt = ipg / INODE_COST;
        }
        let max_debt = max_debt.clamp(1, 255);
        for i in 0..ngroups {
            let g = (parent_group + i) % ngroups;
            let gs = self.groups[g as usize];
            if self.free_inodes(g) == 0
                || i64::from(gs.debt) >= max_debt
                || i64::from(gs.dirs) >= max_dirs
                || self.free_inodes(g) < min_inodes
                || self.free_blocks_of(g) < min_blocks
            {
                continue;
            }
            return g;
        }
        self.orlov_fallback(parent_group, avefreei)
    }

    /// Orlov's `fallback:` label: any group from the parent's on with at
    /// least average free inodes, then any with a free inode.
    fn orlov_fallback(&self, parent_group: u32, avefreei: i64) -> u32 {
        let ngroups = self.geo.groups;
        for floor in [avefreei.max(1), 1] {
            for i in 0..ngroups {
                let g = (parent_group + i) % ngroups;
                if self.free_inodes(g) >= floor {
                    return g;
                }
            }
        }
        panic!("file system out of inodes");
    }

    /// `find_group_dir`, the 2.4 directory allocator.
    pub(crate) fn find_group_dir(&self) -> u32 {
        let (avefreei, _) = self.averages();
        let mut best: Option<u32> = None;
        for g in 0..self.geo.groups {
            if self.free_inodes(g) == 0 || self.free_inodes(g) < avefreei {
                continue;
            }
            if best.is_none_or(|b| self.free_blocks_of(g) > self.free_blocks_of(b)) {
                best = Some(g);
            }
        }
        best.unwrap_or_else(|| self.orlov_fallback(0, 1))
    }

    /// `find_group_other`, for files.
    pub(crate) fn find_group_other(&self, parent: FileId) -> u32 {
        let ngroups = self.geo.groups;
        let parent_group = self.inode(parent).group;
        let fits = |g: u32| self.free_inodes(g) > 0 && self.free_blocks_of(g) > 0;
        if fits(parent_group) {
            return parent_group;
        }
        let mut g = (parent_group + self.inode(parent).ino) % ngroups;
        let mut i = 1;
        while i < ngroups {
            g = (g + i) % ngroups;
            if fits(g) {
                return g;
            }
            i <<= 1;
        }
        let mut g = parent_group;
        for _ in 0..ngroups {
            g = (g + 1) % ngroups;
            if self.free_inodes(g) > 0 {
                return g;
            }
        }
        panic!("file system out of inodes");
    }
}
