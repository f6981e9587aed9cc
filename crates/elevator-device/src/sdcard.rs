//! A cheap SD card of about 2009, after Arnd Bergmann's measurements of
//! flash media (LWN, "Optimizing Linux with cheap flash drives", 2011, and
//! his flashbench notes on linux-mmc).
//!
//! The card erases in allocation units (AUs) of typically 4 MiB and can
//! keep only a few AUs open for writing at once. Within an open AU, data is
//! written in order. Writing elsewhere forces garbage collection:
//!
//! * a write into an AU that is not open opens it, and when all open slots
//!   are taken, the least recently used AU is closed first: its unwritten
//!   rest is copied from the old block, and the old block is erased;
//! * opening an AU at an offset copies the data before that offset;
//! * a write before the write pointer of an open AU closes and reopens it
//!   (the same copy and erase).
//!
//! So each open/close cycle copies `AU - written` bytes: nothing for an AU
//! filled sequentially, almost a whole AU for one 4 KiB write. Sequential
//! writes run at the speed-class rate; scattered small writes run at a few
//! per second. The first AUs (where FAT keeps its tables) are often managed
//! page by page and take random writes at full speed.
//!
//! The card has no write cache and no command queue: one command at a
//! time, first come first served, and a flush only costs a command.
//!
//! Invariants: at most `open_aus` AUs are open; an open AU's write pointer
//! is within the AU; at most one request in service.

use crate::completions::Completions;
use crate::{Device, DeviceStats};
use elevator_core::{Duration, Instant, Op, QueueLimits, Request, RequestId, Sector, SECTOR_SIZE};

/// Everything a card model is built from (validated by the profile
/// loader).
#[derive(Clone, Debug)]
pub(crate) struct SdParams {
    pub name: String,
    pub capacity_sectors: u64,
    pub max_sectors: u32,
    pub au_sectors: u64,
    pub open_aus: u32,
    /// AUs from the start of the card that take random writes.
    pub page_mapped_aus: u64,
    pub read_overhead: Duration,
    /// Bytes per second.
    pub read_rate: f64,
    pub write_overhead: Duration,
    /// Host writes into an open AU, bytes per second.
    pub write_rate: f64,
    /// Internal copy during garbage collection, bytes per second.
    pub copy_rate: f64,
    pub erase_time: Duration,
}

/// An open AU.
#[derive(Clone, Copy, Debug)]
struct OpenAu {
    au: u64,
    /// Sectors from the AU start written in this cycle.
    write_pointer: u64,
    used: u64,
}

/// A simulated SD card.
#[derive(Debug)]
pub(crate) struct SdCard {
    p: SdParams,
    limits: QueueLimits,
    open: Vec<OpenAu>,
    clock: u64,
    free_at: Instant,
    done: Completions,
}

impl SdCard {
    pub fn new(p: SdParams) -> Self {
        SdCard {
            limits: QueueLimits {
                rotational: false,
                queue_depth: 1,
                max_sectors: p.max_sectors,
                capacity: p.capacity_sectors,
            },
            open: Vec::with_capacity(p.open_aus as usize),
            clock: 0,
            free_at: Instant::ZERO,
            done: Completions::new(1),
            p,
        }
    }

    fn copy(&self, sectors: u64) -> Duration {
        Duration((sectors as f64 * SECTOR_SIZE as f64 * 1e9 / self.p.copy_rate).round() as u64)
    }

    /// Close an AU written up to `write_pointer`: copy the rest, erase.
    fn close_cost(&self, write_pointer: u64) -> Duration {
        self.copy(self.p.au_sectors - write_pointer.min(self.p.au_sectors)) + self.p.erase_time
    }

    /// Garbage-collection cost of writing `offset..offset+len` of `au`
    /// (within one AU), updating the open set.
    fn write_into(&mut self, au: u64, offset: u64, len: u64) -> Duration {
        if au < self.p.page_mapped_aus {
            return Duration::ZERO;
        }
        self.clock += 1;
        if let Some(i) = self.open.iter().position(|o| o.au == au) {
            let wp = self.open[i].write_pointer;
            let cost = if offset >= wp {
                // Skipped sectors are copied from the old block.
                self.copy(offset - wp)
            } else {
                self.close_cost(wp) + self.copy(offset)
            };
            let o = &mut self.open[i];
            o.write_pointer = offset + len;
            o.used = self.clock;
            return cost;
        }
        let mut cost = self.copy(offset);
        let entry = OpenAu {
            au,
            write_pointer: offset + len,
            used: self.clock,
        };
        if self.open.len() < self.p.open_aus as usize {
            self.open.push(entry);
        } else {
            let lru = (0..self.open.len())
                .min_by_key(|&i| self.open[i].used)
                .unwrap_or(0);
            cost += self.close_cost(self.open[lru].write_pointer);
            self.open[lru] = entry;
        }
        cost
    }

    fn write_cost(&mut self, start: Sector, end: Sector) -> Duration {
        let au_len = self.p.au_sectors;
        let mut cost = Duration::ZERO;
        let mut pos = start;
        while pos < end {
            let au = pos / au_len;
            let offset = pos % au_len;
            let len = (end - pos).min(au_len - offset);
            cost += self.write_into(au, offset, len);
            pos += len;
        }
        let bytes = (end - start) * SECTOR_SIZE;
        cost + self.p.write_overhead
            + Duration((bytes as f64 * 1e9 / self.p.write_rate).round() as u64)
    }
}

impl Device for SdCard {
    fn name(&self) -> &str {
        &self.p.name
    }

    fn limits(&self) -> QueueLimits {
        self.limits
    }

    fn submit(&mut self, request: &Request, now: Instant) {
        debug_assert_eq!(self.in_flight(), 0, "the card takes one command at a time");
        self.done.submitted(now);
        let cap = self.limits.capacity;
        let start = request.sector.min(cap);
        let end = request.end().min(cap).max(start);
        let service = match request.op {
            Op::Read => {
                let bytes = (end - start) * SECTOR_SIZE;
                self.p.read_overhead
                    + Duration((bytes as f64 * 1e9 / self.p.read_rate).round() as u64)
            }
            Op::Write => self.write_cost(start, end),
            Op::Flush => self.p.write_overhead,
        };
        let due = self.free_at.max(now) + service;
        self.free_at = due;
        self.done.schedule(request.id, due);
    }

    fn next_completion(&self) -> Option<Instant> {
        self.done.next_due()
    }

    fn complete(&mut self, now: Instant) -> Option<RequestId> {
        self.done.pop_due(now)
    }

    fn in_flight(&self) -> usize {
        self.done.in_flight()
    }

    fn stats(&self) -> DeviceStats {
        self.done.stats
    }
}

#[cfg(test)]
mod tests {
    use crate::{open, Device};
    use elevator_core::{Instant, Op, Request};

    /// Service time of a write of `sectors` at `sector`, on an idle card.
    fn write(dev: &mut dyn Device, id: u64, sector: u64, sectors: u32, now: Instant) -> f64 {
        let mut r = Request::read(id, 0, sector, sectors);
        r.op = Op::Write;
        dev.submit(&r, now);
        let due = dev.next_completion().unwrap();
        assert_eq!(dev.complete(due), Some(r.id));
        due.since(now).as_millis_f64()
    }

    #[test]
    fn filling_aus_in_order_costs_no_copy_but_scattering_does() {
        let mut dev = open("sdcard-2009").unwrap();
        let au = 8192; // sectors in 4 MiB
                       // Fill AUs 2, 3 and 4 in order: every write costs the same, even
                       // when a third AU evicts the first (which is full: erase only).
        let mut t = Instant::ZERO;
        let mut times = Vec::new();
        for k in 0..(3 * au / 256) {
            let ms = write(dev.as_mut(), k, 2 * au + k * 256, 256, t);
            times.push(ms);
            t += elevator_core::Duration::from_secs(1);
        }
        let max = times.iter().cloned().fold(0.0, f64::max);
        // 128 KiB at 5 MB/s is 26 ms, plus 1 ms overhead and a 3 ms erase.
        assert!(max < 31.0, "{max}");
        // A 4 KiB write in the middle of another AU copies the half before
        // it now (2 MiB at 14 MB/s); the half after is copied at close.
        let ms = write(dev.as_mut(), 1000, 40 * au + au / 2, 8, t);
        assert!((140.0..170.0).contains(&ms), "{ms}");
        // The FAT area takes random writes at full speed.
        let ms = write(
            dev.as_mut(),
            1001,
            123 * 8,
            8,
            t + elevator_core::Duration::from_secs(1),
        );
        assert!(ms < 2.0, "{ms}");
    }
}
