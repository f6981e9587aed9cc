//! fio's value grammar: sizes, times, integers, booleans, lists and splits,
//! as `parse.c` (`str_to_decimal`, `get_mult_bytes`, `get_mult_time`,
//! `check_int`) and `options.c` (`split_parse_ddir`, `str_split_parse`)
//! of fio read them.
//!
//! Where fio silently reads garbage as something (`4q` is 4 bytes,
//! `1.5g` is 1 byte, `10sec` is 10 µs) we refuse it instead; every form fio
//! documents means here what it means there, including its odd ones: with
//! the default `kb_base=1024`, `4k`, `4kb` and `4KB` are 4096 bytes while
//! `4KiB` is 4000 ("opposite units", HOWTO "kb_base").

/// A size as written: bytes, a percentage (of the file or device), or a
/// count of zones (`z`, zoned modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    Bytes(u64),
    Percent(u64),
    Zones(u64),
}

/// The largest value an option takes.
const MAX: i128 = i64::MAX as i128;

/// Split a number from its suffix: optional sign, then `0x` hex or decimal
/// digits. Returns the value and the suffix.
fn number(s: &str) -> Result<(i128, &str), String> {
    let t = s.trim();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if body.starts_with('(') {
        return Err(format!(
            "{s:?}: arithmetic expressions are not supported; write the value"
        ));
    }
    let (radix, digits) = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(rest) => (16, rest),
        None => (10, body),
    };
    let end = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    if end == 0 {
        return Err(format!("{s:?} is not a number"));
    }
    let v = i128::from_str_radix(&digits[..end], radix)
        .ok()
        .filter(|v| *v <= MAX)
        .ok_or_else(|| format!("{s:?} is too large"))?;
    let rest = &digits[end..];
    if rest.starts_with('.') {
        return Err(format!(
            "{s:?}: fractions are not read by fio (it would take {}); write a whole number",
            &digits[..end]
        ));
    }
    Ok((if neg { -v } else { v }, rest))
}

/// The multiplier of a size suffix (`parse.c` `__get_mult_bytes`): with
/// `kb_base=1024` the plain prefixes are powers of 1024 and the IEC ones
/// (`kib`) powers of 1000; `kb_base=1000` the other way round.
fn size_mult(suffix: &str, kb_base: u32) -> Option<i128> {
    let lower = suffix.to_ascii_lowercase();
    let (letter, iec) = match lower.as_str() {
        "" | "b" => return Some(1),
        s if s.len() == 3 && s.ends_with("ib") => (s.as_bytes()[0], true),
        s if s.len() == 2 && s.ends_with('b') => (s.as_bytes()[0], false),
        s if s.len() == 1 => (s.as_bytes()[0], false),
        _ => return None,
    };
    let pow = match letter {
        b'k' => 1,
        b'm' => 2,
        b'g' => 3,
        b't' => 4,
        b'p' => 5,
        _ => return None,
    };
    let base: i128 = match (kb_base, iec) {
        (1000, false) | (1024, true) => 1000,
        _ => 1024,
    };
    Some(base.pow(pow))
}

/// A signed byte count (`rw=read:-8k`): digits, then an optional unit.
pub fn signed_bytes(s: &str, kb_base: u32) -> Result<i64, String> {
    let (v, suffix) = number(s)?;
    let mult = size_mult(suffix, kb_base).ok_or_else(|| {
        format!("{s:?}: unknown size unit {suffix:?} (k, m, g, t, p; kib... with kb_base)")
    })?;
    let total = v * mult;
    if total.abs() > MAX {
        return Err(format!("{s:?} is too large"));
    }
    Ok(total as i64)
}

/// A byte count, a percentage, or (`zones`) a zone count.
pub fn size(s: &str, kb_base: u32, zones: bool) -> Result<Size, String> {
    let t = s.trim();
    if let Some(n) = t.strip_suffix(['z', 'Z']) {
        if !zones {
            return Err(format!("{s:?}: the 'z' (zones) suffix does not apply here"));
        }
        let n: u64 = n
            .parse()
            .map_err(|_| format!("{s:?}: a zone count is a whole number before 'z'"))?;
        return Ok(Size::Zones(n));
    }
    let (v, suffix) = number(t)?;
    if v < 0 {
        return Err(format!("{s:?} is negative"));
    }
    if suffix == "%" {
        if v > 100 {
            return Err(format!("{s:?} is over 100%"));
        }
        return Ok(Size::Percent(v as u64));
    }
    let b = signed_bytes(t, kb_base)?;
    Ok(Size::Bytes(b as u64))
}

/// A byte count (no percentage).
pub fn bytes(s: &str, kb_base: u32) -> Result<u64, String> {
    match size(s, kb_base, false)? {
        Size::Bytes(b) => Ok(b),
        _ => Err(format!("{s:?}: a percentage does not apply here")),
    }
}

/// A time in microseconds (`get_mult_time`): a bare number is seconds
/// when `seconds`, else microseconds; suffixes `us`/`usec`, `ms`/`msec`,
/// `s`/`sec`, `m`, `h`, `d`, in any case.
pub fn time_us(s: &str, seconds: bool) -> Result<u64, String> {
    let (v, suffix) = number(s)?;
    if v < 0 {
        return Err(format!("{s:?} is negative"));
    }
    let mult: i128 = match suffix.to_ascii_lowercase().as_str() {
        "" => {
            if seconds {
                1_000_000
            } else {
                1
            }
        }
        "us" | "usec" => 1,
        "ms" | "msec" => 1_000,
        "s" | "sec" => 1_000_000,
        "m" => 60_000_000,
        "h" => 3_600_000_000,
        "d" => 86_400_000_000,
        other => {
            return Err(format!(
                "{s:?}: unknown time unit {other:?} (us, ms, s, m, h, d)"
            ))
        }
    };
    u64::try_from(v * mult).map_err(|_| format!("{s:?} is too long"))
}

/// An integer option (`FIO_OPT_INT`): fio reads it as a size, so `4k` is
/// 4096.
pub fn int(s: &str, kb_base: u32) -> Result<u64, String> {
    bytes(s, kb_base)
}

/// A boolean (`FIO_OPT_BOOL`): absent or `1` is on, `0` is off.
pub fn boolean(v: Option<&str>) -> Result<bool, String> {
    match v.map(str::trim) {
        None | Some("1") => Ok(true),
        Some("0") => Ok(false),
        Some(other) => Err(format!("{other:?} is not 0 or 1")),
    }
}

/// A floating-point value.
pub fn float(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if !v.is_finite() {
        return Err(format!("{s:?} is not a finite number"));
    }
    Ok(v)
}

/// The per-direction parts of `read,write,trim` values (`str_split_parse`):
/// one value applies to all three; two give read and write (trim takes
/// write's); an empty part keeps the default (`None`).
pub fn per_ddir(s: &str) -> [Option<&str>; 3] {
    let parts: Vec<&str> = s.split(',').collect();
    let get = |i: usize| parts.get(i).map(|p| p.trim()).filter(|p| !p.is_empty());
    match parts.len() {
        1 => [get(0), get(0), get(0)],
        2 => [get(0), get(1), get(1)],
        _ => [get(0), get(1), get(2)],
    }
}

/// One `value/percentage` entry of a split (`split_parse_ddir`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitEntry {
    pub value: u64,
    /// `None`: not given (the remainder is shared among such entries).
    pub perc: Option<u32>,
}

/// `a/p:b/q:...` as fio splits it: entries separated by `:`, each a size
/// with an optional `/percentage` (over 100 is 100; `/0` counts as not
/// given, as in fio). Parsing stops at an empty entry.
pub fn split(s: &str, kb_base: u32) -> Result<Vec<SplitEntry>, String> {
    let mut out = Vec::new();
    for entry in s.split(':') {
        let entry = entry.trim();
        if entry.is_empty() {
            break;
        }
        let (v, p) = match entry.split_once('/') {
            Some((v, p)) => (v, Some(p)),
            None => (entry, None),
        };
        let value = bytes(v, kb_base)?;
        let perc = match p.map(str::trim) {
            None | Some("") => None,
            Some(p) => {
                let n: u32 = p
                    .parse()
                    .map_err(|_| format!("{entry:?}: {p:?} is not a whole percentage"))?;
                (n > 0).then_some(n.min(100))
            }
        };
        out.push(SplitEntry { value, perc });
        if out.len() > 64 {
            return Err(format!("{s:?}: more than 64 entries"));
        }
    }
    Ok(out)
}

/// A range `low-high` or `low:high` of sizes (`FIO_OPT_RANGE`); a single
/// value is both ends. Swapped ends are put in order, as fio does.
pub fn range(s: &str, kb_base: u32) -> Result<(u64, u64), String> {
    let t = s.trim();
    // A leading sign is not a separator.
    let sep = t
        .char_indices()
        .skip(1)
        .find(|&(_, c)| c == '-' || c == ':')
        .map(|(i, _)| i);
    let (a, b) = match sep {
        Some(i) => (bytes(&t[..i], kb_base)?, bytes(&t[i + 1..], kb_base)?),
        None => {
            let v = bytes(t, kb_base)?;
            (v, v)
        }
    };
    Ok((a.min(b), a.max(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_fios_units_including_its_opposite_iec_prefixes() {
        let b = |s| bytes(s, 1024).unwrap();
        assert_eq!(b("4k"), 4096);
        assert_eq!(b("4K"), 4096);
        assert_eq!(b("4kb"), 4096);
        assert_eq!(b("4KiB"), 4000, "kb_base=1024: IEC prefixes are decimal");
        assert_eq!(b("1m"), 1 << 20);
        assert_eq!(b("10G"), 10 << 30);
        assert_eq!(b("512"), 512);
        assert_eq!(b("512b"), 512);
        assert_eq!(b("0x1000"), 4096);
        assert_eq!(bytes("4KiB", 1000).unwrap(), 4096);
        assert_eq!(bytes("4k", 1000).unwrap(), 4000);
        assert_eq!(size("50%", 1024, false).unwrap(), Size::Percent(50));
        assert_eq!(size("524z", 1024, true).unwrap(), Size::Zones(524));
        assert!(size("524z", 1024, false).is_err());
        assert!(bytes("4q", 1024).is_err());
        assert!(bytes("1.5g", 1024).is_err());
        assert!(bytes("(4k*2)", 1024).is_err());
        assert_eq!(signed_bytes("-8k", 1024).unwrap(), -8192);
    }

    #[test]
    fn times_default_to_seconds_or_microseconds() {
        assert_eq!(time_us("900", true).unwrap(), 900_000_000);
        assert_eq!(time_us("5m", true).unwrap(), 300_000_000);
        assert_eq!(time_us("10ms", true).unwrap(), 10_000);
        assert_eq!(time_us("2000", false).unwrap(), 2000);
        assert_eq!(time_us("1h", true).unwrap(), 3_600_000_000);
        assert_eq!(time_us("30s", true).unwrap(), 30_000_000);
        assert!(time_us("10parsecs", true).is_err());
    }

    #[test]
    fn splits_and_per_direction_values() {
        let s = split("64k/40:1024k/60", 1024).unwrap();
        assert_eq!(
            s[0],
            SplitEntry {
                value: 65536,
                perc: Some(40)
            }
        );
        assert_eq!(s[1].perc, Some(60));
        let z = split("50/5:30/15:20/", 1024).unwrap();
        assert_eq!(
            z[2],
            SplitEntry {
                value: 20,
                perc: None
            }
        );
        assert_eq!(per_ddir("4k"), [Some("4k"); 3]);
        assert_eq!(per_ddir("4k,8k"), [Some("4k"), Some("8k"), Some("8k")]);
        assert_eq!(per_ddir(",8k"), [None, Some("8k"), Some("8k")]);
        assert_eq!(range("4k-16k", 1024).unwrap(), (4096, 16384));
        assert_eq!(range("16k:4k", 1024).unwrap(), (4096, 16384));
        assert_eq!(boolean(None), Ok(true));
        assert!(boolean(Some("yes")).is_err());
    }
}
