// plan.cu: the device planner's steps (scratchkit/scratchpipe/device_plan.py). Its NumPy twins,
// the specification, are scratchkit/kernels/twin_plan.py.
//
// The planner waits for the device once a batch, at the end, so no kernel here may need a length
// the host would have to read first. An array whose length only the device knows is a *buffer*:
// as long as it could be, its items first, then SK_PAD, which sorts after every id, slot and key.
// A kernel over one is launched over the whole buffer and reads the count from device memory
// (`count`, a one-item array), or the count is where binary searches stop by themselves.
// Counts come from the inclusive scan `pos` of 0/1 flags: item i is flagged when pos[i] differs
// from pos[i-1], it goes to position pos[i] - 1, and pos[n-1] is how many there are.
//
// The tables share one id space and one slot space: table t's ids start at row_starts[t], its slots
// at slot_starts[t]; table_of_slot[s] is the table of global slot s. One thread per item; ids,
// slots, keys and counts are int64 (`long long`), dirty bits and hits `bool`.

#define SK_PAD 0x7fffffffffffffffLL

__device__ __forceinline__ long long sk_item() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }

// The first position in sorted[0, n) whose item is >= value (n if none).
__device__ __forceinline__ long long sk_lower_bound(const long long* sorted, long long n, long long value) {
    long long low = 0, high = n;
    while (low < high) {
        const long long mid = low + (high - low) / 2;
        if (sorted[mid] < value) low = mid + 1; else high = mid;
    }
    return low;
}

// How many items the inclusive scan `pos` counted before position `at`.
__device__ __forceinline__ long long sk_count_before(const long long* pos, long long at) {
    return at > 0 ? pos[at - 1] : 0;
}

__device__ __forceinline__ bool sk_flagged(const long long* pos, long long i) {
    return pos[i] != (i > 0 ? pos[i - 1] : 0);
}

// ---- the working set: unique(ids, return_inverse) from a sort (`order`) and a scan ------------

// flags[i] = 1 where ids[order[i]] starts a run of equal ids.
extern "C" __global__ void first_of_runs(const long long* ids, const long long* order, long long n,
                                         long long* flags) {
    const long long i = sk_item();
    if (i >= n) return;
    flags[i] = i == 0 || ids[order[i]] != ids[order[i - 1]];
}

// pos: the scan of first_of_runs. unique [n]: each run's id in order, then SK_PAD; inverse [n]:
// each id's position in unique.
extern "C" __global__ void working_set(const long long* ids, const long long* order, const long long* pos,
                                       long long n, long long* unique, long long* inverse) {
    const long long i = sk_item();
    if (i >= n) return;
    if (sk_flagged(pos, i)) unique[pos[i] - 1] = ids[order[i]];
    inverse[order[i]] = pos[i] - 1;
    if (i >= pos[n - 1]) unique[i] = SK_PAD;
}

// out[j] = the first position of sorted[0, n) whose item is >= values[j].
extern "C" __global__ void lower_bounds(const long long* sorted, long long n, const long long* values,
                                        long long count, long long* out) {
    const long long j = sk_item();
    if (j >= count) return;
    out[j] = sk_lower_bound(sorted, n, values[j]);
}

// ---- flags and compaction --------------------------------------------------------------------

// flags[i] = 1 where low <= values[i] < high.
extern "C" __global__ void in_range(const long long* values, long long n, long long low, long long high,
                                    long long* flags) {
    const long long i = sk_item();
    if (i >= n) return;
    flags[i] = low <= values[i] && values[i] < high;
}

// out [n]: the flagged items of values, in order, then SK_PAD.
extern "C" __global__ void compact(const long long* pos, const long long* values, long long n, long long* out) {
    const long long i = sk_item();
    if (i >= n) return;
    if (sk_flagged(pos, i)) out[pos[i] - 1] = values[i];
    if (i >= pos[n - 1]) out[i] = SK_PAD;
}

// out[j] = how many items the scan counted before position at[j].
extern "C" __global__ void counts_at(const long long* pos, const long long* at, long long count, long long* out) {
    const long long j = sk_item();
    if (j >= count) return;
    out[j] = sk_count_before(pos, at[j]);
}

// ---- a batch's plan --------------------------------------------------------------------------

// Of the first count[0] of the working set's slots (-1: a miss): miss_flags[i] = 1 for a miss; a
// hit's slot is stamped with the batch (never a victim of it). The slots are distinct.
extern "C" __global__ void split_hits(const long long* slots, const long long* count, long long n, long long batch,
                                      long long* hit_stamp, long long* miss_flags) {
    const long long i = sk_item();
    if (i >= n) return;
    const bool real = i < count[0];
    const long long s = slots[i];
    if (real && s >= 0) hit_stamp[s] = batch;
    miss_flags[i] = real && s < 0;
}

// One thread per table t <= tables: where its working set, misses, free slots and held slots
// start (the scans of their flags, counted at its starts); for t < tables, the victims it needs
// (its misses beyond its free slots) and the free slots its misses take.
extern "C" __global__ void table_bounds(const long long* unique_at, const long long* miss_pos,
                                        const long long* free_pos, const long long* held_pos,
                                        const long long* slot_starts, long long tables, long long* unique_out,
                                        long long* miss_at, long long* free_at, long long* held_at,
                                        long long* need, long long* take) {
    const long long t = sk_item();
    if (t > tables) return;
    unique_out[t] = unique_at[t];
    miss_at[t] = sk_count_before(miss_pos, unique_at[t]);
    free_at[t] = sk_count_before(free_pos, slot_starts[t]);
    held_at[t] = sk_count_before(held_pos, slot_starts[t]);
    if (t == tables) return;
    const long long misses = sk_count_before(miss_pos, unique_at[t + 1]) - miss_at[t];
    const long long spare = sk_count_before(free_pos, slot_starts[t + 1]) - free_at[t];
    need[t] = misses > spare ? misses - spare : 0;
    take[t] = misses < spare ? misses : spare;
}

// keys [slots]: each candidate's key, (table, urgency, last trained + 1, slot) packed into one
// int64, lowest evicted first; SK_PAD for every other slot. A candidate holds an id, is not a hit
// of this batch, is not held (planned at or after held_since), and its table needs victims.
// urgency is in [0, levels), last trained in [-1, batch), so the key stays below
// tables * levels * (batch + 2) * slots, far from 2^63.
extern "C" __global__ void victim_keys(const long long* slot_ids, const long long* last_planned,
                                       const long long* hit_stamp, const long long* table_of_slot,
                                       const long long* need, const long long* urgency,
                                       const long long* last_trained, long long batch, long long held_since,
                                       long long levels, long long slots, long long* keys) {
    const long long s = sk_item();
    if (s >= slots) return;
    const long long t = table_of_slot[s];
    const bool candidate = slot_ids[s] >= 0 && hit_stamp[s] != batch && last_planned[s] < held_since && need[t] > 0;
    keys[s] = candidate ? ((t * levels + urgency[s]) * (batch + 2) + last_trained[s] + 1) * slots + s : SK_PAD;
}

// One thread per table, over the sorted keys [n] (table t's in [t * span, (t + 1) * span)): where
// its candidates start, how many it has, and how many victims it gives: min(need, have).
extern "C" __global__ void victims_per_table(const long long* keys, long long n, const long long* need,
                                             long long tables, long long span, long long* first, long long* have,
                                             long long* count) {
    const long long t = sk_item();
    if (t >= tables) return;
    const long long low = sk_lower_bound(keys, n, t * span), high = sk_lower_bound(keys, n, (t + 1) * span);
    first[t] = low;
    have[t] = high - low;
    count[t] = need[t] < high - low ? need[t] : high - low;
}

// chosen [n], zeroed: 1 at the slot of each of table t's first count[t] candidates in the sorted
// keys [n]. n is the number of slots (key % n: the slot). Scanned and compacted, the chosen slots
// come out ascending: by table, as the plan wants them.
extern "C" __global__ void pick_victims(const long long* keys, long long n, const long long* table_of_slot,
                                        const long long* first, const long long* count, long long* chosen) {
    const long long i = sk_item();
    if (i >= n || keys[i] == SK_PAD) return;
    const long long s = keys[i] % n, t = table_of_slot[s];
    if (i - first[t] < count[t]) chosen[s] = 1;
}

// The first count[0] victims leave their slots: victim_ids[i] the id it held, written[i] 1 where
// it was dirty (Write-back returns it); SK_PAD and 0 past them.
extern "C" __global__ void evict(const long long* victims, const long long* count, long long n, long long* slot_ids,
                                 const bool* dirty, long long* victim_ids, long long* written) {
    const long long i = sk_item();
    if (i >= n) return;
    if (i >= count[0]) {
        victim_ids[i] = SK_PAD;
        written[i] = 0;
        return;
    }
    const long long s = victims[i];
    victim_ids[i] = slot_ids[s];
    written[i] = dirty[s];
    slot_ids[s] = -1;
}

// Each miss's slot. The misses are sorted by table: table t's are out[miss_at[t] .. miss_at[t+1]).
// Table t's first take[t] misses get its free slots in order, free[free_at[t] ...]; the rest its
// victims in order, victims[victim_at[t] ...], as far as they go (-1 past them: the planner then
// reports the shortage). A thread finds its table by binary search in miss_at; past the misses,
// out is -1.
extern "C" __global__ void assign_miss_slots(const long long* miss_at, const long long* take,
                                             const long long* free_at, const long long* victim_at,
                                             long long tables, const long long* free_slots,
                                             const long long* victims, long long n, long long* out) {
    const long long j = sk_item();
    if (j >= n) return;
    if (j >= miss_at[tables]) {
        out[j] = -1;
        return;
    }
    long long low = 0, high = tables;  // the last t with miss_at[t] <= j
    while (high - low > 1) {
        const long long mid = (low + high) / 2;
        if (miss_at[mid] <= j) low = mid; else high = mid;
    }
    const long long r = j - miss_at[low];  // position among table low's misses
    if (r < take[low]) {
        out[j] = free_slots[free_at[low] + r];
    } else {
        const long long v = victim_at[low] + r - take[low];
        out[j] = v < victim_at[low + 1] ? victims[v] : -1;
    }
}

// Every working-set id in its slot: a miss (slot -1) takes its slot from miss_slots (by its rank
// among the misses), its id goes into slot_ids, clean; each slot is marked planned by the batch.
// slots in place (-1 past count[0]); hit[i]: the id was resident.
extern "C" __global__ void place(const long long* unique, const long long* count, const long long* miss_pos,
                                 const long long* miss_slots, long long n, long long batch, long long* slots,
                                 bool* hit, long long* slot_ids, bool* dirty, long long* last_planned) {
    const long long i = sk_item();
    if (i >= n) return;
    if (i >= count[0]) {
        slots[i] = -1;
        hit[i] = false;
        return;
    }
    long long s = slots[i];
    hit[i] = s >= 0;
    if (s < 0) {
        s = miss_slots[miss_pos[i] - 1];
        slots[i] = s;
        if (s >= 0) {
            slot_ids[s] = unique[i];
            dirty[s] = false;
        }
    }
    if (s >= 0) last_planned[s] = batch;
}

// A trained batch's slots (-1: none) are dirty, last trained by it.
extern "C" __global__ void mark_trained(const long long* slots, long long n, long long batch, bool* dirty,
                                        long long* last_trained) {
    const long long i = sk_item();
    if (i >= n || slots[i] < 0) return;
    dirty[slots[i]] = true;
    last_trained[slots[i]] = batch;
}

// The first count[0] (id, slot) pairs made table-local (the table is the slot's); -1 past them
// and where a slot is -1.
extern "C" __global__ void to_local(const long long* ids, const long long* slots, const long long* count,
                                    long long n, const long long* table_of_slot, const long long* row_starts,
                                    const long long* slot_starts, long long* ids_out, long long* slots_out) {
    const long long i = sk_item();
    if (i >= n) return;
    const long long s = slots[i];
    if (i >= count[0] || s < 0) {
        ids_out[i] = slots_out[i] = -1;
        return;
    }
    const long long t = table_of_slot[s];
    ids_out[i] = ids[i] - row_starts[t];
    slots_out[i] = s - slot_starts[t];
}

// out[s] = each slot's table-local id (-1: free) as a global id.
extern "C" __global__ void to_global(const long long* ids, const long long* table_of_slot,
                                     const long long* row_starts, long long n, long long* out) {
    const long long s = sk_item();
    if (s >= n) return;
    out[s] = ids[s] >= 0 ? ids[s] + row_starts[table_of_slot[s]] : -1;
}

// out[i] = values[index[i]]
extern "C" __global__ void gather_ids(const long long* values, const long long* index, long long n, long long* out) {
    const long long i = sk_item();
    if (i >= n) return;
    out[i] = values[index[i]];
}
