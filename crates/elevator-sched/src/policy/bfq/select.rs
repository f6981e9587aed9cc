//! Busy/idle switches, queue selection, idling and expiry (`bfq_select_queue`,
//! `bfq_better_to_idle`, `bfq_bfqq_expire`).

use super::*;

// ---------------------------------------------------------------------------
// Busy/idle switches and queue selection.
// ---------------------------------------------------------------------------

impl Bfq {
    pub(super) fn add_busy(&mut self, q: QueueIdx) {
        let qu = self.qm(q);
        let backshift = if qu.non_blocking_wait_rq {
            u64::from(qu.wr_coeff)
        } else {
            0
        };
        qu.non_blocking_wait_rq = false;
        qu.busy = true;
        let (entity, class, raised) = (qu.entity, qu.class, qu.wr_coeff > 1);
        self.wf.activate(entity, backshift);
        self.busy[class.index()] += 1;
        if raised {
            self.wr_busy += 1;
        }
        self.update_counters(q);
    }

    /// `q` leaves the schedule (not in service) (`bfq_del_bfqq_busy`).
    pub(super) fn del_busy(&mut self, q: QueueIdx) {
        let qu = self.qm(q);
        debug_assert!(qu.busy);
        qu.busy = false;
        let (entity, class, raised) = (qu.entity, qu.class, qu.wr_coeff > 1);
        self.busy[class.index()] -= 1;
        if raised {
            self.wr_busy -= 1;
        }
        if self.wf.es[entity as usize].place == Place::Active {
            self.wf.deactivate(entity);
        }
        self.update_counters(q);
    }

    /// Budget for a queue becoming busy; true if it may reclaim the rest of
    /// a budget it lost by emptying briefly (`bfq_bfqq_update_budg_for_activation`).
    pub(super) fn update_budget_for_activation(
        &mut self,
        q: QueueIdx,
        arrived_in_time: bool,
    ) -> bool {
        let left = self.q(q).budget_left(&self.wf);
        let need = self.next_charge(q);
        let qu = self.queues[q as usize].as_mut().expect("live queue");
        let e = &mut self.wf.es[qu.entity as usize];
        if qu.non_blocking_wait_rq && arrived_in_time && left > 0 {
            e.budget = (left as u64).min(qu.max_budget);
            e.service = 0;
            return true;
        }
        e.service = 0;
        e.budget = qu.max_budget.max(need);
        qu.non_blocking_wait_rq = false;
        false
    }

    /// `q` gets its first request after being idle
    /// (`bfq_bfqq_handle_idle_busy_switch`).
    pub(super) fn idle_busy_switch(&mut self, q: QueueIdx, old_wr: u32, now: Instant) -> bool {
        let qu = self.q(q);
        let idle_for_long = qu.dispatched == 0 && passed(qu.budget_timeout, WR_MIN_IDLE_TIME, now);
        let arrived_in_time = qu
            .last_end_request
            .is_none_or(|t| now <= t + self.slice_idle.mul(3));
        let in_burst = qu.in_large_burst;
        let soft_rt = !qu.totally_seeky()
            && !in_burst
            && passed(qu.soft_rt_next_start, Duration::ZERO, now)
            && qu.dispatched == 0;
        let interactive = !in_burst && idle_for_long;
        // Only queues of the default weight are raised (Linux 5.x on:
        // raising a queue whose weight was set on purpose would defeat it).
        let deserves = self.low_latency
            && (qu.wr_coeff > 1
                || (qu.sync
                    && (qu.tasks == 1 || qu.stably_merged)
                    && qu.orig_weight == ioprio_to_weight(DEFAULT_IOPRIO_LEVEL)
                    && (interactive || soft_rt)));
        let wants_to_preempt = self.update_budget_for_activation(q, arrived_in_time);

        let qu = self.qm(q);
        if !qu.just_created && idle_for_long && passed(qu.budget_timeout, BURST_FORGET_IDLE, now) {
            qu.in_large_burst = false;
            if qu.in_burst_list {
                qu.in_burst_list = false;
                self.burst.list.retain(|&x| x != q);
            }
        }
        let qu = self.qm(q);
        qu.just_created = false;
        if !qu.io_bound {
            if arrived_in_time {
                qu.requests_within_timer += 1;
                if qu.requests_within_timer >= REQUESTS_WITHIN_TIMER {
                    qu.io_bound = true;
                }
            } else {
                qu.requests_within_timer = 0;
            }
        }
        if self.low_latency && passed(self.q(q).split_time, WR_MIN_IDLE_TIME, now) {
            let a = Arrival {
                old_wr,
                deserves,
                interactive,
                in_burst,
                soft_rt,
            };
            self.update_wr_on_arrival(q, a, now);
        }
        let qu = self.qm(q);
        qu.last_idle_backlogged = now;
        qu.service_from_backlogged = 0;
        qu.softrt_update = false;
        self.add_busy(q);

        // Preempt the in-service queue when q must reclaim a hole and is at
        // least as raised, or outranks it by class or weight.
        if let Some(s) = self.in_service {
            if s != q {
                let (qu, su) = (self.q(q), self.q(s));
                // 6.1 also preempts a queue that would not idle anyway.
                let plugless = self.rules_61 && !self.better_to_idle(s);
                if (wants_to_preempt && qu.wr_coeff >= su.wr_coeff)
                    || self.outranks(q, s)
                    || plugless
                {
                    self.expire(s, false, Expiration::Preempted, now);
                }
            }
        }
        interactive
    }

    /// Higher class, or higher weight at the level where the two meet
    /// (`bfq_bfqq_higher_class_or_weight`).
    pub(super) fn outranks(&self, q: QueueIdx, s: QueueIdx) -> bool {
        let (qu, su) = (self.q(q), self.q(s));
        if qu.class < su.class {
            return true;
        }
        let weight = |x: &Queue| {
            if qu.group == su.group || x.group == ROOT {
                self.wf.es[x.entity as usize].weight
            } else {
                self.wf.es[self.wf.sds[x.group as usize].entity as usize].weight
            }
        };
        weight(qu) > weight(su)
    }

    /// Put the next queue in service (`bfq_set_in_service_queue`).
    pub(super) fn set_in_service(&mut self, now: Instant) -> Option<QueueIdx> {
        if self.total_busy() == 0 {
            return None;
        }
        let entity = self.wf.select(now)?;
        let q = self.queue_of_entity(entity);
        self.budgets_assigned = (self.budgets_assigned * 7 + 256) / 8;
        let timeout = self.timeout;
        let qu = self.qm(q);
        qu.fifo_checked = false;
        if qu.is_soft_rt() && passed(qu.last_wr_start_finish, Duration::ZERO, now) {
            if let Some(t) = qu.budget_timeout.filter(|&t| t < now) {
                // Do not let the wait for service eat a soft real-time period.
                match qu.last_wr_start_finish {
                    Some(start) if t > start => {
                        qu.last_wr_start_finish = Some(start + now.since(t))
                    }
                    _ => qu.last_wr_start_finish = Some(now),
                }
            }
        }
        let coeff = if qu.is_soft_rt() {
            1
        } else {
            u64::from(qu.wr_coeff)
        };
        qu.budget_timeout = Some(now + timeout.mul(coeff));
        self.last_budget_start = now;
        self.in_service = Some(q);
        Some(q)
    }

    pub(super) fn queue_of_entity(&self, entity: EntityId) -> QueueIdx {
        // Queue and entity arenas grow together but are freed separately;
        // a reverse map keeps the lookup O(1).
        self.entity_queue[entity as usize]
    }
}

// ---------------------------------------------------------------------------
// Idling and expiry.
// ---------------------------------------------------------------------------

impl Bfq {
    /// Idling for `q` raises throughput without hurting raised queues
    /// (`idling_boosts_thr_without_issues`).
    pub(super) fn idling_boosts_throughput(&self, q: QueueIdx) -> bool {
        let qu = self.q(q);
        if qu.tasks == 0 {
            return false;
        }
        let no_queueing = self.hw_tag == Some(false);
        let rot_without_queueing = self.rotational && no_queueing;
        let seq_io_bound = !qu.seeky() && qu.io_bound && qu.short_ttime;
        let boosts = rot_without_queueing || ((self.rotational || no_queueing) && seq_io_bound);
        boosts && self.wr_busy == 0
    }

    /// Without idling `q` would lose its share or its low latency
    /// (`idling_needed_for_service_guarantees`).
    pub(super) fn idling_needed_for_guarantees(&self, q: QueueIdx) -> bool {
        let qu = self.q(q);
        if qu.tasks == 0 {
            return false;
        }
        (qu.wr_coeff > 1
            && (self.wr_busy < self.total_busy() || self.rq_in_driver >= qu.dispatched + 4))
            || self.asymmetric(q)
            // 6.1 keeps plugging for a queue that is the only busy one
            // (5.12, "block, bfq: do not expire a queue when it is the only
            // busy one"). Once unraised, nothing else plugs for a queue in
            // a symmetric scenario: a seeky reader beside a writeback queue
            // of equal weight that always has a request waiting is left
            // behind whatever the device holds (issue 17).
            || (self.rules_61 && self.total_busy() == 1)
    }

    /// `bfq_better_to_idle`.
    pub(super) fn better_to_idle(&self, q: QueueIdx) -> bool {
        let qu = self.q(q);
        if qu.tasks == 0 {
            return false;
        }
        if self.strict_guarantees {
            return true;
        }
        if self.slice_idle == Duration::ZERO || !qu.sync || qu.class == Class::Idle {
            return false;
        }
        self.idling_boosts_throughput(q) || self.idling_needed_for_guarantees(q)
    }

    pub(super) fn must_idle(&self, q: QueueIdx) -> bool {
        self.q(q).sorted.is_empty() && self.better_to_idle(q)
    }

    pub(super) fn budget_timed_out(&self, q: QueueIdx, now: Instant) -> bool {
        self.q(q).budget_timeout.is_none_or(|t| now >= t)
    }

    /// `bfq_may_expire_for_budg_timeout`: not while idling for a queue that
    /// used most of its budget (that would misalign its timestamps).
    pub(super) fn may_expire_for_budget_timeout(&self, q: QueueIdx, now: Instant) -> bool {
        let qu = self.q(q);
        let budget = self.wf.es[qu.entity as usize].budget as i64;
        (!qu.wait_request || qu.budget_left(&self.wf) >= budget / 3)
            && self.budget_timed_out(q, now)
    }

    /// Idle for the in-service queue's next request (`bfq_arm_slice_timer`).
    pub(super) fn arm_idle_timer(&mut self, q: QueueIdx, now: Instant) {
        let mut sl = self.slice_idle;
        let qu = self.q(q);
        if qu.seeky() && qu.wr_coeff == 1 && !self.asymmetric(q) {
            sl = sl.min(MIN_TT);
        } else if qu.wr_coeff > 1 {
            sl = sl.max(WR_MIN_IDLE_SLICE);
        }
        self.qm(q).wait_request = true;
        self.last_idling_start = now;
        self.idle_until = now + sl;
    }

    /// End the in-service queue's service slot (`bfq_bfqq_expire`).
    pub(super) fn expire(
        &mut self,
        q: QueueIdx,
        compensate: bool,
        reason: Expiration,
        now: Instant,
    ) {
        debug_assert_eq!(self.in_service, Some(q));
        let (slow, delta_ms) = self.is_slow(q, compensate, now);
        let qu = self.q(q);
        let e = &self.wf.es[qu.entity as usize];
        let (budget, service) = (e.budget, e.service);
        // Slow queues, and queues that timed out with a third of their
        // budget left, pay for the time they held the disk.
        if qu.wr_coeff == 1
            && (slow
                || (reason == Expiration::BudgetTimeout
                    && qu.budget_left(&self.wf) >= budget as i64 / 3))
        {
            self.charge_time(q, delta_ms, now);
        }
        let low_latency = self.low_latency;
        let qu = self.qm(q);
        if reason == Expiration::TooIdle && service <= 2 * budget / 10 {
            qu.io_bound = false;
        }
        if low_latency && qu.wr_coeff == 1 {
            qu.last_wr_start_finish = Some(now);
        }
        if low_latency && qu.sorted.is_empty() {
            if qu.dispatched == 0 {
                let t = self.softrt_next_start(q, now);
                self.qm(q).soft_rt_next_start = Some(t);
            } else if qu.dispatched > 0 {
                qu.softrt_update = true;
            }
        }
        // No total service time to measure any longer.
        self.rqs_injected = false;
        self.wait_dispatch = false;
        self.waited_rq = None;
        self.recalc_budget(q, reason);

        // __bfq_bfqq_expire.
        let qu = self.qm(q);
        if qu.coop && qu.seeky() {
            qu.split_coop = true;
        }
        qu.wait_request = false;
        let entity = qu.entity;
        let empty = qu.sorted.is_empty();
        let keep_for_guarantees =
            reason == Expiration::Preempted && self.idling_needed_for_guarantees(q);
        self.in_service = None;
        if empty && !keep_for_guarantees {
            let qu = self.qm(q);
            if qu.dispatched == 0 {
                qu.budget_timeout = Some(now);
            }
            qu.busy = false;
            let (class, raised) = (qu.class, qu.wr_coeff > 1);
            self.busy[class.index()] -= 1;
            if raised {
                self.wr_busy -= 1;
            }
            self.wf.expire(entity, false);
            self.update_counters(q);
        } else {
            self.wf.expire(entity, true);
            self.pos_update(q);
        }
        let qu = self.qm(q);
        if !qu.busy && reason != Expiration::BudgetTimeout && reason != Expiration::BudgetExhausted
        {
            // Keep the service: if a request comes in time, the queue goes
            // on with the rest of this budget.
            qu.non_blocking_wait_rq = true;
        } else {
            self.wf.es[entity as usize].service = 0;
        }
        self.maybe_free(q);
    }

    /// Decide which queue to serve now (`bfq_select_queue`); None when the
    /// in-service queue is kept idle or nothing is busy.
    pub(super) fn select_queue(&mut self, now: Instant) -> Option<QueueIdx> {
        let mut cur = self.in_service;
        if let Some(q) = cur {
            if self.may_expire_for_budget_timeout(q, now) && !self.must_idle(q) {
                self.expire(q, false, Expiration::BudgetTimeout, now);
                cur = None;
            }
        }
        loop {
            let q = match cur {
                Some(q) => q,
                None => self.set_in_service(now)?,
            };
            if self.q(q).next_rq.is_some() {
                if self.next_charge(q) as i64 > self.q(q).budget_left(&self.wf) {
                    self.expire(q, false, Expiration::BudgetExhausted, now);
                    cur = None;
                    continue;
                }
                self.qm(q).wait_request = false;
                return Some(q);
            }
            let qu = self.q(q);
            if qu.wait_request || (qu.dispatched > 0 && self.better_to_idle(q)) {
                return None;
            }
            self.expire(q, false, Expiration::NoMoreRequests, now);
            cur = None;
        }
    }

    /// The idle timer fired (`bfq_idle_slice_timer_body`).
    pub(super) fn idle_timer(&mut self, now: Instant) {
        let Some(q) = self.in_service else { return };
        if !self.q(q).wait_request || now < self.idle_until {
            return;
        }
        self.qm(q).wait_request = false;
        let reason = if self.budget_timed_out(q, now) {
            Expiration::BudgetTimeout
        } else if self.q(q).sorted.is_empty() {
            Expiration::TooIdle
        } else {
            return;
        };
        self.expire(q, true, reason, now);
    }
}
