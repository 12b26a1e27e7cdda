// Table-batched embedding on the host: every table's sum-pooled lookup, gradient coalescing and SGD
// update, each in one call for all tables (scratchkit/embedding/table_batched.py calls these through
// ctypes; its torch twins are the specification).
//
// Exactness is the whole point, so each loop does the float operations of the torch ops it replaces,
// in the same order:
//   sk_tbe_forward   pooled[b, t] = 0 + row_1 + row_2 + ... in lookup order, as F.embedding_bag's
//                    sum does (adds only: nothing a compiler may fuse)
//   sk_tbe_backward  each distinct id's gradient: its first lookup's gradient copied, then each later
//                    one added, in the order torch's sparse coalesce visits them: the permutation
//                    that torch.sort gives the ids. Either the caller passes that permutation, or
//                    `sort_like_torch` below computes the same one. With `by_id` (the kit's
//                    SummationOrder.BY_ID, an option) each id's in lookup order instead, `sort_by_id`:
//                    faster, and equal to PyTorch only to rounding
//   sk_tbe_sgd       row = fma(-lr, g, row), torch's add_(g, alpha=-lr) (one rounding)
// Tables are independent, so up to `threads` threads (a pool kept between calls: thread_pool.cpp)
// take whole tables; where there are more threads than tables, each table is cut into runs too
// (thread_pool.h's runs_per_table): the forward's bags, the backward's sort and sums (a table sorted
// by id: sort_runs.cpp), SGD's rows; each bag's sum and each id's sum still one thread's.
// Each function returns -1, or the first table whose input was out of range (nothing is read or
// written outside the arrays, and sk_tbe_sgd checks every row before it changes any; the caller
// raises).
#include "sort_runs.h"
#include "thread_pool.h"
#include "torch_sort.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

using sk::Packed, sk::id_of, sk::position_of, sk::sort_by_id, sk::sort_like_torch;
using sk::for_items, sk::runs_per_table, sk::SortJob;

int64_t first_bad(const std::vector<uint8_t>& bad) {
    for (size_t t = 0; t < bad.size(); ++t)
        if (bad[t]) return static_cast<int64_t>(t);
    return -1;
}

// ------------------------------------------------------------------------------------ row loops
// Rows of floats, a vector at a time through GCC's vector extension (4 floats: SSE on x86-64, NEON
// on arm64; 8 with AVX2 where the CPU has it): each element is still one add of the same two floats,
// so the sums are those of a scalar loop, whatever the width. `Dim` > 0 is the row width known to
// the compiler (the loops unroll); 0: `dim`, known at run time.
typedef float float4 __attribute__((vector_size(16)));
typedef float float8 __attribute__((vector_size(32)));
constexpr int64_t PREFETCH = 16;                  // lookups ahead whose rows are requested from memory
constexpr int64_t LINE = 64 / sizeof(float);      // floats in a cache line

// Request every cache line of a row. Asking for its first line alone leaves the rest to the
// hardware's prefetcher: at dim 128 (8 lines) on a table beyond the caches, ~2x slower.
inline void prefetch_row(const float* row, int64_t dim) {
    for (int64_t c = 0; c < dim; c += LINE) __builtin_prefetch(row + c);
}
inline void prefetch_row_to_write(float* row, int64_t dim) {
    for (int64_t c = 0; c < dim; c += LINE) __builtin_prefetch(row + c, 1);
}

template <int64_t Dim>
inline void add_row(float* out, const float* row, int64_t dim) {
    const int64_t width = Dim ? Dim : dim;
    int64_t c = 0;
    for (; c + 4 <= width; c += 4) {
        float4 a, b;
        std::memcpy(&a, out + c, sizeof a);
        std::memcpy(&b, row + c, sizeof b);
        a += b;
        std::memcpy(out + c, &a, sizeof a);
    }
    if constexpr (Dim % 4 != 0 || Dim == 0)
        for (; c < width; ++c) out[c] += row[c];
}

// Calls body(std::integral_constant<int64_t, Dim>) with Dim = dim for the common widths, else 0.
template <class Body>
void by_width(int64_t dim, Body&& body) {
    switch (dim) {
        case 16: return body(std::integral_constant<int64_t, 16>{});
        case 32: return body(std::integral_constant<int64_t, 32>{});
        case 64: return body(std::integral_constant<int64_t, 64>{});
        case 128: return body(std::integral_constant<int64_t, 128>{});
        default: return body(std::integral_constant<int64_t, 0>{});
    }
}

// bag_of[j] = the bag of lookup j for the lookups of bags first .. last - 1, from a table's offsets
// [B] and lookups n (every bag's run, in turn, fills all of bag_of [n]). False: bad offsets.
bool bags_of_run(const int64_t* offsets, int64_t num_bags, int64_t n, int64_t first, int64_t last, int64_t* bag_of) {
    if (first == 0 && (num_bags == 0 ? n != 0 : offsets[0] != 0)) return false;
    for (int64_t b = first; b < last; ++b) {
        int64_t begin = offsets[b], end = b + 1 < num_bags ? offsets[b + 1] : n;
        if (begin < 0 || end < begin || end > n) return false;
        for (int64_t j = begin; j < end; ++j) bag_of[j] = b;
    }
    return true;
}
bool bags_of_lookups(const int64_t* offsets, int64_t num_bags, int64_t n, std::vector<int64_t>& bag_of) {
    bag_of.resize(n);
    return bags_of_run(offsets, num_bags, n, 0, num_bags, bag_of.data());
}

// One bag's pooled row, lookups [begin, end) of a table of known width Dim, its sum held in
// registers (vectors V of 4 or 8 floats), 64 floats at a time (16 SSE or 8 AVX registers), each
// block of columns a pass over the bag's lookups. Columns are independent, so each element's sum is
// still 0 + row_1 + row_2 + ... in lookup order. Summing into `pooled` in memory instead cost a
// load and a store of the sum per row added (the compiler must assume the row may alias it).
// False: an index out of range.
template <int64_t Dim, class V>
__attribute__((always_inline)) inline bool pool_bag(const float* weight, int64_t rows, const int64_t* index,
                                                    int64_t begin, int64_t end, int64_t n, float* pooled) {
    constexpr int64_t W = sizeof(V) / sizeof(float), BLOCK = Dim < 64 ? Dim : 64, K = BLOCK / W;
    static_assert(Dim % BLOCK == 0 && BLOCK % W == 0, "a row is whole blocks of whole vectors");
    for (int64_t c0 = 0; c0 < Dim; c0 += BLOCK) {
        V sum[K];
        for (int64_t k = 0; k < K; ++k) sum[k] = V{};       // +0.0f, as the bag's sum starts
        for (int64_t j = begin; j < end; ++j) {
            int64_t r = index[j];
            if (r < 0 || r >= rows) return false;
            if (c0 == 0 && j + PREFETCH < n) {
                int64_t ahead = index[j + PREFETCH];
                if (ahead >= 0 && ahead < rows) prefetch_row(weight + ahead * Dim, Dim);
            }
            const float* row = weight + r * Dim + c0;
            for (int64_t k = 0; k < K; ++k) {
                V x;
                std::memcpy(&x, row + k * W, sizeof x);
                sum[k] += x;
            }
        }
        std::memcpy(pooled + c0, sum, sizeof sum);
    }
    return true;
}

// One table's pooled bags first .. last - 1 (of num_bags), bag b written to out + b * out_stride.
// A bag's sum does not depend on which bags share its call, so threads may split a table's bags.
// False: an offset or index out of range.
template <int64_t Dim, class V>
__attribute__((always_inline)) inline bool forward_rows(const float* weight, int64_t rows, const int64_t* index,
                                                        int64_t n, const int64_t* offset, int64_t num_bags,
                                                        int64_t first, int64_t last, int64_t dim, float* out,
                                                        int64_t out_stride) {
    if (first == 0 && (num_bags == 0 ? n != 0 : offset[0] != 0)) return false;
    for (int64_t b = first; b < last; ++b) {
        int64_t begin = offset[b], end = b + 1 < num_bags ? offset[b + 1] : n;
        if (begin < 0 || end < begin || end > n) return false;
        float* pooled = out + b * out_stride;
        if constexpr (Dim > 0) {
            if (!pool_bag<Dim, V>(weight, rows, index, begin, end, n, pooled)) return false;
        } else {                                                   // a width known only at run time
            for (int64_t c = 0; c < dim; ++c) pooled[c] = 0.0f;
            for (int64_t j = begin; j < end; ++j) {
                int64_t r = index[j];
                if (r < 0 || r >= rows) return false;
                if (j + PREFETCH < n) {
                    int64_t ahead = index[j + PREFETCH];
                    if (ahead >= 0 && ahead < rows) prefetch_row(weight + ahead * dim, dim);
                }
                add_row<Dim>(pooled, weight + r * dim, dim);
            }
        }
    }
    return true;
}

// forward_rows built for 4-float vectors, and on x86-64 for AVX2's 8 where the CPU has it (chosen
// at load; `sk_tbe_vector_floats` lets the tests run both)
typedef bool (*ForwardTable)(const float*, int64_t, const int64_t*, int64_t, const int64_t*, int64_t,
                             int64_t, int64_t, int64_t, float*, int64_t);
template <int64_t Dim>
bool forward_table_4(const float* w, int64_t r, const int64_t* i, int64_t n, const int64_t* o, int64_t b,
                     int64_t f, int64_t l, int64_t d, float* out, int64_t s) {
    return forward_rows<Dim, float4>(w, r, i, n, o, b, f, l, d, out, s);
}
#if defined(__x86_64__)
template <int64_t Dim> __attribute__((target("avx2")))
bool forward_table_8(const float* w, int64_t r, const int64_t* i, int64_t n, const int64_t* o, int64_t b,
                     int64_t f, int64_t l, int64_t d, float* out, int64_t s) {
    return forward_rows<Dim, float8>(w, r, i, n, o, b, f, l, d, out, s);
}
int64_t widest_vector_floats() {
    static const int64_t widest = (__builtin_cpu_init(), __builtin_cpu_supports("avx2")) ? 8 : 4;
    return widest;
}
#else
int64_t widest_vector_floats() { return 4; }
#endif
std::atomic<int64_t> vector_floats{0};      // 0: the widest this CPU has
template <int64_t Dim> ForwardTable forward_table() {
#if defined(__x86_64__)
    int64_t floats = vector_floats.load();
    if ((floats ? floats : widest_vector_floats()) == 8) return forward_table_8<Dim>;
#endif
    return forward_table_4<Dim>;
}

// A run of a table's coalesced gradients, visiting its n lookups in sorted order: lookup(k) and
// id(k) for k in [first, last), where `first` starts an id (0, or an id unlike the one before).
// Writes the run's u ids (or addresses) to index and their sums to grad_sum. -> u, or -1.
template <int64_t Dim, class Lookup, class Id>
int64_t coalesce_run(int64_t first, int64_t last, int64_t n, Lookup lookup, Id id, const int64_t* bag_of,
                     const int64_t* address, const float* grad, int64_t stride_bag, int64_t dim,
                     int64_t* index, float* grad_sum) {
    int64_t u = -1;
    float* sum = nullptr;
    for (int64_t k = first; k < last; ++k) {
        int64_t j = lookup(k);
        if (j < 0 || j >= n) return -1;
        if (k + PREFETCH < last) {
            int64_t ahead = lookup(k + PREFETCH);
            if (ahead >= 0 && ahead < n) __builtin_prefetch(grad + bag_of[ahead] * stride_bag);
        }
        const float* g = grad + bag_of[j] * stride_bag;
        if (k == first || id(k) != id(k - 1)) {     // a new id: copy its first gradient
            ++u;
            index[u] = address ? address[j] : id(k);
            sum = grad_sum + u * dim;
            std::memcpy(sum, g, dim * sizeof(float));
        } else {                                    // the same id: add, in sorted order
            add_row<Dim>(sum, g, dim);
        }
    }
    return u + 1;
}

// One whole table's coalesced gradients (coalesce_run over all its lookups). -> u, or -1.
template <int64_t Dim, class Lookup, class Id>
int64_t coalesce_table(int64_t n, Lookup lookup, Id id, const int64_t* offset, int64_t num_bags,
                       const int64_t* address, const float* grad, int64_t stride_bag, int64_t dim,
                       int64_t* index, float* grad_sum) {
    thread_local std::vector<int64_t> bag_of;
    if (!bags_of_lookups(offset, num_bags, n, bag_of)) return -1;
    return coalesce_run<Dim>(0, n, n, lookup, id, bag_of.data(), address, grad, stride_bag, dim, index, grad_sum);
}

// Where run r of `runs` of a table's sorted lookups s [n] starts: at n*r/runs, moved on to the
// next id's first lookup, so that each id is one run's (runs may be empty where an id is long).
int64_t run_start(const Packed* s, int64_t n, int64_t runs, int64_t r) {
    if (r >= runs) return n;
    int64_t k = n * r / runs;
    while (k > 0 && k < n && id_of(s[k]) == id_of(s[k - 1])) ++k;
    return k;
}

// The distinct ids of lookups [first, last) of sorted lookups s, `first` starting an id.
int64_t distinct_ids(const Packed* s, int64_t first, int64_t last) {
    int64_t u = 0;
    for (int64_t k = first; k < last; ++k) u += k == first || id_of(s[k]) != id_of(s[k - 1]);
    return u;
}

// One table's SGD: rows index[i] (distinct) = fma(alpha, grad_sum[i], row), i < count: one rounding
// per element, as torch's add_(g, alpha=alpha). On x86-64 the FMA build runs where the CPU has the
// instruction (the same body inlined into a function compiled for it); elsewhere std::fma gives
// the same in software (arm64 has the instruction in its base set).
template <int64_t Dim>
__attribute__((always_inline)) inline void sgd_rows(float* weight, const int64_t* index, const float* grad_sum,
                                                    int64_t count, float alpha, int64_t dim) {
    const int64_t width = Dim ? Dim : dim;
    for (int64_t i = 0; i < count; ++i) {
        if (i + PREFETCH < count) prefetch_row_to_write(weight + index[i + PREFETCH] * dim, dim);
        float* row = weight + index[i] * dim;
        const float* g = grad_sum + i * dim;
        for (int64_t c = 0; c < width; ++c) row[c] = std::fma(alpha, g[c], row[c]);
    }
}
template <int64_t Dim>
void sgd_table_sw(float* w, const int64_t* i, const float* g, int64_t n, float a, int64_t d) { sgd_rows<Dim>(w, i, g, n, a, d); }
#if defined(__x86_64__)
template <int64_t Dim> __attribute__((target("fma")))
void sgd_table_hw(float* w, const int64_t* i, const float* g, int64_t n, float a, int64_t d) { sgd_rows<Dim>(w, i, g, n, a, d); }
template <int64_t Dim> auto sgd_table() { return __builtin_cpu_supports("fma") ? sgd_table_hw<Dim> : sgd_table_sw<Dim>; }
#else
template <int64_t Dim> auto sgd_table() { return sgd_table_sw<Dim>; }
#endif

}  // namespace

extern "C" {

// perm [n]: the permutation torch.sort gives ids [n] (each id and n below 2^32), for the tests and
// the first-use check// -> -1, or 0 where an id or n is out of range.
int64_t sk_tbe_sort(const int64_t* ids, int64_t n, int64_t* perm) {
    std::vector<Packed> a;
    if (!sort_like_torch(ids, n, a)) return 0;
    for (int64_t k = 0; k < n; ++k) perm[k] = position_of(a[k]);
    return -1;
}

// pooled [B, T, dim] (contiguous) from weights[t] [rows[t], dim], indices[t] [lengths[t]] and
// offsets[t] [B] of every table t. With more threads than tables, each table's bags are cut into
// `parts` runs of consecutive bags (runs_per_table; FBGEMM's CPU TBE threads over tables and bags
// alike): every thread has work, and each bag is still summed by one thread in lookup order.
int64_t sk_tbe_forward(int64_t num_tables, int64_t num_bags, int64_t dim, const float* const* weights,
                       const int64_t* rows, const int64_t* const* indices, const int64_t* lengths,
                       const int64_t* const* offsets, float* pooled, int64_t threads) {
    constexpr int64_t MIN_BAGS = 64;               // fewer a part, and waking a thread costs more
    const int64_t parts = runs_per_table(threads, num_tables, num_bags, MIN_BAGS);
    std::vector<uint8_t> bad(num_tables * parts, 0);
    by_width(dim, [&](auto width) {
        ForwardTable forward = forward_table<width()>();
        for_items(num_tables * parts, threads, [&](int64_t k) {
            int64_t t = k / parts, part = k % parts;
            int64_t first = num_bags * part / parts, last = num_bags * (part + 1) / parts;
            bad[k] = !forward(weights[t], rows[t], indices[t], lengths[t], offsets[t], num_bags, first, last,
                              dim, pooled + t * dim, num_tables * dim);
        });
    });
    int64_t k = first_bad(bad);
    return k < 0 ? k : k / parts;
}

// How many runs each of `tables` tables is cut into on `threads` threads, a run at least `least` of
// its `size` (thread_pool.h's rule; the cost model prices the loops by the same, and the tests
// hold its Python copy to this one).
int64_t sk_tbe_runs_per_table(int64_t threads, int64_t tables, int64_t size, int64_t least) {
    return runs_per_table(threads, tables, size, least);
}

// The forward's vector width in floats: `floats` 4 or 8 (8 only on an x86-64 CPU with AVX2) from
// now on, 0 the widest this CPU has; any other value changes nothing. -> the width now in use.
// For the tests, which hold every width against the torch twin.
int64_t sk_tbe_vector_floats(int64_t floats) {
    if (floats == 0 || floats == 4 || (floats == 8 && widest_vector_floats() == 8)) vector_floats.store(floats);
    int64_t now = vector_floats.load();
    return now ? now : widest_vector_floats();
}

// The coalesced gradients of every table. Table t has lookups ids[t] [lengths[t]] in bags starting
// at offsets[t] [B]; the gradient of its bag b is grad[b * stride_bag + t * stride_table + 0..dim).
// perm[t], if not null, is torch.sort's permutation of ids[t]; else they are sorted here: where
// by_id[t], by id then lookup (sort_by_id: torch.sort's own order where it sorts stably, at 32768
// lookups and more, and SummationOrder.BY_ID's), else in torch's introsort order (sort_like_torch).
// Writes its u_t distinct ids, ascending (or, where addresses[t] is not null, the address of each:
// the row or slot of its lookups), to index[starts[t] ..], their summed gradients to
// grad_sum[starts[t] ..] [u_t, dim], and u_t to counts[t]. Each table's region must hold
// lengths[t] rows.
//
// Threads take whole tables. With more threads than tables, a table sorted by id is cut into runs
// too (runs_per_table, MIN_LOOKUPS a run at least; FBGEMM's CPU backward sorts a table with a
// parallel radix sort and sums its distinct ids in blocks alike): its bags, then its radix sort's
// passes run by run (sort_by_id_in_runs), then its sorted lookups cut at id boundaries, each run's
// ids summed by one thread in sorted order. The sorted order by id then lookup is unique and each
// id is one thread's, so every sum is the same float operations in the same order at any count.
// Tables in introsort's order (or with torch's permutation) stay whole: their sort leaves equal
// ids in an order only the whole introsort gives, and they are short.
int64_t sk_tbe_backward(int64_t num_tables, int64_t num_bags, int64_t dim, const int64_t* const* ids,
                        const int64_t* const* perm, const int64_t* lengths, const int64_t* const* offsets,
                        const int64_t* const* addresses, const float* grad, int64_t stride_bag,
                        int64_t stride_table, const int64_t* starts, int64_t* index, float* grad_sum,
                        int64_t* counts, int64_t threads, const int64_t* by_id) {
    constexpr int64_t MIN_LOOKUPS = 8192;          // fewer a run, and its radix counts cost more
    std::vector<int64_t> whole, cut, runs(num_tables, 1);
    for (int64_t t = 0; t < num_tables; ++t) {
        if (perm[t] == nullptr && by_id[t]) runs[t] = runs_per_table(threads, num_tables, lengths[t], MIN_LOOKUPS);
        (runs[t] > 1 ? cut : whole).push_back(t);
    }
    // a cut table's sorted lookups (two buffers) and the bag of each lookup, at at[c] for cut[c];
    // kept by the calling thread from one call to the next (fresh pages fault in as they are written)
    thread_local std::vector<Packed> a, spare;
    thread_local std::vector<int64_t> bag_of;
    std::vector<int64_t> at(cut.size() + 1, 0), cut_of, run_of;  // item k: run run_of[k] of cut[cut_of[k]]
    for (size_t c = 0; c < cut.size(); ++c) {
        at[c + 1] = at[c] + lengths[cut[c]];
        for (int64_t r = 0; r < runs[cut[c]]; ++r) cut_of.push_back(c), run_of.push_back(r);
    }
    if (static_cast<int64_t>(a.size()) < at.back()) a.resize(at.back()), spare.resize(at.back()), bag_of.resize(at.back());
    int64_t* const bags = bag_of.data();           // (the workers' own thread_locals are other vectors)
    const int64_t items = static_cast<int64_t>(cut_of.size()), whole_tables = static_cast<int64_t>(whole.size());
    std::vector<uint8_t> bad(num_tables, 0), bad_item(items, 0);
    std::vector<SortJob> jobs;
    for (size_t c = 0; c < cut.size(); ++c)
        jobs.push_back({ids[cut[c]], lengths[cut[c]], runs[cut[c]], a.data() + at[c], spare.data() + at[c]});
    std::vector<int64_t> first(items), last(items), base(items);
    by_width(dim, [&](auto width) {
        for_items(whole_tables + items, threads, [&](int64_t item) {
            if (item >= whole_tables) {                // a run of a cut table's bags
                const int64_t k = item - whole_tables, c = cut_of[k], t = cut[c], r = run_of[k];
                bad_item[k] = !bags_of_run(offsets[t], num_bags, lengths[t], num_bags * r / runs[t],
                                           num_bags * (r + 1) / runs[t], bags + at[c]);
                return;
            }
            const int64_t t = whole[item], n = lengths[t], *id = ids[t], *order = perm[t];
            const float* grad_t = grad + t * stride_table;
            int64_t* index_t = index + starts[t];
            float* sum_t = grad_sum + starts[t] * dim;
            if (order != nullptr) {
                counts[t] = coalesce_table<width()>(
                    n, [&](int64_t k) { return order[k]; }, [&](int64_t k) { return id[order[k]]; },
                    offsets[t], num_bags, addresses[t], grad_t, stride_bag, dim, index_t, sum_t);
            } else {
                thread_local std::vector<Packed> sorted;
                if (!(by_id[t] ? sort_by_id(id, n, sorted) : sort_like_torch(id, n, sorted))) { bad[t] = 1; return; }
                const Packed* s = sorted.data();
                counts[t] = coalesce_table<width()>(
                    n, [&](int64_t k) { return position_of(s[k]); },
                    [&](int64_t k) { return static_cast<int64_t>(id_of(s[k])); },
                    offsets[t], num_bags, addresses[t], grad_t, stride_bag, dim, index_t, sum_t);
            }
            bad[t] = counts[t] < 0;
        });
        if (cut.empty()) return;
        sk::sort_by_id_in_runs(jobs, threads);
        for (int64_t k = 0; k < items; ++k) bad[cut[cut_of[k]]] |= bad_item[k] || jobs[cut_of[k]].sorted == nullptr;
        for_items(items, threads, [&](int64_t k) {     // each run's ids, from id boundaries
            const SortJob& job = jobs[cut_of[k]];
            if (bad[cut[cut_of[k]]]) return;
            first[k] = run_start(job.sorted, job.n, job.runs, run_of[k]);
            last[k] = run_start(job.sorted, job.n, job.runs, run_of[k] + 1);
            base[k] = distinct_ids(job.sorted, first[k], last[k]);
        });
        for (int64_t k = 0, u = 0; k < items; ++k) {  // where each run's sums go
            if (run_of[k] == 0) u = 0;
            int64_t mine = base[k];
            base[k] = u, u += mine;
            counts[cut[cut_of[k]]] = u;
        }
        for_items(items, threads, [&](int64_t k) {     // each run's sums
            const int64_t c = cut_of[k], t = cut[c];
            if (bad[t]) return;
            const Packed* s = jobs[c].sorted;
            bad_item[k] = coalesce_run<width()>(
                first[k], last[k], lengths[t], [&](int64_t i) { return position_of(s[i]); },
                [&](int64_t i) { return static_cast<int64_t>(id_of(s[i])); }, bags + at[c], addresses[t],
                grad + t * stride_table, stride_bag, dim, index + starts[t] + base[k],
                grad_sum + (starts[t] + base[k]) * dim) < 0;
        });
        for (int64_t k = 0; k < items; ++k) bad[cut[cut_of[k]]] |= bad_item[k];
    });
    return first_bad(bad);
}

// SGD on every table: weights[t][index[starts[t] + i]] = fma(alpha, grad_sum[starts[t] + i],
// that row) for i < counts[t]; alpha = -lr. The rows of a table must be distinct.
int64_t sk_tbe_sgd(int64_t num_tables, int64_t dim, float* const* weights, const int64_t* rows,
                   const int64_t* index, const float* grad_sum, const int64_t* starts,
                   const int64_t* counts, float alpha, int64_t threads) {
    // a table's rows are distinct, so with more threads than tables its rows are cut in runs too
    constexpr int64_t MIN_ROWS = 256;              // fewer a run, and waking a thread costs more
    int64_t most = 0;
    for (int64_t t = 0; t < num_tables; ++t) most = std::max(most, counts[t]);
    const int64_t parts = runs_per_table(threads, num_tables, most, MIN_ROWS);
    std::vector<uint8_t> bad(num_tables * parts, 0);
    for_items(num_tables * parts, threads, [&](int64_t k) {   // every row checked before any is written
        int64_t t = k / parts, part = k % parts;
        for (int64_t i = starts[t] + counts[t] * part / parts; i < starts[t] + counts[t] * (part + 1) / parts; ++i)
            if (index[i] < 0 || index[i] >= rows[t]) bad[k] = 1;
    });
    if (first_bad(bad) >= 0) return first_bad(bad) / parts;
    by_width(dim, [&](auto width) {
        auto sgd = sgd_table<width()>();
        for_items(num_tables * parts, threads, [&](int64_t k) {
            int64_t t = k / parts, part = k % parts;
            int64_t first = counts[t] * part / parts, last = counts[t] * (part + 1) / parts;
            sgd(weights[t], index + starts[t] + first, grad_sum + (starts[t] + first) * dim, last - first, alpha, dim);
        });
    });
    return -1;
}

}  // extern "C"

// ------------------------------------------------------------------------ fused backward + SGD
// SGD's backward and update in one pass, as FBGEMM's CPU TBE does them: the lookups of every table
// sorted once (sk_tbe_sort_tables, before the step changes anything), then for each distinct id its
// gradient summed and the row updated at once (sk_tbe_fused_sgd), so the sums never go through
// memory. The arithmetic and its order are sk_tbe_backward's then sk_tbe_sgd's: the first gradient
// copied, each later one added in the sorted order, then row = fma(-lr, sum, row).
namespace {

// One table's fused pass over `sorted` [n] (packed id << 32 | lookup, in summation order; checked
// by the caller: every lookup below n, every id below the table's rows).
template <int64_t Dim>
__attribute__((always_inline)) inline void fused_rows(const Packed* sorted, int64_t n, const int64_t* bag_of,
                                                      const float* grad, int64_t stride_bag, float* weight,
                                                      float alpha, int64_t dim, float* sum) {
    const int64_t width = Dim ? Dim : dim;
    for (int64_t k = 0; k < n;) {
        const uint32_t id = id_of(sorted[k]);
        if (k + PREFETCH < n) {
            prefetch_row_to_write(weight + int64_t(id_of(sorted[k + PREFETCH])) * width, width);
            __builtin_prefetch(grad + bag_of[position_of(sorted[k + PREFETCH])] * stride_bag);
        }
        std::memcpy(sum, grad + bag_of[position_of(sorted[k])] * stride_bag, width * sizeof(float));
        for (++k; k < n && id_of(sorted[k]) == id; ++k)
            add_row<Dim>(sum, grad + bag_of[position_of(sorted[k])] * stride_bag, width);
        float* row = weight + int64_t(id) * width;
        for (int64_t c = 0; c < width; ++c) row[c] = std::fma(alpha, sum[c], row[c]);
    }
}
typedef void (*FusedTable)(const Packed*, int64_t, const int64_t*, const float*, int64_t, float*, float,
                           int64_t, float*);
template <int64_t Dim>
void fused_table_sw(const Packed* s, int64_t n, const int64_t* b, const float* g, int64_t sb, float* w, float a,
                    int64_t d, float* sum) { fused_rows<Dim>(s, n, b, g, sb, w, a, d, sum); }
#if defined(__x86_64__)
// The same on AVX2 + FMA for a width known at compile time: each id's sum held in registers (8
// floats a vector; as in pool_bag), then each row element fma'd once, _mm256_fmadd_ps being
// std::fma's single rounding eight at a time.
template <int64_t Dim> __attribute__((target("avx2,fma")))
void fused_table_hw(const Packed* sorted, int64_t n, const int64_t* bag_of, const float* grad, int64_t stride_bag,
                    float* weight, float alpha, int64_t dim, float* sum_memory) {
    if constexpr (Dim == 0 || Dim % 8 != 0) {
        fused_rows<Dim>(sorted, n, bag_of, grad, stride_bag, weight, alpha, dim, sum_memory);
    } else {
        constexpr int64_t K = Dim / 8;
        const __m256 a = _mm256_set1_ps(alpha);
        for (int64_t k = 0; k < n;) {
            const uint32_t id = id_of(sorted[k]);
            if (k + PREFETCH < n) {
                prefetch_row_to_write(weight + int64_t(id_of(sorted[k + PREFETCH])) * Dim, Dim);
                __builtin_prefetch(grad + bag_of[position_of(sorted[k + PREFETCH])] * stride_bag);
            }
            const float* g = grad + bag_of[position_of(sorted[k])] * stride_bag;
            __m256 sum[K];
            for (int64_t c = 0; c < K; ++c) sum[c] = _mm256_loadu_ps(g + 8 * c);      // the first: copied
            for (++k; k < n && id_of(sorted[k]) == id; ++k) {
                g = grad + bag_of[position_of(sorted[k])] * stride_bag;
                for (int64_t c = 0; c < K; ++c) sum[c] = _mm256_add_ps(sum[c], _mm256_loadu_ps(g + 8 * c));
            }
            float* row = weight + int64_t(id) * Dim;
            for (int64_t c = 0; c < K; ++c)
                _mm256_storeu_ps(row + 8 * c, _mm256_fmadd_ps(a, sum[c], _mm256_loadu_ps(row + 8 * c)));
        }
    }
}
template <int64_t Dim> FusedTable fused_table() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? fused_table_hw<Dim> : fused_table_sw<Dim>;
}
#else
template <int64_t Dim> FusedTable fused_table() { return fused_table_sw<Dim>; }
#endif

// Whether table t's sorted lookups [n] name lookups below n and ids below rows, ascending by id.
bool sorted_in_range(const Packed* s, int64_t n, int64_t rows) {
    for (int64_t k = 0; k < n; ++k)
        if (position_of(s[k]) >= n || id_of(s[k]) >= rows || (k > 0 && id_of(s[k]) < id_of(s[k - 1])))
            return false;
    return true;
}

}  // namespace

extern "C" {

// Every table's lookups in summation order, for sk_tbe_fused_sgd: table t's ids[t] [lengths[t]],
// packed (id << 32 | lookup) into sorted[starts[t] ..]: by perm[t] where not null (torch.sort's
// permutation), else torch's order (sort_like_torch; lengths below 32768) or, where by_id[t], by
// id then lookup (a stable sort: torch.sort's order at 32768 lookups and more). Checks that every id lies below rows[t] (each at most 2^32) and that offsets[t] [B]
// are bag starts within the ids, so the update that follows cannot fail.
int64_t sk_tbe_sort_tables(int64_t num_tables, int64_t num_bags, const int64_t* const* ids,
                           const int64_t* const* perm, const int64_t* lengths, const int64_t* const* offsets,
                           const int64_t* rows, const int64_t* starts, int64_t* sorted, int64_t threads,
                           const int64_t* by_id) {
    std::vector<uint8_t> bad(num_tables, 0);
    for_items(num_tables, threads, [&](int64_t t) {
        const int64_t n = lengths[t], *id = ids[t], *order = perm[t];
        Packed* out = reinterpret_cast<Packed*>(sorted + starts[t]);
        thread_local std::vector<int64_t> bag_of;
        if (n >= (int64_t(1) << 32) || rows[t] > (int64_t(1) << 32) ||
            !bags_of_lookups(offsets[t], num_bags, n, bag_of)) { bad[t] = 1; return; }
        if (order != nullptr) {
            for (int64_t k = 0; k < n; ++k) {
                int64_t j = order[k];
                if (j < 0 || j >= n || id[j] < 0 || id[j] >= rows[t]) { bad[t] = 1; return; }
                out[k] = (Packed(id[j]) << 32) | Packed(j);
            }
        } else {
            thread_local std::vector<Packed> a;
            if (!(by_id[t] ? sort_by_id(id, n, a) : sort_like_torch(id, n, a))) { bad[t] = 1; return; }
            std::copy(a.begin(), a.end(), out);
        }
        bad[t] = !sorted_in_range(out, n, rows[t]);
    });
    return first_bad(bad);
}

// SGD on every table from sk_tbe_sort_tables' `sorted`: each distinct id's gradient (grad[b *
// stride_bag + t * stride_table + 0..dim) of each bag b holding it, summed in the sorted order)
// applied at once: weights[t][id] = fma(alpha, sum, row), alpha = -lr. Every table is checked
// before any row changes.
int64_t sk_tbe_fused_sgd(int64_t num_tables, int64_t num_bags, int64_t dim, const int64_t* sorted,
                         const int64_t* starts, const int64_t* lengths, const int64_t* const* offsets,
                         const float* grad, int64_t stride_bag, int64_t stride_table, float* const* weights,
                         const int64_t* rows, float alpha, int64_t threads) {
    std::vector<uint8_t> bad(num_tables, 0);
    std::vector<std::vector<int64_t>> bag_of(num_tables);
    for_items(num_tables, threads, [&](int64_t t) {
        bad[t] = !bags_of_lookups(offsets[t], num_bags, lengths[t], bag_of[t]) ||
                 !sorted_in_range(reinterpret_cast<const Packed*>(sorted + starts[t]), lengths[t], rows[t]);
    });
    if (first_bad(bad) >= 0) return first_bad(bad);
    by_width(dim, [&](auto width) {
        FusedTable fused = fused_table<width()>();
        for_items(num_tables, threads, [&](int64_t t) {
            thread_local std::vector<float> sum;
            sum.resize(dim);
            fused(reinterpret_cast<const Packed*>(sorted + starts[t]), lengths[t], bag_of[t].data(),
                  grad + t * stride_table, stride_bag, weights[t], alpha, dim, sum.data());
        });
    });
    return -1;
}

}  // extern "C"
