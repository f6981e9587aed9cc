//! Weight raising (`bfq_bfqq_end_wr`, `bfq_update_wr_data` and their callers): interactive and
//! soft real-time queues get their weight multiplied for a while.

use super::*;

// ---------------------------------------------------------------------------
// Weight raising.
// ---------------------------------------------------------------------------

impl Bfq {
    /// End `q`'s raising (`bfq_bfqq_end_wr`).
    pub(super) fn end_wr(&mut self, q: QueueIdx, now: Instant) {
        let qu = self.qm(q);
        if qu.wr_coeff == 1 {
            return;
        }
        if qu.busy {
            self.wr_busy -= 1;
        }
        let qu = self.qm(q);
        qu.wr_coeff = 1;
        qu.wr_cur_max_time = Duration::ZERO;
        qu.last_wr_start_finish = Some(now);
        self.apply_weight(q);
    }

    /// Set `q`'s raising coefficient, keeping the busy-raised count.
    pub(super) fn set_wr(&mut self, q: QueueIdx, coeff: u32, max_time: Duration) {
        let qu = self.qm(q);
        let was = qu.wr_coeff > 1;
        qu.wr_coeff = coeff;
        qu.wr_cur_max_time = max_time;
        if qu.busy && !was && coeff > 1 {
            self.wr_busy += 1;
        } else if qu.busy && was && coeff == 1 {
            self.wr_busy -= 1;
        }
        self.apply_weight(q);
    }

    /// When `q` may next arrive and count as soft real-time
    /// (`bfq_bfqq_softrt_next_start`).
    pub(super) fn softrt_next_start(&self, q: QueueIdx, now: Instant) -> Instant {
        let qu = self.q(q);
        let by_rate = qu.last_idle_backlogged
            + Duration(qu.service_from_backlogged * 1_000_000_000 / WR_MAX_SOFTRT_RATE);
        let by_idle = now + self.slice_idle + SOFTRT_EXTRA;
        qu.soft_rt_next_start
            .unwrap_or(Instant::ZERO)
            .max(by_rate)
            .max(by_idle)
    }

    /// Start, renew or end raising on an idle-to-busy switch
    /// (`bfq_update_bfqq_wr_on_rq_arrival`).
    pub(super) fn update_wr_on_arrival(&mut self, q: QueueIdx, a: Arrival, now: Instant) {
        let Arrival {
            old_wr,
            deserves,
            interactive,
            in_burst,
            soft_rt,
        } = a;
        let dur = self.wr_duration();
        if old_wr == 1 && deserves {
            if interactive {
                self.qm(q).service_from_wr = 0;
                self.set_wr(q, WR_COEFF, dur);
            } else {
                self.qm(q).wr_start_at_switch_to_srt = None;
                self.set_wr(q, WR_COEFF * SOFTRT_WEIGHT_FACTOR, WR_RT_MAX_TIME);
            }
            // Keep the raised budget close to the backlog.
            let cap = 2 * self.min_budget();
            let e = self.q(q).entity;
            let b = &mut self.wf.es[e as usize].budget;
            *b = (*b).min(cap);
        } else if old_wr > 1 {
            if interactive {
                self.set_wr(q, WR_COEFF, dur);
            } else if in_burst {
                self.set_wr(q, 1, Duration::ZERO);
            } else if soft_rt {
                if !self.q(q).is_soft_rt() {
                    let qu = self.qm(q);
                    qu.wr_start_at_switch_to_srt = qu.last_wr_start_finish;
                    self.set_wr(q, WR_COEFF * SOFTRT_WEIGHT_FACTOR, WR_RT_MAX_TIME);
                }
                self.qm(q).last_wr_start_finish = Some(now);
            }
        }
    }

    /// On each dispatch of the in-service queue: end raising that ran out
    /// (`bfq_update_wr_data`).
    pub(super) fn update_wr_data(&mut self, q: QueueIdx, now: Instant) {
        let qu = self.q(q);
        if qu.wr_coeff == 1 {
            return;
        }
        if qu.in_large_burst {
            self.end_wr(q, now);
        } else if passed(qu.last_wr_start_finish, qu.wr_cur_max_time, now) {
            if !qu.is_soft_rt() || passed(qu.wr_start_at_switch_to_srt, self.wr_duration(), now) {
                self.end_wr(q, now);
            } else {
                // Soft real-time period over, interactive one still running.
                let dur = self.wr_duration();
                let back = self.q(q).wr_start_at_switch_to_srt;
                self.set_wr(q, WR_COEFF, dur);
                self.qm(q).last_wr_start_finish = back;
            }
        }
        let qu = self.q(q);
        if qu.wr_coeff > 1 && !qu.is_soft_rt() && qu.service_from_wr > MAX_SERVICE_FROM_WR {
            self.end_wr(q, now);
        }
    }
}

impl Bfq {
    /// Update the burst list with the newly created queue `q` (`bfq_handle_burst`).
    pub(super) fn handle_burst(&mut self, q: QueueIdx, now: Instant) {
        let group = self.q(q).group;
        if self.q(q).in_burst_list || self.q(q).in_large_burst {
            return;
        }
        if passed(self.burst.last_insertion, BURST_INTERVAL, now) || group != self.burst.parent {
            // The burst is over: start a possible new one with q.
            self.burst.large = false;
            for x in std::mem::take(&mut self.burst.list) {
                if let Some(qu) = self.queues[x as usize].as_mut() {
                    qu.in_burst_list = false;
                }
            }
            if self.total_busy() == 0 {
                self.burst.list.push(q);
                self.qm(q).in_burst_list = true;
                self.burst.size = 1;
            } else {
                self.burst.size = 0;
            }
            self.burst.parent = group;
        } else if self.burst.large {
            self.qm(q).in_large_burst = true;
        } else {
            self.burst.size += 1;
            if self.burst.size >= LARGE_BURST_THRESH {
                self.burst.large = true;
                for x in std::mem::take(&mut self.burst.list) {
                    if let Some(qu) = self.queues[x as usize].as_mut() {
                        qu.in_large_burst = true;
                        qu.in_burst_list = false;
                    }
                }
                self.qm(q).in_large_burst = true;
            } else {
                self.burst.list.push(q);
                self.qm(q).in_burst_list = true;
            }
        }
        self.burst.last_insertion = Some(now);
    }
}
