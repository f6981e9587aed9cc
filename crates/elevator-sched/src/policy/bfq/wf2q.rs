//! B-WF2Q+: the hierarchical budget scheduler under BFQ.
//!
//! After block/bfq-wf2q.c (Linux 4.12 – 6.x) and Valente & Checconi, "High
//! throughput disk scheduling with fair bandwidth distribution" (IEEE ToC
//! 2010), which build on Bennett & Zhang's WF2Q+ and the augmented tree of
//! Stoica & Abdel-Wahab's EEVDF report.
//!
//! Entities are queues (leaves) and groups (inner nodes). Every group,
//! the root included, owns a [`SchedData`] with one [`ServiceTree`] per
//! class (RT, BE, IDLE). A service tree keeps
//! - its *virtual time* `vtime`, which advances by `Δ(s, wsum)` when `s`
//!   sectors are served below it, with `Δ(s, w) = (s << 22) / w`;
//! - `wsum`, the weight of every entity it holds (active, idle or in
//!   service);
//! - the *active tree*: backlogged entities ordered by virtual finish time,
//!   each node augmented with the minimum virtual start of its subtree, so
//!   that the eligible entity (`start <= vtime`) with the smallest finish
//!   is found in O(log n) ([`first_eligible`]);
//! - the *idle tree*: entities that emptied while their finish was still
//!   ahead of `vtime`. They keep their weight in `wsum` (so a queue that
//!   empties for a moment cannot reset its timestamps and jump the line)
//!   until `vtime` passes their finish.
//!
//! Selection walks from the root: at each level the classes are tried in
//! strict order RT, BE, IDLE, except that the IDLE class goes first when it
//! has not been looked at for [`CLASS_IDLE_TIMEOUT`] (the kernel's
//! `BFQ_CL_IDLE_TIMEOUT`, HZ/5). The entities on the path are taken out of
//! their active trees while in service and put back (requeued) or parked
//! (idle tree) when the leaf's service slot ends.
//!
//! Invariants (checked by `check`, which BFQ's `check_invariants` runs):
//! - an entity is in at most one place: an active tree, an idle tree, or
//!   in service; `on_st` is true exactly in those places;
//! - `wsum` of a tree equals the sum of the weights of the entities it holds;
//! - every active-tree node's `min_start` is the minimum start of its subtree;
//! - a group entity is active or in service iff some child is.

use elevator_core::{Duration, Instant};
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// Index of an entity in the arena.
pub(super) type EntityId = u32;
/// Index of a group's scheduling data; 0 is the root group.
pub(super) type SchedId = u32;

/// No entity.
pub(super) const NIL: u32 = u32::MAX;
/// The root group's scheduling data.
pub(super) const ROOT: SchedId = 0;

/// Shift of the service-to-virtual-time map (`WFQ_SERVICE_SHIFT`, bfq-wf2q.c).
pub(super) const WFQ_SERVICE_SHIFT: u32 = 22;

/// The IDLE class is served when it waited this long (`BFQ_CL_IDLE_TIMEOUT`,
/// HZ/5 in bfq-iosched.h).
pub(super) const CLASS_IDLE_TIMEOUT: Duration = Duration::from_millis(200);

/// The scheduling classes, in service order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Class {
    Rt = 0,
    Be = 1,
    Idle = 2,
}

impl Class {
    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// `Δ(service, weight)`: service mapped into virtual time.
pub(super) fn delta(service: u64, weight: u64) -> u64 {
    (service << WFQ_SERVICE_SHIFT) / weight.max(1)
}

/// Where an entity is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    /// Not scheduled (never activated, or forgotten).
    Off,
    Active,
    Idle,
    InService,
}

/// A schedulable entity: a queue or a group.
#[derive(Clone, Debug)]
pub(super) struct Entity {
    /// Effective weight (the queue's weight times its raising coefficient).
    pub weight: u64,
    /// Sectors it may receive in its next service slot.
    pub budget: u64,
    /// Sectors received in the current slot.
    pub service: u64,
    pub start: u64,
    pub finish: u64,
    /// The scheduling data it is scheduled in.
    pub parent: SchedId,
    pub class: Class,
    /// For a group entity, the scheduling data it owns; `NIL` for a queue.
    pub owns: SchedId,
    pub place: Place,
    // Active-tree links.
    seq: u64,
    left: EntityId,
    right: EntityId,
    height: u8,
    min_start: u64,
}

impl Entity {
    pub(super) fn new(parent: SchedId, class: Class, weight: u64, owns: SchedId) -> Self {
        Entity {
            weight,
            budget: 0,
            service: 0,
            start: 0,
            finish: 0,
            parent,
            class,
            owns,
            place: Place::Off,
            seq: 0,
            left: NIL,
            right: NIL,
            height: 0,
            min_start: 0,
        }
    }

    pub(super) fn on_st(&self) -> bool {
        self.place != Place::Off
    }

    fn key(&self) -> (u64, u64) {
        (self.finish, self.seq)
    }
}

// ---------------------------------------------------------------------------
// The augmented tree: an AVL tree over the entity arena, ordered by
// (finish, insertion sequence) so that equal finish times are served in
// arrival order, each node carrying the minimum start of its subtree.
// ---------------------------------------------------------------------------

fn height(es: &[Entity], n: EntityId) -> u8 {
    if n == NIL {
        0
    } else {
        es[n as usize].height
    }
}

fn fix(es: &mut [Entity], n: EntityId) {
    let (l, r) = (es[n as usize].left, es[n as usize].right);
    let mut min_start = es[n as usize].start;
    if l != NIL {
        min_start = min_start.min(es[l as usize].min_start);
    }
    if r != NIL {
        min_start = min_start.min(es[r as usize].min_start);
    }
    let h = 1 + height(es, l).max(height(es, r));
    let e = &mut es[n as usize];
    e.min_start = min_start;
    e.height = h;
}

fn rotate_right(es: &mut [Entity], n: EntityId) -> EntityId {
    let l = es[n as usize].left;
    es[n as usize].left = es[l as usize].right;
    es[l as usize].right = n;
    fix(es, n);
    fix(es, l);
    l
}

fn rotate_left(es: &mut [Entity], n: EntityId) -> EntityId {
    let r = es[n as usize].right;
    es[n as usize].right = es[r as usize].left;
    es[r as usize].left = n;
    fix(es, n);
    fix(es, r);
    r
}

fn rebalance(es: &mut [Entity], n: EntityId) -> EntityId {
    fix(es, n);
    let (l, r) = (es[n as usize].left, es[n as usize].right);
    let (hl, hr) = (height(es, l), height(es, r));
    if hl > hr + 1 {
        if height(es, es[l as usize].left) < height(es, es[l as usize].right) {
            es[n as usize].left = rotate_left(es, l);
        }
        rotate_right(es, n)
    } else if hr > hl + 1 {
        if height(es, es[r as usize].right) < height(es, es[r as usize].left) {
            es[n as usize].right = rotate_right(es, r);
        }
        rotate_left(es, n)
    } else {
        n
    }
}

/// Insert `id` (its start, finish and seq set) under `root`; returns the new root.
pub(super) fn tree_insert(es: &mut [Entity], root: EntityId, id: EntityId) -> EntityId {
    if root == NIL {
        let e = &mut es[id as usize];
        e.left = NIL;
        e.right = NIL;
        e.height = 1;
        e.min_start = e.start;
        return id;
    }
    if es[id as usize].key() < es[root as usize].key() {
        let l = es[root as usize].left;
        es[root as usize].left = tree_insert(es, l, id);
    } else {
        let r = es[root as usize].right;
        es[root as usize].right = tree_insert(es, r, id);
    }
    rebalance(es, root)
}

/// Detach the leftmost node of `root`; returns (new root, detached node).
fn take_min(es: &mut [Entity], root: EntityId) -> (EntityId, EntityId) {
    let l = es[root as usize].left;
    if l == NIL {
        return (es[root as usize].right, root);
    }
    let (nl, min) = take_min(es, l);
    es[root as usize].left = nl;
    (rebalance(es, root), min)
}

/// Remove `id` from the tree under `root`; returns the new root.
pub(super) fn tree_remove(es: &mut [Entity], root: EntityId, id: EntityId) -> EntityId {
    assert!(root != NIL, "entity {id} not in its active tree");
    if root == id {
        let (l, r) = (es[id as usize].left, es[id as usize].right);
        es[id as usize].left = NIL;
        es[id as usize].right = NIL;
        if l == NIL {
            return r;
        }
        if r == NIL {
            return l;
        }
        let (nr, m) = take_min(es, r);
        es[m as usize].left = l;
        es[m as usize].right = nr;
        return rebalance(es, m);
    }
    match es[id as usize].key().cmp(&es[root as usize].key()) {
        Ordering::Less => {
            let l = es[root as usize].left;
            es[root as usize].left = tree_remove(es, l, id);
        }
        _ => {
            let r = es[root as usize].right;
            es[root as usize].right = tree_remove(es, r, id);
        }
    }
    rebalance(es, root)
}

/// The eligible entity (`start <= vtime`) with the smallest finish, in
/// O(height). A subtree holds an eligible entity iff its `min_start <=
/// vtime`; everything in a node's left subtree finishes before the node,
/// and the node before its right subtree. So: go left while the left
/// subtree holds an eligible entity, else take the node if eligible, else
/// go right. (The kernel's `bfq_first_active_entity` stops at an eligible
/// ancestor once it has gone left, which can miss a smaller finish in the
/// right subtree of a left child; this walk is exact.)
pub(super) fn first_eligible(es: &[Entity], root: EntityId, vtime: u64) -> Option<EntityId> {
    if root == NIL || es[root as usize].min_start > vtime {
        return None;
    }
    let mut node = root;
    loop {
        let e = &es[node as usize];
        if e.left != NIL && es[e.left as usize].min_start <= vtime {
            node = e.left;
        } else if e.start <= vtime {
            return Some(node);
        } else {
            debug_assert!(e.right != NIL, "min_start promised an eligible entity");
            node = e.right;
        }
    }
}

// ---------------------------------------------------------------------------
// Service trees and the hierarchy.
// ---------------------------------------------------------------------------

/// One class's trees inside one group.
#[derive(Clone, Debug, Default)]
pub(super) struct ServiceTree {
    pub vtime: u64,
    pub wsum: u64,
    active: EntityId,
    active_len: u32,
    /// Idle entities by (finish, id).
    idle: BTreeSet<(u64, EntityId)>,
}

impl ServiceTree {
    fn new() -> Self {
        ServiceTree {
            active: NIL,
            ..ServiceTree::default()
        }
    }
}

/// A group's scheduling state (`bfq_sched_data`).
#[derive(Clone, Debug)]
pub(super) struct SchedData {
    pub trees: [ServiceTree; 3],
    /// Child in service, or NIL.
    pub in_service: EntityId,
    /// The group's own entity in its parent (NIL for the root).
    pub entity: EntityId,
    /// Children that are active or in service.
    pub active_children: u32,
    idle_class_last_service: Instant,
}

impl SchedData {
    fn new(entity: EntityId) -> Self {
        SchedData {
            trees: [ServiceTree::new(), ServiceTree::new(), ServiceTree::new()],
            in_service: NIL,
            entity,
            active_children: 0,
            idle_class_last_service: Instant::ZERO,
        }
    }
}

/// The whole B-WF2Q+ hierarchy.
#[derive(Clone, Debug)]
pub(super) struct Wf2q {
    pub es: Vec<Entity>,
    free_entities: Vec<EntityId>,
    pub sds: Vec<SchedData>,
    seq: u64,
}

impl Default for Wf2q {
    fn default() -> Self {
        Wf2q::new()
    }
}

impl Wf2q {
    pub(super) fn new() -> Self {
        Wf2q {
            es: Vec::new(),
            free_entities: Vec::new(),
            sds: vec![SchedData::new(NIL)],
            seq: 0,
        }
    }

    /// A new leaf (queue) entity in group `parent`.
    pub(super) fn new_queue_entity(
        &mut self,
        parent: SchedId,
        class: Class,
        weight: u64,
    ) -> EntityId {
        self.alloc(Entity::new(parent, class, weight, NIL))
    }

    /// A new group under `parent` with `weight`: returns its scheduling data.
    pub(super) fn new_group(&mut self, parent: SchedId, weight: u64) -> SchedId {
        let sd = self.sds.len() as SchedId;
        let e = self.alloc(Entity::new(parent, Class::Be, weight, sd));
        self.sds.push(SchedData::new(e));
        sd
    }

    fn alloc(&mut self, e: Entity) -> EntityId {
        if let Some(id) = self.free_entities.pop() {
            self.es[id as usize] = e;
            id
        } else {
            self.es.push(e);
            (self.es.len() - 1) as EntityId
        }
    }

    /// Drop an unscheduled leaf entity; takes it off an idle tree first.
    pub(super) fn free_entity(&mut self, id: EntityId) {
        match self.es[id as usize].place {
            Place::Off => {}
            Place::Idle => {
                self.idle_extract(id);
                self.forget(id);
            }
            p => panic!("freeing entity {id} while {p:?}"),
        }
        self.free_entities.push(id);
    }

    pub(super) fn tree(&self, id: EntityId) -> &ServiceTree {
        let e = &self.es[id as usize];
        &self.sds[e.parent as usize].trees[e.class.index()]
    }

    fn tree_mut(&mut self, id: EntityId) -> &mut ServiceTree {
        let e = &self.es[id as usize];
        let (p, c) = (e.parent as usize, e.class.index());
        &mut self.sds[p].trees[c]
    }

    fn active_insert(&mut self, id: EntityId) {
        self.seq += 1;
        self.es[id as usize].seq = self.seq;
        self.es[id as usize].place = Place::Active;
        let e = &self.es[id as usize];
        let (p, c) = (e.parent as usize, e.class.index());
        let root = self.sds[p].trees[c].active;
        let root = tree_insert(&mut self.es, root, id);
        let st = &mut self.sds[p].trees[c];
        st.active = root;
        st.active_len += 1;
    }

    fn active_extract(&mut self, id: EntityId) {
        let e = &self.es[id as usize];
        debug_assert_eq!(e.place, Place::Active);
        let (p, c) = (e.parent as usize, e.class.index());
        let root = self.sds[p].trees[c].active;
        let root = tree_remove(&mut self.es, root, id);
        let st = &mut self.sds[p].trees[c];
        st.active = root;
        st.active_len -= 1;
    }

    fn idle_insert(&mut self, id: EntityId) {
        let finish = self.es[id as usize].finish;
        self.es[id as usize].place = Place::Idle;
        self.tree_mut(id).idle.insert((finish, id));
    }

    fn idle_extract(&mut self, id: EntityId) {
        let finish = self.es[id as usize].finish;
        let removed = self.tree_mut(id).idle.remove(&(finish, id));
        debug_assert!(removed);
    }

    /// Stop accounting `id` in its tree (`bfq_forget_entity`).
    fn forget(&mut self, id: EntityId) {
        let w = self.es[id as usize].weight;
        self.es[id as usize].place = Place::Off;
        let st = self.tree_mut(id);
        st.wsum -= w;
    }

    /// Drop the idle entity with the smallest finish once `vtime` passed it
    /// (`bfq_forget_idle`: one per call keeps every operation O(log n)).
    fn forget_idle(&mut self, sd: SchedId, class: usize) {
        let st = &mut self.sds[sd as usize].trees[class];
        if st.active == NIL {
            if let Some(&(last, _)) = st.idle.last() {
                if last <= st.vtime {
                    st.vtime = last;
                }
            }
        }
        if let Some(&(first, id)) = st.idle.first() {
            if first <= st.vtime {
                st.idle.pop_first();
                self.forget(id);
            }
        }
    }

    /// Set the effective weight of `id`, keeping `wsum` right. Takes effect
    /// on its timestamps at the next (re)queue, as in the kernel.
    pub(super) fn set_weight(&mut self, id: EntityId, weight: u64) {
        let old = self.es[id as usize].weight;
        if old == weight {
            return;
        }
        if self.es[id as usize].on_st() {
            let st = self.tree_mut(id);
            st.wsum = st.wsum - old + weight;
        }
        self.es[id as usize].weight = weight;
    }

    /// Move an unscheduled entity to another class.
    pub(super) fn set_class(&mut self, id: EntityId, class: Class) {
        if self.es[id as usize].class == class {
            return;
        }
        if self.es[id as usize].place == Place::Idle {
            self.idle_extract(id);
            self.forget(id);
        }
        assert_eq!(
            self.es[id as usize].place,
            Place::Off,
            "class change of a scheduled entity"
        );
        self.es[id as usize].class = class;
    }

    /// The budget a group would carry: that of the child it would serve
    /// next (`bfq_update_parent_budget`), looked up without moving vtime.
    fn peek_budget(&self, sd: SchedId) -> u64 {
        for st in &self.sds[sd as usize].trees {
            if st.active == NIL {
                continue;
            }
            let vtime = st.vtime.max(self.es[st.active as usize].min_start);
            if let Some(id) = first_eligible(&self.es, st.active, vtime) {
                return self.es[id as usize].budget;
            }
        }
        0
    }

    /// Activate an entity that is off or idle (`__bfq_activate_entity`).
    /// `backshift` is the queue's raising coefficient when its old
    /// timestamps may be reused (it expired waiting for a request that came
    /// in time), else 0.
    fn activate_one(&mut self, id: EntityId, backshift: u64) {
        let vtime = self.tree(id).vtime;
        let e = &self.es[id as usize];
        let backshifted = backshift > 0 && vtime > e.finish;
        let min_vstart = if backshifted { e.finish } else { vtime };
        match e.place {
            Place::Idle => {
                self.idle_extract(id);
                let e = &mut self.es[id as usize];
                e.start = min_vstart.max(e.finish);
            }
            Place::Off => {
                let w = e.weight;
                self.tree_mut(id).wsum += w;
                self.es[id as usize].start = min_vstart;
            }
            p => panic!("activating entity {id} while {p:?}"),
        }
        let e = &mut self.es[id as usize];
        e.finish = e.start + delta(e.budget, e.weight);
        if backshifted && vtime > e.finish {
            // Push back-shifted stamps up to vtime, a raised queue less so.
            let d = (vtime - e.finish) / backshift;
            e.start += d;
            e.finish += d;
        }
        self.active_insert(id);
        let parent = self.es[id as usize].parent;
        self.sds[parent as usize].active_children += 1;
    }

    /// Recompute the finish of an active entity from its unchanged start
    /// after its budget changed (`__bfq_requeue_entity`, not in service).
    fn reposition_one(&mut self, id: EntityId) {
        self.active_extract(id);
        let e = &mut self.es[id as usize];
        e.finish = e.start + delta(e.budget, e.weight);
        self.active_insert(id);
    }

    /// A leaf became backlogged: activate it, and its groups as needed.
    pub(super) fn activate(&mut self, leaf: EntityId, backshift: u64) {
        self.activate_one(leaf, backshift);
        self.propagate_up(self.es[leaf as usize].parent);
    }

    /// A leaf's budget changed while active and not in service.
    pub(super) fn reposition(&mut self, leaf: EntityId) {
        if self.es[leaf as usize].place == Place::Active {
            self.reposition_one(leaf);
            self.propagate_up(self.es[leaf as usize].parent);
        }
    }

    /// After a change inside group `sd`, activate or reposition the group
    /// entities above it.
    fn propagate_up(&mut self, mut sd: SchedId) {
        while sd != ROOT {
            let g = self.sds[sd as usize].entity;
            let budget = self.peek_budget(sd);
            match self.es[g as usize].place {
                Place::InService => return,
                Place::Active => {
                    if self.es[g as usize].budget == budget {
                        return;
                    }
                    self.es[g as usize].budget = budget;
                    self.reposition_one(g);
                }
                Place::Off | Place::Idle => {
                    self.es[g as usize].budget = budget;
                    self.activate_one(g, 0);
                }
            }
            sd = self.es[g as usize].parent;
        }
    }

    /// A leaf that is active (not in service) ran out of work.
    pub(super) fn deactivate(&mut self, leaf: EntityId) {
        debug_assert_eq!(self.es[leaf as usize].place, Place::Active);
        self.active_extract(leaf);
        self.park(leaf);
        let mut sd = self.es[leaf as usize].parent;
        self.sds[sd as usize].active_children -= 1;
        while sd != ROOT {
            let g = self.sds[sd as usize].entity;
            if self.es[g as usize].place != Place::Active {
                return; // in service: settled when the slot ends
            }
            if self.sds[sd as usize].active_children > 0 {
                let budget = self.peek_budget(sd);
                if self.es[g as usize].budget != budget {
                    self.es[g as usize].budget = budget;
                    self.reposition_one(g);
                }
                sd = self.es[g as usize].parent;
                continue;
            }
            self.active_extract(g);
            self.park(g);
            sd = self.es[g as usize].parent;
            self.sds[sd as usize].active_children -= 1;
        }
    }

    /// Put an entity that left service or its active tree on the idle tree
    /// if its finish is still ahead, else forget it.
    fn park(&mut self, id: EntityId) {
        if self.es[id as usize].finish > self.tree(id).vtime {
            self.idle_insert(id);
        } else {
            self.forget(id);
        }
    }

    /// The next entity of `sd` to serve, moving vtime so one is eligible
    /// (`bfq_lookup_next_entity` with nothing in service).
    fn lookup(&mut self, sd: SchedId, now: Instant) -> Option<EntityId> {
        let data = &mut self.sds[sd as usize];
        let mut first_class = 0;
        if now > data.idle_class_last_service + CLASS_IDLE_TIMEOUT {
            if data.trees[Class::Idle.index()].active != NIL {
                first_class = Class::Idle.index();
            }
            data.idle_class_last_service = now;
        }
        for c in (first_class..3).chain(0..first_class) {
            let st = &self.sds[sd as usize].trees[c];
            if st.active == NIL {
                continue;
            }
            let root_min = self.es[st.active as usize].min_start;
            if root_min > st.vtime {
                self.sds[sd as usize].trees[c].vtime = root_min;
                self.forget_idle(sd, c);
            }
            let st = &self.sds[sd as usize].trees[c];
            let id = first_eligible(&self.es, st.active, st.vtime);
            debug_assert!(id.is_some(), "vtime jump left nothing eligible");
            if id.is_some() {
                return id;
            }
        }
        None
    }

    /// Choose the next leaf and set the path to it in service
    /// (`bfq_get_next_queue`). Nothing may be in service.
    pub(super) fn select(&mut self, now: Instant) -> Option<EntityId> {
        let mut sd = ROOT;
        loop {
            debug_assert_eq!(self.sds[sd as usize].in_service, NIL);
            let id = self.lookup(sd, now)?;
            self.active_extract(id);
            let e = &mut self.es[id as usize];
            e.place = Place::InService;
            e.service = 0;
            self.sds[sd as usize].in_service = id;
            let owns = self.es[id as usize].owns;
            if owns == NIL {
                return Some(id);
            }
            sd = owns;
        }
    }

    /// Charge `served` sectors to the in-service leaf and its groups
    /// (`bfq_bfqq_served`).
    pub(super) fn served(&mut self, leaf: EntityId, served: u64) {
        let mut id = leaf;
        while id != NIL {
            self.es[id as usize].service += served;
            let (sd, c) = {
                let e = &self.es[id as usize];
                (e.parent, e.class.index())
            };
            let st = &mut self.sds[sd as usize].trees[c];
            st.vtime += delta(served, st.wsum);
            self.forget_idle(sd, c);
            id = self.sds[sd as usize].entity;
        }
    }

    /// End the in-service leaf's slot: requeue it (it stays backlogged) or
    /// park it, then settle every group on the path. The leaf keeps its
    /// `service`.
    pub(super) fn expire(&mut self, leaf: EntityId, requeue: bool) {
        debug_assert_eq!(self.es[leaf as usize].place, Place::InService);
        let mut id = leaf;
        let mut keep = requeue;
        loop {
            let sd = self.es[id as usize].parent;
            self.sds[sd as usize].in_service = NIL;
            {
                let e = &mut self.es[id as usize];
                e.finish = e.start + delta(e.service, e.weight);
            }
            if keep {
                let owns = self.es[id as usize].owns;
                if owns != NIL {
                    self.es[id as usize].budget = self.peek_budget(owns);
                }
                let e = &mut self.es[id as usize];
                e.start = e.finish;
                e.finish = e.start + delta(e.budget, e.weight);
                self.active_insert(id);
            } else {
                self.park(id);
                self.sds[sd as usize].active_children -= 1;
            }
            // A leaf's service is the caller's to keep (a queue that may
            // resume its budget) or clear; a group's restarts at zero.
            if id != leaf {
                self.es[id as usize].service = 0;
            }
            if sd == ROOT {
                return;
            }
            id = self.sds[sd as usize].entity;
            keep = self.sds[sd as usize].active_children > 0;
        }
    }

    /// Reattach a group (its entity off every tree) under another parent.
    pub(super) fn reparent_group(&mut self, sd: SchedId, parent: SchedId) {
        let g = self.sds[sd as usize].entity;
        if self.es[g as usize].place == Place::Idle {
            self.idle_extract(g);
            self.forget(g);
        }
        assert_eq!(
            self.es[g as usize].place,
            Place::Off,
            "reparenting an active group"
        );
        self.es[g as usize].parent = parent;
    }

    /// Check every invariant listed in the module docs: weight sums and
    /// active counts per tree, AVL balance, order and `min_start` of every
    /// active tree, idle entities in their idle tree, and a group active
    /// exactly when it has active children. O(entities).
    pub(super) fn check(&self) -> Result<(), String> {
        let mut wsum = vec![[0u64; 3]; self.sds.len()];
        let mut active = vec![0u32; self.sds.len()];
        let mut free = vec![false; self.es.len()];
        for &f in &self.free_entities {
            free[f as usize] = true;
        }
        for (i, e) in self.es.iter().enumerate() {
            if free[i] || !e.on_st() {
                continue;
            }
            wsum[e.parent as usize][e.class.index()] += e.weight;
            if matches!(e.place, Place::Active | Place::InService) {
                active[e.parent as usize] += 1;
            }
            if e.place == Place::Idle && !self.tree(i as u32).idle.contains(&(e.finish, i as u32)) {
                return Err(format!("idle entity {i} is not in its idle tree"));
            }
        }
        for (s, sd) in self.sds.iter().enumerate() {
            if sd.active_children != active[s] {
                return Err(format!(
                    "group {s} counts {} active children, {} are active",
                    sd.active_children, active[s]
                ));
            }
            for (c, st) in sd.trees.iter().enumerate() {
                if st.wsum != wsum[s][c] {
                    return Err(format!(
                        "weight sum of group {s} class {c} is {}, its entities weigh {}",
                        st.wsum, wsum[s][c]
                    ));
                }
                let mut n = 0;
                check_subtree(&self.es, st.active, &mut n)?;
                if n != st.active_len {
                    return Err(format!(
                        "active tree of group {s} class {c} holds {n} entities, counted {}",
                        st.active_len
                    ));
                }
            }
            if s != ROOT as usize {
                let g = &self.es[sd.entity as usize];
                let busy = matches!(g.place, Place::Active | Place::InService);
                if busy != (sd.active_children > 0) {
                    return Err(format!(
                        "group {s} is {:?} with {} active children",
                        g.place, sd.active_children
                    ));
                }
            }
        }
        Ok(())
    }

    /// [`Wf2q::check`], panicking (tests).
    #[cfg(test)]
    pub(super) fn debug_check(&self) {
        if let Err(e) = self.check() {
            panic!("B-WF2Q+ invariant: {e}");
        }
    }
}

/// Check AVL balance, order and `min_start` of a subtree; count its nodes;
/// return its height and smallest start.
fn check_subtree(es: &[Entity], n: EntityId, count: &mut u32) -> Result<(u8, u64), String> {
    if n == NIL {
        return Ok((0, u64::MAX));
    }
    *count += 1;
    let e = &es[n as usize];
    if e.place != Place::Active {
        return Err(format!("entity {n} is in an active tree as {:?}", e.place));
    }
    let (hl, ml) = check_subtree(es, e.left, count)?;
    let (hr, mr) = check_subtree(es, e.right, count)?;
    if e.left != NIL && es[e.left as usize].key() >= e.key() {
        return Err(format!("entity {n}: left child {} out of order", e.left));
    }
    if e.right != NIL && es[e.right as usize].key() <= e.key() {
        return Err(format!("entity {n}: right child {} out of order", e.right));
    }
    if hl.abs_diff(hr) > 1 {
        return Err(format!("entity {n}: unbalanced ({hl} vs {hr})"));
    }
    if e.height != 1 + hl.max(hr) {
        return Err(format!(
            "entity {n}: height {} should be {}",
            e.height,
            1 + hl.max(hr)
        ));
    }
    let m = e.start.min(ml).min(mr);
    if e.min_start != m {
        return Err(format!(
            "entity {n}: min_start {} should be {m}",
            e.min_start
        ));
    }
    Ok((e.height, m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn leaf(start: u64, finish: u64) -> Entity {
        let mut e = Entity::new(ROOT, Class::Be, 1, NIL);
        e.start = start;
        e.finish = finish;
        e.place = Place::Active;
        e
    }

    #[test]
    fn eligibility_picks_smallest_finish_among_started() {
        // (start, finish): the smallest finish (id 0) is not yet eligible.
        let mut es = vec![leaf(50, 60), leaf(10, 80), leaf(0, 90), leaf(5, 70)];
        let mut root = NIL;
        for (i, e) in es.iter_mut().enumerate() {
            e.seq = i as u64;
        }
        for i in 0..4 {
            root = tree_insert(&mut es, root, i);
        }
        assert_eq!(first_eligible(&es, root, 4), Some(2));
        assert_eq!(first_eligible(&es, root, 5), Some(3));
        assert_eq!(first_eligible(&es, root, 10), Some(3));
        assert_eq!(first_eligible(&es, root, 50), Some(0));
        root = tree_remove(&mut es, root, 3);
        assert_eq!(first_eligible(&es, root, 10), Some(1));
        let mut n = 0;
        check_subtree(&es, root, &mut n).expect("a valid tree");
        assert_eq!(n, 3);
    }

    proptest! {
        /// The augmented tree answers like a linear scan after any mix of
        /// inserts and removes, and stays balanced (height <= 1.44 log2 n + 2).
        #[test]
        fn augmented_tree_matches_brute_force(
            ops in proptest::collection::vec((0u64..200, 0u64..100, any::<bool>(), 0u64..300), 1..300)
        ) {
            let mut es: Vec<Entity> = Vec::new();
            let mut root = NIL;
            let mut live: Vec<u32> = Vec::new();
            for (seq, (start, len, remove, vtime)) in ops.into_iter().enumerate() {
                if remove && !live.is_empty() {
                    let victim = live.remove((start as usize) % live.len());
                    root = tree_remove(&mut es, root, victim);
                } else {
                    let mut e = leaf(start, start + len);
                    e.seq = seq as u64;
                    es.push(e);
                    let id = (es.len() - 1) as u32;
                    root = tree_insert(&mut es, root, id);
                    live.push(id);
                }
                let mut n = 0;
                check_subtree(&es, root, &mut n).expect("a valid tree");
                prop_assert_eq!(n as usize, live.len());
                let brute = live
                    .iter()
                    .copied()
                    .filter(|&i| es[i as usize].start <= vtime)
                    .min_by_key(|&i| es[i as usize].key());
                prop_assert_eq!(first_eligible(&es, root, vtime), brute);
                let bound = 1.45 * ((live.len() + 2) as f64).log2() + 1.0;
                prop_assert!(f64::from(height(&es, root)) <= bound);
            }
        }
    }

    fn wf() -> Wf2q {
        Wf2q::new()
    }

    /// Serve `leaf` for `sectors` and end its slot.
    fn serve(w: &mut Wf2q, now: Instant, sectors: u64, still_busy: bool) -> EntityId {
        let leaf = w.select(now).expect("something to serve");
        w.served(leaf, sectors);
        w.expire(leaf, still_busy);
        w.debug_check();
        leaf
    }

    #[test]
    fn service_follows_weights() {
        let mut w = wf();
        let a = w.new_queue_entity(ROOT, Class::Be, 100);
        let b = w.new_queue_entity(ROOT, Class::Be, 300);
        for &q in &[a, b] {
            w.es[q as usize].budget = 1000;
            w.activate(q, 0);
        }
        let mut got = [0u64; 2];
        for _ in 0..400 {
            let q = serve(&mut w, Instant::ZERO, 1000, true);
            got[(q == b) as usize] += 1000;
        }
        let ratio = got[1] as f64 / got[0] as f64;
        assert!((ratio - 3.0).abs() < 0.05, "ratio {ratio}");
    }

    #[test]
    fn classes_are_strict_but_idle_gets_a_turn_after_its_timeout() {
        let mut w = wf();
        let rt = w.new_queue_entity(ROOT, Class::Rt, 10);
        let be = w.new_queue_entity(ROOT, Class::Be, 1000);
        let idle = w.new_queue_entity(ROOT, Class::Idle, 1000);
        for &q in &[rt, be, idle] {
            w.es[q as usize].budget = 100;
            w.activate(q, 0);
        }
        let mut now = Instant::ZERO + Duration::from_millis(1);
        for _ in 0..10 {
            now += Duration::from_millis(10);
            assert_eq!(serve(&mut w, now, 100, true), rt);
        }
        now += Duration::from_millis(200);
        assert_eq!(serve(&mut w, now, 100, true), idle);
        now += Duration::from_millis(1);
        assert_eq!(serve(&mut w, now, 100, false), rt);
        assert_eq!(serve(&mut w, now, 100, true), be);
    }

    #[test]
    fn idle_entities_keep_their_place_until_vtime_passes_them() {
        let mut w = wf();
        let a = w.new_queue_entity(ROOT, Class::Be, 100);
        let b = w.new_queue_entity(ROOT, Class::Be, 100);
        for &q in &[a, b] {
            w.es[q as usize].budget = 1000;
            w.activate(q, 0);
        }
        // a is served and empties: it goes to the idle tree with its finish.
        let first = serve(&mut w, Instant::ZERO, 1000, false);
        assert_eq!(w.es[first as usize].place, Place::Idle);
        let f = w.es[first as usize].finish;
        // Reactivated at once, it starts at its old finish, not at vtime.
        w.activate(first, 0);
        assert_eq!(w.es[first as usize].start, f);
        w.debug_check();
        // The other one is served next.
        let second = serve(&mut w, Instant::ZERO, 1000, true);
        assert_ne!(first, second);
    }

    #[test]
    fn groups_share_by_group_weight_then_by_queue_weight() {
        let mut w = wf();
        let g1 = w.new_group(ROOT, 100);
        let g2 = w.new_group(ROOT, 300);
        // Three queues in g1, one in g2: g2's single queue still gets 3/4.
        let qs1: Vec<_> = (0..3)
            .map(|_| w.new_queue_entity(g1, Class::Be, 100))
            .collect();
        let q2 = w.new_queue_entity(g2, Class::Be, 100);
        for &q in qs1.iter().chain([q2].iter()) {
            w.es[q as usize].budget = 500;
            w.activate(q, 0);
        }
        w.debug_check();
        let mut in_g2 = 0u64;
        let mut total = 0u64;
        for _ in 0..800 {
            let q = serve(&mut w, Instant::ZERO, 500, true);
            total += 500;
            if q == q2 {
                in_g2 += 500;
            }
        }
        let share = in_g2 as f64 / total as f64;
        assert!((share - 0.75).abs() < 0.02, "share {share}");
    }

    #[test]
    fn a_group_goes_idle_with_its_last_queue() {
        let mut w = wf();
        let g = w.new_group(ROOT, 100);
        let q = w.new_queue_entity(g, Class::Be, 100);
        let r = w.new_queue_entity(ROOT, Class::Be, 100);
        for &x in &[q, r] {
            w.es[x as usize].budget = 100;
            w.activate(x, 0);
        }
        let gid = w.sds[g as usize].entity;
        assert_eq!(w.es[gid as usize].place, Place::Active);
        w.deactivate(q);
        w.debug_check();
        assert!(matches!(w.es[gid as usize].place, Place::Idle | Place::Off));
        assert_eq!(serve(&mut w, Instant::ZERO, 100, false), r);
        assert!(w.select(Instant::ZERO).is_none());
    }
}
