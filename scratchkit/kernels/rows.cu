// rows.cu: move whole rows between the scratchpad and a dense buffer, addressed by slot.
//
//   gather_rows:  out[i, :]          = table[slots[i], :]    (victims out, rows for inspection)
//   scatter_rows: table[slots[i], :] = src[i, :]             (fetched rows in)
//
// `table` is [capacity, width] row-major; width is the embedding dim for rows, or the optimizer
// state width for state. One thread per element (i, c), so consecutive threads touch consecutive
// floats of a row: coalesced reads and writes on a GPU.
// The wrapper checks that every slot is in [0, capacity) and, for scatter, that no slot repeats
// (two threads writing one element would leave whichever ran last).

extern "C" __global__ void gather_rows(const float* table, long long width, const long long* slots,
                                       long long n, float* out) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * width) return;
    const long long i = t / width;  // which slot
    const long long c = t % width;  // which column
    out[t] = table[slots[i] * width + c];
}

extern "C" __global__ void scatter_rows(float* table, long long width, const long long* slots,
                                        long long n, const float* src) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * width) return;
    const long long i = t / width;
    const long long c = t % width;
    table[slots[i] * width + c] = src[t];
}
