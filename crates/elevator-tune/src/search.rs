//! The search: exhaustive when the space is small, else TPE.
//!
//! Baselines first (the kernel's default for the device and every policy
//! at its defaults), then either every point of the space (when it has at
//! most `exhaustive_limit`) or batches proposed by the `tpe` crate's
//! Tree-structured Parzen Estimator (Bergstra et al., NIPS 2011): one
//! categorical optimizer picks the policy, one per axis of that policy
//! picks its value, each told the scalar cost of every trial it took part
//! in. A batch is `batch` proposals evaluated in parallel (rayon), told in
//! order; the first `startup` proposals are uniform, as TPE starts; the proposals come from one seeded RNG, so the result does not
//! depend on the number of threads. The search stops after `budget`
//! evaluations, or early once `patience` evaluations in a row have not
//! improved the best feasible cost.

use crate::objective::{Figures, Objective, Score};
use crate::space::{Setting, Space};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rayon::prelude::*;
use std::collections::BTreeMap;

/// How a search runs.
#[derive(Clone, Debug)]
pub struct SearchOptions {
    /// Most evaluations in all (baselines included).
    pub budget: usize,
    /// Search every point when the space has at most this many.
    pub exhaustive_limit: u64,
    /// Proposals per parallel batch.
    pub batch: usize,
    /// Stop once this many evaluations in a row did not improve the best.
    pub patience: usize,
    /// Uniform proposals before TPE takes over (its start-up trials).
    pub startup: usize,
    pub seed: u64,
    /// Worker threads (0: rayon's default, one per core).
    pub threads: usize,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            budget: 64,
            exhaustive_limit: 64,
            batch: 8,
            patience: 32,
            startup: 16,
            seed: 1,
            threads: 0,
        }
    }
}

/// One evaluated setting.
#[derive(Clone, Debug)]
pub struct Trial {
    pub setting: Setting,
    /// Evaluation order (baselines first): breaks ties, so that among
    /// equal values the kernel's default and the defaults rank first.
    pub order: usize,
    pub score: Result<Score, String>,
    pub figures: Option<Figures>,
}

impl Trial {
    /// Cost for ordering and for the optimizer: feasible by the first goal,
    /// infeasible and failed after them all.
    pub fn scalar(&self) -> f64 {
        match &self.score {
            Ok(s) if s.feasible() => s.costs[0],
            Ok(s) => 1e15 + s.violation,
            Err(_) => 1e18,
        }
    }
}

/// What a search found, best first.
#[derive(Clone, Debug)]
pub struct SearchResult {
    pub ranked: Vec<Trial>,
    pub exhaustive: bool,
    pub evaluations: usize,
    pub stopped_early: bool,
    pub space_size: u64,
}

impl SearchResult {
    pub fn best(&self) -> Option<&Trial> {
        self.ranked.first()
    }

    pub fn find(&self, s: &Setting) -> Option<&Trial> {
        self.ranked.iter().find(|t| &t.setting == s)
    }

    /// How many trials score strictly better than `s` (ties do not count).
    pub fn strictly_better_than(&self, s: &Setting) -> usize {
        let Some(Ok(base)) = self.find(s).map(|t| &t.score) else {
            return 0;
        };
        let key = base.rank_key();
        self.ranked
            .iter()
            .filter_map(|t| t.score.as_ref().ok())
            .filter(|o| {
                let k = o.rank_key();
                (k.0, k.1, k.2) < key
            })
            .count()
    }

    /// The feasible trials no other feasible trial dominates on both goals
    /// (a two-goal objective; the best alone with one goal), in rank order.
    pub fn pareto(&self) -> Vec<&Trial> {
        let scores: Vec<Option<&Score>> = self
            .ranked
            .iter()
            .map(|t| t.score.as_ref().ok().filter(|s| s.feasible()))
            .collect();
        self.ranked
            .iter()
            .zip(&scores)
            .filter(|(_, s)| s.is_some_and(|s| !scores.iter().flatten().any(|o| o.dominates(s))))
            .map(|(t, _)| t)
            .collect()
    }
}

fn rank_cmp(a: &Trial, b: &Trial) -> std::cmp::Ordering {
    let key = |t: &Trial| match &t.score {
        Ok(s) => {
            let (f, x, y) = s.rank_key();
            (f, x, y)
        }
        Err(_) => (2, 0.0, 0.0),
    };
    let (ka, kb) = (key(a), key(b));
    ka.0.cmp(&kb.0)
        .then(ka.1.total_cmp(&kb.1))
        .then(ka.2.total_cmp(&kb.2))
        .then(a.order.cmp(&b.order))
}

/// Search `space` for `objective`, evaluating with `eval`; `baselines`
/// are evaluated first and kept in the ranking.
pub fn search(
    space: &Space,
    objective: &Objective,
    eval: &(dyn Fn(&Setting) -> Result<Figures, String> + Sync),
    baselines: &[Setting],
    o: &SearchOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> SearchResult {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(o.threads)
        .build()
        .expect("a thread pool");
    pool.install(|| search_in_pool(space, objective, eval, baselines, o, progress))
}

fn search_in_pool(
    space: &Space,
    objective: &Objective,
    eval: &(dyn Fn(&Setting) -> Result<Figures, String> + Sync),
    baselines: &[Setting],
    o: &SearchOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> SearchResult {
    let size = space.size();
    let exhaustive = size <= o.exhaustive_limit;
    let budget = if exhaustive {
        (size as usize + baselines.len()).max(o.budget.min(baselines.len()))
    } else {
        o.budget.max(baselines.len())
    };
    let done = std::sync::atomic::AtomicUsize::new(0);
    let run = |batch: &[Setting]| -> Vec<Trial> {
        batch
            .par_iter()
            .map(|s| {
                let figures = eval(s);
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                progress(n, budget);
                match figures {
                    Ok(f) => Trial {
                        setting: s.clone(),
                        order: 0,
                        score: objective.score(&f),
                        figures: Some(f),
                    },
                    Err(e) => Trial {
                        setting: s.clone(),
                        order: 0,
                        score: Err(e),
                        figures: None,
                    },
                }
            })
            .collect()
    };
    let mut seen: BTreeMap<Setting, usize> = BTreeMap::new();
    let mut trials: Vec<Trial> = Vec::new();
    let mut add = |new: Vec<Trial>, trials: &mut Vec<Trial>| {
        for mut t in new {
            t.order = trials.len();
            seen.insert(t.setting.clone(), trials.len());
            trials.push(t);
        }
    };
    let mut first: Vec<Setting> = Vec::new();
    for b in baselines {
        if !first.contains(b) {
            first.push(b.clone());
        }
    }
    add(run(&first), &mut trials);
    let mut stopped_early = false;
    if exhaustive {
        let rest: Vec<Setting> = space
            .all()
            .into_iter()
            .filter(|s| !first.contains(s))
            .collect();
        add(run(&rest), &mut trials);
    } else {
        stopped_early = tpe_loop(space, &run, &mut trials, &mut seen, budget, o);
    }
    let evaluations = trials.len();
    trials.sort_by(rank_cmp);
    SearchResult {
        ranked: trials,
        exhaustive,
        evaluations,
        stopped_early,
        space_size: size,
    }
}

/// A uniformly drawn point: a policy, then a value per axis.
fn random_point(space: &Space, rng: &mut StdRng) -> Setting {
    use rand::Rng;
    let p = &space.policies[rng.gen_range(0..space.policies.len())];
    let values: Vec<i64> = p
        .tunables
        .iter()
        .chain(&space.block)
        .map(|a| a.values[rng.gen_range(0..a.values.len())])
        .collect();
    space.setting(p, &values)
}

/// The TPE batches; true if stopped by `patience`.
fn tpe_loop(
    space: &Space,
    run: &(dyn Fn(&[Setting]) -> Vec<Trial> + Sync),
    trials: &mut Vec<Trial>,
    seen: &mut BTreeMap<Setting, usize>,
    budget: usize,
    o: &SearchOptions,
) -> bool {
    let cat = |n: usize| {
        tpe::TpeOptimizer::new(
            tpe::histogram_estimator(),
            tpe::categorical_range(n).expect("a non-empty range"),
        )
    };
    let mut rng = StdRng::seed_from_u64(o.seed);
    let mut policy_opt = cat(space.policies.len());
    // Per policy, one optimizer per axis (its tunables, then the block's).
    let mut axis_opts: Vec<Vec<_>> = space
        .policies
        .iter()
        .map(|p| {
            p.tunables
                .iter()
                .chain(&space.block)
                .map(|a| cat(a.values.len()))
                .collect()
        })
        .collect();
    // Index of each axis value, for telling the optimizers about a trial.
    let decode = |s: &Setting| -> Option<(usize, Vec<usize>)> {
        let pi = space.policies.iter().position(|p| p.policy == s.policy)?;
        let p = &space.policies[pi];
        let mut idx = Vec::new();
        for (a, block) in p
            .tunables
            .iter()
            .map(|a| (a, false))
            .chain(space.block.iter().map(|a| (a, true)))
        {
            let list = if block { &s.block } else { &s.tunables };
            let v = list
                .iter()
                .find(|(k, _)| *k == a.name)
                .map_or(a.default, |p| p.1);
            idx.push(a.values.iter().position(|x| *x == v).unwrap_or(0));
        }
        Some((pi, idx))
    };
    let tell = |t: &Trial,
                policy_opt: &mut tpe::TpeOptimizer,
                axis_opts: &mut Vec<Vec<tpe::TpeOptimizer>>| {
        if let Some((pi, idx)) = decode(&t.setting) {
            let v = t.scalar();
            let _ = policy_opt.tell(pi as f64 + 0.5, v);
            for (opt, i) in axis_opts[pi].iter_mut().zip(idx) {
                let _ = opt.tell(i as f64 + 0.5, v);
            }
        }
    };
    for t in trials.iter() {
        tell(t, &mut policy_opt, &mut axis_opts);
    }
    let mut best = trials
        .iter()
        .map(Trial::scalar)
        .fold(f64::INFINITY, f64::min);
    let mut since_best = 0usize;
    let baselines = trials.len();
    // Proposals that repeat an evaluated point are skipped; give up after
    // many in a row (the optimizer has settled).
    let mut repeats = 0usize;
    while trials.len() < budget {
        let mut batch: Vec<Setting> = Vec::new();
        let want = o.batch.min(budget - trials.len()).max(1);
        while batch.len() < want && repeats < 50 * want {
            // The first proposals are uniform (TPE's start-up trials),
            // as is any proposal that repeats an evaluated point.
            let startup = trials.len() + batch.len() < baselines + o.startup;
            let mut s = if startup {
                random_point(space, &mut rng)
            } else {
                let pi = (policy_opt.ask(&mut rng).unwrap_or(0.0) as usize)
                    .min(space.policies.len() - 1);
                let p = &space.policies[pi];
                let mut values = Vec::new();
                for (opt, a) in axis_opts[pi]
                    .iter_mut()
                    .zip(p.tunables.iter().chain(&space.block))
                {
                    let i = (opt.ask(&mut rng).unwrap_or(0.0) as usize).min(a.values.len() - 1);
                    values.push(a.values[i]);
                }
                space.setting(p, &values)
            };
            if seen.contains_key(&s) || batch.contains(&s) {
                s = random_point(space, &mut rng);
            }
            if seen.contains_key(&s) || batch.contains(&s) {
                repeats += 1;
                continue;
            }
            repeats = 0;
            batch.push(s);
        }
        if batch.is_empty() {
            break;
        }
        for mut t in run(&batch) {
            t.order = trials.len();
            tell(&t, &mut policy_opt, &mut axis_opts);
            let v = t.scalar();
            if v < best {
                best = v;
                since_best = 0;
            } else {
                since_best += 1;
            }
            seen.insert(t.setting.clone(), trials.len());
            trials.push(t);
        }
        if since_best >= o.patience {
            return true;
        }
    }
    false
}
