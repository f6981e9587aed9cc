//! The block layer's settings a run may override (`--set block.NAME=VALUE`),
//! checked here and applied by the engine that models the block layer (the
//! simulator's `EngineConfig::apply`).

/// One block-layer setting, checked. Sizes are in sectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlockSetting {
    /// Request slots per direction (`nr_requests`).
    NrRequests(usize),
    /// Free slots needed before sleepers are woken.
    BatchRequests(usize),
    /// New submitters may take a free slot while others sleep (2.4).
    Steal(bool),
    /// elevator-lowlatency's limit on sectors queued and in flight.
    InflightLimit(Option<u64>),
    /// The largest request below the device's own.
    MaxSectors(Option<u32>),
    /// A completion starts the next request before it wakes the submitter.
    RestartBeforeWakeup(bool),
    /// 2.6.30+ allocation: sync/async lists, batching, `may_queue`.
    SyncLists(bool),
    /// The lists' congestion bits reach the host's writeback.
    Congestion(bool),
    /// 2.6.32's plugging.
    Plugging(bool),
    /// Nanoseconds of policy CPU per request (`elevator_sched::cost`); 0:
    /// off.
    CpuCostNs(u64),
}

/// The names `--set block.NAME` takes.
pub const BLOCK_SETTINGS: &[&str] = &[
    "nr_requests",
    "batch_requests",
    "steal",
    "inflight_limit",
    "max_sectors",
    "restart_before_wakeup",
    "sync_lists",
    "congestion",
    "plugging",
    "cpu_cost",
];

const SECTOR_SIZE: u64 = elevator_core::SECTOR_SIZE;

impl BlockSetting {
    /// `--set block.NAME=VALUE`: sizes in bytes (0 lifts a limit), flags
    /// 0 or 1 (any other number is on).
    pub fn parse(name: &str, value: i64) -> Result<BlockSetting, String> {
        let n = usize::try_from(value).map_err(|_| "must not be negative".to_string())?;
        Ok(match name {
            "nr_requests" | "batch_requests" if n == 0 => {
                return Err("must be at least 1".into());
            }
            "nr_requests" => BlockSetting::NrRequests(n),
            "batch_requests" => BlockSetting::BatchRequests(n),
            "steal" => BlockSetting::Steal(n != 0),
            "inflight_limit" => {
                BlockSetting::InflightLimit((n > 0).then_some((n as u64).div_ceil(SECTOR_SIZE)))
            }
            "max_sectors" => {
                BlockSetting::MaxSectors(match u32::try_from((n as u64).div_ceil(SECTOR_SIZE)) {
                    Ok(0) => None,
                    Ok(s) => Some(s),
                    Err(_) => return Err("over 2 TiB".into()),
                })
            }
            "restart_before_wakeup" => BlockSetting::RestartBeforeWakeup(n != 0),
            "sync_lists" => BlockSetting::SyncLists(n != 0),
            "congestion" => BlockSetting::Congestion(n != 0),
            "plugging" => BlockSetting::Plugging(n != 0),
            "cpu_cost" => BlockSetting::CpuCostNs(n as u64),
            other => {
                return Err(format!(
                    "no block setting {other:?} ({})",
                    BLOCK_SETTINGS.join(", ")
                ))
            }
        })
    }
}
