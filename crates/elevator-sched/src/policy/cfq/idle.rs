//! Idling and preemption: the idle window (`cfq_update_idle_window`),
//! `cfq_should_preempt`, `cfq_should_idle`, the slice timer and
//! `cfq_should_wait_busy`.

use super::*;

impl Cfq {
    /// Whether a sync queue should keep idling (`cfq_update_idle_window`).
    pub(super) fn update_idle_window(&mut self, id: QueueId, task: TaskId) {
        let slice_idle = self.conf.slice_idle;
        let ttime = self.tasks.get(&task).map(|t| t.ttime);
        let q = self.qm(id);
        if !q.sync || q.class == WlClass::Idle {
            return;
        }
        if q.sorted.len() >= DEEP_QUEUED {
            q.deep = true;
        }
        let noidle = q
            .next_rq
            .and_then(|n| q.sorted.get(n))
            .is_some_and(|n| n.noidle);
        let mut enable = q.idle_window;
        if noidle || ttime.is_none() || slice_idle == Duration::ZERO || (!q.deep && q.seeky()) {
            enable = false;
        } else if let Some(t) = ttime.filter(|t| t.valid()) {
            enable = t.mean() <= slice_idle.nanos();
        }
        q.idle_window = enable;
    }

    /// Whether a request for queue `new` should preempt the active queue
    /// (`cfq_should_preempt`).
    pub(super) fn should_preempt(&self, new: QueueId, r: &Request, now: Instant) -> bool {
        let Some(a) = self.active else { return false };
        let (n, q) = (self.q(new), self.q(a));
        if n.class == WlClass::Idle {
            return false;
        }
        if q.class == WlClass::Idle {
            return true;
        }
        if q.class == WlClass::Rt && n.class != WlClass::Rt {
            return false;
        }
        if is_sync(r) && !q.sync {
            return true;
        }
        if n.group != q.group {
            return false;
        }
        if self.slice_used(a, now) {
            return true;
        }
        if self.serving_type == WlType::SyncNoidle
            && n.wl_type() == WlType::SyncNoidle
            && n.tree
                .is_some_and(|(ti, _, _)| self.groups[n.group].trees[ti].count() == 2)
            && q.sorted.is_empty()
        {
            return true;
        }
        if n.class == WlClass::Rt && q.class != WlClass::Rt {
            return true;
        }
        // Metadata preempts regular I/O (REQ_PRIO, `prio_pending`).
        if r.meta && !q.sorted.iter().any(|p| p.meta) {
            return true;
        }
        if q.sorted.is_empty() && !self.should_idle(a) {
            return true;
        }
        if self.active_task.is_none() || !q.wait_request {
            return false;
        }
        r.sector.abs_diff(self.last_position) <= CLOSE_THR
    }

    /// Queue `id` takes over: the active queue expires keeping its
    /// leftover, `id` goes to the front of its tree with a fresh slice.
    pub(super) fn preempt_queue(&mut self, id: QueueId, now: Instant) {
        let old_type = self.active.map(|a| self.q(a).wl_type());
        self.expire_active(true, now);
        let (g, ty) = {
            let q = self.q(id);
            (q.group, q.wl_type())
        };
        if old_type != Some(ty) {
            self.groups[g].saved_workload = None;
        }
        debug_assert!(self.q(id).on_rr);
        self.service_tree_add(id, true, now);
        let q = self.qm(id);
        q.slice_end = Instant::ZERO;
        q.slice_new = true;
    }

    /// Whether to idle on queue `id` when it runs dry (`cfq_should_idle`).
    pub(super) fn should_idle(&self, id: QueueId) -> bool {
        let q = self.q(id);
        if self.conf.slice_idle == Duration::ZERO || q.class == WlClass::Idle {
            return false;
        }
        if q.idle_window && !self.ncq_flash() {
            return true;
        }
        // Otherwise only the last queue of its tree idles ("idle at the end
        // of the SYNC_NOIDLE tree"), if the tree's think time is short.
        let Some((ti, _, _)) = q.tree else {
            return false;
        };
        let st = &self.groups[q.group].trees[ti];
        st.count() == 1 && q.sync && !Self::thinktime_big(&st.ttime, self.conf.slice_idle)
    }

    /// Arm the idle timer on the active queue, now empty (`cfq_arm_slice_timer`).
    pub(super) fn arm_slice_timer(&mut self, now: Instant) {
        let Some(a) = self.active else { return };
        if self.ncq_flash() {
            return;
        }
        let mut group_idle = Duration::ZERO;
        if !self.should_idle(a) {
            if self.group_idle == Duration::ZERO {
                return;
            }
            group_idle = self.group_idle;
        }
        let q = self.q(a);
        if q.dispatched > 0 {
            return;
        }
        // The task has exited: nothing will come.
        let Some(ts) = self.active_task.and_then(|t| self.tasks.get(&t)) else {
            return;
        };
        // Think time longer than what is left of the slice: don't idle.
        if ts.ttime.valid() && q.slice_end.since(now).nanos() < ts.ttime.mean() {
            return;
        }
        if group_idle != Duration::ZERO && self.groups[q.group].nr_cfqq > 1 {
            return;
        }
        let wait = if group_idle == Duration::ZERO {
            self.conf.slice_idle
        } else {
            group_idle
        };
        self.qm(a).wait_request = true;
        self.idle_timer = Some(now + wait);
    }

    /// The idle timer fires (`cfq_idle_slice_timer`), run lazily at the
    /// first call after its time, with the time it was due: nothing else
    /// happened in between.
    pub(super) fn fire_idle_timer(&mut self, now: Instant) {
        let Some(at) = self.idle_timer else { return };
        if at > now {
            return;
        }
        self.idle_timer = None;
        let Some(a) = self.active else { return };
        let q = self.q(a);
        if q.must_dispatch {
            return;
        }
        if !self.slice_used(a, at) {
            if self.busy_queues == 0 || !q.sorted.is_empty() {
                return;
            }
            self.qm(a).deep = false;
        }
        self.expire_active(false, at);
    }

    /// Whether to extend the slice of a group's last queue to keep the
    /// group backlogged (`cfq_should_wait_busy`).
    pub(super) fn should_wait_busy(&self, id: QueueId, now: Instant) -> bool {
        let q = self.q(id);
        let g = &self.groups[q.group];
        if !q.sorted.is_empty() || g.nr_cfqq > 1 {
            return false;
        }
        if Self::thinktime_big(&g.ttime, self.group_idle) {
            return false;
        }
        if self.slice_used(id, now) {
            return true;
        }
        let left = q.slice_end.since(now);
        if let Some(ts) = self.active_task.and_then(|t| self.tasks.get(&t)) {
            if ts.ttime.valid() && left.nanos() < ts.ttime.mean() {
                return true;
            }
        }
        left <= JIFFY
    }
}
