//! Policy registry and tunables, after the kernel's `elevator_type`.
//!
//! Each policy registers its name, aliases, a one-line description, what it
//! honours (I/O priorities, weights) and its tunables with the kernel's names
//! and defaults. Tunable values are integers in the unit the kernel's sysfs
//! file uses (milliseconds, requests, booleans as 0/1).

use crate::{policy, Scheduler};
use elevator_core::QueueLimits;
use std::collections::BTreeMap;
use std::fmt;

/// One tunable: kernel name, default, unit and meaning.
#[derive(Clone, Copy, Debug)]
pub struct Tunable {
    pub name: &'static str,
    pub default: i64,
    pub unit: &'static str,
    pub about: &'static str,
}

/// A registered policy.
#[derive(Clone, Copy)]
pub struct SchedulerType {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub about: &'static str,
    /// What the policy honours beyond ordering: "ioprio", "weights", ...
    pub honours: &'static [&'static str],
    pub tunables: &'static [Tunable],
    pub build: fn(&Tunables, &QueueLimits) -> Box<dyn Scheduler>,
}

impl fmt::Debug for SchedulerType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerType")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Resolved tunable values for one policy: defaults with overrides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tunables(BTreeMap<&'static str, i64>);

impl Tunables {
    /// The value of `name`. Panics on a name the policy did not declare:
    /// that is a bug in the policy, not bad input.
    pub fn get(&self, name: &str) -> i64 {
        match self.0.get(name) {
            Some(v) => *v,
            None => panic!("policy read undeclared tunable {name}"),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, i64)> + '_ {
        self.0.iter().map(|(k, v)| (*k, *v))
    }
}

/// A tunable override that names no tunable of the policy, or is out of range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TunableError {
    Unknown {
        policy: &'static str,
        name: String,
        known: Vec<&'static str>,
    },
    Negative {
        policy: &'static str,
        name: String,
        value: i64,
    },
}

impl fmt::Display for TunableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TunableError::Unknown {
                policy,
                name,
                known,
            } => write!(
                f,
                "{policy} has no tunable {name:?} (it has: {})",
                known.join(", ")
            ),
            TunableError::Negative {
                policy,
                name,
                value,
            } => write!(
                f,
                "{policy} tunable {name} must not be negative, got {value}"
            ),
        }
    }
}

impl std::error::Error for TunableError {}

impl SchedulerType {
    /// The defaults with `overrides` applied.
    pub fn tunables<'a>(
        &self,
        overrides: impl IntoIterator<Item = (&'a str, i64)>,
    ) -> Result<Tunables, TunableError> {
        let mut values: BTreeMap<&'static str, i64> =
            self.tunables.iter().map(|t| (t.name, t.default)).collect();
        for (name, value) in overrides {
            let Some(t) = self.tunables.iter().find(|t| t.name == name) else {
                return Err(TunableError::Unknown {
                    policy: self.name,
                    name: name.to_string(),
                    known: self.tunables.iter().map(|t| t.name).collect(),
                });
            };
            if value < 0 {
                return Err(TunableError::Negative {
                    policy: self.name,
                    name: name.to_string(),
                    value,
                });
            }
            values.insert(t.name, value);
        }
        Ok(Tunables(values))
    }

    /// Build with default tunables.
    pub fn build_default(&self, limits: &QueueLimits) -> Box<dyn Scheduler> {
        let t = self
            .tunables(std::iter::empty())
            .expect("defaults are valid");
        (self.build)(&t, limits)
    }
}

/// Every policy, in the order of the lineage.
pub fn registry() -> &'static [SchedulerType] {
    &[
        policy::noop::TYPE,
        policy::linus24::TYPE,
        policy::deadline::TYPE,
        policy::anticipatory::TYPE,
        policy::cfq::TYPE,
        policy::cfq2003::TYPE,
        policy::cfq_2632::TYPE,
        policy::cfq_2632::TYPE_BRUNELLE,
        policy::cfq_v10::TYPE,
        policy::deadline_mc::TYPE,
        policy::bfq::TYPE,
        policy::bfq::TYPE_61,
        policy::mq_deadline::TYPE,
        policy::kyber::TYPE,
        policy::mclock::TYPE,
    ]
}
