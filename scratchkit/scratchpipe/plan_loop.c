/* ScratchPipe's Plan for one table, as a C++ loop: what scratchpipe/plan.py's TablePlanner does,
 * decision for decision (the tests hold the two equal, plan by plan), about 15x faster.
 *
 * Why. On a GPU server the planner must keep up with Train: for the embedding-bound profile
 * (655k lookups a step, 450k distinct rows) an H100 trains a batch in about 2.4 ms, and NumPy plans
 * it in about 100 ms on one core. This loop plans one table per call and releases Python's lock
 * while it runs (ctypes), so the tables of a batch are planned on as many cores at once.
 *
 * State (one Planner per table, for one train() call):
 *   slot_of[num_rows]    id -> slot it will hold, -1      slot_ids[capacity]  slot -> id, -1 = free
 *   dirty[capacity]      dirty by the time the plan runs  holds[capacity]     batches in flight using it
 *   last_trained[cap]    LRU clock                        evicted_by[num_rows] batch whose write-back
 *                                                                              returns the id, -1
 * Batches are *seen* in order (their working set read, and their occurrences queued per id), then
 * planned in order, then retired (Train done: dirty, clocked, released). A seen batch lives in a
 * ring of R slots (R > depth + horizon + 1). For each id, a FIFO of its seen occurrences that are
 * not planned yet: head[id], tail[id] (ring slot and position, packed), next_occ per occurrence.
 * So an id's next use after the batch being planned is its FIFO's head: O(1), with no array over
 * all rows to fill per batch (NumPy's NextUses fills one). And `next_use[slot]` keeps, for each
 * resident id, the batch of its FIFO's head, updated wherever a head changes, so the victim
 * search reads arrays by slot, in order: no random access per candidate (a memory access out of
 * the cache costs ~100 ns, and there are ~100k candidates a table a batch).
 */
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace {

const int64_t NONE = std::numeric_limits<int64_t>::max();   // no seen use ahead
const int64_t POS_BITS = 26;                      // positions < 2^26 lookups a batch
inline int32_t pack(int64_t r, int64_t pos) { return (int32_t)((r << POS_BITS) | pos); }
inline int64_t ring_of(int32_t occ) { return occ >> POS_BITS; }
inline int64_t pos_of(int32_t occ) { return occ & ((1 << POS_BITS) - 1); }

struct Seen {                                     // one batch in the ring
    int64_t batch = -1;
    std::vector<int64_t> unique, inverse, slots;  // sorted working set; lookup -> position; decisions
    std::vector<int32_t> next_occ;                // per position: the id's next occurrence, -1
};

struct Planner {
    int64_t num_rows, capacity, ring, holds_on, furthest, record_held, used = 0;
    int64_t *slot_of, *slot_ids, *last_trained, *evicted_by;
    uint8_t *dirty; int32_t *holds;
    std::vector<int32_t> head, tail;              // [num_rows]
    std::vector<int64_t> next_use;                // [capacity] batch of the resident id's head
    std::vector<uint8_t> mark;                    // [num_rows] working-set scratch
    std::vector<int64_t> where;                   // [num_rows] position scratch
    std::vector<uint8_t> in_batch;                // [capacity] this batch's hit slots
    std::vector<Seen> seen;
};

inline int64_t head_batch(const Planner *p, int64_t id) {
    return p->head[id] >= 0 ? p->seen[ring_of(p->head[id])].batch : NONE;
}

struct Candidate { int64_t level, clock, slot; };   // victims: least (level, clock, slot) first
inline bool before(const Candidate &a, const Candidate &b) {
    if (a.level != b.level) return a.level < b.level;
    if (a.clock != b.clock) return a.clock < b.clock;
    return a.slot < b.slot;
}

// The sorted distinct ids of a batch, and each lookup's position among them (np.unique's).
void working_set(Planner *p, const int64_t *ids, int64_t n, Seen &s) {
    s.unique.clear();
    s.inverse.resize(n);
    if (p->num_rows <= 64 * n) {                  // a small table next to the batch: mark, scan
        for (int64_t i = 0; i < n; ++i) p->mark[ids[i]] = 1;
        for (int64_t id = 0; id < p->num_rows; ++id)
            if (p->mark[id]) { p->mark[id] = 0; p->where[id] = (int64_t)s.unique.size(); s.unique.push_back(id); }
    } else {                                      // a large one: sort
        s.unique.assign(ids, ids + n);
        std::sort(s.unique.begin(), s.unique.end());
        s.unique.erase(std::unique(s.unique.begin(), s.unique.end()), s.unique.end());
        for (int64_t k = 0; k < (int64_t)s.unique.size(); ++k) p->where[s.unique[k]] = k;
    }
    for (int64_t i = 0; i < n; ++i) s.inverse[i] = p->where[ids[i]];
}

}  // namespace

extern "C" {

void *sk_plan_new(int64_t num_rows, int64_t capacity, int64_t ring, int64_t holds_on, int64_t furthest,
                  int64_t record_held, int64_t *slot_of, int64_t *slot_ids, uint8_t *dirty,
                  int32_t *holds, int64_t *last_trained, int64_t *evicted_by) {
    Planner *p = new Planner();
    p->num_rows = num_rows; p->capacity = capacity; p->ring = ring; p->holds_on = holds_on;
    p->furthest = furthest; p->record_held = record_held;
    p->slot_of = slot_of; p->slot_ids = slot_ids; p->dirty = dirty; p->holds = holds;
    p->last_trained = last_trained; p->evicted_by = evicted_by;
    p->head.assign(num_rows, -1); p->tail.assign(num_rows, -1);
    p->mark.assign(num_rows, 0); p->where.assign(num_rows, 0);
    p->in_batch.assign(capacity, 0);
    p->next_use.assign(capacity, NONE);
    p->seen.resize(ring);
    for (int64_t s = 0; s < capacity; ++s) p->used += slot_ids[s] >= 0;
    return p;
}

void sk_plan_free(void *handle) { delete static_cast<Planner *>(handle); }

// Batch k's ids [n] (k = the last seen + 1): its working set, and its occurrences queued per id.
// -> its number of distinct ids.
int64_t sk_plan_see(void *handle, int64_t k, const int64_t *ids, int64_t n) {
    Planner *p = static_cast<Planner *>(handle);
    const int64_t r = k % p->ring;
    Seen &s = p->seen[r];
    s.batch = k;
    working_set(p, ids, n, s);
    const int64_t u = (int64_t)s.unique.size();
    s.next_occ.assign(u, -1);
    for (int64_t pos = 0; pos < u; ++pos) {
        const int64_t id = s.unique[pos];
        const int32_t occ = pack(r, pos);
        if (p->tail[id] >= 0) {
            p->seen[ring_of(p->tail[id])].next_occ[pos_of(p->tail[id])] = occ;
        } else {
            p->head[id] = occ;
            if (p->slot_of[id] >= 0) p->next_use[p->slot_of[id]] = k;
        }
        p->tail[id] = occ;
    }
    return u;
}

// How many victims Plan(b) needs (misses beyond the free slots): 0 means no look-ahead is read.
int64_t sk_plan_shortfall(void *handle, int64_t b) {
    Planner *p = static_cast<Planner *>(handle);
    const Seen &s = p->seen[b % p->ring];
    int64_t misses = 0;
    for (int64_t id : s.unique) misses += p->slot_of[id] < 0;
    return misses - (p->capacity - p->used);
}

// Plan(b). Outputs (caller-sized: u, n, capacity): unique, slots, hit, lookup_slots, miss ids and
// slots (counts[1] of them), victims' ids, slots and dirtiness (counts[2]), held_before
// (counts[3]); counts[0] = u, counts[4] = the batch whose write-back Collect waits for (-1).
// `stop`: batches b+1 .. stop-1 are the look-ahead (seen). -> 0, or -1 if the unheld slots are too
// few for the victims needed (the capacity check should have refused the run).
int64_t sk_plan_batch(void *handle, int64_t b, int64_t stop, int64_t *unique, int64_t *slots,
                      uint8_t *hit, int64_t *lookup_slots, int64_t *miss_ids, int64_t *miss_slots,
                      int64_t *victim_ids, int64_t *victim_slots, uint8_t *victim_dirty,
                      int64_t *held_before, int64_t *counts) {
    Planner *p = static_cast<Planner *>(handle);
    Seen &s = p->seen[b % p->ring];
    const int64_t u = (int64_t)s.unique.size(), n = (int64_t)s.inverse.size();
    int64_t held = 0;
    if (p->record_held)
        for (int64_t slot = 0; slot < p->capacity; ++slot)
            if (p->holds[slot] > 0) held_before[held++] = slot;
    for (int64_t pos = 0; pos < u; ++pos) {        // planned now: off the FIFO of its id
        const int64_t id = s.unique[pos];
        p->head[id] = s.next_occ[pos];
        if (p->head[id] < 0) p->tail[id] = -1;
        if (p->slot_of[id] >= 0) p->next_use[p->slot_of[id]] = head_batch(p, id);
    }
    int64_t m = 0;
    for (int64_t pos = 0; pos < u; ++pos) {
        const int64_t id = s.unique[pos];
        unique[pos] = id;
        slots[pos] = p->slot_of[id];
        hit[pos] = slots[pos] >= 0;
        if (hit[pos]) p->in_batch[slots[pos]] = 1; else miss_ids[m++] = id;
    }
    const int64_t free_slots = p->capacity - p->used;
    int64_t v = m > free_slots ? m - free_slots : 0;
    if (v > 0) {                                   // victims: unheld, not this batch's, least first
        std::vector<Candidate> cand;
        const int64_t seen_ahead = stop - 1 - b;
        for (int64_t slot = 0; slot < p->capacity; ++slot) {
            const int64_t id = p->slot_ids[slot];
            if (id < 0 || p->in_batch[slot] || (p->holds_on && p->holds[slot] > 0)) continue;
            int64_t level = 0;                     // urgency: seen_ahead + 1 - k for a use in b+k
            if (p->furthest && p->next_use[slot] != NONE) {
                const int64_t k = p->next_use[slot] - b;
                if (k >= 1 && k <= seen_ahead) level = seen_ahead + 1 - k;
            }
            cand.push_back({level, p->last_trained[slot], slot});
        }
        if ((int64_t)cand.size() < v) {
            for (int64_t pos = 0; pos < u; ++pos) if (hit[pos]) p->in_batch[slots[pos]] = 0;
            counts[0] = (int64_t)cand.size(); counts[2] = v;
            return -1;
        }
        std::nth_element(cand.begin(), cand.begin() + (v - 1), cand.end(), before);
        for (int64_t i = 0; i < v; ++i) victim_slots[i] = cand[i].slot;
        std::sort(victim_slots, victim_slots + v);  // victims in slot order: the same on every engine
        for (int64_t i = 0; i < v; ++i) {           // evict
            const int64_t slot = victim_slots[i], id = p->slot_ids[slot];
            victim_ids[i] = id;
            victim_dirty[i] = p->dirty[slot];
            p->slot_of[id] = -1; p->slot_ids[slot] = -1; p->dirty[slot] = 0;
        }
        p->used -= v;
    }
    for (int64_t pos = 0; pos < u; ++pos) if (hit[pos]) p->in_batch[slots[pos]] = 0;
    int64_t given = 0;                             // the misses' slots: free ones, lowest first,
    for (int64_t slot = 0; given < m - v && slot < p->capacity; ++slot)   // then the victims'
        if (p->slot_ids[slot] < 0 && !std::binary_search(victim_slots, victim_slots + v, slot))
            miss_slots[given++] = slot;
    for (int64_t i = 0; i < v; ++i) miss_slots[given++] = victim_slots[i];
    int64_t wait = -1;
    for (int64_t i = 0, j = 0; i < u; ++i) {
        if (hit[i]) continue;
        const int64_t id = unique[i], slot = miss_slots[j++];
        slots[i] = slot;
        p->slot_of[id] = slot; p->slot_ids[slot] = id; p->dirty[slot] = 0;
        p->next_use[slot] = head_batch(p, id);
        if (p->evicted_by[id] > wait) wait = p->evicted_by[id];
        p->evicted_by[id] = -1;
    }
    p->used += m;
    for (int64_t i = 0; i < v; ++i) if (victim_dirty[i]) p->evicted_by[victim_ids[i]] = b;
    if (p->holds_on) for (int64_t i = 0; i < u; ++i) p->holds[slots[i]] += 1;
    for (int64_t i = 0; i < n; ++i) lookup_slots[i] = slots[s.inverse[i]];
    s.slots.assign(slots, slots + u);
    counts[0] = u; counts[1] = m; counts[2] = v; counts[3] = held; counts[4] = wait;
    return 0;
}

// Train(k) has finished by the time the plan being made is used: its slots are dirty, clocked
// and released.
void sk_plan_retire(void *handle, int64_t k) {
    Planner *p = static_cast<Planner *>(handle);
    const Seen &s = p->seen[k % p->ring];
    for (int64_t slot : s.slots) {
        p->dirty[slot] = 1;
        p->last_trained[slot] = k;
        if (p->holds_on) p->holds[slot] -= 1;
    }
}

}  // extern "C"
