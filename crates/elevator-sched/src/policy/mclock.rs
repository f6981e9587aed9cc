//! mclock: reservation, weight and limit tags per client, after dmClock.
//!
//! mClock (Gulati, Merchant and Varman, "mClock: Handling Throughput
//! Variability for Hypervisor IO Scheduling", OSDI 2010) as Ceph's OSDs
//! run it (ceph/dmclock `src/dmclock_server.h`, used by
//! `src/osd/scheduler/mClockScheduler.cc`), on one server. A client is a
//! control group, or a task of the root group. Each client has a
//! reservation `r` and a limit `l` in IOPS (a group's `reservation` and
//! `limit`; none for tasks) and a weight `w` (the group's weight, 100 for
//! tasks). Each request gets three tags when it arrives at `t`
//! (`tag_calc`): `R = max(t, R' + cost/r)`, `L = max(t, L' + cost/l)`,
//! `P = max(t, P' + cost/w)`, primed tags being the client's previous
//! request's; an unset reservation makes `R` infinite, an unset limit makes
//! `L` zero (always within its limit).
//!
//! Dispatch (`do_next_request`), over the head requests of the clients:
//! 1. Constraint phase: the smallest `R` at or before now is served.
//! 2. Weight phase: otherwise, among heads whose `L` is at or before now,
//!    the smallest `P` is served, and that client's queued `R` tags move
//!    back by the served request's `cost/r` (`reduce_reservation_tags`),
//!    so service beyond the reservation does not count towards it.
//! 3. Otherwise wait until the earliest `R` or `L` among the heads
//!    (dmClock's `AtLimit::Wait`, its default).
//!
//! A client that becomes busy again after being idle gets its `P` tags
//! shifted so that its first one lines up with the smallest `P` of the busy
//! clients (dmClock's `prop_delta`), so idling earns no credit.
//!
//! Cost (Ceph Quincy+ mClockScheduler): a request costs its bytes plus
//! `osd_bandwidth_cost_per_io`, the bytes the device moves sequentially in
//! the time of one random I/O, `max_sequential_bandwidth /
//! max_capacity_iops`. Here that cost is divided by a 4 KiB request's, so
//! a 4 KiB request costs 1, a 128 KiB one more (about 3 on an SSD's
//! defaults), and reservations and limits read as 4 KiB IOPS.
//!
//! No merging: Ceph's op queue has none.
//!
//! Invariants: each queued request is in its client's FIFO; a client with
//! requests is in exactly one of `ready` (its head within its limit at the
//! last look) and `waiting` (by the head's `L`), and in `by_reservation`
//! iff it has a reservation; the tag sets hold each client's head tags.
//!
//! Starvation bound: none promised. A client held at its limit waits for
//! its limit tag, however long the run, by design.

use crate::{Dispatch, Scheduler, SchedulerType, Tunable, Tunables};
use elevator_core::{
    GroupId, GroupTree, Instant, QueueLimits, Request, TaskId, DEFAULT_WEIGHT, SECTOR_SIZE,
};
use std::collections::{BTreeSet, HashMap, VecDeque};

/// 0: by device type, `osd_mclock_max_capacity_iops_hdd` 315 or `_ssd`
/// 21500 (Ceph's defaults; ../shared/reference/userspace-peers.md §2).
pub const MAX_CAPACITY_IOPS: i64 = 0;
const CAPACITY_IOPS_HDD: u64 = 315;
const CAPACITY_IOPS_SSD: u64 = 21_500;
/// 0: by device type, `osd_mclock_max_sequential_bandwidth_hdd` 150 MiB/s
/// or `_ssd` 1200 MiB/s (Ceph src/common/options/osd.yaml.in, Reef).
pub const MAX_SEQUENTIAL_BANDWIDTH: i64 = 0;
const SEQUENTIAL_MIB_S_HDD: u64 = 150;
const SEQUENTIAL_MIB_S_SSD: u64 = 1200;

/// Reservations and limits count requests of this size (Ceph's figures are
/// 4 KiB random IOPS).
const UNIT_BYTES: u64 = 4096;
/// Cost is kept in millionths of a 4 KiB request's, tags in nanoseconds.
const COST_UNIT: u64 = 1_000_000;
const NS_PER_S: u64 = 1_000_000_000;
/// The tag of an unset reservation: never due.
const NEVER: u64 = u64::MAX;

pub const TYPE: SchedulerType = SchedulerType {
    name: "mclock",
    aliases: &["dmclock"],
    about: "reservation/weight/limit tags per group or task (mClock, as in Ceph's OSD)",
    honours: &["weights", "reservation", "limit"],
    tunables: &[
        Tunable {
            name: "max_capacity_iops",
            default: MAX_CAPACITY_IOPS,
            unit: "IOPS",
            about: "random 4 KiB IOPS of the device (0: 315 rotational, 21500 else)",
        },
        Tunable {
            name: "max_sequential_bandwidth",
            default: MAX_SEQUENTIAL_BANDWIDTH,
            unit: "MiB/s",
            about: "sequential bandwidth of the device (0: 150 rotational, 1200 else)",
        },
    ],
    build: |t, limits| Box::new(MClock::from_tunables(t, limits)),
};

/// Who a request belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ClientKey {
    Group(GroupId),
    Task(TaskId),
}

fn client_key(r: &Request) -> ClientKey {
    if r.group == GroupId::ROOT {
        ClientKey::Task(r.task)
    } else {
        ClientKey::Group(r.group)
    }
}

/// A queued request with its tags (raw: see `Client`).
#[derive(Debug)]
struct Tagged {
    request: Request,
    cost: u64,
    reservation: u64,
    limit: u64,
    proportion: u64,
}

/// Reservation, weight and limit of a client.
#[derive(Clone, Copy, Debug)]
struct Params {
    reservation: Option<u32>,
    weight: u32,
    limit: Option<u32>,
}

/// One client: its queue and the tags of its last request.
#[derive(Debug)]
struct Client {
    params: Params,
    queue: VecDeque<Tagged>,
    prev_reservation: u64,
    prev_limit: u64,
    prev_proportion: u64,
    /// Subtracted from every raw reservation tag, queued or previous
    /// (`reduce_reservation_tags` moves them all by the same amount).
    reservation_shift: u64,
    /// Added to every raw proportion tag (`prop_delta`).
    proportion_delta: u64,
}

impl Client {
    fn reservation(&self, t: &Tagged) -> u64 {
        if t.reservation == NEVER {
            NEVER
        } else {
            t.reservation.saturating_sub(self.reservation_shift)
        }
    }

    fn proportion(&self, t: &Tagged) -> u64 {
        t.proportion.saturating_add(self.proportion_delta)
    }
}

/// `max(t, prev + cost / rate)`, in nanoseconds; `rate` per second.
fn tag(now: Instant, prev: u64, cost: u64, rate: u32) -> u64 {
    let step = u128::from(cost) * u128::from(NS_PER_S) / u128::from(COST_UNIT) / u128::from(rate);
    now.0
        .max(prev.saturating_add(step.min(u128::from(u64::MAX)) as u64))
}

/// The mClock policy.
#[derive(Debug)]
pub struct MClock {
    clients: Vec<Client>,
    index: HashMap<ClientKey, usize>,
    /// Per group: reservation, weight, limit (from `set_groups`).
    groups: HashMap<GroupId, Params>,
    /// Bytes that cost as much as one I/O.
    bandwidth_cost_per_io: u64,
    by_reservation: BTreeSet<(u64, usize)>,
    /// Busy clients whose head was within its limit at the last look, by
    /// the head's effective `P`.
    ready: BTreeSet<(u64, usize)>,
    /// Busy clients whose head is over its limit, by the head's `L`.
    waiting: BTreeSet<(u64, usize)>,
    queued: usize,
}

impl MClock {
    pub fn from_tunables(t: &Tunables, limits: &QueueLimits) -> Self {
        let iops = match t.get("max_capacity_iops") {
            0 if limits.rotational => CAPACITY_IOPS_HDD,
            0 => CAPACITY_IOPS_SSD,
            n => n as u64,
        };
        let mib_s = match t.get("max_sequential_bandwidth") {
            0 if limits.rotational => SEQUENTIAL_MIB_S_HDD,
            0 => SEQUENTIAL_MIB_S_SSD,
            n => n as u64,
        };
        MClock {
            clients: Vec::new(),
            index: HashMap::new(),
            groups: HashMap::new(),
            bandwidth_cost_per_io: (mib_s * (1 << 20) / iops).max(1),
            by_reservation: BTreeSet::new(),
            ready: BTreeSet::new(),
            waiting: BTreeSet::new(),
            queued: 0,
        }
    }

    /// With the defaults.
    pub fn new(limits: &QueueLimits) -> Self {
        let t = TYPE.tunables(std::iter::empty()).expect("defaults");
        MClock::from_tunables(&t, limits)
    }

    /// A request's cost in millionths of a 4 KiB request's.
    fn cost(&self, r: &Request) -> u64 {
        let bytes = u64::from(r.sectors) * SECTOR_SIZE;
        let per_io = self.bandwidth_cost_per_io;
        (bytes + per_io) * COST_UNIT / (UNIT_BYTES + per_io)
    }

    fn client(&mut self, key: ClientKey) -> usize {
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let params = match key {
            ClientKey::Group(g) => self.groups.get(&g).copied().unwrap_or(Params {
                reservation: None,
                weight: DEFAULT_WEIGHT,
                limit: None,
            }),
            ClientKey::Task(_) => Params {
                reservation: None,
                weight: DEFAULT_WEIGHT,
                limit: None,
            },
        };
        self.clients.push(Client {
            params,
            queue: VecDeque::new(),
            prev_reservation: 0,
            prev_limit: 0,
            prev_proportion: 0,
            reservation_shift: 0,
            proportion_delta: 0,
        });
        self.index.insert(key, self.clients.len() - 1);
        self.clients.len() - 1
    }

    /// Take client `i`'s head out of the tag sets.
    fn unlist(&mut self, i: usize) {
        let c = &self.clients[i];
        let Some(head) = c.queue.front() else { return };
        let r = c.reservation(head);
        if r != NEVER {
            self.by_reservation.remove(&(r, i));
        }
        self.ready.remove(&(c.proportion(head), i));
        self.waiting.remove(&(head.limit, i));
    }

    /// Put client `i`'s head into the tag sets.
    fn list(&mut self, i: usize, now: Instant) {
        let c = &self.clients[i];
        let Some(head) = c.queue.front() else { return };
        let r = c.reservation(head);
        if r != NEVER {
            self.by_reservation.insert((r, i));
        }
        if head.limit <= now.0 {
            self.ready.insert((c.proportion(head), i));
        } else {
            self.waiting.insert((head.limit, i));
        }
    }

    /// Serve client `i`'s head.
    fn serve(&mut self, i: usize, now: Instant, weight_phase: bool) -> Request {
        self.unlist(i);
        let c = &mut self.clients[i];
        let served = c.queue.pop_front().expect("a head");
        if weight_phase {
            if let Some(r) = c.params.reservation {
                let back = tag(Instant::ZERO, 0, served.cost, r);
                c.reservation_shift = c.reservation_shift.saturating_add(back);
            }
        }
        self.queued -= 1;
        self.list(i, now);
        served.request
    }
}

impl Scheduler for MClock {
    fn name(&self) -> &'static str {
        "mclock"
    }

    fn set_groups(&mut self, groups: &GroupTree) {
        for g in groups.iter() {
            self.groups.insert(
                g.id,
                Params {
                    reservation: g.reservation_iops,
                    weight: g.weight.max(1),
                    limit: g.limit_iops,
                },
            );
        }
    }

    fn insert(&mut self, request: Request, now: Instant) {
        let i = self.client(client_key(&request));
        let cost = self.cost(&request);
        let was_idle = self.clients[i].queue.is_empty();
        if was_idle {
            // `prop_delta`: line the new head up with the busy clients.
            let lowest = self.ready.first().map(|&(p, _)| p).or_else(|| {
                self.waiting
                    .iter()
                    .map(|&(_, j)| {
                        let c = &self.clients[j];
                        c.proportion(c.queue.front().expect("busy"))
                    })
                    .min()
            });
            let c = &mut self.clients[i];
            let own = tag(now, c.prev_proportion, cost, c.params.weight);
            c.proportion_delta = lowest.map_or(0, |l| l.saturating_sub(own));
        }
        self.unlist(i);
        let c = &mut self.clients[i];
        let shift = c.reservation_shift;
        let reservation = match c.params.reservation {
            Some(r) => {
                let prev = c.prev_reservation.saturating_sub(shift);
                tag(now, prev, cost, r) + shift
            }
            None => NEVER,
        };
        let limit = match c.params.limit {
            Some(l) => tag(now, c.prev_limit, cost, l),
            None => 0,
        };
        let proportion = tag(now, c.prev_proportion, cost, c.params.weight);
        c.prev_reservation = reservation;
        c.prev_limit = limit;
        c.prev_proportion = proportion;
        c.queue.push_back(Tagged {
            request,
            cost,
            reservation,
            limit,
            proportion,
        });
        self.queued += 1;
        self.list(i, now);
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        if self.queued == 0 {
            return Dispatch::Empty;
        }
        // 1. Constraint phase.
        if let Some(&(r, i)) = self.by_reservation.first() {
            if r <= now.0 {
                return Dispatch::Request(self.serve(i, now, false));
            }
        }
        // Heads whose limit tag has come are ready now.
        while let Some(&(l, i)) = self.waiting.first() {
            if l > now.0 {
                break;
            }
            self.waiting.remove(&(l, i));
            let c = &self.clients[i];
            let p = c.proportion(c.queue.front().expect("busy"));
            self.ready.insert((p, i));
        }
        // 2. Weight phase.
        if let Some(&(_, i)) = self.ready.first() {
            return Dispatch::Request(self.serve(i, now, true));
        }
        // 3. Wait for the next reservation or limit tag.
        let next_r = self.by_reservation.first().map(|&(r, _)| r);
        let next_l = self.waiting.first().map(|&(l, _)| l);
        let until = next_r
            .into_iter()
            .chain(next_l)
            .min()
            .expect("a busy client");
        Dispatch::Wait {
            until: Instant(until),
        }
    }

    fn complete(&mut self, _request: &Request, _now: Instant) {}

    fn queued(&self) -> usize {
        self.queued
    }

    fn check_invariants(&self) -> Result<(), String> {
        let total: usize = self.clients.iter().map(|c| c.queue.len()).sum();
        if total != self.queued {
            return Err(format!(
                "{total} requests in clients, queued() {}",
                self.queued
            ));
        }
        for (i, c) in self.clients.iter().enumerate() {
            let Some(head) = c.queue.front() else {
                continue;
            };
            let ready = self.ready.contains(&(c.proportion(head), i));
            let waiting = self.waiting.contains(&(head.limit, i));
            if ready == waiting {
                return Err(format!("client {i} ready {ready} and waiting {waiting}"));
            }
            let r = c.reservation(head);
            if (r != NEVER) != self.by_reservation.contains(&(r, i)) {
                return Err(format!("client {i}'s reservation tag is not listed right"));
            }
        }
        let busy = self.clients.iter().filter(|c| !c.queue.is_empty()).count();
        if self.ready.len() + self.waiting.len() != busy {
            return Err(format!(
                "{} ready and {} waiting for {busy} busy clients",
                self.ready.len(),
                self.waiting.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flash that takes one request at a time.
    fn ssd() -> QueueLimits {
        QueueLimits {
            rotational: false,
            queue_depth: 1,
            max_sectors: 256,
            capacity: 1 << 30,
        }
    }

    fn tree(params: &[(u32, Option<u32>, Option<u32>)]) -> GroupTree {
        let mut t = GroupTree::default();
        for (n, &(w, r, l)) in params.iter().enumerate() {
            let id = t.add(&format!("g{n}"), GroupId::ROOT, w, Default::default());
            t.set_mclock(id, r, l);
        }
        t
    }

    /// One task per group (task `g` in group `g`), each keeping 8 4 KiB
    /// reads in the system, on flash that serves one request every `gap`
    /// (the harness's serial device, one request at a time) from time zero
    /// to `total`; returns the requests served per group (index 0 unused).
    fn serve(s: MClock, groups: u32, gap: u64, total: u64) -> Vec<u64> {
        use crate::harness::{Case, Layout, Options, Phase, Run, TaskScript, REGION};
        use elevator_core::Duration;
        // 1000 sectors apart: nothing merges.
        let reads = Phase::reads(u32::MAX, 8, Layout::Strided { stride: 1000 });
        let tasks = (1..=groups)
            .map(|g| TaskScript {
                group: GroupId(g),
                outstanding: 8,
                ..TaskScript::new(g, REGION + u64::from(g) * REGION, vec![reads.clone()])
            })
            .collect();
        let case = Case::serial(tasks, ssd(), Duration(gap));
        let mut run = Run::new(Box::new(s), &case, &Options::default());
        let checked = run.run_until(Instant(total)).and_then(|()| run.finish());
        checked.unwrap_or_else(|v| panic!("{v}"));
        let mut served = vec![0];
        served.extend((1..=groups).map(|g| run.stats(TaskId(g)).requests()));
        served
    }

    #[test]
    fn weights_share_beyond_reservations() {
        let mut s = MClock::new(&ssd());
        s.set_groups(&tree(&[(100, None, None), (300, None, None)]));
        // 1000 IOPS for 10 s.
        let served = serve(s, 2, 1_000_000, 10 * NS_PER_S);
        println!("served per group: {served:?}");
        let ratio = served[2] as f64 / served[1] as f64;
        assert!((ratio - 3.0).abs() < 0.05, "{served:?}");
    }

    #[test]
    fn a_reservation_is_met_against_a_heavier_weight() {
        let mut s = MClock::new(&ssd());
        // Group 1: weight 1 but 400 IOPS reserved; group 2: weight 1000.
        s.set_groups(&tree(&[(1, Some(400), None), (1000, None, None)]));
        let served = serve(s, 2, 1_000_000, 10 * NS_PER_S);
        println!("served per group: {served:?}");
        let iops = served[1] as f64 / 10.0;
        assert!((399.0..=402.0).contains(&iops), "{served:?}");
    }

    #[test]
    fn a_limit_caps_a_client_and_makes_the_device_wait() {
        let mut s = MClock::new(&ssd());
        s.set_groups(&tree(&[(100, None, Some(200))]));
        let served = serve(s, 1, 1_000_000, 10 * NS_PER_S);
        println!("served per group: {served:?}");
        let iops = served[1] as f64 / 10.0;
        // Tags advance by cost/limit, 1/200 s per 4 KiB request.
        assert!((199.0..=201.0).contains(&iops), "{served:?}");
    }
}
