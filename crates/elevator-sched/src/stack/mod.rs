//! The policy stack: what sits between the submitters and the device, and
//! the one builder every run path assembles it with.
//!
//! Seen from the device, a queue is: the block layer's settings (request
//! slots, size limits, plugging), the group layers in front of the policy
//! (blk-throttle's `io.max`, `io.latency`, `io.cost`, blk-wbt), the policy
//! with its tunables, and (ours) the invariant checker around them all. The
//! kernel keeps these in `/sys/block/DEV/queue/`; a run names them in a
//! scenario (`schedulers`, `[sched.NAME]`, `[[group]]`, `[iocost]`, `[wbt]`,
//! `[block]`), on the command line (`--sched`, `--set POLICY.TUNABLE=V`,
//! `--set block.NAME=V`) or in a fio job file (`cgroup`, `cgroup_weight`).
//!
//! [`StackBuilder`] takes all of it, checks each piece as it comes (an
//! error names the file and line, or the flag, it came from: one
//! [`ConfigError`]), and builds the stack for a device's limits:
//!
//! ```
//! use elevator_sched::stack::{Origin, StackBuilder};
//! let stack = StackBuilder::new("mq-deadline", Origin::flag("--sched"))?
//!     .tunable("fifo_batch", 8, Origin::flag("--set"))?
//!     .check(true)
//!     .build(&elevator_core::QueueLimits::default());
//! assert_eq!(stack.info.policy.name, "mq-deadline");
//! assert_eq!(stack.info.tunables.get("fifo_batch"), 8);
//! assert!(stack.scheduler.enabled());
//! # Ok::<(), elevator_sched::stack::ConfigError>(())
//! ```
//!
//! The simulator (`elevator_sim::Engine::build`) applies the block-layer
//! settings and builds the stack for the device's limits under them; the
//! io_uring runtime (`elevator_uring::Runtime::build`) builds it for its
//! target and refuses block-layer settings, which it does not model. Nothing
//! else looks policies up or stacks layers.
//!
//! Architecture invariant: a policy is found by one rule ([`find`]: its
//! registry name or one of its aliases, exactly), and the layers stack in
//! the order of [`GROUP_LAYERS`], innermost first.

mod block;
mod error;

pub use block::{BlockSetting, BLOCK_SETTINGS};
pub use error::{ConfigError, Origin, COMMAND_LINE};

use crate::check::Checked;
use crate::group::registry::GROUP_LAYERS;
use crate::group::{GroupLayerType, LayerContext, LayerSettings};
use crate::{registry, SchedulerType, Tunables};
use elevator_core::{GroupTree, QueueLimits};

/// The registered policy named `name` or with `name` as an alias: the one
/// rule by which the command line, scenario files and fio job files name
/// policies.
pub fn find(name: &str) -> Option<&'static SchedulerType> {
    registry()
        .iter()
        .find(|t| t.name == name || t.aliases.contains(&name))
}

/// [`find`], or the error that names `origin` and the known policies.
pub fn policy(name: &str, origin: Origin) -> Result<&'static SchedulerType, ConfigError> {
    find(name).ok_or_else(|| ConfigError::UnknownPolicy {
        origin,
        name: name.to_string(),
    })
}

/// A `--set PREFIX.NAME=VALUE` as `(prefix, name, value)`: the prefix is a
/// policy (name or alias) or `block`.
pub type Override = (String, String, i64);

/// Parse and check `--set` text: `POLICY.TUNABLE=VALUE` (the policy known,
/// the tunable its own, the value one it takes) or `block.NAME=VALUE`.
pub fn parse_override(text: &str) -> Result<Override, ConfigError> {
    let origin = || Origin::flag(format!("--set {text:?}"));
    let bad = || ConfigError::Setting {
        origin: origin(),
        message: "expected POLICY.TUNABLE=VALUE, e.g. deadline.fifo_batch=8".into(),
    };
    let (key, value) = text.split_once('=').ok_or_else(bad)?;
    // Policy names may hold dots (cfq-2.6.32), tunable names never do.
    let (prefix, name) = key.rsplit_once('.').ok_or_else(bad)?;
    let value: i64 = value.trim().parse().map_err(|_| bad())?;
    let (prefix, name) = (prefix.trim(), name.trim());
    if prefix == "block" {
        BlockSetting::parse(name, value).map_err(|message| ConfigError::Setting {
            origin: origin(),
            message,
        })?;
    } else {
        let t = policy(prefix, origin())?;
        t.tunables([(name, value)])
            .map_err(|error| ConfigError::Tunable {
                origin: origin(),
                error: Box::new(error),
            })?;
    }
    Ok((prefix.to_string(), name.to_string(), value))
}

/// Everything a run says about its stack, checked as it is given; see the
/// module docs.
#[derive(Clone, Debug)]
pub struct StackBuilder {
    policy: &'static SchedulerType,
    /// Tunable overrides in the order given (a later one wins).
    tunables: Vec<(String, i64)>,
    groups: Option<GroupTree>,
    settings: LayerSettings,
    check: bool,
    block: Vec<BlockSetting>,
    layers: &'static [&'static GroupLayerType],
}

impl StackBuilder {
    /// A stack around policy `name` (a registry name or alias), named by
    /// `origin` if it is unknown; default tunables, no groups or layers,
    /// the checker as debug assertions say.
    pub fn new(name: &str, origin: Origin) -> Result<StackBuilder, ConfigError> {
        Ok(StackBuilder {
            policy: policy(name, origin)?,
            tunables: Vec::new(),
            groups: None,
            settings: LayerSettings::default(),
            check: false,
            block: Vec::new(),
            layers: GROUP_LAYERS,
        })
    }

    /// The policy, as the registry names it.
    pub fn policy(&self) -> &'static SchedulerType {
        self.policy
    }

    /// Set tunable `name` of the policy to `value`; an unknown tunable or a
    /// value it does not take is an error naming `origin`.
    pub fn tunable(
        mut self,
        name: &str,
        value: i64,
        origin: Origin,
    ) -> Result<StackBuilder, ConfigError> {
        self.policy
            .tunables([(name, value)])
            .map_err(|error| ConfigError::Tunable {
                origin,
                error: Box::new(error),
            })?;
        self.tunables.push((name.to_string(), value));
        Ok(self)
    }

    /// A scenario's `[sched.NAME]` for this policy: each key at `file`
    /// (lines are not kept after parsing, so errors name the key alone).
    pub fn scenario_tunables<'a>(
        mut self,
        file: &str,
        values: impl IntoIterator<Item = (&'a String, &'a i64)>,
    ) -> Result<StackBuilder, ConfigError> {
        for (name, value) in values {
            let key = format!("sched.{}.{name}", self.policy.name);
            self = self.tunable(name, *value, Origin::file(file, None, &key))?;
        }
        Ok(self)
    }

    /// `--set` overrides (see [`parse_override`]): those of this policy
    /// (by name or alias) set its tunables, `block.*` the block layer;
    /// those of other policies are theirs.
    pub fn overrides(mut self, sets: &[Override]) -> Result<StackBuilder, ConfigError> {
        for (prefix, name, value) in sets {
            let origin = || Origin::flag(format!("--set \"{prefix}.{name}={value}\""));
            if prefix == "block" {
                let setting =
                    BlockSetting::parse(name, *value).map_err(|message| ConfigError::Setting {
                        origin: origin(),
                        message,
                    })?;
                self.block.push(setting);
            } else if find(prefix).is_some_and(|t| t.name == self.policy.name) {
                self = self.tunable(name, *value, origin())?;
            }
        }
        Ok(self)
    }

    /// The control groups: handed to the policy (`Scheduler::set_groups`)
    /// and read by the group layers (limits, latency targets, weights).
    pub fn groups(mut self, groups: &GroupTree) -> StackBuilder {
        self.groups = Some(groups.clone());
        self
    }

    /// The group layers' settings beyond the tree (`[iocost]`, `[wbt]`).
    pub fn layer_settings(mut self, settings: LayerSettings) -> StackBuilder {
        self.settings = settings;
        self
    }

    /// Check every call with the invariant checker (it is on anyway where
    /// debug assertions are).
    pub fn check(mut self, asked: bool) -> StackBuilder {
        self.check = asked;
        self
    }

    /// Whether the checker was asked for.
    pub fn check_asked(&self) -> bool {
        self.check
    }

    /// The block-layer settings given, in order, for the engine to apply.
    pub fn block_settings(&self) -> &[BlockSetting] {
        &self.block
    }

    /// Stack the layers of `layers` (innermost first) instead of
    /// [`GROUP_LAYERS`]: for tests that add a toy layer.
    pub fn layer_registry(mut self, layers: &'static [&'static GroupLayerType]) -> StackBuilder {
        self.layers = layers;
        self
    }

    /// The stack for a device with `limits`: the policy with its tunables
    /// and the control groups, each layer the run asks for around it, and
    /// the checker around all.
    pub fn build(self, limits: &QueueLimits) -> Stack {
        let tunables = self
            .policy
            .tunables(self.tunables.iter().map(|(k, v)| (k.as_str(), *v)))
            .expect("each override was checked when given");
        let mut scheduler = (self.policy.build)(&tunables, limits);
        let root = GroupTree::default();
        let groups = match &self.groups {
            Some(g) => {
                scheduler.set_groups(g);
                g
            }
            None => &root,
        };
        let cx = LayerContext {
            policy: self.policy,
            groups,
            limits,
            settings: &self.settings,
        };
        let mut shown = Vec::new();
        for layer in self.layers {
            let layered = (layer.build)(scheduler, &cx);
            scheduler = layered.scheduler;
            if let Some(s) = layered.shown {
                shown.push((layer.name, s));
            }
        }
        Stack {
            scheduler: Checked::for_engine(scheduler, limits, self.check),
            info: StackInfo {
                policy: self.policy,
                tunables,
                shown,
                limits: *limits,
            },
        }
    }
}

/// A built stack: the scheduler an engine drives (the checker around the
/// layers around the policy) and what it is made of.
#[derive(Debug)]
pub struct Stack {
    pub scheduler: Checked,
    pub info: StackInfo,
}

/// What a built stack is made of, for reports.
#[derive(Clone, Debug)]
pub struct StackInfo {
    pub policy: &'static SchedulerType,
    /// The policy's tunables in force.
    pub tunables: Tunables,
    /// What the run shows of its layers, innermost first (`("wbt",
    /// "2000us")`).
    pub shown: Vec<(&'static str, String)>,
    /// The limits the policy was built for.
    pub limits: QueueLimits,
}
