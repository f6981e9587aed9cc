//! Device models: what services a request, and how long it takes.
//!
//! A device is a pure state machine like a policy: the engine submits a
//! request at `now`, asks when the next completion is due, and collects
//! completions once time has reached it. Models never read a clock; the
//! rotational position of a disk is derived from `now`.
//!
//! A device is data: each model is built from a profile file (TOML) whose
//! comments cite where every number comes from. Built-in profiles ship in
//! `profiles/`; `--device path.toml` loads another.
//!
//! Architecture invariant: `in_flight() <= limits().queue_depth`; the
//! engine never submits more, and a model returns every submitted request
//! exactly once through `complete`.
//!
//! # Models
//!
//! * Hard disks after Ruemmler & Wilkes (IEEE Computer, 1994): a √/linear
//!   seek curve fitted to datasheet figures (or a measured table), rotation
//!   derived from `now`, zoned recording with track skew, DiskSim's
//!   segmented read-ahead buffer, write-back caching and NCQ with
//!   shortest-positioning-time-first. Profiles `ide-2003`, `sata-hdd`, and
//!   `ibm18es` (DiskSim's validated Ultrastar 18ES, which replays its
//!   measured trace with a 0.133 ms demerit; DiskSim's own is 0.135 ms).
//! * SSDs with channel/die/plane parallelism, striped mapping, a write
//!   buffer and a host link with per-command cost, in MQSim's vocabulary
//!   (Tavakkol et al., FAST 2018). Profiles `ssd-sata-2016` (the Plextor
//!   of the 2016 BFQ letter) and `nvme`.
//! * SD cards with allocation units and a few open AUs, after Arnd
//!   Bergmann's measurements of cheap flash (LWN, 2011). Profile
//!   `sdcard-2009`.
//!
//! All models answer in O(1) or O(queue depth) per request and allocate
//! nothing after construction: they sit on the simulator's hot path
//! (`benches/devices.rs`).
//!
//! Build one with [`open`] (a built-in name or a `.toml` path) or
//! [`parse`]; [`builtin_profiles`] lists the built-ins. A profile names its
//! model by `kind`; [`DEVICE_MODELS`] is the registry of models (a
//! `DeviceModelType` each, as policies have `SchedulerType`): adding a model
//! is one module and one line there.

mod completions;
pub mod disksim;
mod faulty;
mod hdd;
mod models;
mod profile;
mod sdcard;
mod ssd;

pub use elevator_core::read_input;
pub use faulty::{FaultSpec, FaultStats, Faulty, DEFAULT_STALL, SD_TIMEOUT};
pub use models::{open, parse, parse_with, DEVICE_MODELS};
pub use profile::{
    builtin_profiles, builtin_text, DeviceModelType, ProfileError, ProfileText, MAX_PROFILE_BYTES,
};
pub use ssd::Z99;

use elevator_core::{Instant, IoError, QueueLimits, Request, RequestId};

/// Counters a device keeps over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeviceStats {
    /// Total time with at least one request in service, ns.
    pub busy_ns: u64,
    /// Requests serviced.
    pub requests: u64,
    /// Head movements to a different cylinder (zero for flash).
    pub seeks: u64,
    /// Sum of seek distances, in sectors.
    pub seek_distance: u64,
}

/// A simulated storage device.
pub trait Device: Send + std::fmt::Debug {
    /// The profile name.
    fn name(&self) -> &str;
    /// What the block layer above may know of it.
    fn limits(&self) -> QueueLimits;
    /// Start servicing `request` at `now`.
    fn submit(&mut self, request: &Request, now: Instant);
    /// When the next completion is due, if any request is in flight.
    fn next_completion(&self) -> Option<Instant>;
    /// Pop one request whose service finished at or before `now`.
    fn complete(&mut self, now: Instant) -> Option<RequestId>;
    /// [`Device::complete`] with the request's outcome: `None` for
    /// success, or the error it failed with. Healthy models never fail;
    /// [`Faulty`] wraps one to inject errors, timeouts and stalls.
    fn complete_status(&mut self, now: Instant) -> Option<(RequestId, Option<IoError>)> {
        self.complete(now).map(|id| (id, None))
    }
    /// Requests submitted and not yet completed.
    fn in_flight(&self) -> usize;
    /// Counters so far.
    fn stats(&self) -> DeviceStats;
    /// Seed the model's own random draws from the run's seed (a model
    /// that draws nothing ignores it). Called once, before the first
    /// submission; without it a model draws from seed 0.
    fn reseed(&mut self, _seed: u64) {}
}
