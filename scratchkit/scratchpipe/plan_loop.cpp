/* ScratchPipe's Plan for one table, as a C++ loop: what scratchpipe/plan.py's TablePlanner does,
 * decision for decision (tests/test_plan_native.py holds the two equal, plan by plan).
 *
 * Why. On a GPU server the planner must keep up with Train: for the embedding-bound profile
 * (655k lookups a step, 450k distinct rows) an H100 trains a batch in about 2.4 ms; NumPy plans
 * it in ~145 ms of CPU on one core here, this loop in ~80 ms (benchmarks/bench_planner.py), and
 * plan_group.cpp runs the tables (and their stripes, stripes.py) on as many cores at once.
 *
 * Where the time goes. A table of a million rows is far bigger than the CPU's caches, and each
 * distinct id of a batch is a random access into it: ~100 ns when it misses every cache. So all
 * that the planner keeps per row sits in one 16-byte `Row` (4 per cache line: one miss brings the
 * whole record), all it keeps per slot in one `Slot`, and the victim search reads the slots in
 * order (the prefetcher streams them) instead of chasing ids.
 *
 * State (one Planner per table, for one train() call):
 *   rows[num_rows]   per id: the slot it will hold (-1), its FIFO of seen-but-unplanned uses
 *                    (head, tail), the batch whose write-back returns it (-1)
 *   slots[capacity]  per slot: the id it will hold (-1 free), the batch of that id's next seen use,
 *                    the LRU clock (batch last trained), holds (batches in flight using it), dirty
 * Batches are *seen* in order (their working set read, and their occurrences queued per id), then
 * planned in order, then retired (Train done: dirty, clocked, released). A seen batch lives in a
 * ring of R slots (R > depth + horizon + 1). An occurrence is packed in 31 bits as (ring slot,
 * position: 2^26 distinct ids a batch for a ring of 32);
 * next_occ chains an id's occurrences, so its next use after the batch being planned is its FIFO's
 * head: O(1), with no array over all rows to fill per batch (NumPy's NextUses fills one).
 *
 * Stripes. One table may be planned by several Planners at once (scratchpipe/stripes.py): stripe s of
 * S plans the ids with id % S == s, as local ids id / S, in its own range of the scratchpad's
 * slots [offset, offset + capacity). It reads the whole batch and keeps its own lookups; it
 * writes global ids and slots out, and its lookups' slots into the table's shared lookup_slots
 * (the stripes write disjoint positions). S = 1 is the whole table.
 */
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace {

const int32_t NONE = std::numeric_limits<int32_t>::max();   // no seen use ahead
const int64_t AHEAD = 16;                         // prefetch distance, in ids: ~ memory latency / work per id

struct Row { int32_t slot, head, tail, evicted_by; };          // 16 B: one cache miss per id
struct Slot { int32_t id, next_use, last_trained, holds; uint8_t dirty, in_batch, pad[2]; };

struct Seen {                                     // one batch in the ring
    int64_t batch = -1;
    std::vector<int32_t> unique, inverse, slots;  // sorted working set; lookup -> position; decisions
    std::vector<int32_t> lookups;                 // this stripe's lookups' positions in the batch (S > 1)
    std::vector<int32_t> next_occ;                // per position: the id's next occurrence, -1
};

struct Planner {
    int64_t num_rows, capacity, ring, holds_on, furthest, record_held, used = 0, first_free = 0;
    int64_t stripe, stripes, offset;                // ids id % stripes == stripe, slots from offset
    std::vector<int64_t> local;                   // [n] this stripe's ids of a batch, as local ids
    int pos_bits;                                 // an occurrence: ring slot << pos_bits | position
    int32_t pack(int64_t r, int64_t pos) const { return (int32_t)((r << pos_bits) | pos); }
    int64_t ring_of(int32_t occ) const { return occ >> pos_bits; }
    int64_t pos_of(int32_t occ) const { return occ & ((1 << pos_bits) - 1); }
    std::vector<Row> rows;
    std::vector<Slot> slots;
    std::vector<uint64_t> bits;                   // [num_rows / 64] working-set scratch
    std::vector<int32_t> where;                   // [num_rows] position scratch
    std::vector<uint64_t> keys;                   // victim search scratch: each slot's key,
    std::vector<int64_t> count;                   // and a count per bucket
    std::vector<Seen> seen;
};

inline int32_t head_batch(const Planner *p, int32_t head) {
    return head >= 0 ? (int32_t)p->seen[p->ring_of(head)].batch : NONE;
}

// The sorted distinct ids of a batch, and each lookup's position among them (np.unique's): set a
// bit per id (the bitmap of a 1M-row table is 128 KB, it stays in cache), then read the set bits
// in order. The bitmap is cleared as it is read.
void working_set(Planner *p, const int64_t *ids, int64_t n, Seen &s) {
    s.unique.clear();
    s.inverse.resize(n);
    uint64_t *bits = p->bits.data();
    int64_t lo = p->num_rows, hi = -1;            // the words touched
    for (int64_t i = 0; i < n; ++i) {
        const int64_t id = ids[i];
        bits[id >> 6] |= 1ull << (id & 63);
        lo = std::min(lo, id); hi = std::max(hi, id);
    }
    for (int64_t w = lo >> 6; hi >= 0 && w <= (hi >> 6); ++w) {
        for (uint64_t word = bits[w]; word; word &= word - 1) {
            const int32_t id = (int32_t)((w << 6) + __builtin_ctzll(word));
            p->where[id] = (int32_t)s.unique.size();
            s.unique.push_back(id);
        }
        bits[w] = 0;
    }
    for (int64_t i = 0; i < n; ++i) s.inverse[i] = p->where[ids[i]];
}

// The v slots to evict: unheld, not this batch's, least (urgency level, clock, slot) first.
// Key = level << 32 | clock + 1: one integer orders the first two; a slot that may not go gets
// the largest key. Sorting ~200k candidate keys a batch (or nth_element) would cost more than the
// rest of the plan, so: count the keys by bucket (level, then age = b - clock up to AGES, older
// ones share the level's first bucket), find the bucket that holds the v-th key, and only if that
// bucket is a shared one, select within it. A last pass in slot order takes every key below the
// v-th and, of the keys equal to it, the lowest slots: exactly the three-key order. The passes
// read the slots in order and branch little: the CPU streams them.
// -> victims found (< v: too few unheld slots).
const int64_t AGES = 1024;
const uint64_t KEEP = ~0ull;                      // the key of a slot that may not be a victim

int64_t choose_victims(Planner *p, int64_t b, int64_t seen_ahead, int64_t v, int64_t *victim_slots) {
    std::vector<uint64_t> &keys = p->keys;
    std::vector<int64_t> &count = p->count;
    keys.resize(p->capacity);
    const int64_t buckets = (seen_ahead + 2) * AGES;
    count.assign(buckets + 1, 0);                 // the last: slots that may not go
    auto bucket = [b, buckets](uint64_t key) {    // ascending keys -> non-decreasing buckets
        if (key == KEEP) return buckets;
        const int64_t level = (int64_t)(key >> 32), clock = (int64_t)(key & 0xffffffffu) - 1;
        return level * AGES + (AGES - 1 - std::min(b - clock, AGES - 1));
    };
    const bool furthest = p->furthest, holds_on = p->holds_on;
    for (int64_t slot = 0; slot < p->capacity; ++slot) {
        const Slot &s = p->slots[slot];
        const int64_t k = (int64_t)s.next_use - b;    // urgency: seen_ahead + 1 - k for a use in b+k
        const uint64_t level = (furthest && s.next_use != NONE && k >= 1 && k <= seen_ahead)
                               ? (uint64_t)(seen_ahead + 1 - k) : 0;
        const bool keep = s.id < 0 || s.in_batch || (holds_on && s.holds > 0);
        const uint64_t key = keep ? KEEP : (level << 32 | (uint64_t)(uint32_t)(s.last_trained + 1));
        keys[slot] = key;
        count[bucket(key)] += 1;
    }
    int64_t j = 0, below = 0;                     // the bucket of the v-th key, and keys before it
    while (j < buckets && below + count[j] < v) below += count[j++];
    if (j == buckets) return below;               // too few candidates
    uint64_t kth;
    if (j % AGES != 0) {                          // one clock: the v-th key is the bucket's key
        const int64_t level = j / AGES, clock = b - (AGES - 1 - j % AGES);
        kth = (uint64_t)level << 32 | (uint64_t)(uint32_t)(clock + 1);
    } else {                                      // the old ones: select among them
        std::vector<uint64_t> old;
        for (uint64_t key : keys) if (bucket(key) == j) old.push_back(key);
        std::nth_element(old.begin(), old.begin() + (v - below - 1), old.end());
        kth = old[v - below - 1];
    }
    below = 0;
    for (uint64_t key : keys) below += key < kth;
    int64_t equal_wanted = v - below, found = 0;
    for (int64_t slot = 0; slot < p->capacity; ++slot) {
        const uint64_t key = keys[slot];
        if (key < kth || (key == kth && equal_wanted-- > 0)) victim_slots[found++] = slot;
    }
    return found;                                 // in slot order: the same on every engine
}

}  // namespace

extern "C" {

// A planner for stripe `stripe` of `stripes` of a table of `num_rows` (local) rows, with `capacity`
// slots from `offset`, starting from what those slots hold now (global ids: all of this stripe's,
// else -> NULL).
void *sk_plan_new(int64_t num_rows, int64_t capacity, int64_t ring, int64_t holds_on, int64_t furthest,
                  int64_t record_held, int64_t stripe, int64_t stripes, int64_t offset,
                  const int64_t *slot_ids, const uint8_t *dirty, const int64_t *last_trained) {
    Planner *p = new Planner();
    p->num_rows = num_rows; p->capacity = capacity; p->ring = ring; p->holds_on = holds_on;
    p->furthest = furthest; p->record_held = record_held;
    p->stripe = stripe; p->stripes = stripes; p->offset = offset;
    p->rows.assign(num_rows, Row{-1, -1, -1, -1});
    p->slots.assign(capacity, Slot{-1, NONE, -1, 0, 0, 0, {0, 0}});
    p->bits.assign((num_rows + 63) / 64, 0);
    p->where.assign(num_rows, 0);
    p->seen.resize(ring);
    int ring_bits = 1;
    while ((1ll << ring_bits) < ring) ++ring_bits;
    p->pos_bits = 31 - ring_bits;
    for (int64_t s = 0; s < capacity; ++s) {
        Slot &slot = p->slots[s];
        if (slot_ids[s] >= 0 && slot_ids[s] % stripes != stripe) { delete p; return nullptr; }
        slot.id = slot_ids[s] < 0 ? -1 : (int32_t)(slot_ids[s] / stripes);
        slot.dirty = dirty[s]; slot.last_trained = (int32_t)last_trained[s];
        if (slot.id >= 0) { p->rows[slot.id].slot = (int32_t)s; p->used += 1; }
    }
    while (p->first_free < capacity && p->slots[p->first_free].id >= 0) ++p->first_free;
    return p;
}

void sk_plan_free(void *handle) { delete static_cast<Planner *>(handle); }

// Batch k's ids [n] (k = the last seen + 1): its working set, and its occurrences queued per id.
// -> its number of distinct ids, or -1 if they are too many to number in an occurrence.
int64_t sk_plan_see(void *handle, int64_t k, const int64_t *ids, int64_t n) {
    Planner *p = static_cast<Planner *>(handle);
    const int64_t r = k % p->ring;
    Seen &s = p->seen[r];
    s.batch = k;
    if (p->stripes > 1) {                          // this stripe's lookups, as local ids
        p->local.clear(); s.lookups.clear();
        for (int64_t i = 0; i < n; ++i)
            if (ids[i] % p->stripes == p->stripe) { p->local.push_back(ids[i] / p->stripes); s.lookups.push_back((int32_t)i); }
        ids = p->local.data(); n = (int64_t)p->local.size();
    }
    working_set(p, ids, n, s);
    const int64_t u = (int64_t)s.unique.size();
    if (u >= (1ll << p->pos_bits)) return -1;
    s.next_occ.assign(u, -1);
    for (int64_t pos = 0; pos < u; ++pos) {
        if (pos + AHEAD < u) __builtin_prefetch(&p->rows[s.unique[pos + AHEAD]]);
        if (pos + AHEAD / 2 < u) {                 // where its occurrence is chained
            const int32_t near = p->rows[s.unique[pos + AHEAD / 2]].tail;
            if (near >= 0) __builtin_prefetch(&p->seen[p->ring_of(near)].next_occ[p->pos_of(near)]);
        }
        Row &row = p->rows[s.unique[pos]];
        const int32_t occ = p->pack(r, pos);
        if (row.tail >= 0) {
            p->seen[p->ring_of(row.tail)].next_occ[p->pos_of(row.tail)] = occ;
        } else {
            row.head = occ;
            if (row.slot >= 0) p->slots[row.slot].next_use = (int32_t)k;
        }
        row.tail = occ;
    }
    return u;
}

// How many victims Plan(b) needs (misses beyond the free slots): 0 means no look-ahead is read.
int64_t sk_plan_shortfall(void *handle, int64_t b) {
    Planner *p = static_cast<Planner *>(handle);
    const Seen &s = p->seen[b % p->ring];
    int64_t misses = 0;
    for (int32_t id : s.unique) misses += p->rows[id].slot < 0;
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
            if (p->slots[slot].holds > 0) held_before[held++] = slot;
    int64_t m = 0;
    for (int64_t pos = 0; pos < u; ++pos) {        // planned now: off the FIFO of its id
        const int32_t id = s.unique[pos];
        if (pos + AHEAD < u) __builtin_prefetch(&p->rows[s.unique[pos + AHEAD]]);
        if (pos + AHEAD / 2 < u) {                 // its slot, once its row has arrived
            const int32_t near = p->rows[s.unique[pos + AHEAD / 2]].slot;
            if (near >= 0) __builtin_prefetch(&p->slots[near]);
        }
        Row &row = p->rows[id];
        row.head = s.next_occ[pos];
        if (row.head < 0) row.tail = -1;
        unique[pos] = id;
        slots[pos] = row.slot;
        hit[pos] = row.slot >= 0;
        if (hit[pos]) {
            Slot &slot = p->slots[row.slot];
            slot.next_use = head_batch(p, row.head);
            slot.in_batch = 1;
        } else {
            miss_ids[m++] = id;
        }
    }
    const int64_t free_slots = p->capacity - p->used;
    const int64_t v = m > free_slots ? m - free_slots : 0;
    if (v > 0) {
        const int64_t found = choose_victims(p, b, stop - 1 - b, v, victim_slots);
        if (found < v) {
            for (int64_t pos = 0; pos < u; ++pos) if (hit[pos]) p->slots[slots[pos]].in_batch = 0;
            counts[0] = found; counts[2] = v;
            return -1;
        }
        for (int64_t i = 0; i < v; ++i) {           // evict (their rows are cold: prefetch)
            if (i + AHEAD < v) __builtin_prefetch(&p->rows[p->slots[victim_slots[i + AHEAD]].id]);
            Slot &slot = p->slots[victim_slots[i]];
            victim_ids[i] = slot.id;
            victim_dirty[i] = slot.dirty;
            p->rows[slot.id].slot = -1; slot.id = -1; slot.dirty = 0;
        }
        p->used -= v;
    }
    for (int64_t pos = 0; pos < u; ++pos) if (hit[pos]) p->slots[slots[pos]].in_batch = 0;
    // the misses' slots: free ones, lowest first, then the victims'. Only victims ever free a slot,
    // and they are filled again at once, so no free slot lies below `first_free`.
    int64_t given = 0;
    for (int64_t slot = p->first_free; given < m - v && slot < p->capacity; ++slot)
        if (p->slots[slot].id < 0 && !std::binary_search(victim_slots, victim_slots + v, slot))
            miss_slots[given++] = slot;
    for (int64_t i = 0; i < v; ++i) miss_slots[given++] = victim_slots[i];
    int64_t wait = -1;
    for (int64_t i = 0, j = 0; i < u; ++i) {
        if (hit[i]) continue;
        const int64_t id = unique[i], slot_index = miss_slots[j++];
        Row &row = p->rows[id];
        Slot &slot = p->slots[slot_index];
        slots[i] = slot_index;
        row.slot = (int32_t)slot_index; slot.id = (int32_t)id; slot.dirty = 0;
        slot.next_use = head_batch(p, row.head);
        if (row.evicted_by > wait) wait = row.evicted_by;
        row.evicted_by = -1;
    }
    p->used += m;
    while (p->first_free < p->capacity && p->slots[p->first_free].id >= 0) ++p->first_free;
    for (int64_t i = 0; i < v; ++i) if (victim_dirty[i]) p->rows[victim_ids[i]].evicted_by = (int32_t)b;
    if (p->holds_on) for (int64_t i = 0; i < u; ++i) p->slots[slots[i]].holds += 1;
    s.slots.assign(slots, slots + u);
    // out: global slots and ids (local id * stripes + stripe), lookups at their batch positions
    const int64_t S = p->stripes, stripe = p->stripe, off = p->offset;
    for (int64_t i = 0; i < u; ++i) { slots[i] += off; unique[i] = unique[i] * S + stripe; }
    for (int64_t i = 0; i < m; ++i) { miss_slots[i] += off; miss_ids[i] = miss_ids[i] * S + stripe; }
    for (int64_t i = 0; i < v; ++i) { victim_slots[i] += off; victim_ids[i] = victim_ids[i] * S + stripe; }
    for (int64_t i = 0; i < held; ++i) held_before[i] += off;
    if (S > 1) for (int64_t i = 0; i < n; ++i) lookup_slots[s.lookups[i]] = slots[s.inverse[i]];
    else for (int64_t i = 0; i < n; ++i) lookup_slots[i] = slots[s.inverse[i]];
    counts[0] = u; counts[1] = m; counts[2] = v; counts[3] = held; counts[4] = wait;
    return 0;
}

// Train(k) has finished by the time the plan being made is used: its slots are dirty, clocked
// and released.
void sk_plan_retire(void *handle, int64_t k) {
    Planner *p = static_cast<Planner *>(handle);
    const Seen &s = p->seen[k % p->ring];
    for (int32_t index : s.slots) {
        Slot &slot = p->slots[index];
        slot.dirty = 1;
        slot.last_trained = (int32_t)k;
        if (p->holds_on) slot.holds -= 1;
    }
}

}  // extern "C"
