//! The shared device checks, run on every registered model through its
//! built-in profiles: every submitted request completes exactly once, never
//! before it was submitted, with at most the queue depth in flight, and the
//! same requests at the same times give the same completions. A model added
//! to `DEVICE_MODELS` is covered here with no edit (and must ship a
//! built-in profile). A toy model shows that a module and a registry line
//! are all a model needs, and a broken toy that the checks can fail.

use elevator_core::{Instant, Prng, QueueLimits, Request, RequestId};
use elevator_device::{
    builtin_profiles, builtin_text, parse_with, Device, DeviceModelType, DeviceStats, ProfileError,
    ProfileText, DEVICE_MODELS,
};
use serde::Deserialize;
use std::collections::{HashSet, VecDeque};

const REQUESTS: u64 = 2000;

/// Drive `dev` with `REQUESTS` random reads and writes, keeping it full;
/// the completions in order, or what went wrong.
fn check_device(dev: &mut dyn Device, seed: u64) -> Result<Vec<(u64, Instant)>, String> {
    let limits = dev.limits();
    let mut prng = Prng::derive(seed, "device-check");
    let mut now = Instant::ZERO;
    let mut outstanding: HashSet<u64> = HashSet::new();
    let mut submitted_at = std::collections::HashMap::new();
    let mut done = Vec::new();
    let mut next = 0u64;
    while next < REQUESTS || !outstanding.is_empty() {
        while next < REQUESTS && (outstanding.len() as u32) < limits.queue_depth {
            let sectors = 8 << prng.below(5);
            let sector = prng.below(limits.capacity - u64::from(sectors));
            let r = if prng.below(3) == 0 {
                Request::write(next, 1 + prng.below(4) as u32, sector, sectors)
            } else {
                Request::read(next, 1 + prng.below(4) as u32, sector, sectors)
            };
            dev.submit(&r, now);
            outstanding.insert(next);
            submitted_at.insert(next, now);
            next += 1;
            if dev.in_flight() > limits.queue_depth as usize {
                return Err(format!(
                    "{} in flight, queue depth {}",
                    dev.in_flight(),
                    limits.queue_depth
                ));
            }
        }
        let Some(at) = dev.next_completion() else {
            return Err(format!(
                "{} requests outstanding and no completion due",
                outstanding.len()
            ));
        };
        if at < now {
            return Err(format!("completion due at {at}, before now {now}"));
        }
        now = at;
        while let Some(RequestId(id)) = dev.complete(now) {
            if !outstanding.remove(&id) {
                return Err(format!("request {id} completed twice or never submitted"));
            }
            if now < submitted_at[&id] {
                return Err(format!("request {id} completed before it was submitted"));
            }
            done.push((id, now));
        }
        if dev.in_flight() != outstanding.len() {
            return Err(format!(
                "in_flight() = {} with {} outstanding",
                dev.in_flight(),
                outstanding.len()
            ));
        }
    }
    if dev.stats().requests != REQUESTS {
        return Err(format!(
            "stats count {} requests of {REQUESTS}",
            dev.stats().requests
        ));
    }
    Ok(done)
}

/// The shared checks on a device made twice from one profile.
fn check_profile(models: &[&DeviceModelType], name: &str, text: &str) -> Result<(), String> {
    let open = || parse_with(models, name, text).map_err(|e| e.to_string());
    let first = check_device(&mut *open()?, 7)?;
    let second = check_device(&mut *open()?, 7)?;
    if first != second {
        return Err("the same requests at the same times completed differently".into());
    }
    Ok(())
}

fn kind_of(text: &str) -> String {
    #[derive(Deserialize)]
    struct Kind {
        kind: String,
    }
    let k: Kind = toml::from_str::<toml::Value>(text)
        .ok()
        .and_then(|v| v.try_into().ok())
        .expect("a built-in profile has a kind");
    k.kind
}

#[test]
fn every_registered_model_passes_the_device_checks_on_its_profiles() {
    for model in DEVICE_MODELS {
        let profiles: Vec<&str> = builtin_profiles()
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| kind_of(builtin_text(name).unwrap()) == model.name)
            .collect();
        assert!(
            !profiles.is_empty(),
            "model {} ships no built-in profile to check",
            model.name
        );
        for name in profiles {
            check_profile(DEVICE_MODELS, name, builtin_text(name).unwrap())
                .unwrap_or_else(|e| panic!("{} ({name}): {e}", model.name));
        }
    }
}

/// A toy model: a fixed service time per request, served in order one at a
/// time; `loses` drops every 100th completion.
#[derive(Debug)]
struct Toy {
    name: String,
    service_us: u64,
    loses: bool,
    queue: VecDeque<(u64, Instant)>,
    busy_until: Instant,
    stats: DeviceStats,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToyFile {
    #[allow(dead_code)]
    kind: String,
    service_us: u64,
}

fn toy(p: &ProfileText<'_>, name: String, loses: bool) -> Result<Box<dyn Device>, ProfileError> {
    let f: ToyFile = p.parse()?;
    let service_us = p.check("service_us", f.service_us, 1..=1_000_000)?;
    Ok(Box::new(Toy {
        name,
        service_us,
        loses,
        queue: VecDeque::new(),
        busy_until: Instant::ZERO,
        stats: DeviceStats::default(),
    }))
}

const TOY: DeviceModelType = DeviceModelType {
    name: "toy",
    about: "toy: a fixed service time, one request at a time",
    keys: &["service_us"],
    build: |p, name| toy(p, name, false),
};

const LOSING_TOY: DeviceModelType = DeviceModelType {
    name: "toy",
    about: "toy: loses every 100th completion",
    keys: &["service_us"],
    build: |p, name| toy(p, name, true),
};

impl Device for Toy {
    fn name(&self) -> &str {
        &self.name
    }
    fn limits(&self) -> QueueLimits {
        QueueLimits {
            rotational: false,
            queue_depth: 4,
            max_sectors: 256,
            capacity: 1 << 24,
        }
    }
    fn submit(&mut self, request: &Request, now: Instant) {
        let start = self.busy_until.max(now);
        let end = start + elevator_core::Duration::from_micros(self.service_us);
        self.busy_until = end;
        self.queue.push_back((request.id.0, end));
    }
    fn next_completion(&self) -> Option<Instant> {
        self.queue.front().map(|&(_, at)| at)
    }
    fn complete(&mut self, now: Instant) -> Option<RequestId> {
        loop {
            let &(id, at) = self.queue.front()?;
            if at > now {
                return None;
            }
            self.queue.pop_front();
            self.stats.requests += 1;
            if self.loses && id % 100 == 99 {
                continue;
            }
            return Some(RequestId(id));
        }
    }
    fn in_flight(&self) -> usize {
        self.queue.len()
    }
    fn stats(&self) -> DeviceStats {
        self.stats
    }
}

const TOY_PROFILE: &str = "kind = \"toy\"\nservice_us = 50\n";

#[test]
fn a_model_is_one_module_and_one_registry_line() {
    // The registry as it would read with the toy's line added.
    let with_toy: Vec<&DeviceModelType> = DEVICE_MODELS.iter().copied().chain([&TOY]).collect();
    check_profile(&with_toy, "toy.toml", TOY_PROFILE).expect("the toy passes the device checks");
    // Without its line, a profile of its kind is an error at `kind`.
    let err = parse_with(DEVICE_MODELS, "toy.toml", TOY_PROFILE).unwrap_err();
    assert!(
        err.to_string()
            .contains("toy.toml:1: `kind`: unknown device kind \"toy\""),
        "{err}"
    );
    // Its own keys are checked as a profile's are.
    let err = parse_with(&with_toy, "toy.toml", "kind = \"toy\"\nservice_us = 0\n").unwrap_err();
    assert!(
        err.to_string().contains("toy.toml:2: `service_us`"),
        "{err}"
    );
}

#[test]
fn the_device_checks_fail_a_model_that_loses_completions() {
    let err = check_profile(&[&LOSING_TOY], "toy.toml", TOY_PROFILE)
        .expect_err("a device that loses completions must fail");
    assert!(
        err.contains("in_flight") || err.contains("no completion"),
        "{err}"
    );
}
