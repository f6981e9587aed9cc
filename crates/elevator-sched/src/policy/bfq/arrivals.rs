//! Arrivals, dispatches and completions: a request's way into a queue, out to the device, and the
//! budget and device statistics its completion updates.

use super::*;

// ---------------------------------------------------------------------------
// Arrivals, dispatches, completions.
// ---------------------------------------------------------------------------

impl Bfq {
    pub(super) fn update_max_budget(&mut self) {
        if self.user_max_budget == 0 {
            let timeout_ms = self.timeout.nanos() / 1_000_000;
            self.max_budget = ((self.peak.rate * 1000 * timeout_ms) >> RATE_SHIFT).max(32);
        }
    }

    /// Think time, short-think flag and seek history on an arrival
    /// (`bfq_update_io_thinktime`, `bfq_update_has_short_ttime`,
    /// `bfq_update_io_seektime`).
    pub(super) fn update_stats(&mut self, q: QueueIdx, rq: &Request, now: Instant) {
        let cap = self.slice_idle.mul(2);
        let slice_idle = self.slice_idle;
        let rotational = self.rotational;
        let (rules_61, injection) = (self.rules_61, self.injection);
        let qu = self.qm(q);
        let elapsed = qu.last_end_request.map_or(cap, |t| now.since(t).min(cap));
        qu.ttime.add(elapsed.nanos());
        let mut reset_inject = false;
        if qu.sync
            && qu.class != Class::Idle
            && slice_idle > Duration::ZERO
            && passed(qu.split_time, WR_MIN_IDLE_TIME, now)
        {
            // 6.1 compares the mean with half of slice_idle.
            let threshold = slice_idle.nanos() >> u32::from(rules_61);
            let short = !(qu.tasks == 0 || (qu.ttime.valid() && qu.ttime.mean() > threshold));
            let changed = short != qu.short_ttime;
            qu.short_ttime = short;
            // A limit not measured yet follows the think time
            // (`bfq_update_has_short_ttime`).
            reset_inject = injection
                && changed
                && qu.last_serv_time == Duration::ZERO
                && (now >= qu.decrease_time + INJECT_TTIME_BARRIER || !short);
        }
        let seeky = rq_seeky(rotational, qu.last_request_pos, rq.sector, rq.sectors);
        qu.seek_history = (qu.seek_history << 1) | u32::from(seeky);
        if qu.is_soft_rt() && qu.totally_seeky() {
            self.end_wr(q, now);
        }
        if reset_inject {
            self.reset_inject_limit(q, now);
        }
    }

    /// Queue `rq` in `q` (`bfq_add_request` and `bfq_rq_enqueued`).
    pub(super) fn add_request(&mut self, q: QueueIdx, rq: Request, now: Instant) {
        let qu = self.q(q);
        if qu.sync && qu.sorted.is_empty() && qu.dispatched == 0 {
            self.first_request(q, now);
        }
        let old_wr = self.q(q).wr_coeff;
        let (id, sync, sectors, end) = (rq.id, rq.sync, rq.sectors, rq.end());
        let deadline = now + self.fifo_expire[usize::from(sync)];
        let last_position = self.peak.last_position;
        let qu = self.qm(q);
        qu.fifo.push_back((deadline, id));
        qu.sorted.insert(rq);
        self.queued += 1;
        let prev = self.q(q).next_rq;
        let next = self.choose_req(&self.q(q).sorted, prev, Some(id), last_position);
        self.qm(q).next_rq = next;
        if prev != next {
            self.pos_update(q);
        }
        let mut interactive = false;
        if !self.q(q).busy {
            interactive = self.idle_busy_switch(q, old_wr, now);
        } else {
            let qu = self.q(q);
            if self.low_latency
                && old_wr == 1
                && !sync
                && passed(qu.last_wr_start_finish, WR_MIN_INTER_ARR_ASYNC, now)
            {
                let d = self.wr_duration();
                self.set_wr(q, WR_COEFF, d);
            }
            if prev != next {
                self.updated_next_req(q);
            }
        }
        let low_latency = self.low_latency;
        let qu = self.qm(q);
        if low_latency && (old_wr == 1 || qu.wr_coeff == 1 || interactive) {
            qu.last_wr_start_finish = Some(now);
        }
        qu.last_request_pos = end;

        // bfq_rq_enqueued: a request for the queue we idle for.
        if self.in_service == Some(q) && self.q(q).wait_request {
            let small = self.q(q).sorted.len() == 1 && sectors < SMALL_REQ;
            let timed_out = self.budget_timed_out(q, now);
            if small && self.idling_boosts_throughput(q) && !timed_out {
                return;
            }
            self.qm(q).wait_request = false;
            if timed_out {
                self.expire(q, false, Expiration::BudgetTimeout, now);
            }
        }
    }

    /// A request merged into `survivor` of `q`, which may have swallowed
    /// the queued `absorbed` too.
    pub(super) fn merged(&mut self, q: QueueIdx, survivor: RequestId, absorbed: Option<RequestId>) {
        if let Some(gone) = absorbed {
            self.queued -= 1;
            let qu = self.qm(q);
            // The survivor inherits the older deadline: take over its slot.
            if let Some(slot) = qu.fifo.iter_mut().find(|(_, id)| *id == gone) {
                slot.1 = survivor;
            }
            if qu.next_rq == Some(gone) {
                qu.next_rq = Some(survivor);
            }
        }
        let prev = self.q(q).next_rq;
        let next = self.choose_req(
            &self.q(q).sorted,
            prev,
            Some(survivor),
            self.peak.last_position,
        );
        self.qm(q).next_rq = next;
        if prev != next || next == Some(survivor) {
            self.pos_update(q);
            self.updated_next_req(q);
        }
    }

    /// Dispatch `q`'s next request (`bfq_dispatch_rq_from_bfqq`).
    pub(super) fn dispatch_from(&mut self, q: QueueIdx, now: Instant) -> Request {
        let id = self.q(q).next_rq.expect("selected queue has a request");
        let (sector, sectors) = {
            let r = self.q(q).sorted.get(id).expect("queued");
            (r.sector, r.sectors)
        };
        let charge = self.charge(q, sectors);
        self.queue_served(q, charge, now);
        self.qm(q).dispatched += 1;
        if self
            .peak
            .dispatched(now, sector, sectors, self.rq_in_driver, self.rotational)
        {
            self.update_max_budget();
        }
        if self.in_service == Some(q) {
            self.in_serv_last_pos = self.peak.last_position;
        }
        if self.in_service == Some(q) && self.wait_dispatch {
            self.wait_dispatch = false;
            self.waited_rq = Some(id);
        }
        let rq = self.remove_request(q, id, now);
        self.update_counters(q);
        if self.in_service == Some(q) {
            self.update_wr_data(q, now);
            if self.total_busy() > 1 && self.q(q).class == Class::Idle {
                self.expire(q, false, Expiration::BudgetExhausted, now);
            }
        }
        self.rq_in_driver += 1;
        if !self.shallow.is_empty() {
            for id in rq.ids() {
                self.shallow.remove(&id);
            }
        }
        if !rq.sync {
            self.async_in_driver += 1;
        } else if !rq.is_read() {
            self.sync_writes_in_driver += 1;
        }
        self.in_flight.insert(rq.id, q);
        rq
    }

    /// Learn whether the device queues commands (`bfq_update_hw_tag`).
    pub(super) fn update_hw_tag(&mut self) {
        self.max_rq_in_driver = self.max_rq_in_driver.max(self.rq_in_driver);
        if self.hw_tag == Some(true) {
            return;
        }
        if self.rq_in_driver as usize + self.queued <= HW_QUEUE_THRESHOLD as usize {
            return;
        }
        if let Some(s) = self.in_service {
            let su = self.q(s);
            if su.short_ttime
                && su.dispatched as usize + su.sorted.len() < HW_QUEUE_THRESHOLD as usize
                && self.rq_in_driver < HW_QUEUE_THRESHOLD
            {
                return;
            }
        }
        self.hw_tag_samples += 1;
        if self.hw_tag_samples <= HW_QUEUE_SAMPLES {
            return;
        }
        let tag = self.max_rq_in_driver > HW_QUEUE_THRESHOLD;
        self.hw_tag = Some(tag);
        self.max_rq_in_driver = 0;
        self.hw_tag_samples = 0;
        self.nonrot_with_queueing = !self.rotational && tag;
    }

    /// Whether `bfq_limit_depth` lets request `id` of `q` into the device:
    /// sync reads always; async I/O and sync writes while fewer than their
    /// share of the tags are in the device. The kernel limits tag
    /// allocation, at arrival, with the share in force then; the engine's
    /// request slots stand for the tags here, so the share caps what the
    /// device holds (where it bites), and a request that arrived while a
    /// raised queue was busy keeps the raised share (`shallow`). Under 6.1's
    /// rules a queue is also held to its weight's share of that depth
    /// (`bfqq_request_over_limit`, in [`modern`]).
    pub(super) fn depth_allows(
        &self,
        q: QueueIdx,
        id: RequestId,
        sync: bool,
        is_read: bool,
    ) -> bool {
        if !self.limit_depth {
            return true;
        }
        if sync && is_read {
            return !self.rules_61 || !self.over_share(q, self.nr_requests);
        }
        let raised = usize::from(self.wr_busy > 0 || self.shallow.contains(&id));
        let ((num, shift), in_driver) = if sync {
            (DEPTH_SYNC_WRITE[raised], self.sync_writes_in_driver)
        } else {
            (DEPTH_ASYNC[raised], self.async_in_driver)
        };
        let depth = ((self.nr_requests * num) >> shift).max(1);
        in_driver < depth && !(self.rules_61 && self.over_share(q, depth))
    }

    pub(super) fn next_rq_allowed(&self, q: QueueIdx) -> bool {
        let qu = self.q(q);
        let id = qu.next_rq.expect("a next request");
        let r = qu.sorted.get(id).expect("queued");
        self.depth_allows(q, id, r.sync, r.is_read())
    }

    pub(super) fn wait_for_completion(&self, now: Instant) -> Dispatch {
        Dispatch::Wait {
            until: now + self.slice_idle.max(MIN_TT),
        }
    }
}
