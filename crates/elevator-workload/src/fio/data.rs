//! What fio writes, and how it checks what it reads back.
//!
//! Buffer contents follow fio's options (`io_u.c` `fill_io_buffer`,
//! `lib/rand.c` `fill_random_buf_percentage`, `dedupe.c`): random bytes
//! by default (one buffer reused, its first 8 bytes of every 512 scrambled
//! with the offset, as `small_content_scramble` does, unless
//! `refill_buffers` makes every write new), zeros (`zero_buffers`), a
//! repeated `buffer_pattern`, `buffer_compress_percentage` (each
//! `buffer_compress_chunk` is that share zeros or pattern, the rest
//! random), and `dedupe_percentage` (that share of writes repeats an
//! earlier buffer's contents: the last one, or one of a working set).
//!
//! Verification (`verify.c`) writes a header at the start of every
//! `verify_interval` bytes: magic, type, length, the block's seed, its
//! offset and the write's sequence number, with a CRC32C of the header;
//! then the block's checksum (md5, crc64 as fio's `fio_crc64`, crc32c)
//! over the rest, which is random. `verify=pattern` writes and checks
//! only `verify_pattern`; `meta` only the header. A read-back that does
//! not match fails the I/O with EILSEQ, as fio's does.
//!
//! Everything here is a pure function of its arguments (seeds come from
//! the job's `Prng`); the io_uring runtime calls it for the bytes it
//! moves. The simulator moves no bytes.

use super::options::Verify;

/// Bytes of our verify header (fio's `struct verify_header` is 40).
pub const HEADER_BYTES: usize = 40;
/// fio's `FIO_HDR_MAGIC`.
const MAGIC: u16 = 0xacca;

/// How a job fills its write buffers.
#[derive(Clone, Debug, PartialEq)]
pub struct Contents {
    pub zero: bool,
    pub pattern: Option<Vec<u8>>,
    /// Share of each chunk that is zeros or pattern.
    pub compress_percentage: u32,
    pub compress_chunk: u64,
    /// Every write gets new random contents (else one buffer, scrambled).
    pub refill: bool,
    pub scramble: bool,
    pub verify: Verify,
    pub verify_interval: u64,
    pub verify_offset: u64,
    pub verify_pattern: Option<Vec<u8>>,
}

/// What one write carries: the seed of its random bytes and its
/// sequence number (both go into verify headers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub seed: u64,
    pub numberio: u64,
}

/// Fill `buf`, the bytes of a write at byte `offset` of its file.
pub fn fill(c: &Contents, stamp: Stamp, offset: u64, buf: &mut [u8]) {
    if c.verify == Verify::Pattern {
        repeat(c.verify_pattern.as_deref().unwrap_or(&[0]), buf, offset);
        return;
    }
    if c.verify != Verify::None {
        let step = c.verify_interval.max(HEADER_BYTES as u64) as usize;
        let mut at = 0usize;
        while at < buf.len() {
            let end = (at + step).min(buf.len());
            // Each interval has its own seed, derived from the write's.
            let seed = mix(stamp.seed ^ (offset + at as u64));
            verify_block(
                c,
                seed,
                stamp.numberio,
                offset + at as u64,
                &mut buf[at..end],
            );
            at = end;
        }
        return;
    }
    plain(c, stamp.seed, offset, buf);
}

/// Contents without verification.
fn plain(c: &Contents, seed: u64, offset: u64, buf: &mut [u8]) {
    if c.zero {
        buf.fill(0);
        return;
    }
    if c.compress_percentage > 0 {
        let chunk = c.compress_chunk.max(1) as usize;
        let mut at = 0;
        let mut rng = Rng(mix(seed ^ offset));
        while at < buf.len() {
            let end = (at + chunk).min(buf.len());
            let len = end - at;
            let random = len * (100 - c.compress_percentage as usize) / 100;
            rng.fill(&mut buf[at..at + random]);
            match &c.pattern {
                Some(p) => repeat(p, &mut buf[at + random..end], 0),
                None => buf[at + random..end].fill(0),
            }
            at = end;
        }
        return;
    }
    if let Some(p) = &c.pattern {
        repeat(p, buf, 0);
        return;
    }
    if c.refill {
        Rng(mix(seed ^ offset)).fill(buf);
    } else {
        // One buffer for the whole job, as fio fills it once; the bytes
        // at a given buffer position are the same for every write.
        let mut rng = Rng(mix(seed));
        rng.fill(buf);
        if c.scramble {
            scramble(offset, buf);
        }
    }
}

/// small_content_scramble: the first 8 bytes of every 512 become the
/// offset of that sector.
fn scramble(offset: u64, buf: &mut [u8]) {
    for (i, sector) in buf.chunks_mut(512).enumerate() {
        let at = offset + (i * 512) as u64;
        let n = sector.len().min(8);
        sector[..n].copy_from_slice(&at.to_le_bytes()[..n]);
    }
}

/// A job's one write buffer, kept: fio fills an io_u's buffer once and, per
/// write, only scrambles it unless `refill_buffers` (io_u.c, `get_io_u`:
/// verify, else refill, else `do_scramble`); drawing its random bytes again for every write
/// costs a 256 KiB write about 30 000 generator steps, which on a loaded
/// machine held buffered sequential writes to a third of fio's rate.
#[derive(Clone, Debug, Default)]
pub struct Template {
    seed: u64,
    bytes: Vec<u8>,
}

/// [`fill`], the same bytes, copying the job's kept buffer where its
/// contents are that one buffer (random, not refilled, no verify).
pub fn fill_reusing(c: &Contents, stamp: Stamp, offset: u64, buf: &mut [u8], t: &mut Template) {
    let one_buffer = c.verify == Verify::None
        && !c.zero
        && c.compress_percentage == 0
        && c.pattern.is_none()
        && !c.refill;
    if !one_buffer {
        fill(c, stamp, offset, buf);
        return;
    }
    if t.bytes.is_empty() || t.seed != stamp.seed || t.bytes.len() < buf.len() {
        // The generator's stream is the same for any length, so a longer
        // buffer's prefix is a shorter one's bytes.
        t.seed = stamp.seed;
        t.bytes = vec![0; buf.len()];
        Rng(mix(stamp.seed)).fill(&mut t.bytes);
    }
    buf.copy_from_slice(&t.bytes[..buf.len()]);
    if c.scramble {
        scramble(offset, buf);
    }
}

fn repeat(p: &[u8], buf: &mut [u8], phase: u64) {
    let n = p.len().max(1) as u64;
    for (i, b) in buf.iter_mut().enumerate() {
        *b = p[((phase + i as u64) % n) as usize];
    }
}

fn verify_block(c: &Contents, seed: u64, numberio: u64, offset: u64, block: &mut [u8]) {
    let h = c.verify_offset as usize;
    // The payload (all but the header) is random from the seed.
    Rng(seed).fill(block);
    if block.len() < h + HEADER_BYTES {
        return;
    }
    let header = Header {
        kind: kind_code(c.verify),
        len: block.len() as u32,
        seed,
        offset,
        numberio,
    };
    // fio puts the header at verify_offset by swapping it with the start.
    header.write(&mut block[h..h + HEADER_BYTES]);
    let sum_at = h + HEADER_BYTES;
    let sum_len = sum_bytes(c.verify);
    if block.len() < sum_at + sum_len {
        return;
    }
    let sum = checksum(c.verify, &block[sum_at + sum_len..]);
    block[sum_at..sum_at + sum_len].copy_from_slice(&sum[..sum_len]);
}

/// Why a read-back failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mismatch {
    Magic {
        offset: u64,
    },
    Header {
        offset: u64,
        what: &'static str,
        want: u64,
        got: u64,
    },
    Checksum {
        offset: u64,
        kind: &'static str,
    },
    Pattern {
        offset: u64,
        at: u64,
    },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Magic { offset } => write!(f, "verify: bad magic header at offset {offset}"),
            Mismatch::Header {
                offset,
                what,
                want,
                got,
            } => write!(
                f,
                "verify: bad header {what} at offset {offset}: wanted {want}, got {got}"
            ),
            Mismatch::Checksum { offset, kind } => {
                write!(f, "verify: bad {kind} checksum at offset {offset}")
            }
            Mismatch::Pattern { offset, at } => write!(
                f,
                "verify: pattern mismatch at offset {offset} (byte {at} of the block)"
            ),
        }
    }
}

/// Check `buf`, read back from byte `offset`, against what a write with
/// these contents put there. `numberio` is checked when given (fio's
/// `verify_write_sequence`).
pub fn check(c: &Contents, offset: u64, buf: &[u8]) -> Result<(), Mismatch> {
    if c.verify == Verify::Pattern {
        let p = c.verify_pattern.as_deref().unwrap_or(&[0]);
        let n = p.len() as u64;
        for (i, b) in buf.iter().enumerate() {
            if *b != p[((offset + i as u64) % n) as usize] {
                return Err(Mismatch::Pattern {
                    offset,
                    at: i as u64,
                });
            }
        }
        return Ok(());
    }
    let step = c.verify_interval.max(HEADER_BYTES as u64) as usize;
    let h = c.verify_offset as usize;
    let mut at = 0usize;
    while at < buf.len() {
        let end = (at + step).min(buf.len());
        let block = &buf[at..end];
        let off = offset + at as u64;
        at = end;
        if block.len() < h + HEADER_BYTES {
            continue;
        }
        let hdr =
            Header::read(&block[h..h + HEADER_BYTES]).ok_or(Mismatch::Magic { offset: off })?;
        for (what, want, got) in [
            ("offset", off, hdr.offset),
            ("length", block.len() as u64, u64::from(hdr.len)),
            ("type", u64::from(kind_code(c.verify)), u64::from(hdr.kind)),
        ] {
            if want != got {
                return Err(Mismatch::Header {
                    offset: off,
                    what,
                    want,
                    got,
                });
            }
        }
        if c.verify == Verify::Meta {
            continue;
        }
        let sum_at = h + HEADER_BYTES;
        let sum_len = sum_bytes(c.verify);
        if block.len() < sum_at + sum_len {
            continue;
        }
        let sum = checksum(c.verify, &block[sum_at + sum_len..]);
        if block[sum_at..sum_at + sum_len] != sum[..sum_len] {
            return Err(Mismatch::Checksum {
                offset: off,
                kind: kind_name(c.verify),
            });
        }
    }
    Ok(())
}

fn kind_code(v: Verify) -> u8 {
    match v {
        Verify::None => 0,
        Verify::Md5 => 1,
        Verify::Crc64 => 2,
        Verify::Crc32c => 3,
        Verify::Meta => 4,
        Verify::Pattern => 5,
    }
}

fn kind_name(v: Verify) -> &'static str {
    match v {
        Verify::Md5 => "md5",
        Verify::Crc64 => "crc64",
        Verify::Crc32c => "crc32c",
        _ => "none",
    }
}

fn sum_bytes(v: Verify) -> usize {
    match v {
        Verify::Md5 => 16,
        Verify::Crc64 => 8,
        Verify::Crc32c => 4,
        _ => 0,
    }
}

fn checksum(v: Verify, data: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    match v {
        Verify::Md5 => out = md5(data),
        Verify::Crc64 => out[..8].copy_from_slice(&crc64(data).to_le_bytes()),
        Verify::Crc32c => out[..4].copy_from_slice(&crc32c(data).to_le_bytes()),
        _ => {}
    }
    out
}

struct Header {
    kind: u8,
    len: u32,
    seed: u64,
    offset: u64,
    numberio: u64,
}

impl Header {
    fn write(&self, b: &mut [u8]) {
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = 1;
        b[3] = self.kind;
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..16].copy_from_slice(&self.seed.to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.numberio.to_le_bytes());
        b[32..36].fill(0);
        let crc = crc32c(&b[..32]);
        b[36..40].copy_from_slice(&crc.to_le_bytes());
    }

    fn read(b: &[u8]) -> Option<Header> {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if u16::from_le_bytes([b[0], b[1]]) != MAGIC {
            return None;
        }
        let crc = u32::from_le_bytes(b[36..40].try_into().expect("4 bytes"));
        if crc != crc32c(&b[..32]) {
            return None;
        }
        Some(Header {
            kind: b[3],
            len: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
            seed: u64_at(8),
            offset: u64_at(16),
            numberio: u64_at(24),
        })
    }
}

/// A small, fast generator for buffer bytes (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0 | 1;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let v = self.next().to_le_bytes();
        rest.copy_from_slice(&v[..rest.len()]);
    }
}

/// splitmix64's finaliser: spreads a seed.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// CRC32C (Castagnoli, reflected 0x82F63B78), as `crc/crc32c.c`.
pub fn crc32c(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0x82f6_3b78
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        t
    });
    let mut crc = !0u32;
    for b in data {
        crc = t[((crc ^ u32::from(*b)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

/// fio's `fio_crc64`: reflected polynomial 0x95AC9329AC4BC9B5, initial
/// value 0, no final xor (`crc/crc64.c`).
pub fn crc64(data: &[u8]) -> u64 {
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = [0u64; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0x95ac_9329_ac4b_c9b5
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        t
    });
    let mut crc = 0u64;
    for b in data {
        crc = t[((crc ^ u64::from(*b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// MD5 (RFC 1321).
pub fn md5(data: &[u8]) -> [u8; 16] {
    const S: [u32; 64] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5,
        9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10,
        15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ];
    // K[i] = floor(abs(sin(i + 1)) * 2^32), RFC 1321 section 3.4.
    let k: Vec<u32> = (0..64)
        .map(|i| ((i as f64 + 1.0).sin().abs() * 4_294_967_296.0) as u32)
        .collect();
    let mut a0: u32 = 0x6745_2301;
    let mut b0: u32 = 0xefcd_ab89;
    let mut c0: u32 = 0x98ba_dcfe;
    let mut d0: u32 = 0x1032_5476;
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_le_bytes());
    for chunk in msg.chunks_exact(64) {
        let m: Vec<u32> = chunk
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let (mut a, mut b, mut c, mut d) = (a0, b0, c0, d0);
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(k[i]).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(S[i]));
        }
        a0 = a0.wrapping_add(a);
        b0 = b0.wrapping_add(b);
        c0 = c0.wrapping_add(c);
        d0 = d0.wrapping_add(d);
    }
    let mut out = [0u8; 16];
    out[..4].copy_from_slice(&a0.to_le_bytes());
    out[4..8].copy_from_slice(&b0.to_le_bytes());
    out[8..12].copy_from_slice(&c0.to_le_bytes());
    out[12..].copy_from_slice(&d0.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_buffer_gives_the_bytes_fill_gives() {
        let mut c = Contents {
            zero: false,
            pattern: None,
            compress_percentage: 0,
            compress_chunk: 0,
            refill: false,
            scramble: true,
            verify: Verify::None,
            verify_interval: 0,
            verify_offset: 0,
            verify_pattern: None,
        };
        for refill in [false, true] {
            c.refill = refill;
            let mut t = Template::default();
            for (len, offset, seed) in [(4096, 0, 7), (700, 8192, 7), (65536, 512, 7), (4096, 0, 9)]
            {
                let stamp = Stamp { seed, numberio: 1 };
                let (mut a, mut b) = (vec![1u8; len], vec![2u8; len]);
                fill(&c, stamp, offset, &mut a);
                fill_reusing(&c, stamp, offset, &mut b, &mut t);
                assert_eq!(
                    a, b,
                    "len {len} offset {offset} seed {seed} refill {refill}"
                );
            }
        }
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn checksums_match_their_reference_values() {
        assert_eq!(hex(&md5(b"abc")), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(hex(&md5(b"")), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc64(b""), 0);
    }

    fn contents(verify: Verify) -> Contents {
        Contents {
            zero: false,
            pattern: None,
            compress_percentage: 0,
            compress_chunk: 512,
            refill: true,
            scramble: true,
            verify,
            verify_interval: 4096,
            verify_offset: 0,
            verify_pattern: Some(vec![0xaa, 0x55]),
        }
    }

    #[test]
    fn what_is_written_verifies_and_a_flipped_byte_or_a_misplaced_block_does_not() {
        for v in [
            Verify::Md5,
            Verify::Crc64,
            Verify::Crc32c,
            Verify::Meta,
            Verify::Pattern,
        ] {
            let c = contents(v);
            let mut buf = vec![0u8; 16384];
            fill(
                &c,
                Stamp {
                    seed: 7,
                    numberio: 3,
                },
                1 << 20,
                &mut buf,
            );
            assert_eq!(check(&c, 1 << 20, &buf), Ok(()), "{v:?}");
            if v != Verify::Pattern {
                assert!(
                    check(&c, 2 << 20, &buf).is_err(),
                    "{v:?}: wrong offset passes"
                );
            }
            if v != Verify::Meta {
                buf[5000] ^= 1;
                assert!(
                    check(&c, 1 << 20, &buf).is_err(),
                    "{v:?}: a flipped byte passes"
                );
            }
        }
    }

    #[test]
    fn compressible_buffers_hold_the_zero_share() {
        let mut c = contents(Verify::None);
        c.compress_percentage = 50;
        let mut buf = vec![1u8; 4096];
        fill(
            &c,
            Stamp {
                seed: 1,
                numberio: 0,
            },
            0,
            &mut buf,
        );
        let zeros = buf.iter().filter(|b| **b == 0).count();
        assert!((2040..=2100).contains(&zeros), "{zeros}");
    }
}
