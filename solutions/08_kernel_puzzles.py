"""Solutions to notebook 08's kernel puzzles: each a kernel's CUDA source, as a learner might finish
it from the notebook's template (see 01's file for how the tests use them)."""

gather_rows = r"""
extern "C" __global__ void gather_rows(const float* table, long long width, const long long* slots,
                                       long long n, float* out) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long i = t / 32;              // the row this thread helps copy
    if (i >= n) return;
    for (long long c = t % 32; c < width; c += 32) out[i * width + c] = table[slots[i] * width + c];
}
"""

scatter_rows = r"""
extern "C" __global__ void scatter_rows(float* table, long long width, const long long* slots,
                                        long long n, const float* src) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long i = t / 32;
    if (i >= n) return;
    for (long long c = t % 32; c < width; c += 32) table[slots[i] * width + c] = src[i * width + c];
}
"""

hashmap_query = r"""
#define SK_EMPTY (-1LL)

__device__ unsigned long long sk_hash(unsigned long long x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

extern "C" __global__ void hashmap_query(const long long* keys, const long long* values,
                                         long long mask, const long long* ids, long long n,
                                         long long* out_slots) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long bucket = sk_hash((unsigned long long)ids[i]) & (unsigned long long)mask;
    long long slot = -1;
    for (long long probe = 0; probe <= mask; ++probe) {
        if (keys[bucket] == ids[i]) { slot = values[bucket]; break; }
        if (keys[bucket] == SK_EMPTY) break;
        bucket = (bucket + 1) & (unsigned long long)mask;
    }
    out_slots[i] = slot;
}
"""

embedding_bag_forward = r"""
extern "C" __global__ void embedding_bag_forward(const float* rows, long long dim,
                                                 const long long* slots, long long nnz,
                                                 const long long* offsets, long long num_bags,
                                                 float* pooled) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= num_bags * dim) return;
    const long long bag = t / dim, c = t % dim;
    const long long end = bag + 1 < num_bags ? offsets[bag + 1] : nnz;
    float sum = 0.0f;
    for (long long j = offsets[bag]; j < end; ++j) sum += rows[slots[j] * dim + c];
    pooled[t] = sum;
}
"""
