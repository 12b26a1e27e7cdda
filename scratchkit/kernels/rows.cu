// rows.cu: move whole rows between the scratchpad and a dense buffer, addressed by slot.
//
//   gather_rows:  out[i, :]          = table[slots[i], :]    (victims out, rows for inspection)
//   scatter_rows: table[slots[i], :] = src[i, :]             (fetched rows in)
//
// `table` is [capacity, width] row-major; width is the embedding dim for rows, or the optimizer
// state width for state. Each row gets SK_ROW_LANES consecutive threads (a warp on a GPU): lane l
// copies columns l, l + 32, l + 64, ... so neighbouring threads touch neighbouring floats
// (coalesced), and the row index is a shift, not a 64-bit division per element.
// The wrapper checks that every slot is in [0, capacity) and, for scatter, that no slot repeats
// (two threads writing one element would leave whichever ran last).

#define SK_ROW_LANES 32

// Launch with n * SK_ROW_LANES threads.
extern "C" __global__ void gather_rows(const float* table, long long width, const long long* slots,
                                       long long n, float* out) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long i = t / SK_ROW_LANES;  // which row of the batch
    if (i >= n) return;
    const float* src = table + slots[i] * width;
    float* dst = out + i * width;
    for (long long c = t % SK_ROW_LANES; c < width; c += SK_ROW_LANES) dst[c] = src[c];
}

// Launch with n * SK_ROW_LANES threads.
extern "C" __global__ void scatter_rows(float* table, long long width, const long long* slots,
                                        long long n, const float* src) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long i = t / SK_ROW_LANES;
    if (i >= n) return;
    const float* from = src + i * width;
    float* to = table + slots[i] * width;
    for (long long c = t % SK_ROW_LANES; c < width; c += SK_ROW_LANES) to[c] = from[c];
}
