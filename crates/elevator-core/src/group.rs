//! Control groups: a tree of named groups with a proportional weight and
//! optional absolute limits, in the cgroup v2 style.
//!
//! `io.weight` is 1..=10000 in cgroup v2 with default 100; BFQ's
//! `io.bfq.weight` and this project use 1..=1000, default 100 (the 2009
//! controllers' range). `io.max` limits are bytes or I/Os per second per
//! direction, written `rbps=N wbps=N riops=N wiops=N` in any order and
//! subset, `max` meaning no limit (Documentation/admin-guide/cgroup-v2.rst).
//!
//! Invariant: the root group is `GroupId::ROOT` and has no parent; every
//! other group's parent exists and appears before it.

use crate::{Duration, GroupId};
use std::fmt;
use std::str::FromStr;

/// Default weight of a group (cgroup v2 `io.weight`, BFQ `io.bfq.weight`).
pub const DEFAULT_WEIGHT: u32 = 100;
/// Weights run 1..=1000 (BFQ's `io.bfq.weight` range).
pub const MAX_WEIGHT: u32 = 1000;

/// `io.max`: per-direction limits, `None` for `max`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoMax {
    pub rbps: Option<u64>,
    pub wbps: Option<u64>,
    pub riops: Option<u64>,
    pub wiops: Option<u64>,
}

impl IoMax {
    pub fn is_unlimited(&self) -> bool {
        *self == IoMax::default()
    }
}

/// Error in an `io.max` string; names the offending field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoMaxError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for IoMaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "io.max field {:?}: {}", self.field, self.message)
    }
}

impl std::error::Error for IoMaxError {}

/// Parses `rbps=10485760 wbps=max riops=100` (values: an integer, an
/// integer with a binary suffix k/m/g for bps, or `max`).
impl FromStr for IoMax {
    type Err = IoMaxError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = IoMax::default();
        let mut seen = Vec::new();
        for field in s.split_whitespace() {
            let err = |message: &str| IoMaxError {
                field: field.to_string(),
                message: message.to_string(),
            };
            let (key, value) = field.split_once('=').ok_or_else(|| {
                err("expected KEY=VALUE with KEY one of rbps, wbps, riops, wiops")
            })?;
            if seen.contains(&key) {
                return Err(err("given twice"));
            }
            seen.push(key);
            let parsed = if value == "max" {
                None
            } else {
                let (digits, scale) =
                    match value.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
                        None => (value, 1),
                        Some((i, _)) => {
                            let scale = match &value[i..] {
                                "k" | "K" => 1 << 10,
                                "m" | "M" => 1 << 20,
                                "g" | "G" => 1 << 30,
                                _ => return Err(err(
                                    "value must be an integer (k, m, g suffixes allowed) or max",
                                )),
                            };
                            (&value[..i], scale)
                        }
                    };
                let n: u64 = digits.parse().map_err(|_| {
                    err("value must be an integer (k, m, g suffixes allowed) or max")
                })?;
                if n == 0 {
                    return Err(err(
                        "a limit of 0 would stop all I/O; use a positive value or max",
                    ));
                }
                Some(n.checked_mul(scale).ok_or_else(|| err("value too large"))?)
            };
            match key {
                "rbps" => out.rbps = parsed,
                "wbps" => out.wbps = parsed,
                "riops" => out.riops = parsed,
                "wiops" => out.wiops = parsed,
                _ => return Err(err("unknown key (rbps, wbps, riops, wiops)")),
            }
        }
        Ok(out)
    }
}

impl fmt::Display for IoMax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = |x: Option<u64>| x.map_or("max".to_string(), |n| n.to_string());
        write!(
            f,
            "rbps={} wbps={} riops={} wiops={}",
            v(self.rbps),
            v(self.wbps),
            v(self.riops),
            v(self.wiops)
        )
    }
}

/// How io-throttle meters one of a group's limits (the STRATEGY field of
/// `blockio.bandwidth-max` and `blockio.iops-max`, Andrea Righi's
/// io-throttle patches, v5 and v8 changelogs, 2008).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bucket {
    /// Strategy 0: no credit is saved up; the group never goes faster
    /// than the limit.
    Leaky,
    /// Strategy 1: credit accumulates while the group is slower than the
    /// limit, up to `size` (bytes or I/Os), and starts full; `DEV:LIMIT:1`
    /// without a size makes it the limit itself (v8 changelog).
    Token { size: u64 },
}

/// One io-throttle limit: `limit` bytes or I/Os per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThrottleRule {
    pub limit: u64,
    pub bucket: Bucket,
}

/// A group's io-throttle limits on the device (all its I/O, reads and
/// writes together), `None` for no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoThrottleLimits {
    pub bandwidth: Option<ThrottleRule>,
    pub iops: Option<ThrottleRule>,
}

impl IoThrottleLimits {
    pub fn is_unlimited(&self) -> bool {
        self.bandwidth.is_none() && self.iops.is_none()
    }
}

/// Parses `bandwidth-max=10m:0 iops-max=2150:1` (each `LIMIT[:STRATEGY
/// [:BUCKET]]` as the cgroup files took it after the device; strategy 0
/// leaky, 1 token; k/m/g binary suffixes on byte figures).
impl FromStr for IoThrottleLimits {
    type Err = IoMaxError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = IoThrottleLimits::default();
        for field in s.split_whitespace() {
            let err = |message: &str| IoMaxError {
                field: field.to_string(),
                message: message.to_string(),
            };
            let (key, value) = field.split_once('=').ok_or_else(|| {
                err("expected KEY=LIMIT[:STRATEGY[:BUCKET]] with KEY bandwidth-max or iops-max")
            })?;
            let bytes = match key {
                "bandwidth-max" => true,
                "iops-max" => false,
                _ => return Err(err("unknown key (bandwidth-max, iops-max)")),
            };
            let slot = if bytes {
                &mut out.bandwidth
            } else {
                &mut out.iops
            };
            if slot.is_some() {
                return Err(err("given twice"));
            }
            let mut parts = value.split(':');
            let number = |text: Option<&str>, what: &str| -> Result<u64, IoMaxError> {
                let text = text.ok_or_else(|| err(&format!("missing {what}")))?;
                let n = parse_scaled(text, bytes)
                    .ok_or_else(|| err(&format!("{what} must be a positive integer")))?;
                if n == 0 {
                    return Err(err(&format!("{what} must be positive")));
                }
                Ok(n)
            };
            let limit = number(parts.next(), "LIMIT")?;
            let bucket = match parts.next() {
                None | Some("0") => {
                    if parts.next().is_some() {
                        return Err(err("a leaky bucket (strategy 0) takes no bucket size"));
                    }
                    Bucket::Leaky
                }
                Some("1") => {
                    let size = match parts.next() {
                        None => limit,
                        Some(b) => number(Some(b), "BUCKET")?,
                    };
                    Bucket::Token { size }
                }
                Some(_) => return Err(err("STRATEGY must be 0 (leaky) or 1 (token)")),
            };
            if parts.next().is_some() {
                return Err(err("too many fields"));
            }
            *slot = Some(ThrottleRule { limit, bucket });
        }
        Ok(out)
    }
}

impl fmt::Display for IoThrottleLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        for (key, rule) in [("bandwidth-max", self.bandwidth), ("iops-max", self.iops)] {
            if let Some(r) = rule {
                match r.bucket {
                    Bucket::Leaky => write!(f, "{sep}{key}={}:0", r.limit)?,
                    Bucket::Token { size } => write!(f, "{sep}{key}={}:1:{size}", r.limit)?,
                }
                sep = " ";
            }
        }
        Ok(())
    }
}

/// An integer, with a k/m/g binary suffix when `scaled`.
fn parse_scaled(text: &str, scaled: bool) -> Option<u64> {
    let (digits, scale) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (text, 1u64),
        Some((i, _)) if scaled => {
            let scale = match &text[i..] {
                "k" | "K" => 1 << 10,
                "m" | "M" => 1 << 20,
                "g" | "G" => 1 << 30,
                _ => return None,
            };
            (&text[..i], scale)
        }
        Some(_) => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(scale)
}

/// One group of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub id: GroupId,
    pub name: String,
    pub parent: Option<GroupId>,
    pub weight: u32,
    pub max: IoMax,
    /// `io.latency` target: protect this group's completion latency by
    /// throttling looser siblings.
    pub latency_target: Option<Duration>,
    /// mClock's reservation and limit for the group, in IOPS (Ceph's
    /// `client_reservation`/`client_limit`): honoured by `mclock` only.
    pub reservation_iops: Option<u32>,
    pub limit_iops: Option<u32>,
    /// io-throttle's limits (2009, out of tree): honoured by the
    /// `iothrottle` layer only.
    pub io_throttle: IoThrottleLimits,
}

/// The tree of groups of a run; index = `GroupId.0`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupTree {
    groups: Vec<Group>,
}

impl Default for GroupTree {
    fn default() -> Self {
        GroupTree {
            groups: vec![Group {
                id: GroupId::ROOT,
                name: "root".into(),
                parent: None,
                weight: DEFAULT_WEIGHT,
                max: IoMax::default(),
                latency_target: None,
                reservation_iops: None,
                limit_iops: None,
                io_throttle: IoThrottleLimits::default(),
            }],
        }
    }
}

impl GroupTree {
    /// Add a group under `parent`; returns its id.
    pub fn add(&mut self, name: &str, parent: GroupId, weight: u32, max: IoMax) -> GroupId {
        assert!((parent.0 as usize) < self.groups.len(), "parent must exist");
        let id = GroupId(self.groups.len() as u32);
        self.groups.push(Group {
            id,
            name: name.to_string(),
            parent: Some(parent),
            weight: weight.clamp(1, MAX_WEIGHT),
            max,
            latency_target: None,
            reservation_iops: None,
            limit_iops: None,
            io_throttle: IoThrottleLimits::default(),
        });
        id
    }

    /// Set `id`'s `io.latency` target.
    pub fn set_latency_target(&mut self, id: GroupId, target: Option<Duration>) {
        self.groups[id.0 as usize].latency_target = target;
    }

    /// Set `id`'s mClock reservation and limit (IOPS).
    pub fn set_mclock(&mut self, id: GroupId, reservation: Option<u32>, limit: Option<u32>) {
        let g = &mut self.groups[id.0 as usize];
        g.reservation_iops = reservation;
        g.limit_iops = limit;
    }

    /// Set `id`'s io-throttle limits.
    pub fn set_io_throttle(&mut self, id: GroupId, limits: IoThrottleLimits) {
        self.groups[id.0 as usize].io_throttle = limits;
    }

    /// Whether any group has an io-throttle limit.
    pub fn has_io_throttle(&self) -> bool {
        self.groups.iter().any(|g| !g.io_throttle.is_unlimited())
    }

    /// The groups whose parent is `id`.
    pub fn children(&self, id: GroupId) -> impl Iterator<Item = &Group> + '_ {
        self.groups.iter().filter(move |g| g.parent == Some(id))
    }

    /// Whether any group has an `io.latency` target.
    pub fn has_latency_targets(&self) -> bool {
        self.groups.iter().any(|g| g.latency_target.is_some())
    }

    pub fn get(&self, id: GroupId) -> &Group {
        &self.groups[id.0 as usize]
    }

    pub fn find(&self, name: &str) -> Option<GroupId> {
        self.groups.iter().find(|g| g.name == name).map(|g| g.id)
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn iter(&self) -> impl Iterator<Item = &Group> {
        self.groups.iter()
    }

    /// `id` and its ancestors, up to and including the root.
    pub fn path(&self, id: GroupId) -> impl Iterator<Item = GroupId> + '_ {
        let mut next = Some(id);
        std::iter::from_fn(move || {
            let g = next?;
            next = self.groups.get(g.0 as usize).and_then(|x| x.parent);
            Some(g)
        })
    }

    /// Whether any group has an `io.max` limit.
    pub fn has_limits(&self) -> bool {
        self.groups.iter().any(|g| !g.max.is_unlimited())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_io_max() {
        let m: IoMax = "rbps=10485760 wiops=max riops=100".parse().unwrap();
        assert_eq!(m.rbps, Some(10 << 20));
        assert_eq!(m.riops, Some(100));
        assert_eq!(m.wiops, None);
        assert_eq!("rbps=10m".parse::<IoMax>().unwrap().rbps, Some(10 << 20));
        assert_eq!("".parse::<IoMax>().unwrap(), IoMax::default());
        for (bad, field) in [
            ("rbps=fast", "rbps=fast"),
            ("xbps=1", "xbps=1"),
            ("rbps", "rbps"),
            ("rbps=1 rbps=2", "rbps=2"),
            ("wbps=0", "wbps=0"),
            ("riops=99999999999999999999", "riops=99999999999999999999"),
        ] {
            let e = bad.parse::<IoMax>().unwrap_err();
            assert_eq!(e.field, field, "{bad}");
        }
    }

    #[test]
    fn parses_io_throttle_rules() {
        let t: IoThrottleLimits = "bandwidth-max=10m:0 iops-max=2150:1".parse().unwrap();
        assert_eq!(
            t.bandwidth,
            Some(ThrottleRule {
                limit: 10 << 20,
                bucket: Bucket::Leaky
            })
        );
        assert_eq!(
            t.iops,
            Some(ThrottleRule {
                limit: 2150,
                bucket: Bucket::Token { size: 2150 }
            })
        );
        let back: IoThrottleLimits = t.to_string().parse().unwrap();
        assert_eq!(back, t);
        let b: IoThrottleLimits = "bandwidth-max=4096:1:1m".parse().unwrap();
        assert_eq!(b.bandwidth.unwrap().bucket, Bucket::Token { size: 1 << 20 });
        assert!("".parse::<IoThrottleLimits>().unwrap().is_unlimited());
        for (bad, field) in [
            ("bandwidth-max", "bandwidth-max"),
            ("iops-max=2150:2", "iops-max=2150:2"),
            ("iops-max=2k", "iops-max=2k"),
            ("iops-max=10:0:5", "iops-max=10:0:5"),
            ("bandwidth-max=0", "bandwidth-max=0"),
            ("iops-max=1 iops-max=2", "iops-max=2"),
            ("rbps=1", "rbps=1"),
            ("iops-max=1:1:1:1", "iops-max=1:1:1:1"),
        ] {
            let e = bad.parse::<IoThrottleLimits>().unwrap_err();
            assert_eq!(e.field, field, "{bad}");
        }
    }

    #[test]
    fn tree_paths() {
        let mut t = GroupTree::default();
        let a = t.add("a", GroupId::ROOT, 200, IoMax::default());
        let b = t.add("b", a, 5000, IoMax::default());
        assert_eq!(t.path(b).collect::<Vec<_>>(), vec![b, a, GroupId::ROOT]);
        assert_eq!(t.get(b).weight, MAX_WEIGHT);
        assert_eq!(t.find("a"), Some(a));
    }
}
