# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 08 · Kernel puzzles: write the scratchpad's CUDA kernels, run them without a GPU
#
# **Shows:** the scratchpad's CUDA kernels, written by you and run on a CPU through the host build,
# checked against their NumPy twins; a race found deterministically
#
# **You write:** four CUDA kernels: gather rows, scatter rows, the hash map's probe, the embedding
# bag's forward
#
# ScratchPipe's scratchpad lives in GPU memory, and CUDA kernels move its rows: a *gather* of rows by
# slot, a *scatter* into slots, a *hash map* from ids to slots, and the *embedding bag* that pools
# rows by slot. The kit's kernels are plain CUDA `.cu` files (`scratchkit/kernels/`). They also run on
# a CPU: the **host build** compiles them with g++ behind a small header, `cuda_compat.h`, that turns
# the CUDA keywords into C++ and runs every thread of a launch, one after the other. Each kernel has a
# NumPy **twin** (`scratchkit/kernels/twin.py`) that says what it must compute.
#
# Here you write four of them yourself, as CUDA C, in a notebook cell. `check(source)` builds your
# kernel for the CPU, runs it on random inputs and on edge cases with every thread's writes recorded,
# and compares the result with the twin. A wrong kernel gets the first wrong output element, its
# value and the twin's, and **the thread that wrote it**; a write past the end of an array and a
# **race** (two threads writing one element without an atomic) are found and explained. On a machine
# with an NVIDIA GPU and CuPy, `check` also runs your kernel there.
#
# **Learning goals**
# - CUDA's thread model: a grid of blocks of threads, one global index per thread, spare threads in
#   the last block;
# - coalesced copies: neighbouring threads touch neighbouring floats;
# - an open-addressing probe with tombstones, which must always end;
# - what a race is, and why a CPU that runs threads one at a time can still find one.

# %% [markdown]
# ## How a kernel runs here
#
# A launch `k<<<grid, block>>>(args)` runs `grid * block` threads. Each computes its global index
# `t = blockIdx.x * blockDim.x + threadIdx.x` and does the work of item `t`, if there is one: the
# checker launches blocks of 64 threads, so the last block usually has threads with nothing to do,
# and they must return before they write. Every array a kernel gets is C-contiguous: row `r`, column
# `c` of a table `width` wide is element `r * width + c`. Outputs come uninitialised (as `empty`
# allocates them): every element must be written.
#
# To see what `check` says about a wrong kernel, here is an embedding bag forward written the tempting
# way: one thread per (lookup, column), each adding its row into its bag's pooled vector. Two lookups
# of one bag then write the same element: on a GPU they run at the same time, and a sum loses
# additions. The host build runs one thread at a time, so the result may even look right; but it
# records which thread changed each element, and an element changed by two threads, not through an
# atomic, is a race.

# %%
# NBVAL_CHECK_OUTPUT
from scratchkit.course.exercises import check

racy = r"""
extern "C" __global__ void embedding_bag_forward(const float* rows, long long dim, const long long* slots,
                                                 long long nnz, const long long* offsets, long long num_bags,
                                                 float* pooled) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long j = t / dim, c = t % dim;          // one thread per (lookup, column)
    if (j >= nnz) return;
    long long bag = 0;
    while (bag + 1 < num_bags && offsets[bag + 1] <= j) ++bag;
    const float value = rows[slots[j] * dim + c];
    if (j == offsets[bag]) pooled[bag * dim + c] = value;   // the bag's first lookup writes,
    else pooled[bag * dim + c] += value;                    // the others add
}
"""
print(check(racy))

# %% [markdown]
# The fix is not an `atomicAdd` alone (the output would still start uninitialised, and the order of
# the additions would change from run to run): give each output element **one** writer, a thread per
# (bag, column) that adds the bag's rows in order. That is puzzle 4.
#
# ## Puzzle 1: gather rows by slot
#
# `out[i, :] = table[slots[i], :]` for `i < n`. Each row gets 32 consecutive threads (a warp on a
# GPU): thread `t` works on row `i = t / 32` as lane `t % 32`, and copies columns `lane`, `lane + 32`,
# `lane + 64`, ... while they are below `width`. So the 32 threads of a warp read 32 neighbouring
# floats at once: a *coalesced* read. The launch has `n * 32` threads (and spares in the last block).
# Replace the line that says YOUR CODE HERE, then run the cell.

# %% tags=["exercise", "raises-exception"]
gather_rows = r"""
extern "C" __global__ void gather_rows(const float* table, long long width, const long long* slots,
                                       long long n, float* out) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    // YOUR CODE HERE: row i = t / 32, lane t % 32; return if i >= n; copy the lane's columns
}
"""
check(gather_rows)

# %% [markdown]
# ## Puzzle 2: scatter rows into slots
#
# The reverse, as Insert does with the rows it fetched: `table[slots[i], :] = src[i, :]` for `i < n`,
# 32 threads per row as in puzzle 1. The slots of one launch are distinct; every other row of the
# table must stay as it was.

# %% tags=["exercise", "raises-exception"]
scatter_rows = r"""
extern "C" __global__ void scatter_rows(float* table, long long width, const long long* slots,
                                        long long n, const float* src) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    // YOUR CODE HERE
}
"""
check(scatter_rows)

# %% [markdown]
# ## Puzzle 3: the hash map's probe
#
# The scratchpad finds an id's slot in an open-addressing hash map of `mask + 1` buckets (a power of
# two): `keys[b]` is the id stored in bucket `b`, or `EMPTY` (-1, never used) or `TOMBSTONE` (-2, an
# erased id); `values[b]` is that id's slot. An id's probe starts at its *home* bucket
# `sk_hash(id) & mask` and walks `bucket = (bucket + 1) & mask`, past other ids and tombstones,
# until it finds the id (answer `values[bucket]`) or an `EMPTY` bucket (the id is absent: -1).
# One thread per id: write `out_slots[i]` for `i < n`. Careful: a table may have no `EMPTY` bucket at
# all, and a probe must still end (after `mask + 1` buckets it has seen them all).

# %% tags=["exercise", "raises-exception"]
hashmap_query = r"""
#define SK_EMPTY (-1LL)
#define SK_TOMBSTONE (-2LL)

__device__ unsigned long long sk_hash(unsigned long long x) {   // splitmix64's finalizer
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
    // YOUR CODE HERE
}
"""
check(hashmap_query)

# %% [markdown]
# ## Puzzle 4: the embedding bag's forward, by slot
#
# Train reads rows through slots: bag `b` is the lookups `slots[offsets[b]] .. slots[offsets[b+1] - 1]`
# (the last bag runs to `nnz`), and `pooled[b, c]` is the sum of `rows[slots[j], c]` over its lookups,
# in lookup order; an empty bag pools to zeros. One thread per (bag, column): `num_bags * dim`
# threads, thread `t` on bag `t / dim`, column `t % dim`. Each output element has one writer, so no
# atomics and no race, and the sum's order is fixed: the same result on every run.

# %% tags=["exercise", "raises-exception"]
embedding_bag_forward = r"""
extern "C" __global__ void embedding_bag_forward(const float* rows, long long dim,
                                                 const long long* slots, long long nnz,
                                                 const long long* offsets, long long num_bags,
                                                 float* pooled) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    // YOUR CODE HERE
}
"""
check(embedding_bag_forward)

# %% [markdown]
# ## How the checker sees a race on a CPU
#
# The host build runs the threads of a launch one after the other, so two threads never overlap and a
# race cannot go wrong the way it does on a GPU. The checker builds your kernel with
# `scratchkit/kernels/traced_launch.h` in front of the usual header. After each thread, it compares
# every array with a copy taken after the thread before: an element that differs was written by this
# thread. For each element it keeps the last thread that changed it, an earlier one that also did,
# and whether any change came without an atomic (the header's `atomicAdd` and friends note the
# addresses they touch). Two writers, one of them plain: a race, found the same way on every run.
# Each array also has a guard zone on either side, so a write past an end lands there and is named
# with its thread; and the launch runs in a child process, so a crash or a probe that never ends
# costs the child, not this notebook. What it cannot see: a thread that writes the very value an
# element already holds (which cannot make a result wrong in any order either), and reads.
#
# ## Try this
#
# 1. In puzzle 1, make the loop run `c <= width`. Which thread does `check` name, and why that one?
# 2. In puzzle 3, drop the `mask + 1` limit from your probe loop. Which case fails, and how?
# 3. Give puzzle 4 a thread per (lookup, column) again, but with `atomicAdd`. What does `check` say
#    now, and why is a thread per output element still the better kernel?
