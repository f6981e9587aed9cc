//! Sizes and durations as people write them: `4k`, `128KiB`, `100m`,
//! `500ms`, `5s`. Size suffixes are binary (k = 1024), as in fio.

use elevator_core::Duration;

/// Bytes from `4096`, `4k`, `4KiB`, `4kb`, `1.5m`, `2g`, `8s` (sectors).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| {
        format!("bad size {s:?}: expected a number with an optional unit (4k, 128KiB, 100m, 1g)")
    })?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "s" | "sectors" => 512,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "bad size {s:?}: unknown unit {other:?} (use b, k, m, g, t)"
            ))
        }
    };
    let bytes = value * scale as f64;
    if !bytes.is_finite() || !(0.0..=1e18).contains(&bytes) {
        return Err(format!("bad size {s:?}: out of range"));
    }
    Ok(bytes.round() as u64)
}

/// A duration from `250ms`, `5s`, `1.5s`, `2min`, `100us`, `1h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("bad duration {s:?}: expected a number and a unit (500ms, 5s)"))?;
    let ns_per: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "min" | "m" => 60e9,
        "h" => 3600e9,
        "" => {
            return Err(format!(
                "bad duration {s:?}: missing unit (ns, us, ms, s, min, h)"
            ))
        }
        other => {
            return Err(format!(
                "bad duration {s:?}: unknown unit {other:?} (ns, us, ms, s, min, h)"
            ))
        }
    };
    let ns = value * ns_per;
    if !ns.is_finite() || !(0.0..=1e18).contains(&ns) {
        return Err(format!("bad duration {s:?}: out of range"));
    }
    Ok(Duration(ns.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("128KiB"), Ok(131072));
        assert_eq!(parse_size("100m"), Ok(100 << 20));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert_eq!(parse_size("8s"), Ok(4096));
        assert_eq!(parse_size("512"), Ok(512));
        for bad in ["", "k", "12x", "-4k", "1e400"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        for bad in ["5", "5 parsecs", "ms", ""] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
