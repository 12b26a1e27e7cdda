// plan.cu: the device planner's fused steps (scratchkit/scratchpipe/device_plan.py), one launch each
// where array ops would take several. On a GPU a launch costs about what a small kernel runs for,
// and the planner's launches are what bounds it (docs/costmodel.md), so these three do in one
// kernel what took 3, ~25 and ~8 array ops.
//
// The tables share one id space and one slot space: table t's ids start at row_starts[t], its slots
// at slot_starts[t]; table_of_slot[s] is the table of global slot s.
//
// One thread per output element; all arrays int64 (`long long`).

// out[i] = values[i] - starts[table_of_slot[where[i]]]: global ids or slots made table-local
// (`values` are ids with `starts` = row_starts, or slots with `starts` = slot_starts; `where` is
// the slot each value lives in, which names its table).
extern "C" __global__ void to_local(const long long* values, const long long* where,
                                    const long long* table_of_slot, const long long* starts,
                                    long long n, long long* out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = values[i] - starts[table_of_slot[where[i]]];
}

// Each miss's slot. The misses are sorted by table: table t's are out[miss_at[t] .. miss_at[t+1]).
// Table t's first take[t] misses get its free slots in order, free[free_at[t] ...]; the rest its
// victims in order, victims[victim_at[t] ...]. A thread finds its table by binary search in
// miss_at (tables + 1 ascending starts, miss_at[tables] = n).
extern "C" __global__ void assign_miss_slots(const long long* miss_at, const long long* take,
                                             const long long* free_at, const long long* victim_at,
                                             long long tables, const long long* free_slots,
                                             const long long* victims, long long n, long long* out) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    long long low = 0, high = tables;                 // the last t with miss_at[t] <= j
    while (high - low > 1) {
        const long long mid = (low + high) / 2;
        if (miss_at[mid] <= j) low = mid; else high = mid;
    }
    const long long r = j - miss_at[low];             // position among table low's misses
    out[j] = r < take[low] ? free_slots[free_at[low] + r] : victims[victim_at[low] + r - take[low]];
}

// The victim order's key of each candidate slot: (table, urgency, last trained + 1, slot) packed
// into one int64, lowest first. urgency is in [0, levels), last trained in [-1, batch), slot in
// [0, slots): the key stays below tables * levels * (batch + 2) * slots, far from 2^63.
// `urgency` is per slot (all 0 for the LRU policy).
extern "C" __global__ void victim_keys(const long long* candidates, const long long* table_of_slot,
                                       const long long* urgency, const long long* last_trained,
                                       long long levels, long long batch, long long slots,
                                       long long n, long long* out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long s = candidates[i];
    out[i] = ((table_of_slot[s] * levels + urgency[s]) * (batch + 2) + last_trained[s] + 1) * slots + s;
}
