//! The settings a search may choose: policy x tunables x block settings.
//!
//! * **Policies**: by default the four a current kernel offers
//!   (`none`/noop, `mq-deadline`, `kyber`, `bfq` as of 6.1); any
//!   registered policy by name. Those that do not honour what the workload
//!   uses are left out: weighted control groups need a policy that
//!   honours weights, RT or IDLE I/O priorities one that honours ioprio.
//! * **Tunables**: each policy's registered tunables (kernel names,
//!   defaults and units, as `elevator list --tunables` prints them), less
//!   the switches that choose a kernel version's rules rather than a sysfs
//!   value ([`MODEL_SWITCHES`], and any tunable in unit `version`). A
//!   `bool` takes 0 and 1; a number takes its default x 1/4, 1/2, 1, 2, 4,
//!   and 0 where the tunable's meaning gives 0 one (`slice_idle`: never
//!   idle); a default of 0 stays 0 (it means "derive it").
//! * **Block settings** the model has: `nr_requests` (32-256) always;
//!   `read_ahead_kb` when the workload runs the host's page cache;
//!   `wbt_lat_usec` when the scenario runs writeback throttling. The
//!   kernel's `rq_affinity` is not modelled (no CPUs in the simulator).

use std::fmt;

/// Registered tunables that pick a model's kernel version or mechanism,
/// not a value the kernel's sysfs exposes (`(policy, tunable)`).
pub const MODEL_SWITCHES: &[(&str, &str)] = &[
    ("bfq", "slice_idle_us"),
    ("bfq", "limit_depth"),
    ("bfq", "injection"),
    ("bfq", "waker"),
    ("bfq", "stable_merge"),
    ("bfq-6.1", "slice_idle_us"),
    ("bfq-6.1", "limit_depth"),
    ("bfq-6.1", "injection"),
    ("bfq-6.1", "waker"),
    ("bfq-6.1", "stable_merge"),
    ("cfq-2.6.32", "sort_level"),
    ("cfq-2.6.32-brunelle", "sort_level"),
    ("linus24", "max_bomb_segments"),
];

/// Today's kernel schedulers, as registered policies.
pub const MODERN: &[&str] = &["noop", "mq-deadline", "kyber", "bfq-6.1"];

/// One block-layer setting with the values to try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axis {
    pub name: String,
    pub values: Vec<i64>,
    pub default: i64,
}

/// A point of the space.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Setting {
    pub policy: String,
    /// Only tunables that differ from the default.
    pub tunables: Vec<(String, i64)>,
    /// Only block settings that differ from the default.
    pub block: Vec<(String, i64)>,
}

impl Setting {
    pub fn defaults(policy: &str) -> Self {
        Setting {
            policy: policy.to_string(),
            tunables: Vec::new(),
            block: Vec::new(),
        }
    }

    pub fn block_value(&self, name: &str) -> Option<i64> {
        self.block.iter().find(|(n, _)| n == name).map(|p| p.1)
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.policy)?;
        let all: Vec<String> = self
            .tunables
            .iter()
            .chain(&self.block)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !all.is_empty() {
            write!(f, " {}", all.join(","))?;
        }
        Ok(())
    }
}

/// One policy's part of the space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicySpace {
    pub policy: String,
    pub tunables: Vec<Axis>,
}

/// The whole space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Space {
    pub policies: Vec<PolicySpace>,
    pub block: Vec<Axis>,
}

/// What the workload uses, for the policy filter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Uses {
    pub weights: bool,
    pub prio_classes: bool,
}

/// Candidate values of one registered tunable.
pub fn tunable_values(t: &elevator_sched::Tunable) -> Vec<i64> {
    let d = t.default;
    if t.unit == "bool" || t.unit == "0/1" {
        return vec![0, 1];
    }
    if d == 0 {
        return vec![0];
    }
    let mut v: Vec<i64> = [d / 4, d / 2, d, d * 2, d * 4]
        .into_iter()
        .map(|x| x.max(1))
        .collect();
    let about = t.about.to_ascii_lowercase();
    if about.contains("0:") || about.contains("0 disables") || about.contains("(0") {
        v.insert(0, 0);
    }
    v.dedup();
    v
}

impl Space {
    /// The space for `policies` (names; empty: [`MODERN`]), filtered by
    /// `uses`, with `block` axes.
    pub fn new(policies: &[String], uses: Uses, block: Vec<Axis>) -> Result<Space, String> {
        let names: Vec<String> = if policies.is_empty() {
            MODERN.iter().map(|s| s.to_string()).collect()
        } else {
            policies.to_vec()
        };
        let mut out = Vec::new();
        for name in &names {
            let t =
                elevator_sched::find(name).ok_or_else(|| format!("unknown scheduler {name:?}"))?;
            let honours = |what: &str| t.honours.iter().any(|h| h.contains(what));
            if uses.weights && !honours("weights") {
                continue;
            }
            if uses.prio_classes && !honours("ioprio") {
                continue;
            }
            let tunables = t
                .tunables
                .iter()
                .filter(|k| k.unit != "version")
                .filter(|k| !MODEL_SWITCHES.contains(&(t.name, k.name)))
                .map(|k| Axis {
                    name: k.name.to_string(),
                    values: tunable_values(k),
                    default: k.default,
                })
                .filter(|a| a.values.len() > 1)
                .collect();
            out.push(PolicySpace {
                policy: t.name.to_string(),
                tunables,
            });
        }
        if out.is_empty() {
            return Err(format!(
                "no policy among {} honours what the workload uses ({}{})",
                names.join(", "),
                if uses.weights { "weights " } else { "" },
                if uses.prio_classes {
                    "I/O priority classes"
                } else {
                    ""
                }
            ));
        }
        Ok(Space {
            policies: out,
            block,
        })
    }

    /// How many points the space has (saturating).
    pub fn size(&self) -> u64 {
        let block: u64 = self
            .block
            .iter()
            .fold(1u64, |n, a| n.saturating_mul(a.values.len() as u64));
        self.policies
            .iter()
            .map(|p| {
                p.tunables
                    .iter()
                    .fold(1u64, |n, a| n.saturating_mul(a.values.len() as u64))
            })
            .fold(0u64, |n, m| n.saturating_add(m.saturating_mul(block)))
    }

    /// Every point (for exhaustive search); call only when `size` is small.
    pub fn all(&self) -> Vec<Setting> {
        let mut out = Vec::new();
        for p in &self.policies {
            let axes: Vec<&Axis> = p.tunables.iter().chain(&self.block).collect();
            let mut combos: Vec<Vec<i64>> = vec![Vec::new()];
            for a in &axes {
                combos = combos
                    .into_iter()
                    .flat_map(|c| {
                        a.values.iter().map(move |v| {
                            let mut c = c.clone();
                            c.push(*v);
                            c
                        })
                    })
                    .collect();
            }
            for c in combos {
                out.push(self.setting(p, &c));
            }
        }
        out
    }

    /// The setting of policy `p` with one value per axis (tunables, then
    /// block), defaults left out.
    pub fn setting(&self, p: &PolicySpace, values: &[i64]) -> Setting {
        let mut s = Setting::defaults(&p.policy);
        let axes = p
            .tunables
            .iter()
            .map(|a| (a, false))
            .chain(self.block.iter().map(|a| (a, true)));
        for ((a, block), &v) in axes.zip(values) {
            if v != a.default {
                if block {
                    s.block.push((a.name.clone(), v));
                } else {
                    s.tunables.push((a.name.clone(), v));
                }
            }
        }
        s
    }
}
