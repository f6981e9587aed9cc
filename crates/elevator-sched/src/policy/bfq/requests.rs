//! Requests inside a queue (the next one from the head position, the position trees) and early
//! queue merging (close cooperators, `bfq_setup_cooperator`, `bfq_merge_bfqqs`).

use super::*;

// ---------------------------------------------------------------------------
// Requests inside a queue.
// ---------------------------------------------------------------------------

impl Bfq {
    /// Which of two requests to serve first from head position `last`
    /// (`bfq_choose_req`): sync before async, then metadata before data,
    /// then short forward seeks, backward ones up to `back_seek_max` at
    /// `back_seek_penalty` times the cost.
    pub(super) fn choose_req(
        &self,
        sorted: &SortedQueue,
        a: Option<RequestId>,
        b: Option<RequestId>,
        last: Sector,
    ) -> Option<RequestId> {
        let (a, b) = match (a, b) {
            (None, b) => return b,
            (a, None) => return a,
            (Some(a), Some(b)) if a == b => return Some(a),
            (Some(a), Some(b)) => (a, b),
        };
        let (ra, rb) = (
            sorted.get(a).expect("queued"),
            sorted.get(b).expect("queued"),
        );
        Some(if self.back_seek.prefers(ra, rb, last) {
            a
        } else {
            b
        })
    }

    /// The request to serve after `last` leaves `q` (`bfq_find_next_rq`):
    /// an expired FIFO head once per slot, else the better neighbour.
    pub(super) fn find_next_rq(
        &mut self,
        q: QueueIdx,
        last: RequestId,
        now: Instant,
    ) -> Option<RequestId> {
        let qu = self.queues[q as usize].as_mut().expect("live queue");
        if !qu.fifo_checked {
            qu.fifo_checked = true;
            while qu
                .fifo
                .front()
                .is_some_and(|&(_, id)| !qu.sorted.contains(id))
            {
                qu.fifo.pop_front();
            }
            if let Some(&(d, id)) = qu.fifo.front() {
                if id != last && now >= d {
                    return Some(id);
                }
            }
        }
        let qu = self.q(q);
        let r = qu.sorted.get(last).expect("queued");
        let next = qu
            .sorted
            .next_after(last)
            .or_else(|| qu.sorted.first().filter(|&f| f != last));
        let prev = qu.sorted.prev_before(last);
        self.choose_req(&qu.sorted, next, prev, r.sector)
    }

    /// Take `id` out of `q` (`bfq_remove_request`).
    pub(super) fn remove_request(&mut self, q: QueueIdx, id: RequestId, now: Instant) -> Request {
        if self.q(q).next_rq == Some(id) {
            let next = self.find_next_rq(q, id, now);
            self.qm(q).next_rq = next;
            self.updated_next_req(q);
        }
        let r = self.qm(q).sorted.remove(id).expect("queued request");
        self.queued -= 1;
        let qu = self.q(q);
        if qu.sorted.is_empty() {
            self.qm(q).next_rq = None;
            self.qm(q).fifo.clear();
            if self.q(q).busy && self.in_service != Some(q) {
                self.del_busy(q);
                let e = self.q(q).entity;
                let e = &mut self.wf.es[e as usize];
                e.budget = 0;
                e.service = 0;
            }
            self.pos_remove(q);
        } else {
            self.pos_update(q);
        }
        r
    }

    // Position trees for early queue merging.

    pub(super) fn pos_remove(&mut self, q: QueueIdx) {
        let qu = self.qm(q);
        if let Some(key) = qu.pos_key.take() {
            let g = qu.group;
            let t = &mut self.groups[g as usize].pos_tree;
            if t.get(&key) == Some(&q) {
                t.remove(&key);
            }
        }
    }

    /// Re-key `q` by its next request (`bfq_pos_tree_add_move`).
    pub(super) fn pos_update(&mut self, q: QueueIdx) {
        if self.nonrot_with_queueing {
            return;
        }
        let qu = self.q(q);
        let want = if qu.class == Class::Idle || !qu.sync || self.too_late_for_merging(q) {
            None
        } else {
            qu.next_rq
                .and_then(|id| qu.sorted.get(id))
                .map(|r| r.sector)
        };
        if want.is_some() && want == qu.pos_key {
            return; // already keyed there
        }
        self.pos_remove(q);
        let Some(sector) = want else {
            return;
        };
        let qu = self.q(q);
        let g = qu.group;
        let t = &mut self.groups[g as usize].pos_tree;
        if let std::collections::btree_map::Entry::Vacant(v) = t.entry(sector) {
            v.insert(q);
            self.qm(q).pos_key = Some(sector);
        }
    }

    pub(super) fn too_late_for_merging(&self, q: QueueIdx) -> bool {
        let qu = self.q(q);
        qu.service_from_backlogged > 0 && self.now > qu.first_io_time + MERGE_TIME_LIMIT
    }

    /// A queue whose next request is within `CLOSE_THR` of `sector` (`bfqq_find_close`).
    pub(super) fn find_close(&self, q: QueueIdx, sector: Sector) -> Option<QueueIdx> {
        let t = &self.groups[self.q(q).group as usize].pos_tree;
        if t.is_empty() {
            return None;
        }
        // The nearest queue at or below `sector` and at or above it, found
        // in one descent: only those within CLOSE_THR can qualify.
        let (mut below, mut above) = (None, None);
        let window = sector.saturating_sub(CLOSE_THR)..=sector.saturating_add(CLOSE_THR);
        for (&s, &x) in t.range(window) {
            if s <= sector {
                below = Some((s, x));
            }
            if s >= sector {
                above = Some((s, x));
                break;
            }
        }
        [below, above]
            .into_iter()
            .flatten()
            .filter(|&(_, x)| x != q)
            .min_by_key(|&(s, _)| s.abs_diff(sector))
            .map(|(_, x)| x)
    }

    pub(super) fn may_be_close_cooperator(&self, q: QueueIdx, n: QueueIdx) -> bool {
        let (qu, nu) = (self.q(q), self.q(n));
        !self.too_late_for_merging(n)
            && qu.class != Class::Idle
            && qu.class == nu.class
            && !qu.seeky()
            && !nu.seeky()
            && qu.sync
            && nu.sync
    }

    /// Find a queue that `q`'s task should share (`bfq_setup_cooperator`).
    pub(super) fn setup_cooperator(&mut self, q: QueueIdx, sector: Sector) -> Option<QueueIdx> {
        if self.stable_merge && self.q(q).sync {
            if let Some(n) = self.q(q).new_queue {
                return Some(n);
            }
            if let Some(n) = self.late_stable_merge(q, self.now) {
                return Some(n);
            }
        }
        if self.nonrot_with_queueing || !self.q(q).sync || self.too_late_for_merging(q) {
            return None;
        }
        if let Some(n) = self.q(q).new_queue {
            return Some(n);
        }
        if self.total_busy() <= 1 {
            return None;
        }
        if let Some(s) = self.in_service {
            if s != q
                && sector.abs_diff(self.in_serv_last_pos) <= CLOSE_THR
                && self.q(q).group == self.q(s).group
                && self.may_be_close_cooperator(q, s)
            {
                if let Some(n) = self.setup_merge(q, s) {
                    return Some(n);
                }
            }
        }
        let n = self.find_close(q, sector)?;
        if self.may_be_close_cooperator(q, n) {
            self.setup_merge(q, n)
        } else {
            None
        }
    }

    pub(super) fn setup_merge(&mut self, q: QueueIdx, mut n: QueueIdx) -> Option<QueueIdx> {
        if self.q(n).tasks == 0 {
            return None;
        }
        while let Some(nn) = self.q(n).new_queue {
            if nn == q {
                return None;
            }
            n = nn;
        }
        if self.q(q).tasks == 0 || self.q(n).tasks == 0 || n == q {
            return None;
        }
        self.qm(q).new_queue = Some(n);
        Some(n)
    }

    /// Redirect `task` from `q` to `n` (`bfq_merge_bfqqs`).
    pub(super) fn merge_queues(&mut self, task: TaskId, q: QueueIdx, n: QueueIdx, now: Instant) {
        let qu = self.q(q);
        let saved = Saved {
            ttime: qu.ttime,
            io_bound: qu.io_bound,
            short_ttime: qu.short_ttime,
            in_large_burst: qu.in_large_burst,
            wr_coeff: qu.wr_coeff,
            wr_cur_max_time: qu.wr_cur_max_time,
            last_wr_start_finish: qu.last_wr_start_finish,
            wr_start_at_switch_to_srt: qu.wr_start_at_switch_to_srt,
        };
        let io_bound = saved.io_bound;
        let wr = (
            saved.wr_coeff,
            saved.wr_cur_max_time,
            saved.last_wr_start_finish,
            saved.wr_start_at_switch_to_srt,
        );
        self.saved.insert(task, saved);
        if io_bound {
            self.qm(n).io_bound = true;
        }
        // q's waker may inject for the merged tasks too (`bfq_merge_bfqqs`).
        let waker = self.q(q).waker;
        let nu = self.qm(n);
        if nu.waker.is_none() && waker.is_some() && waker != Some(n) {
            nu.waker = waker;
            nu.tentative_waker = None;
        }
        self.qm(q).io_bound = false;
        if self.q(n).wr_coeff == 1 && wr.0 > 1 {
            self.set_wr(n, wr.0, wr.1);
            let nu = self.qm(n);
            nu.last_wr_start_finish = wr.2;
            nu.wr_start_at_switch_to_srt = wr.3;
        }
        if wr.0 > 1 {
            self.set_wr(q, 1, Duration::ZERO);
            self.qm(q).last_wr_start_finish = Some(now);
        }
        let nu = self.qm(n);
        nu.coop = true;
        nu.tasks += 1;
        self.release_task(task, q);
        self.sync_of.insert(task, n);
    }
}

impl Bfq {
    /// Break `task` out of the merged queue `q` (`bfq_split_bfqq`).
    pub(super) fn split(
        &mut self,
        task: TaskId,
        q: QueueIdx,
        rq: &Request,
        now: Instant,
    ) -> QueueIdx {
        if self.q(q).tasks == 1 {
            let qu = self.qm(q);
            qu.coop = false;
            qu.split_coop = false;
            return q;
        }
        let waker = self.q(q).waker;
        self.release_task(task, q);
        let group = self.group_sched(rq.group);
        let n = self.new_queue(group, rq.prio, true, now);
        // The split queue keeps the shared queue's waker (`bfq_init_rq`).
        self.qm(n).waker = waker.filter(|&w| self.queues[w as usize].is_some());
        self.sync_of.insert(task, n);
        let saved = self.saved.remove(&task);
        let large_burst = self.burst.large;
        let qu = self.qm(n);
        qu.tasks = 1;
        qu.owner = Some(task);
        qu.split_time = Some(now);
        qu.just_created = false;
        if let Some(s) = saved {
            qu.ttime = s.ttime;
            qu.io_bound = s.io_bound;
            qu.short_ttime = s.short_ttime;
            qu.in_large_burst = s.in_large_burst && large_burst;
            qu.wr_coeff = s.wr_coeff;
            qu.wr_cur_max_time = s.wr_cur_max_time;
            qu.last_wr_start_finish = s.last_wr_start_finish;
            qu.wr_start_at_switch_to_srt = s.wr_start_at_switch_to_srt;
            let expired = qu.wr_coeff > 1
                && (qu.in_large_burst || passed(qu.last_wr_start_finish, qu.wr_cur_max_time, now));
            if expired {
                if qu.is_soft_rt()
                    && !qu.in_large_burst
                    && !passed(qu.wr_start_at_switch_to_srt, self.wr_duration(), now)
                {
                    let d = self.wr_duration();
                    let qu = self.qm(n);
                    qu.wr_coeff = WR_COEFF;
                    qu.wr_cur_max_time = d;
                    qu.last_wr_start_finish = qu.wr_start_at_switch_to_srt;
                } else {
                    self.qm(n).wr_coeff = 1;
                }
            }
            self.apply_weight(n);
        }
        n
    }
}
