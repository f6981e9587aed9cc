//! File-set generators: kernel source trees, well laid out big files,
//! copies, and an application's start-up file set.
//!
//! Everything is placed through the file system's own allocator, in the
//! order a real `tar x` or `cp -a` would create it, so trees, copies and big
//! files land where ext2 would have put them.

use super::{FileId, FileSystem, Kind, NoSpace};
use elevator_core::{Duration, Prng};

/// Files of the Linux 2.4.19 source tree.
///
/// From ../shared/reference/devices-workloads-traces.md §3.4, computed
/// from a CVS import of 2.4.19 (`bticino/linux-2.4.19-rmk7-pxa2-btweb`,
/// 2.4.19 plus the ARM rmk7/pxa2 patches: close to, not exactly, vanilla):
/// 11 219 files in 596 directories, 135.0 MiB of data, median 4 544 B,
/// largest 1.77 MB.
pub const KTREE_FILES: u32 = 11_219;
/// Directories of the 2.4.19 tree, its top directory included.
pub const KTREE_DIRS: u32 = 596;
/// Bytes of file data in the 2.4.19 tree (135.0 MiB).
pub const KTREE_BYTES: u64 = 135 * (1 << 20);
/// The largest file of the 2.4.19 tree.
pub const KTREE_MAX_FILE: u64 = 1_770_000;
/// The tree's file-size histogram: (lower bound of the log2 bucket in
/// bytes, files), same source.
pub const KTREE_HISTOGRAM: [(u64, u32); 12] = [
    (1, 351),
    (256, 548),
    (512, 1013),
    (1 << 10, 1532),
    (2 << 10, 1874),
    (4 << 10, 1988),
    (8 << 10, 1817),
    (16 << 10, 1180),
    (32 << 10, 578),
    (64 << 10, 256),
    (128 << 10, 58),
    (256 << 10, 24),
];

/// A directory tree's shape: what to create, in creation order.
#[derive(Clone, Debug)]
pub struct TreeShape {
    /// `dirs[0]` is the top directory; each lists its entries in the order
    /// they are created (and read back by readdir).
    pub dirs: Vec<Vec<Entry>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A file of this many bytes.
    File(u64),
    /// Subdirectory number `n` of `TreeShape::dirs`.
    Dir(usize),
}

impl TreeShape {
    pub fn files(&self) -> usize {
        self.dirs
            .iter()
            .flatten()
            .filter(|e| matches!(e, Entry::File(_)))
            .count()
    }

    pub fn bytes(&self) -> u64 {
        self.dirs
            .iter()
            .flatten()
            .map(|e| match e {
                Entry::File(n) => *n,
                Entry::Dir(_) => 0,
            })
            .sum()
    }

    /// The shape of a 2.4.19 kernel tree: [`KTREE_DIRS`] directories and
    /// [`KTREE_FILES`] files whose sizes follow [`KTREE_HISTOGRAM`] exactly
    /// and add up to [`KTREE_BYTES`]. The directory structure is drawn (the
    /// reference gives counts, not the tree): each new directory hangs from
    /// an existing one chosen with preferential attachment that fades with
    /// depth, and directories get files in proportion to a log-normal
    /// weight, so a few hold hundreds of files (as include/linux does) and
    /// most hold a dozen.
    pub fn kernel_tree(rng: &mut Prng) -> TreeShape {
        let ndirs = KTREE_DIRS as usize;
        let mut parent = vec![0usize; ndirs];
        let mut depth = vec![0u32; ndirs];
        let mut subdirs = vec![0u32; ndirs];
        for d in 1..ndirs {
            let weight = |p: usize| f64::from(subdirs[p] + 1) * 0.6f64.powi(depth[p] as i32);
            let total: f64 = (0..d).filter(|&p| depth[p] < 7).map(weight).sum();
            let mut x = rng.unit() * total;
            let mut pick = 0;
            for p in (0..d).filter(|&p| depth[p] < 7) {
                x -= weight(p);
                pick = p;
                if x <= 0.0 {
                    break;
                }
            }
            parent[d] = pick;
            depth[d] = depth[pick] + 1;
            subdirs[pick] += 1;
        }
        // Files per directory.
        let weights: Vec<f64> = (0..ndirs).map(|_| (1.3 * normal(rng)).exp()).collect();
        let total_w: f64 = weights.iter().sum();
        let mut cumulative = Vec::with_capacity(ndirs);
        let mut acc = 0.0;
        for w in &weights {
            acc += w / total_w;
            cumulative.push(acc);
        }
        let sizes = kernel_file_sizes(rng);
        let mut dirs: Vec<Vec<Entry>> = vec![Vec::new(); ndirs];
        for size in sizes {
            let x = rng.unit();
            let d = cumulative.partition_point(|&c| c < x).min(ndirs - 1);
            dirs[d].push(Entry::File(size));
        }
        for d in 1..ndirs {
            dirs[parent[d]].push(Entry::Dir(d));
        }
        // Interleave files and subdirectories as readdir would list them.
        for entries in &mut dirs {
            shuffle(entries, rng);
        }
        TreeShape { dirs }
    }
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut Prng) -> f64 {
    let u1 = rng.unit().max(1e-12);
    let u2 = rng.unit();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn shuffle<T>(v: &mut [T], rng: &mut Prng) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// [`KTREE_FILES`] sizes, in random order, with the histogram's bucket
/// counts and a total of [`KTREE_BYTES`]. Within a bucket `[lo, hi)` a size
/// is `lo * (hi/lo)^(u^k)` for uniform `u`: `k = 1` is log-uniform, larger
/// `k` leans to the bucket's low end (as a falling distribution does), and
/// one `k` for all buckets is solved so that the total comes out exact.
pub fn kernel_file_sizes(rng: &mut Prng) -> Vec<u64> {
    let mut draws: Vec<(usize, f64)> = Vec::with_capacity(KTREE_FILES as usize);
    for (i, &(_, count)) in KTREE_HISTOGRAM.iter().enumerate() {
        for _ in 0..count {
            draws.push((i, rng.unit()));
        }
    }
    let bounds = |i: usize| {
        let lo = KTREE_HISTOGRAM[i].0 as f64;
        let hi = KTREE_HISTOGRAM
            .get(i + 1)
            .map_or(KTREE_MAX_FILE as f64, |b| b.0 as f64);
        (lo, hi)
    };
    let size = |i: usize, u: f64, k: f64| {
        let (lo, hi) = bounds(i);
        (lo * (hi / lo).powf(u.powf(k))).floor().clamp(lo, hi - 1.0)
    };
    let total = |k: f64| draws.iter().map(|&(i, u)| size(i, u, k)).sum::<f64>();
    let target = KTREE_BYTES as f64;
    let (mut lo_k, mut hi_k) = (0.05, 20.0);
    for _ in 0..60 {
        let mid = 0.5 * (lo_k + hi_k);
        if total(mid) > target {
            lo_k = mid;
        } else {
            hi_k = mid;
        }
    }
    let k = 0.5 * (lo_k + hi_k);
    let mut sizes: Vec<u64> = draws.iter().map(|&(i, u)| size(i, u, k) as u64).collect();
    // Put the rounding remainder on the largest file (stays in its bucket).
    let sum: u64 = sizes.iter().sum();
    let max_i = (0..sizes.len()).max_by_key(|&i| sizes[i]).expect("files");
    if sum < KTREE_BYTES {
        sizes[max_i] = (sizes[max_i] + (KTREE_BYTES - sum)).min(KTREE_MAX_FILE);
    }
    shuffle(&mut sizes, rng);
    sizes
}

/// Create `shape` under `parent` the way `tar x` or `cp -a` does: depth
/// first, each directory's entries in order, each file written out in full
/// right after it is created. `pid` is the creating process (ext2 colours
/// a file's first block by it). Returns the top directory.
pub fn place_tree(
    fs: &mut FileSystem,
    parent: FileId,
    shape: &TreeShape,
    pid: u32,
) -> Result<FileId, NoSpace> {
    let top = fs.create(parent, Kind::Dir, pid)?;
    let mut stack = vec![(0usize, top, 0usize)];
    while let Some((d, dir, next)) = stack.pop() {
        let Some(&entry) = shape.dirs[d].get(next) else {
            continue;
        };
        stack.push((d, dir, next + 1));
        match entry {
            Entry::File(size) => {
                let f = fs.create(dir, Kind::File, pid)?;
                fs.extend_to(f, size, pid)?;
                fs.discard_prealloc(f);
            }
            Entry::Dir(sub) => {
                let sd = fs.create(dir, Kind::Dir, pid)?;
                stack.push((sub, sd, 0));
            }
        }
    }
    Ok(top)
}

/// The shape of an existing tree, for placing a copy of it.
pub fn shape_of(fs: &FileSystem, top: FileId) -> TreeShape {
    let mut dirs: Vec<Vec<Entry>> = vec![Vec::new()];
    let mut stack = vec![(top, 0usize)];
    while let Some((dir, index)) = stack.pop() {
        for &c in fs.children(dir) {
            if fs.is_dir(c) {
                let n = dirs.len();
                dirs.push(Vec::new());
                dirs[index].push(Entry::Dir(n));
                stack.push((c, n));
            } else {
                dirs[index].push(Entry::File(fs.size(c)));
            }
        }
    }
    TreeShape { dirs }
}

/// A file of `size` bytes written in one go: with a fresh file system it
/// is contiguous but for ext2's in-line indirect blocks and the metadata at
/// the start of each 128 MiB group ("well laid out").
pub fn big_file(
    fs: &mut FileSystem,
    parent: FileId,
    size: u64,
    pid: u32,
) -> Result<FileId, NoSpace> {
    let f = fs.create(parent, Kind::File, pid)?;
    fs.extend_to(f, size, pid)?;
    fs.discard_prealloc(f);
    Ok(f)
}

/// Every file under `top`, in the order `find top -type f` prints them
/// (depth first, readdir order).
pub fn files_under(fs: &FileSystem, top: FileId) -> Vec<FileId> {
    let mut out = Vec::new();
    let mut stack = vec![(top, 0usize)];
    while let Some((dir, next)) = stack.pop() {
        let Some(&c) = fs.children(dir).get(next) else {
            continue;
        };
        stack.push((dir, next + 1));
        if fs.is_dir(c) {
            stack.push((c, 0));
        } else {
            out.push(c);
        }
    }
    out
}

/// One step of an application's start-up: read (or write) `len` bytes at
/// `offset` of `file`, then compute for `think`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppOp {
    pub file: FileId,
    pub offset: u64,
    pub len: u64,
    pub think: Duration,
    pub write: bool,
}

/// Bytes the xterm cold start-up reads: the BFQ suite's `xterm.trace`
/// (../shared/reference/devices-workloads-traces.md §5) moves 718 4 KiB
/// requests, 5.9 MiB, in about 109 separately located runs, over 2.4 s.
pub const XTERM_BYTES: u64 = 5_900 * 1024;
/// Separately located reads of the xterm start-up (same trace: 109 jumps).
pub const XTERM_READS: usize = 109;
/// Files the start-up touches: binaries (sshd, bash, xauth, xterm), the
/// X11 and C libraries, and configuration files [estimate: the trace
/// records sectors, not names; 109 runs over about 40 files].
pub const XTERM_FILES: usize = 40;
/// Computation between two reads: the trace's 2.4 s less about 1.2 s of
/// disk time for 109 seeks, over 109 reads, is about 11 ms; 10 ms is used.
pub const XTERM_THINK: Duration = Duration::from_millis(10);

/// An xterm-sized application start-up (the seed's `ssh testbox xterm -e
/// true`): [`XTERM_FILES`] files in a small system tree under `parent`, and
/// [`XTERM_READS`] dependent reads totalling [`XTERM_BYTES`], each followed
/// by [`XTERM_THINK`]. The first read of each file is at offset 0 (headers,
/// configuration); the others land at random page-aligned offsets of the
/// larger files (libraries faulted in piece by piece). One 4 KiB write to
/// a small file stands for `xauth` updating `~/.Xauthority`, which sshd
/// runs for an X11-forwarded session. Returns the top directory and the
/// operations.
pub fn xterm_startup(
    fs: &mut FileSystem,
    parent: FileId,
    rng: &mut Prng,
    pid: u32,
) -> Result<(FileId, Vec<AppOp>), NoSpace> {
    let top = fs.create(parent, Kind::Dir, pid)?;
    let sub = (0..4)
        .map(|_| fs.create(top, Kind::Dir, pid))
        .collect::<Result<Vec<FileId>, NoSpace>>()?;
    // Sizes: log-uniform 4 KiB .. 2 MiB.
    let mut files = Vec::with_capacity(XTERM_FILES);
    for i in 0..XTERM_FILES {
        let size = (4096.0 * 512f64.powf(rng.unit())) as u64;
        let dir = sub[i % sub.len()];
        let f = fs.create(dir, Kind::File, pid)?;
        fs.extend_to(f, size.max(512), pid)?;
        fs.discard_prealloc(f);
        files.push(f);
    }
    let xauthority = fs.create(top, Kind::File, pid)?;
    fs.extend_to(xauthority, 200, pid)?;
    fs.discard_prealloc(xauthority);

    // First reads: headers of every file.
    let mut reads: Vec<(FileId, u64, u64)> = files.iter().map(|&f| (f, 0, 4096)).collect();
    // The rest: pieces of the larger files.
    let big: Vec<FileId> = files
        .iter()
        .copied()
        .filter(|&f| fs.size(f) > 64 << 10)
        .collect();
    let pool = if big.is_empty() { files.clone() } else { big };
    while reads.len() < XTERM_READS {
        let f = pool[rng.below(pool.len() as u64) as usize];
        let pages = fs.size(f) / 4096;
        let offset = rng.below(pages.max(1)) * 4096;
        reads.push((f, offset, 0));
    }
    // Spread the remaining bytes over the non-header reads.
    let header_bytes: u64 = reads.iter().map(|r| r.2).sum();
    let rest = XTERM_BYTES.saturating_sub(header_bytes);
    let n_rest = (reads.len() - files.len()) as u64;
    for r in reads.iter_mut().skip(files.len()) {
        let room = fs.size(r.0) - r.1;
        r.2 = (rest / n_rest).next_multiple_of(4096).min(room).max(4096);
    }
    // Interleave: a file's header comes before its other pieces.
    let mut order: Vec<usize> = (files.len()..reads.len()).collect();
    shuffle(&mut order, rng);
    let mut ops = Vec::with_capacity(reads.len() + 1);
    ops.push(AppOp {
        file: xauthority,
        offset: 0,
        len: 4096,
        think: XTERM_THINK,
        write: true,
    });
    let mut seen = vec![false; files.len()];
    for i in order {
        let (f, off, len) = reads[i];
        let fi = files.iter().position(|&x| x == f).expect("file of the set");
        if !seen[fi] {
            seen[fi] = true;
            ops.push(AppOp {
                file: f,
                offset: 0,
                len: 4096,
                think: XTERM_THINK,
                write: false,
            });
        }
        ops.push(AppOp {
            file: f,
            offset: off,
            len,
            think: XTERM_THINK,
            write: false,
        });
    }
    for (fi, &f) in files.iter().enumerate() {
        if !seen[fi] {
            ops.push(AppOp {
                file: f,
                offset: 0,
                len: 4096,
                think: XTERM_THINK,
                write: false,
            });
        }
    }
    Ok((top, ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::FsParams;

    #[test]
    fn kernel_sizes_follow_the_histogram_and_total() {
        let mut rng = Prng::new(3);
        let sizes = kernel_file_sizes(&mut rng);
        assert_eq!(sizes.len(), KTREE_FILES as usize);
        let total: u64 = sizes.iter().sum();
        let err = (total as f64 - KTREE_BYTES as f64).abs() / KTREE_BYTES as f64;
        assert!(err < 0.001, "total {total}");
        for (i, &(lo, count)) in KTREE_HISTOGRAM.iter().enumerate() {
            let hi = KTREE_HISTOGRAM.get(i + 1).map_or(u64::MAX, |b| b.0);
            let n = sizes.iter().filter(|&&s| s >= lo && s < hi).count();
            assert_eq!(n, count as usize, "bucket {lo}");
        }
        let mut sorted = sizes.clone();
        sorted.sort_unstable();
        let median = sorted[sorted.len() / 2];
        println!("median {median} B (reference 4544), total {total}");
        assert!((3000..7000).contains(&median));
    }

    #[test]
    fn a_kernel_tree_on_disk() {
        let mut fs = FileSystem::new(&FsParams::default(), 64 * (128 << 20) / 512, 1);
        let mut rng = Prng::new(9);
        let shape = TreeShape::kernel_tree(&mut rng);
        assert_eq!(shape.files(), KTREE_FILES as usize);
        assert_eq!(shape.dirs.len(), KTREE_DIRS as usize);
        let top = place_tree(&mut fs, FileId::ROOT, &shape, 100).unwrap();
        fs.check();
        let files = files_under(&fs, top);
        assert_eq!(files.len(), KTREE_FILES as usize);
        let groups: std::collections::BTreeSet<u32> =
            files.iter().map(|&f| fs.inode(f).group).collect();
        println!("tree in groups {groups:?}");
        assert!(
            groups.len() <= 6,
            "an Orlov tree stays in a few groups: {groups:?}"
        );
        let copied = shape_of(&fs, top);
        let copy = place_tree(&mut fs, FileId::ROOT, &copied, 101).unwrap();
        assert_eq!(files_under(&fs, copy).len(), KTREE_FILES as usize);
        assert_ne!(fs.inode(copy).group, fs.inode(top).group);
    }
}
