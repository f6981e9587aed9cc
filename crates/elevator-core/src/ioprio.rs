//! I/O priorities as Linux defines them (Documentation/block/ioprio.txt).
//!
//! A priority is a class and a level. The classes are real-time (RT),
//! best-effort (BE) and idle (IDLE); levels run from 0 (highest) to 7
//! (lowest). A task that never called `ioprio_set` has class NONE, and the
//! kernel derives its level from the CPU nice value:
//! `level = (nice + 20) / 5`, served as best-effort. IDLE has no level; the
//! kernel treats it as 7.
//!
//! Invariant: `level <= 7` for every value built through this module.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The scheduling class of an I/O priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum IoClass {
    /// No class set: best-effort with a level derived from CPU nice.
    None,
    /// Real-time: served before everything else, can starve others.
    RealTime,
    /// Best-effort: the default.
    BestEffort,
    /// Idle: served only when nobody else wants the disk.
    Idle,
}

/// An I/O priority: class and level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IoPrio {
    class: IoClass,
    level: u8,
}

/// The lowest (numerically highest) level.
pub const IOPRIO_LEVELS: u8 = 8;

/// The default for a task with no ioprio and nice 0: class NONE, level 4.
impl Default for IoPrio {
    fn default() -> Self {
        IoPrio::from_nice(0)
    }
}

impl IoPrio {
    /// A priority of class RT, BE or IDLE; `level` is clamped to 0..=7.
    pub fn new(class: IoClass, level: u8) -> Self {
        let level = if class == IoClass::Idle {
            IOPRIO_LEVELS - 1
        } else {
            level.min(IOPRIO_LEVELS - 1)
        };
        IoPrio { class, level }
    }

    pub fn rt(level: u8) -> Self {
        IoPrio::new(IoClass::RealTime, level)
    }
    pub fn be(level: u8) -> Self {
        IoPrio::new(IoClass::BestEffort, level)
    }
    pub fn idle() -> Self {
        IoPrio::new(IoClass::Idle, 7)
    }

    /// Class NONE for a task of CPU nice `nice` (-20..=19): the kernel's
    /// `task_nice_ioprio`, `(nice + 20) / 5`.
    pub fn from_nice(nice: i8) -> Self {
        let nice = i32::from(nice.clamp(-20, 19));
        IoPrio {
            class: IoClass::None,
            level: ((nice + 20) / 5) as u8,
        }
    }

    /// The class as set (NONE stays NONE).
    pub fn class(self) -> IoClass {
        self.class
    }

    /// The class the schedulers act on: NONE is served as best-effort.
    pub fn effective_class(self) -> IoClass {
        match self.class {
            IoClass::None => IoClass::BestEffort,
            c => c,
        }
    }

    /// The level 0 (highest) ..= 7 (lowest).
    pub fn level(self) -> u8 {
        self.level
    }
}

/// Error from parsing an ionice-style priority string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoPrioError(pub String);

impl fmt::Display for IoPrioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad I/O priority {:?}: expected rt/N, be/N (N 0-7), idle, or none",
            self.0
        )
    }
}

impl std::error::Error for IoPrioError {}

/// Parses `rt/0`, `be/4`, `idle`, `none`, `none/nice=-5` (ionice's classes
/// by name; `realtime` and `best-effort` are accepted too).
impl FromStr for IoPrio {
    type Err = IoPrioError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || IoPrioError(s.to_string());
        let lower = s.trim().to_ascii_lowercase();
        let (class, rest) = match lower.split_once('/') {
            Some((c, r)) => (c, Some(r)),
            None => (lower.as_str(), None),
        };
        let level = |r: Option<&str>| -> Result<u8, IoPrioError> {
            match r {
                None => Ok(4),
                Some(r) => match r.parse::<u8>() {
                    Ok(l) if l < IOPRIO_LEVELS => Ok(l),
                    _ => Err(err()),
                },
            }
        };
        match class {
            "rt" | "realtime" | "1" => Ok(IoPrio::rt(level(rest)?)),
            "be" | "best-effort" | "2" => Ok(IoPrio::be(level(rest)?)),
            "idle" | "3" if rest.is_none() => Ok(IoPrio::idle()),
            "none" | "0" => match rest {
                None => Ok(IoPrio::from_nice(0)),
                Some(r) => {
                    let nice = r.strip_prefix("nice=").ok_or_else(err)?;
                    let nice: i8 = nice.parse().map_err(|_| err())?;
                    if !(-20..=19).contains(&nice) {
                        return Err(err());
                    }
                    Ok(IoPrio::from_nice(nice))
                }
            },
            _ => Err(err()),
        }
    }
}

impl fmt::Display for IoPrio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.class {
            IoClass::None => write!(f, "none/{}", self.level),
            IoClass::RealTime => write!(f, "rt/{}", self.level),
            IoClass::BestEffort => write!(f, "be/{}", self.level),
            IoClass::Idle => write!(f, "idle"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_is_derived_from_nice_as_the_kernel_does() {
        assert_eq!(IoPrio::from_nice(0).level(), 4);
        assert_eq!(IoPrio::from_nice(-20).level(), 0);
        assert_eq!(IoPrio::from_nice(19).level(), 7);
        assert_eq!(IoPrio::from_nice(-1).level(), 3);
        assert_eq!(IoPrio::from_nice(0).effective_class(), IoClass::BestEffort);
    }

    #[test]
    fn parses_ionice_strings() {
        assert_eq!("rt/0".parse::<IoPrio>().unwrap(), IoPrio::rt(0));
        assert_eq!("BE/7".parse::<IoPrio>().unwrap(), IoPrio::be(7));
        assert_eq!("idle".parse::<IoPrio>().unwrap(), IoPrio::idle());
        assert_eq!(
            "none/nice=10".parse::<IoPrio>().unwrap(),
            IoPrio::from_nice(10)
        );
        for bad in ["rt/8", "be/x", "idle/3", "fast", "none/nice=40", ""] {
            assert!(bad.parse::<IoPrio>().is_err(), "{bad}");
        }
    }

    #[test]
    fn display_round_trips() {
        for p in [IoPrio::rt(3), IoPrio::be(0), IoPrio::idle()] {
            assert_eq!(p.to_string().parse::<IoPrio>().unwrap(), p);
        }
    }
}
