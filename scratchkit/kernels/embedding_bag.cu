// embedding_bag.cu: pooled (sum) embedding-bag forward by slot, and its backward fused with the
// sparse optimizer update, in place in the scratchpad.
//
// Bags follow torch.nn.EmbeddingBag's `offsets` convention: bag b is the lookups
// slots[offsets[b] : offsets[b+1]], and the last bag runs to the end (nnz). Empty bags pool to 0.
//
// Forward: one thread per (bag, column); it sums its bag's rows in lookup order. No atomics, so
// the result is the same on every run and every engine.
//
// Backward: the gradient of a lookup is the gradient of its bag, grad_pooled[bag]. A slot looked
// up k times gets the sum of its k lookup gradients ("coalesced"), added in lookup order. Instead
// of atomicAdd (whose order changes from run to run), the Python side passes a *coalescing plan*:
//   unique_slots[u]                 the u-th distinct slot (ascending)
//   run_starts[u] .. run_starts[u+1] its lookups, as positions into sorted_bags
//   sorted_bags[k]                  the bag of the k-th lookup, lookups sorted by (slot, position)
// so one thread owns each (slot, column) and adds that slot's lookup gradients in lookup order.
// Deterministic, and identical to the NumPy twin bit for bit.
//
// Updates, with g the coalesced gradient of a row (lr > 0):
//   SGD:               row  = fma(-lr, g, row)
//   row-wise Adagrad:  s    = s + (sum over columns of g*g, in column order) / dim
//                      row  = fma(-lr, g / (sqrt(s) + eps), row)
//   Adagrad:           s_c  = s_c + g_c*g_c
//                      row_c = fma(-lr, g_c / (sqrt(s_c) + eps), row_c)
// The row update is one fused multiply-add (a single rounding), which is what torch's
// `rows.add(step, alpha=-lr)` computes on AVX2/AVX-512 CPUs and what a GPU's FFMA does. Every other
// product and sum is rounded on its own: the host build uses -ffp-contract=off and the CuPy build
// --fmad=false, so no compiler fuses them behind our back.

extern "C" __global__ void embedding_bag_forward(const float* rows, long long dim,
                                                 const long long* slots, long long nnz,
                                                 const long long* offsets, long long num_bags,
                                                 float* pooled) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= num_bags * dim) return;
    const long long bag = t / dim;
    const long long c = t % dim;
    const long long begin = offsets[bag];
    const long long end = (bag + 1 < num_bags) ? offsets[bag + 1] : nnz;
    float sum = 0.0f;
    for (long long j = begin; j < end; ++j) sum += rows[slots[j] * dim + c];
    pooled[t] = sum;
}

// The coalesced gradient of unique slot u in column c: its lookups' bag gradients, lookup order.
__device__ __forceinline__ float sk_coalesced_grad(const float* grad_pooled, long long dim,
                                                   const long long* sorted_bags,
                                                   const long long* run_starts, long long u,
                                                   long long c) {
    float g = 0.0f;
    for (long long k = run_starts[u]; k < run_starts[u + 1]; ++k) g += grad_pooled[sorted_bags[k] * dim + c];
    return g;
}

// One thread per (unique slot, column).
extern "C" __global__ void embedding_bag_backward_sgd(float* rows, long long dim,
                                                      const float* grad_pooled,
                                                      const long long* sorted_bags,
                                                      const long long* unique_slots,
                                                      const long long* run_starts,
                                                      long long num_unique, float lr) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= num_unique * dim) return;
    const long long u = t / dim;
    const long long c = t % dim;
    const float g = sk_coalesced_grad(grad_pooled, dim, sorted_bags, run_starts, u, c);
    float* row = rows + unique_slots[u] * dim;
    row[c] = fmaf(-lr, g, row[c]);
}

// One thread per unique slot: the state update needs the whole row's gradient (a reduction over
// columns). A production kernel would give each row a warp and reduce with shuffles; one thread
// per row keeps this kernel runnable by the serial host build, which has no barriers. The
// coalesced gradient is computed twice (once for the state, once for the row) rather than stored.
extern "C" __global__ void embedding_bag_backward_rowwise_adagrad(
    float* rows, float* state, long long dim, const float* grad_pooled,
    const long long* sorted_bags, const long long* unique_slots, const long long* run_starts,
    long long num_unique, float lr, float eps) {
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= num_unique) return;
    const long long slot = unique_slots[u];
    float sum_sq = 0.0f;
    for (long long c = 0; c < dim; ++c) {
        const float g = sk_coalesced_grad(grad_pooled, dim, sorted_bags, run_starts, u, c);
        sum_sq += g * g;
    }
    const float s = state[slot] + sum_sq / (float)dim;
    state[slot] = s;
    const float denom = sqrtf(s) + eps;
    float* row = rows + slot * dim;
    for (long long c = 0; c < dim; ++c) {
        const float g = sk_coalesced_grad(grad_pooled, dim, sorted_bags, run_starts, u, c);
        row[c] = fmaf(-lr, g / denom, row[c]);
    }
}

// Element-wise Adagrad (torch.optim.Adagrad's rule, state [capacity, dim]): one thread per
// (unique slot, column), like SGD.
extern "C" __global__ void embedding_bag_backward_adagrad(float* rows, float* state, long long dim,
                                                          const float* grad_pooled,
                                                          const long long* sorted_bags,
                                                          const long long* unique_slots,
                                                          const long long* run_starts,
                                                          long long num_unique, float lr,
                                                          float eps) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= num_unique * dim) return;
    const long long u = t / dim;
    const long long c = t % dim;
    const float g = sk_coalesced_grad(grad_pooled, dim, sorted_bags, run_starts, u, c);
    const long long at = unique_slots[u] * dim + c;
    const float s = state[at] + g * g;
    state[at] = s;
    rows[at] = fmaf(-lr, g / (sqrtf(s) + eps), rows[at]);
}
