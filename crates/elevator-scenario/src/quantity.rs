//! Units of the figures a published table compares: the unit a table
//! declares for a cell, the unit a thread wrote beside a figure
//! (`5551KB/s`, `132K usec`, `2820 msec`, `24.848 MB/s`) and the unit our
//! metric comes in (`Metric::native_unit`), each converted to the cell's.
//!
//! Byte prefixes are ambiguous in the threads: fio 1.x printed KiB as
//! "KB", tiotest printed MiB as "MB". A figure's written `K`, `M` or `G`
//! is therefore read in the base of the unit the table declares (binary
//! for `KiB/s`, decimal for `kB/s`); the table's comment says why it
//! declares what it does. An explicit `KiB`/`MiB` is always binary.

/// What a unit measures; only units of one dimension convert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    Time,
    Bytes,
    Rate,
    Ops,
    Calls,
    Share,
}

/// A unit a table may declare.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Unit {
    pub name: &'static str,
    pub dim: Dim,
    /// The unit in the dimension's base (seconds, bytes, bytes/s, I/Os
    /// per second, calls, fraction).
    pub scale: f64,
}

const KI: f64 = 1024.0;
const MI: f64 = 1024.0 * 1024.0;
const GI: f64 = 1024.0 * 1024.0 * 1024.0;

/// Every unit a table may declare, by name.
pub const UNITS: &[Unit] = &[
    Unit {
        name: "s",
        dim: Dim::Time,
        scale: 1.0,
    },
    Unit {
        name: "ms",
        dim: Dim::Time,
        scale: 1e-3,
    },
    Unit {
        name: "us",
        dim: Dim::Time,
        scale: 1e-6,
    },
    Unit {
        name: "B",
        dim: Dim::Bytes,
        scale: 1.0,
    },
    Unit {
        name: "KiB",
        dim: Dim::Bytes,
        scale: KI,
    },
    Unit {
        name: "MiB",
        dim: Dim::Bytes,
        scale: MI,
    },
    Unit {
        name: "GiB",
        dim: Dim::Bytes,
        scale: GI,
    },
    Unit {
        name: "kB",
        dim: Dim::Bytes,
        scale: 1e3,
    },
    Unit {
        name: "MB",
        dim: Dim::Bytes,
        scale: 1e6,
    },
    Unit {
        name: "GB",
        dim: Dim::Bytes,
        scale: 1e9,
    },
    Unit {
        name: "B/s",
        dim: Dim::Rate,
        scale: 1.0,
    },
    Unit {
        name: "KiB/s",
        dim: Dim::Rate,
        scale: KI,
    },
    Unit {
        name: "MiB/s",
        dim: Dim::Rate,
        scale: MI,
    },
    Unit {
        name: "kB/s",
        dim: Dim::Rate,
        scale: 1e3,
    },
    Unit {
        name: "MB/s",
        dim: Dim::Rate,
        scale: 1e6,
    },
    Unit {
        name: "IOPS",
        dim: Dim::Ops,
        scale: 1.0,
    },
    Unit {
        name: "calls",
        dim: Dim::Calls,
        scale: 1.0,
    },
    Unit {
        name: "%",
        dim: Dim::Share,
        scale: 0.01,
    },
    Unit {
        name: "fraction",
        dim: Dim::Share,
        scale: 1.0,
    },
];

/// The names of [`UNITS`], for messages.
pub fn unit_names() -> String {
    UNITS.iter().map(|u| u.name).collect::<Vec<_>>().join(", ")
}

impl Unit {
    /// The declared unit called `name`.
    pub fn named(name: &str) -> Option<Unit> {
        UNITS.iter().copied().find(|u| u.name == name)
    }

    /// Whether the unit's byte prefixes are binary.
    fn binary(&self) -> bool {
        self.name.contains('i')
    }

    /// `value` in `from` as a value in this unit; `None` across dimensions.
    pub fn convert(&self, value: f64, from: &Unit) -> Option<f64> {
        (from.dim == self.dim).then(|| value * from.scale / self.scale)
    }

    /// The factor that turns a figure written with `suffix` (what follows
    /// the number as the thread wrote it: `KB/s`, `K usec`, `msec`, or
    /// nothing) into this unit.
    pub fn factor_of_written(&self, suffix: &str) -> Result<f64, String> {
        let s = suffix.trim();
        if s.is_empty() {
            return Ok(1.0);
        }
        let written = self.written(s).ok_or_else(|| {
            format!(
                "{s:?} after the number is no unit this reads (s, sec, ms, msec, us, usec, \
                 K usec; B, KB, MB, GB, KiB, MiB with or without /s; IOPS, iops, iop/s; %)"
            )
        })?;
        self.convert(1.0, &written).ok_or_else(|| {
            format!(
                "a figure in {s:?} does not convert to the cell's unit {:?}",
                self.name
            )
        })
    }

    /// The unit a written suffix stands for, its byte prefixes read in this
    /// unit's base.
    fn written(&self, s: &str) -> Option<Unit> {
        let unit = |dim, scale| {
            Some(Unit {
                name: "written",
                dim,
                scale,
            })
        };
        match s {
            "s" | "sec" | "secs" => return unit(Dim::Time, 1.0),
            "ms" | "msec" | "msecs" => return unit(Dim::Time, 1e-3),
            "us" | "usec" | "usecs" | "µs" => return unit(Dim::Time, 1e-6),
            // fio 1.x's "132K usec": thousands of microseconds.
            "K usec" | "Kusec" => return unit(Dim::Time, 1e-3),
            "IOPS" | "iops" | "iop/s" => return unit(Dim::Ops, 1.0),
            "%" => return unit(Dim::Share, 0.01),
            _ => {}
        }
        let (bytes, rate) = match s.strip_suffix("/s") {
            Some(b) => (b, true),
            None => (s, false),
        };
        let dim = if rate { Dim::Rate } else { Dim::Bytes };
        let base = if self.binary() { KI } else { 1e3 };
        let scale = match bytes {
            "B" => 1.0,
            "KiB" => KI,
            "MiB" => MI,
            "GiB" => GI,
            "KB" | "kB" | "K" | "k" => base,
            "MB" | "M" => base * base,
            "GB" | "G" => base * base * base,
            _ => return None,
        };
        unit(dim, scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_prefixes_read_in_the_declared_base() {
        let kib_s = Unit::named("KiB/s").unwrap();
        assert_eq!(kib_s.factor_of_written("KB/s"), Ok(1.0));
        assert_eq!(kib_s.factor_of_written("MB/s"), Ok(1024.0));
        let kb_s = Unit::named("kB/s").unwrap();
        assert_eq!(kb_s.factor_of_written("KB/s"), Ok(1.0));
        // An explicit KiB is binary whatever the table declares.
        assert!((kb_s.factor_of_written("KiB/s").unwrap() - 1.024).abs() < 1e-12);
        let ms = Unit::named("ms").unwrap();
        assert_eq!(ms.factor_of_written("K usec"), Ok(1.0));
        assert_eq!(ms.factor_of_written("msec"), Ok(1.0));
        assert_eq!(ms.factor_of_written("usec"), Ok(1e-3));
        assert_eq!(ms.factor_of_written(""), Ok(1.0));
        assert!(ms
            .factor_of_written("KB/s")
            .unwrap_err()
            .contains("does not convert"));
        assert!(ms
            .factor_of_written("furlongs")
            .unwrap_err()
            .contains("no unit"));
    }

    #[test]
    fn ours_converts_from_its_native_unit() {
        let kib_s = Unit::named("KiB/s").unwrap();
        let mb_s = Unit::named("MB/s").unwrap();
        assert_eq!(kib_s.convert(1.024, &mb_s), Some(1000.0));
        let kib = Unit::named("KiB").unwrap();
        assert_eq!(kib.convert(4096.0, &Unit::named("B").unwrap()), Some(4.0));
        assert_eq!(kib.convert(1.0, &mb_s), None);
    }
}
