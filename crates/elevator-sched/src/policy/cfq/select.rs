//! Choosing what to serve: the active queue and its expiry, close cooperators,
//! the workload class and type, the group, and `cfq_select_queue`.

use super::*;

impl Cfq {
    pub(super) fn set_active(&mut self, id: QueueId, now: Instant) {
        let q = self.qm(id);
        // The slice starts at the first dispatch (`slice_new`).
        (q.slice_new, q.slice_start, q.slice_end) = (true, None, Instant::ZERO);
        (q.dispatch_start, q.allocated_slice, q.slice_dispatch) = (now, Duration::ZERO, 0);
        (q.wait_request, q.must_dispatch, q.fifo_checked) = (false, false, false);
        self.idle_timer = None;
        self.active = Some(id);
    }

    pub(super) fn expire_active(&mut self, timed_out: bool, now: Instant) {
        if let Some(a) = self.active {
            self.expire_queue(a, timed_out, now);
        }
    }

    /// End queue `id`'s slice (`__cfq_slice_expired`); `timed_out` keeps
    /// what was left of it for the queue's next key.
    pub(super) fn expire_queue(&mut self, id: QueueId, timed_out: bool, now: Instant) {
        if self.active == Some(id) {
            self.idle_timer = None;
        }
        {
            let q = self.qm(id);
            q.wait_request = false;
            q.wait_busy = false;
        }
        if timed_out {
            let resid = if self.q(id).slice_new {
                self.scaled_slice(id).nanos() as i64
            } else {
                ns(self.q(id).slice_end) - ns(now)
            };
            self.qm(id).slice_resid = resid;
        }
        let g = self.q(id).group;
        self.group_served(g, id, now);
        if self.q(id).on_rr && self.q(id).sorted.is_empty() {
            self.del_cfqq_rr(id);
        }
        self.resort_rr_list(id, now);
        if self.active == Some(id) {
            self.active = None;
        }
        self.active_task = None;
        self.maybe_free(id);
    }

    /// Another sync, non-seeky queue of the same group and RT-ness with its
    /// next request within 4 MiB of the head (`cfq_close_cooperator`).
    pub(super) fn close_cooperator(&self, cur: QueueId) -> Option<QueueId> {
        let c = self.q(cur);
        if c.class == WlClass::Idle || !c.sync || c.seeky() {
            return None;
        }
        if self.groups[c.group].nr_cfqq == 1 {
            return None;
        }
        let tree = &self.prio_trees[c.level as usize];
        let pos = self.last_position;
        let after = tree
            .range((pos, QueueId(0))..)
            .find(|&&(_, q)| q != cur)
            .copied();
        let before = tree
            .range(..(pos, QueueId(0)))
            .rev()
            .find(|&&(_, q)| q != cur)
            .copied();
        let (sector, cand) = match (before, after) {
            (Some(b), Some(a)) => {
                if pos - b.0 <= a.0 - pos {
                    b
                } else {
                    a
                }
            }
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => return None,
        };
        if sector.abs_diff(pos) > CLOSE_THR {
            return None;
        }
        let n = self.q(cand);
        if n.group != c.group
            || !n.sync
            || n.seeky()
            || (n.class == WlClass::Rt) != (c.class == WlClass::Rt)
        {
            return None;
        }
        Some(cand)
    }

    /// Pick the workload type: the tree whose first queue has the lowest key.
    pub(super) fn choose_wl_type(&self, g: usize, class: WlClass) -> WlType {
        let mut best: Option<(i64, WlType)> = None;
        for ty in WL_TYPES {
            if let Some((k, _)) = self.groups[g].trees[tree_index(class, ty)].first() {
                let lower = match best {
                    None => true,
                    Some((bk, _)) => k < bk,
                };
                if lower {
                    best = Some((k, ty));
                }
            }
        }
        best.map_or(WlType::SyncNoidle, |(_, ty)| ty)
    }

    /// Class (RT, then BE, then IDLE) and workload type with its slice
    /// (`choose_wl_class_and_type`).
    pub(super) fn choose_class_and_type(&mut self, g: usize, now: Instant) {
        let original = self.serving_class;
        let class = if self.busy_wl(g, WlClass::Rt) > 0 {
            WlClass::Rt
        } else if self.busy_wl(g, WlClass::Be) > 0 {
            WlClass::Be
        } else {
            self.serving_class = WlClass::Idle;
            self.workload_expires = Some(now + JIFFY);
            return;
        };
        self.serving_class = class;
        if original == class {
            let count = self.groups[g].trees[tree_index(class, self.serving_type)].count();
            if count > 0 && self.workload_expires.is_some_and(|e| now <= e) {
                return;
            }
        }
        let ty = self.choose_wl_type(g, class);
        self.serving_type = ty;
        let count = u64::from(self.groups[g].trees[tree_index(class, ty)].count());
        // The workload's share of the group slice: its queues over all the
        // class's busy queues.
        let busy = self.groups[g].busy_queues_avg[class as usize].max(self.busy_wl(g, class));
        let mut slice = self.group_slice(g).nanos() * count / u64::from(busy.max(1));
        if ty == WlType::Async {
            let cap = self.target_latency.nanos() * u64::from(self.busy_async(g))
                / u64::from(self.busy_queues.max(1));
            slice = slice.min(cap);
            slice = slice * self.conf.slice[0].nanos() / self.conf.slice[1].nanos();
        } else {
            slice = slice.max(2 * self.conf.slice_idle.nanos());
        }
        let slice = Duration(slice).max(MIN_TT);
        self.workload_expires = Some(now + slice);
    }

    /// The leftmost group, restoring its saved workload state
    /// (`cfq_choose_cfqg`). False if no group is busy.
    pub(super) fn choose_group(&mut self, now: Instant) -> bool {
        let Some(&(v, _, g)) = self.group_tree.iter().next() else {
            return false;
        };
        self.min_vdisktime = self.min_vdisktime.max(v);
        self.serving_group = g;
        match self.groups[g].saved_workload {
            Some((left, class, ty)) => {
                self.workload_expires = Some(now + left);
                self.serving_type = ty;
                self.serving_class = class;
            }
            None => self.workload_expires = None,
        }
        self.choose_class_and_type(g, now);
        true
    }

    pub(super) fn next_queue(&self) -> Option<QueueId> {
        if self.rq_queued == 0 {
            return None;
        }
        let g = &self.groups[self.serving_group];
        g.trees[tree_index(self.serving_class, self.serving_type)]
            .first()
            .map(|(_, q)| q)
    }

    /// The grace period an IDLE-class queue waits for: none while it is
    /// over, else until when.
    pub(super) fn idle_class_wait(&self, now: Instant) -> Option<Instant> {
        if self.nonidle_in_flight > 0 {
            return Some(Instant::NEVER);
        }
        let end = self.last_nonidle_end + IDLE_DELAY;
        (now < end).then_some(end)
    }

    /// Keep the active queue or choose the next (`cfq_select_queue`).
    /// `None`: dispatch nothing now.
    pub(super) fn select_queue(&mut self, now: Instant) -> Option<QueueId> {
        let mut cooperator = None;
        if let Some(a) = self.active {
            if self.rq_queued == 0 {
                return None;
            }
            let (g, empty, dispatched, wait_busy, must_dispatch) = {
                let q = self.q(a);
                (
                    q.group,
                    q.sorted.is_empty(),
                    q.dispatched,
                    q.wait_busy,
                    q.must_dispatch,
                )
            };
            // Whether to go to the group-idle check (else expire now).
            let check_group_idle = if wait_busy && !empty {
                false
            } else if self.slice_used(a, now) && !must_dispatch {
                // Slice used while idling for the group to get busy: let
                // the last request complete.
                if self.groups[g].nr_cfqq == 1 && empty && dispatched > 0 && self.should_idle(a) {
                    return None;
                }
                true
            } else if !empty {
                return Some(a);
            } else if let Some(c) = self.close_cooperator(a) {
                cooperator = Some(c);
                false
            } else if self.idle_timer.is_some() {
                return None;
            } else {
                // A deep seeky queue on a device faster than it can feed
                // it: stop idling on it.
                let q = self.qm(a);
                if q.seeky()
                    && q.idle_window
                    && (q.slice_new
                        || q.slice_end.since(now)
                            > q.slice_start.map_or(Duration::ZERO, |s| now.since(s)))
                {
                    q.deep = false;
                    q.idle_window = false;
                }
                if dispatched > 0 && self.should_idle(a) {
                    return None;
                }
                true
            };
            if check_group_idle {
                let grp = &self.groups[g];
                if self.group_idle != Duration::ZERO
                    && grp.nr_cfqq == 1
                    && grp.dispatched > 0
                    && !Self::thinktime_big(&grp.ttime, self.group_idle)
                {
                    return None;
                }
            }
            self.expire_active(false, now);
        }
        let next = match cooperator {
            Some(c) => Some(c),
            None => {
                if !self.choose_group(now) {
                    return None;
                }
                if self.serving_class == WlClass::Idle && self.idle_class_wait(now).is_some() {
                    return None;
                }
                self.next_queue()
            }
        };
        if let Some(n) = next {
            self.set_active(n, now);
        }
        next
    }
}
