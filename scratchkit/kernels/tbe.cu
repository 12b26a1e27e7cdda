// tbe.cu: every table's embedding bags in one launch (table-batched, as FBGEMM's TBE), and the
// backward fused with the optimizer's update, with nothing the host must wait for.
//
// The batch is every table's lookups one after the other: table t's are positions
// starts[t] .. starts[t+1] of the [N] arrays, its bags start at offsets[t * B + b] (relative to
// starts[t], torch.nn.EmbeddingBag's convention: the last bag runs to the table's end). Table t's
// rows are the float array at address tables[t] (one pointer per table: device tables, cache rows
// or scratchpad slots, wherever they live), and lookup j reads its row index[j] - index_base[t]
// (table ids made local, or slots with a base of 0).
//
// Forward: one thread per (bag, table, column) sums its bag's rows in lookup order into
// pooled[b, t, c] ([B, T, dim], the layout the dense model reads). No atomics.
//
// Backward + update: the gradient of a lookup is its bag's, grad[b, t, :]. The lookups come sorted
// by key (a stable sort of each lookup's global id, so a key's lookups stay in lookup order):
// sorted_keys[k] and sorted_at[k], the lookup's position. The grid is sized by the lookups, not
// by the distinct ids, which only the device knows: the thread of a sorted position that starts a
// run of equal keys sums the run's gradients in lookup order and applies the update to that
// id's row; every other thread returns at once. Deterministic, no atomics, no host wait (a grid
// sized by the distinct ids would need their count on the host first).
//
// Updates, with g the summed gradient of a row (lr > 0), as embedding_bag.cu's:
//   SGD:               row  = fma(-lr, g, row)
//   row-wise Adagrad:  s    = s + (sum over columns of g*g, in column order) / dim
//                      row  = fma(-lr, g / (sqrt(s) + eps), row)
//   Adagrad:           s_c  = s_c + g_c*g_c
//                      row_c = fma(-lr, g_c / (sqrt(s_c) + eps), row_c)
// Every other product and sum is rounded on its own (-ffp-contract=off, --fmad=false).

// The first i in [0, n) with a[i] > x (a sorted), or n: a binary search over a few entries.
__device__ __forceinline__ long long sk_upper(const long long* a, long long n, long long x) {
    long long low = 0, high = n;
    while (low < high) {
        const long long mid = (low + high) / 2;
        if (a[mid] <= x) low = mid + 1;
        else high = mid;
    }
    return low;
}

// Where lookup `at` lives: its table (*t) and its bag (the return value).
__device__ __forceinline__ long long sk_bag_of(long long at, const long long* starts, const long long* offsets,
                                               long long num_tables, long long num_bags, long long* t) {
    *t = sk_upper(starts, num_tables + 1, at) - 1;
    return sk_upper(offsets + *t * num_bags, num_bags, at - starts[*t]) - 1;
}

// The summed gradient, column c, of the run of equal keys that starts at sorted position k.
__device__ __forceinline__ float sk_run_grad(const float* grad, long long dim, const long long* sorted_keys,
                                             const long long* sorted_at, long long n, long long k,
                                             const long long* starts, const long long* offsets,
                                             long long num_tables, long long num_bags, long long c) {
    float g = 0.0f;
    for (long long j = k; j < n && sorted_keys[j] == sorted_keys[k]; ++j) {
        long long t = 0;
        const long long bag = sk_bag_of(sorted_at[j], starts, offsets, num_tables, num_bags, &t);
        g += grad[(bag * num_tables + t) * dim + c];
    }
    return g;
}

// One thread per (bag, table, column): num_bags * num_tables * dim threads.
extern "C" __global__ void tbe_forward(const long long* tables, long long dim, const long long* index,
                                       const long long* index_base, const long long* starts,
                                       const long long* offsets, long long num_tables, long long num_bags,
                                       float* pooled) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= num_bags * num_tables * dim) return;
    const long long c = i % dim;
    const long long t = (i / dim) % num_tables;
    const long long b = i / (dim * num_tables);
    const long long* bags = offsets + t * num_bags;
    const long long begin = starts[t] + bags[b];
    const long long end = (b + 1 < num_bags) ? starts[t] + bags[b + 1] : starts[t + 1];
    const float* rows = (const float*)tables[t];
    float sum = 0.0f;
    for (long long j = begin; j < end; ++j) sum += rows[(index[j] - index_base[t]) * dim + c];
    pooled[i] = sum;
}

// One thread per (sorted position, column): n * dim threads.
extern "C" __global__ void tbe_backward_sgd(const long long* tables, long long dim, const float* grad,
                                            const long long* sorted_keys, const long long* sorted_at,
                                            long long n, const long long* index, const long long* index_base,
                                            const long long* starts, const long long* offsets,
                                            long long num_tables, long long num_bags, float lr) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * dim) return;
    const long long k = i / dim;
    const long long c = i % dim;
    if (k > 0 && sorted_keys[k - 1] == sorted_keys[k]) return;  // not the first of its run
    const float g = sk_run_grad(grad, dim, sorted_keys, sorted_at, n, k, starts, offsets, num_tables, num_bags, c);
    const long long at = sorted_at[k];
    const long long t = sk_upper(starts, num_tables + 1, at) - 1;
    float* row = (float*)tables[t] + (index[at] - index_base[t]) * dim;
    row[c] = fmaf(-lr, g, row[c]);
}

// One thread per sorted position (n threads): the state needs the whole row's gradient. A
// production kernel would give each run a warp and reduce with shuffles; one thread per run keeps
// it runnable by the serial host build, which has no barriers. The gradient is summed twice (for
// the state, then for the row) rather than stored.
extern "C" __global__ void tbe_backward_rowwise_adagrad(const long long* tables, const long long* states,
                                                        long long dim, const float* grad,
                                                        const long long* sorted_keys, const long long* sorted_at,
                                                        long long n, const long long* index,
                                                        const long long* index_base, const long long* starts,
                                                        const long long* offsets, long long num_tables,
                                                        long long num_bags, float lr, float eps) {
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    if (k > 0 && sorted_keys[k - 1] == sorted_keys[k]) return;
    const long long at = sorted_at[k];
    const long long t = sk_upper(starts, num_tables + 1, at) - 1;
    const long long r = index[at] - index_base[t];
    float sum_sq = 0.0f;
    for (long long c = 0; c < dim; ++c) {
        const float g = sk_run_grad(grad, dim, sorted_keys, sorted_at, n, k, starts, offsets, num_tables, num_bags, c);
        sum_sq += g * g;
    }
    float* state = (float*)states[t] + r;
    const float s = *state + sum_sq / (float)dim;
    *state = s;
    const float denom = sqrtf(s) + eps;
    float* row = (float*)tables[t] + r * dim;
    for (long long c = 0; c < dim; ++c) {
        const float g = sk_run_grad(grad, dim, sorted_keys, sorted_at, n, k, starts, offsets, num_tables, num_bags, c);
        row[c] = fmaf(-lr, g / denom, row[c]);
    }
}

// Element-wise Adagrad (state [rows, dim] beside each table): one thread per (sorted position, column).
extern "C" __global__ void tbe_backward_adagrad(const long long* tables, const long long* states, long long dim,
                                                const float* grad, const long long* sorted_keys,
                                                const long long* sorted_at, long long n, const long long* index,
                                                const long long* index_base, const long long* starts,
                                                const long long* offsets, long long num_tables, long long num_bags,
                                                float lr, float eps) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * dim) return;
    const long long k = i / dim;
    const long long c = i % dim;
    if (k > 0 && sorted_keys[k - 1] == sorted_keys[k]) return;
    const float g = sk_run_grad(grad, dim, sorted_keys, sorted_at, n, k, starts, offsets, num_tables, num_bags, c);
    const long long at = sorted_at[k];
    const long long t = sk_upper(starts, num_tables + 1, at) - 1;
    const long long e = (index[at] - index_base[t]) * dim + c;
    float* state = (float*)states[t];
    float* row = (float*)tables[t];
    const float s = state[e] + g * g;
    state[e] = s;
    row[e] = fmaf(-lr, g / (sqrtf(s) + eps), row[e]);
}

// Invariant 1 checked on the device: how many lookups find their own id in their slot. One thread
// per lookup: lookup j of table t reads slot index[j] of that table's slot ids (the array at
// slot_ids[t]) and counts a hit when it holds keys[j] - key_base[t]. The count is an integer sum,
// the same whatever order the threads add in; the host reads it with the loss, not on its own.
extern "C" __global__ void tbe_count_hits(const long long* slot_ids, const long long* index, const long long* keys,
                                          const long long* key_base, const long long* starts,
                                          long long num_tables, long long n, unsigned long long* hits) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    const long long t = sk_upper(starts, num_tables + 1, j) - 1;
    const long long* ids = (const long long*)slot_ids[t];
    if (ids[index[j]] == keys[j] - key_base[t]) atomicAdd(hits, 1ULL);
}
