// hashmap.cu: the scratchpad's id -> slot map, as an open-addressing hash table on the device.
//
// Layout: two arrays of `mask + 1` buckets (a power of two, so `& mask` replaces `% size`):
//   keys[b]   the id stored in bucket b, or EMPTY (-1: never used) or TOMBSTONE (-2: erased)
//   values[b] the slot of that id (-1 when the bucket holds no id)
// An id's home bucket is hash(id) & mask; collisions probe linearly: home, home+1, ... (wrapping).
//
// Erase leaves a TOMBSTONE, not an EMPTY: a query for another id whose probe sequence passes this
// bucket must keep walking, and only EMPTY means "walked past the end of every chain". Tombstones
// are reused by later inserts. They make misses slower as they pile up, so the Python side counts
// them and rebuilds the table (clear + re-insert the live ids) before they fill it.
//
// Preconditions, checked by the Python wrapper before any launch: the ids of one insert are unique
// and absent from the map, and the table has room. With those, concurrent inserts need only
// atomicCAS on the key: the thread that wins a bucket owns it. A negative id is no id: it is never
// found, and an insert skips a pair whose id or slot is negative (the device planner's buffers end
// in such padding, plan.cu).
//
// One thread per id. ids and slots are int64 (`long long`); atomicCAS works on the same bits
// viewed as `unsigned long long`.

#define SK_EMPTY (-1LL)
#define SK_TOMBSTONE (-2LL)

// splitmix64's finalizer: every input bit moves every output bit, so ids that differ only in their
// high bits (common after per-table offsets) still spread over the buckets.
__device__ __forceinline__ unsigned long long sk_hash(unsigned long long x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

// The bucket holding `id`, or -1 when it is absent: walk the probe sequence from the home bucket
// past other ids and tombstones until the id or an EMPTY bucket (the end of the chain).
__device__ __forceinline__ long long sk_find(const long long* keys, long long mask, long long id) {
    if (id < 0) return -1;  // EMPTY and TOMBSTONE are negative: no id matches them
    unsigned long long bucket = sk_hash((unsigned long long)id) & (unsigned long long)mask;
    for (long long probe = 0; probe <= mask; ++probe) {
        const long long key = keys[bucket];
        if (key == id) return (long long)bucket;
        if (key == SK_EMPTY) return -1;
        bucket = (bucket + 1) & (unsigned long long)mask;
    }
    return -1;
}

// out_slots[i] = slot of ids[i], or -1 when ids[i] is not in the map.
extern "C" __global__ void hashmap_query(const long long* keys, const long long* values,
                                         long long mask, const long long* ids, long long n,
                                         long long* out_slots) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long bucket = sk_find(keys, mask, ids[i]);
    out_slots[i] = bucket < 0 ? -1 : values[bucket];
}

// out[slot of ids[i]] = value, for each id in the map (absent ids are skipped). The ids of one
// launch are distinct, so no two threads write one slot: launched from the furthest batch to the
// nearest, the nearest batch's value is the one left.
extern "C" __global__ void hashmap_stamp(const long long* keys, const long long* values, long long mask,
                                         const long long* ids, long long n, long long value,
                                         long long* out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long bucket = sk_find(keys, mask, ids[i]);
    if (bucket >= 0) out[values[bucket]] = value;
}

// Store ids[i] -> slots[i] in the first EMPTY or TOMBSTONE bucket of the id's probe sequence.
// stats[0] += number of tombstones reused; stats[1] += number of ids that found no bucket
// (never happens when the wrapper's room check holds; the wrapper raises if it does).
extern "C" __global__ void hashmap_insert(long long* keys, long long* values, long long mask,
                                          const long long* ids, const long long* slots,
                                          long long n, unsigned long long* stats) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || ids[i] < 0 || slots[i] < 0) return;  // padding, not a pair
    const unsigned long long id = (unsigned long long)ids[i];
    unsigned long long bucket = sk_hash(id) & (unsigned long long)mask;
    for (long long probe = 0; probe <= mask; ++probe) {
        const long long seen = keys[bucket];
        if (seen == SK_EMPTY || seen == SK_TOMBSTONE) {
            // Claim the bucket only if nobody changed it since we looked. Losing the race means
            // another thread stored its id here: walk on.
            const unsigned long long old = atomicCAS((unsigned long long*)&keys[bucket],
                                                     (unsigned long long)seen, id);
            if (old == (unsigned long long)seen) {
                values[bucket] = slots[i];
                if (seen == SK_TOMBSTONE) atomicAdd(&stats[0], 1ULL);
                return;
            }
        }
        bucket = (bucket + 1) & (unsigned long long)mask;
    }
    atomicAdd(&stats[1], 1ULL);
}

// Remove ids[i]: its bucket becomes a TOMBSTONE. out_slots[i] = the slot it had, or -1 if absent.
extern "C" __global__ void hashmap_erase(long long* keys, long long* values, long long mask,
                                         const long long* ids, long long n,
                                         long long* out_slots) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long bucket = sk_find(keys, mask, ids[i]);
    out_slots[i] = bucket < 0 ? -1 : values[bucket];
    if (bucket >= 0) {
        values[bucket] = -1;
        atomicExch((unsigned long long*)&keys[bucket], (unsigned long long)SK_TOMBSTONE);
    }
}
