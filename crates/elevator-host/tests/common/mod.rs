//! Shared test harness: a host on a real device profile under a policy,
//! with every request the device saw recorded.

#![allow(dead_code)]

use elevator_core::{Instant, Op, QueueLimits, Request, RequestId};
use elevator_device::{Device, DeviceStats};
use elevator_host::{Host, HostParams};
use elevator_sim::{Engine, EngineConfig, RunSummary};
use std::sync::{Arc, Mutex};

/// A request as the device saw it (after the policy's merges).
#[derive(Clone, Debug)]
pub struct Seen {
    pub id: RequestId,
    pub op: Op,
    pub sync: bool,
    /// `REQ_NOIDLE`.
    pub noidle: bool,
    /// `REQ_META`.
    pub meta: bool,
    pub sector: u64,
    pub sectors: u32,
    pub task: u32,
    pub submitted: Instant,
    pub completed: Option<Instant>,
}

/// Wraps a device and logs what it services.
#[derive(Debug)]
pub struct Recorder {
    pub inner: Box<dyn Device>,
    pub log: Arc<Mutex<Vec<Seen>>>,
}

impl Device for Recorder {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn limits(&self) -> QueueLimits {
        self.inner.limits()
    }
    fn submit(&mut self, r: &Request, now: Instant) {
        self.log.lock().unwrap().push(Seen {
            id: r.id,
            op: r.op,
            sync: r.sync,
            noidle: r.noidle,
            meta: r.meta,
            sector: r.sector,
            sectors: r.sectors,
            task: r.task.0,
            submitted: now,
            completed: None,
        });
        self.inner.submit(r, now);
    }
    fn next_completion(&self) -> Option<Instant> {
        self.inner.next_completion()
    }
    fn complete(&mut self, now: Instant) -> Option<RequestId> {
        let id = self.inner.complete(now)?;
        let mut log = self.log.lock().unwrap();
        if let Some(s) = log.iter_mut().rev().find(|s| s.id == id) {
            s.completed = Some(now);
        }
        Some(id)
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
}

/// A host on `device` with default 2.6 parameters (device limits applied).
pub fn host_on(device: &str, seed: u64, params: Option<HostParams>) -> Host {
    let dev = elevator_device::open(device).expect("device profile");
    let limits = dev.limits();
    let mut params = params.unwrap_or_default();
    params.max_sectors = limits.max_sectors;
    Host::new(params, limits.capacity, seed, 1)
}

/// Run `host` under `policy` on `device` for at most `limit_s` seconds.
pub fn run(host: &mut Host, policy: &str, device: &str, limit_s: u64) -> (RunSummary, Vec<Seen>) {
    run_on(host, policy, device, limit_s, EngineConfig::default())
}

/// [`run`] on the block layer `config` (its time limit replaced).
pub fn run_on(
    host: &mut Host,
    policy: &str,
    device: &str,
    limit_s: u64,
    config: EngineConfig,
) -> (RunSummary, Vec<Seen>) {
    let dev = elevator_device::open(device).expect("device profile");
    let limits = dev.limits();
    let log = Arc::new(Mutex::new(Vec::new()));
    let rec = Recorder {
        inner: dev,
        log: log.clone(),
    };
    let sched = elevator_sched::find(policy)
        .expect("policy")
        .build_default(&limits);
    let config = EngineConfig {
        time_limit: Instant(limit_s * 1_000_000_000),
        ..config
    };
    let mut engine = Engine::new(sched, Box::new(rec), config);
    let summary = engine.run(host);
    let log = log.lock().unwrap().clone();
    (summary, log)
}

/// A host with the `linux-2.4` preset on `device`, with 2.4's IDE request
/// limit (see [`run_24`]).
pub fn host_on_24(device: &str, seed: u64) -> Host {
    let dev = elevator_device::open(device).expect("device profile");
    let limits = dev.limits();
    let mut params = HostParams::linux_2_4();
    params.max_sectors = limits.max_sectors.min(elevator_sim::IDE_24_MAX_SECTORS);
    Host::new(params, limits.capacity, seed, 1)
}

/// Run `host` under linus24 on the 2.4 block layer (`EngineConfig::linux_24`:
/// 64 KiB requests, restart before wake-up, request lists).
pub fn run_24(host: &mut Host, device: &str, limit_s: u64) -> (RunSummary, Vec<Seen>) {
    let dev = elevator_device::open(device).expect("device profile");
    let mut limits = dev.limits();
    let config = EngineConfig {
        time_limit: Instant(limit_s * 1_000_000_000),
        ..EngineConfig::linux_24()
    };
    limits.max_sectors = limits
        .max_sectors
        .min(config.max_sectors.unwrap_or(u32::MAX));
    let log = Arc::new(Mutex::new(Vec::new()));
    let rec = Recorder {
        inner: dev,
        log: log.clone(),
    };
    let sched = elevator_sched::find("linus24")
        .expect("policy")
        .build_default(&limits);
    let mut engine = Engine::new(sched, Box::new(rec), config);
    let summary = engine.run(host);
    let log = log.lock().unwrap().clone();
    (summary, log)
}
