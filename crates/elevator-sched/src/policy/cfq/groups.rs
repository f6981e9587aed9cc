//! Control groups: the group service tree keyed by weighted virtual disk time
//! (`cfq_group_service_tree_add`, `cfq_group_served`), group slices and
//! the busy-queue counts they are computed from.

use super::*;

impl Cfq {
    /// Busy queues of `class` in group `g`.
    pub(super) fn busy_wl(&self, g: usize, class: WlClass) -> u32 {
        let t = &self.groups[g].trees;
        match class {
            WlClass::Idle => t[IDLE_TREE].count(),
            c => WL_TYPES
                .iter()
                .map(|&ty| t[tree_index(c, ty)].count())
                .sum(),
        }
    }

    pub(super) fn busy_async(&self, g: usize) -> u32 {
        let t = &self.groups[g].trees;
        t[tree_index(WlClass::Rt, WlType::Async)].count()
            + t[tree_index(WlClass::Be, WlType::Async)].count()
    }

    /// Averaged busy queues of a class: rises at once, decays slowly.
    pub(super) fn group_avg_queues(&mut self, g: usize, class: WlClass) -> u32 {
        let busy = self.busy_wl(g, class);
        let avg = &mut self.groups[g].busy_queues_avg[class as usize];
        let (lo, hi) = ((*avg).min(busy), (*avg).max(busy));
        *avg = ((HIST_DIVISOR - 1) * hi + lo + HIST_DIVISOR / 2) / HIST_DIVISOR;
        *avg
    }

    /// `target_latency` times the group's share.
    pub(super) fn group_slice(&self, g: usize) -> Duration {
        Duration((self.target_latency.nanos() * self.groups[g].vfraction) >> SERVICE_SHIFT)
    }

    pub(super) fn group_idx(&mut self, id: GroupId) -> usize {
        if let Some(&i) = self.group_index.get(&id) {
            return i;
        }
        let (parent, weight) = self
            .group_conf
            .get(&id)
            .copied()
            .unwrap_or((Some(GroupId::ROOT), GROUP_WEIGHT_DEFAULT));
        let parent = parent.map(|p| self.group_idx(p));
        let idx = self.groups.len();
        self.groups.push(CfqGroup::new(parent, weight));
        self.group_index.insert(id, idx);
        idx
    }

    /// Put group `g` on the group tree and work out its share (3.x
    /// `cfq_group_service_tree_add`): activate it and its ancestors, then
    /// compound leaf_weight/children_weight and weight/parent's
    /// children_weight up to the root.
    pub(super) fn group_tree_add(&mut self, g: usize) {
        let seq = self.next_seq();
        let key = (self.groups[g].vdisktime, seq);
        self.group_tree.insert((key.0, key.1, g));
        self.groups[g].tree_key = Some(key);

        let mut vfr: u64 = 1 << SERVICE_SHIFT;
        let mut propagate = self.groups[g].nr_active == 0;
        self.groups[g].nr_active += 1;
        self.groups[g].children_weight += u64::from(self.groups[g].leaf_weight);
        vfr = vfr * u64::from(self.groups[g].leaf_weight) / self.groups[g].children_weight;
        let mut pos = g;
        while let Some(parent) = self.groups[pos].parent {
            let w = u64::from(self.groups[pos].weight);
            if propagate {
                propagate = self.groups[parent].nr_active == 0;
                self.groups[parent].nr_active += 1;
                self.groups[parent].children_weight += w;
            }
            vfr = vfr * w / self.groups[parent].children_weight;
            pos = parent;
        }
        self.groups[g].vfraction = vfr.max(1);
    }

    /// Undo `group_tree_add`.
    pub(super) fn group_tree_del(&mut self, g: usize) {
        if let Some((k, s)) = self.groups[g].tree_key.take() {
            self.group_tree.remove(&(k, s, g));
        }
        self.groups[g].nr_active -= 1;
        let mut propagate = self.groups[g].nr_active == 0;
        self.groups[g].children_weight -= u64::from(self.groups[g].leaf_weight);
        let mut pos = g;
        while propagate {
            self.groups[pos].vfraction = 0;
            let Some(parent) = self.groups[pos].parent else {
                break;
            };
            self.groups[parent].nr_active -= 1;
            propagate = self.groups[parent].nr_active == 0;
            self.groups[parent].children_weight -= u64::from(self.groups[pos].weight);
            pos = parent;
        }
    }

    pub(super) fn group_notify_queue_add(&mut self, g: usize) {
        self.groups[g].nr_cfqq += 1;
        if self.groups[g].tree_key.is_some() {
            return;
        }
        // A group becoming busy goes to the back of the group tree.
        self.groups[g].vdisktime = match self.group_tree.iter().next_back() {
            Some(&(v, _, _)) => v + IDLE_DELAY.nanos(),
            None => self.min_vdisktime,
        };
        self.group_tree_add(g);
    }

    pub(super) fn group_notify_queue_del(&mut self, g: usize) {
        self.groups[g].nr_cfqq -= 1;
        if self.groups[g].nr_cfqq > 0 {
            return;
        }
        self.group_tree_del(g);
        self.groups[g].saved_workload = None;
    }

    /// Disk time queue `id` used in its slice.
    pub(super) fn slice_usage(&self, id: QueueId, now: Instant) -> Duration {
        let q = self.q(id);
        match q.slice_start {
            // Expired before (or just at) its first completion: charge the
            // time since its first dispatch, so seeks are not free.
            Some(start) if now.since(start) >= JIFFY => now.since(start).min(q.allocated_slice),
            _ => now.since(q.dispatch_start).max(JIFFY),
        }
    }

    /// Add `charge` of disk time to group `g`'s vdisktime, scaled by its
    /// share, if it is on the group tree (a group off it is placed anew
    /// when it next gets busy).
    pub(super) fn charge_group(&mut self, g: usize, charge: Duration) {
        if self.groups[g].tree_key.is_some() {
            let vfr = self.groups[g].vfraction.max(1);
            self.group_tree_del(g);
            self.groups[g].vdisktime += (charge.nanos() << SERVICE_SHIFT) / vfr;
            self.group_tree_add(g);
        }
    }

    /// Charge group `g` for the slice queue `id` just ended.
    pub(super) fn group_served(&mut self, g: usize, id: QueueId, now: Instant) {
        let nr_sync = i64::from(self.groups[g].nr_cfqq)
            - i64::from(self.busy_async(g))
            - i64::from(self.groups[g].trees[IDLE_TREE].count());
        debug_assert!(nr_sync >= 0);
        let mut charge = self.slice_usage(id, now);
        let iops_mode = self.iops_mode();
        let open = self.charge_in_flight && !iops_mode;
        let q = self.qm(id);
        if iops_mode {
            charge = JIFFY.mul(u64::from(q.slice_dispatch));
        } else if !q.sync && nr_sync == 0 {
            charge = q.allocated_slice;
        } else if open && q.slice_start.is_none() && q.dispatched > 0 {
            // `cfq-v10`: charged when its reads complete (`complete`),
            // from the first selection still uncharged.
            q.charge_from.get_or_insert(q.dispatch_start);
            charge = Duration::ZERO;
        }
        self.charge_group(g, charge);
        // Remember the workload state the group was in.
        self.groups[g].saved_workload = match self.workload_expires {
            Some(e) if e > now => Some((e.since(now), self.serving_class, self.serving_type)),
            _ => None,
        };
    }
}
