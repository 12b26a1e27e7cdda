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
// Tables are independent, so up to `threads` threads (a pool kept between calls) take whole tables.
// Each function returns -1, or the first table whose input was out of range (nothing is read or
// written outside the arrays, and sk_tbe_sgd checks every row before it changes any; the caller
// raises).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <vector>

namespace {

// ------------------------------------------------------------------------------------ thread pool
// Workers wait on a condition variable between calls (a thread started per call costs ~30 us).
// A forked child has none of its parent's threads, so a pool belongs to the process that made it
// and a child makes its own. Pools are never destroyed: their detached threads end with the process.
class Pool {
  public:
    // work(t) for every t in [0, n), on up to `threads` threads (the caller's among them)
    void run(int64_t n, int64_t threads, const std::function<void(int64_t)>& work) {
        std::lock_guard<std::mutex> one_job(job_mutex_);
        int64_t helpers = std::min(threads, n) - 1;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            while (static_cast<int64_t>(started_) < helpers) {
                std::thread(&Pool::serve, this, started_++, generation_).detach();   // joins this job
            }
            job_ = &work, total_ = n, wanted_ = helpers, finished_ = 0;
            next_.store(0);
            ++generation_;
        }
        wake_.notify_all();
        drain();
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return finished_ == wanted_; });
    }

  private:
    void drain() {
        for (int64_t t; (t = next_.fetch_add(1)) < total_;) (*job_)(t);
    }

    void serve(int64_t me, uint64_t seen) {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            wake_.wait(lock, [&] { return generation_ != seen; });
            seen = generation_;
            if (me >= wanted_) continue;               // not needed this time
            lock.unlock();
            drain();
            lock.lock();
            if (++finished_ == wanted_) done_.notify_one();
        }
    }

    std::mutex job_mutex_, mutex_;
    std::condition_variable wake_, done_;
    const std::function<void(int64_t)>* job_ = nullptr;
    std::atomic<int64_t> next_{0};
    int64_t total_ = 0, wanted_ = 0, finished_ = 0, started_ = 0;
    uint64_t generation_ = 0;
};

void for_tables(int64_t num_tables, int64_t threads, const std::function<void(int64_t)>& work) {
    if (threads <= 1 || num_tables <= 1) {
        for (int64_t t = 0; t < num_tables; ++t) work(t);
        return;
    }
    static std::mutex mutex;
    static Pool* pool = nullptr;
    static pid_t owner = 0;
    Pool* mine;
    {
        std::lock_guard<std::mutex> lock(mutex);
        if (pool == nullptr || owner != getpid()) pool = new Pool(), owner = getpid();
        mine = pool;
    }
    mine->run(num_tables, threads, work);
}

int64_t first_bad(const std::vector<uint8_t>& bad) {
    for (size_t t = 0; t < bad.size(); ++t)
        if (bad[t]) return static_cast<int64_t>(t);
    return -1;
}

// ------------------------------------------------------------------------- torch.sort's order
// torch.sort on a CPU (ATen's SortingKernel.cpp) sorts a 1-D int64 array shorter than 32768 with
// std::sort over (id, position) pairs compared by id: libstdc++'s introsort, which leaves equal ids
// in an order of its own (longer arrays get a stable radix sort; the caller passes torch's
// permutation for those). We run introsort's own steps, as libstdc++ (GCC 4.5 to 14 at least)
// writes them, each partition done without data-dependent branches (~2x faster than std::sort on
// ids that repeat). The Python side checks on first use that this order is torch's, and otherwise
// passes torch's own permutation.
//
// An element packs (id << 32) | position, so the ids and positions must be below 2^32.
typedef uint64_t Packed;
inline uint32_t id_of(Packed e) { return static_cast<uint32_t>(e >> 32); }
inline int64_t position_of(Packed e) { return static_cast<int64_t>(e & 0xffffffffu); }
struct ById {
    bool operator()(Packed x, Packed y) const { return id_of(x) < id_of(y); }
};

// libstdc++'s __move_median_to_first
void move_median_to_first(Packed* result, Packed* a, Packed* b, Packed* c) {
    ById less;
    if (less(*a, *b)) {
        if (less(*b, *c)) std::swap(*result, *b);
        else if (less(*a, *c)) std::swap(*result, *c);
        else std::swap(*result, *a);
    } else if (less(*a, *c)) std::swap(*result, *a);
    else if (less(*b, *c)) std::swap(*result, *c);
    else std::swap(*result, *b);
}

// libstdc++'s __unguarded_partition_pivot. Its loop moves i up to the next element >= pivot and j
// down to the next <= pivot, and swaps them until they cross. So the k-th swap pairs the k-th such
// position from the left, up[k], with the k-th from the right, down[k], while up[k] < down[k], and
// i stops at up[k] or, past it, at the last swapped j. We find those positions BLOCK at a time
// with no data-dependent branch, from either end. (A block may read a position some swap already
// changed; it lies past the crossing, where only the cut's `min` looks, and the min is the same.)
constexpr int64_t BLOCK = 64;

int64_t partition(Packed* a, int64_t first, int64_t last) {
    move_median_to_first(a + first, a + first + 1, a + first + (last - first) / 2, a + last - 1);
    const uint32_t pivot = id_of(a[first]);
    int64_t up[BLOCK], down[BLOCK];
    int64_t n_up = 0, at_up = 0, n_down = 0, at_down = 0;
    int64_t i = first + 1, j = last - 1;     // the next positions to look at from either end
    int64_t swapped_down = last;             // the last swap's down position
    for (;;) {
        if (at_up == n_up) {
            if (i >= last) return std::min(last, swapped_down);
            n_up = at_up = 0;
            for (int64_t end = std::min(i + BLOCK, last); i < end; ++i)
                up[n_up] = i, n_up += id_of(a[i]) >= pivot;
        } else if (at_down == n_down) {
            if (j < first) return std::min(up[at_up], swapped_down);   // not reached: a[first] is the pivot
            n_down = at_down = 0;
            for (int64_t end = std::max(j - BLOCK, first - 1); j > end; --j)
                down[n_down] = j, n_down += id_of(a[j]) <= pivot;
        } else {
            int64_t u = up[at_up], d = down[at_down];
            if (u >= d) return std::min(u, swapped_down);
            std::swap(a[u], a[d]);
            swapped_down = d, ++at_up, ++at_down;
        }
    }
}

// A stable insertion sort of a[first, last). libstdc++ ends std::sort with an insertion sort of the
// whole array, which never moves an element past an equal one: so it leaves the order a stable
// sort gives, which sorting each final segment (their ids are ordered segment to segment) gives too.
void insertion_sort(Packed* a, int64_t first, int64_t last) {
    for (int64_t i = first + 1; i < last; ++i) {
        Packed e = a[i];
        int64_t j = i;
        for (; j > first && id_of(e) < id_of(a[j - 1]); --j) a[j] = a[j - 1];
        a[j] = e;
    }
}

// libstdc++'s __introsort_loop, each final segment of <= 16 sorted as it is reached
void introsort_loop(Packed* a, int64_t first, int64_t last, int64_t depth) {
    while (last - first > 16) {
        if (depth == 0) {                                  // libstdc++'s heapsort fallback, itself
            std::partial_sort(a + first, a + last, a + last, ById());
            return;
        }
        --depth;
        int64_t cut = partition(a, first, last);
        introsort_loop(a, cut, last, depth);
        last = cut;
    }
    insertion_sort(a, first, last);
}

// ids [n] -> `a` [n] packed, in lookup order. False: an id or n out of range (below 2^32 each).
bool pack(const int64_t* ids, int64_t n, std::vector<Packed>& a) {
    const int64_t limit = int64_t{1} << 32;
    if (n >= limit) return false;
    a.resize(n);
    for (int64_t i = 0; i < n; ++i) {
        if (ids[i] < 0 || ids[i] >= limit) return false;
        a[i] = (static_cast<Packed>(ids[i]) << 32) | static_cast<Packed>(i);
    }
    return true;
}

// ids [n] -> `a` [n] packed in torch.sort's order (n below 32768). False: an id or n out of range.
bool sort_like_torch(const int64_t* ids, int64_t n, std::vector<Packed>& a) {
    if (!pack(ids, n, a)) return false;
    if (n > 1) introsort_loop(a.data(), 0, n, 2 * (63 - __builtin_clzll(static_cast<uint64_t>(n))));
    return true;
}

// ids [n] -> `a` [n] packed, sorted by id and, within an id, by position: the order the kit's
// `SummationOrder.BY_ID` sums in (each id's gradients in lookup order; not torch's, which leaves
// equal ids in introsort's order). A stable LSD radix sort, 11 bits of id a pass, as many passes
// as the largest id needs (2 for tables under 4M rows): ~2x introsort's speed at 2k ids.
// False: an id or n out of range.
bool sort_by_id(const int64_t* ids, int64_t n, std::vector<Packed>& a) {
    if (!pack(ids, n, a)) return false;
    thread_local std::vector<Packed> spare;
    spare.resize(n);
    uint64_t bits_of_ids = 0;                             // the passes: as many as the largest id needs
    for (int64_t i = 0; i < n; ++i) bits_of_ids |= id_of(a[i]);
    constexpr int RADIX = 11;
    Packed *from = a.data(), *to = spare.data();
    for (int shift = 0; (bits_of_ids >> shift) != 0; shift += RADIX) {
        int64_t start[(1 << RADIX) + 1] = {0};            // where each digit's run begins in `to`
        for (int64_t i = 0; i < n; ++i) ++start[((id_of(from[i]) >> shift) & ((1 << RADIX) - 1)) + 1];
        for (int d = 0; d < (1 << RADIX); ++d) start[d + 1] += start[d];
        for (int64_t i = 0; i < n; ++i) to[start[(id_of(from[i]) >> shift) & ((1 << RADIX) - 1)]++] = from[i];
        std::swap(from, to);
    }
    if (from != a.data()) std::copy(from, from + n, a.data());
    return true;
}

// ------------------------------------------------------------------------------------ row loops
// Rows of floats, four at a time through GCC's vector extension (SSE on x86-64, NEON on arm64):
// each element is still one add of the same two floats, so the sums are those of a scalar loop.
// `Dim` > 0 is the row width known to the compiler (the loops unroll); 0: `dim`, known at run time.
typedef float float4 __attribute__((vector_size(16)));
constexpr int64_t PREFETCH = 16;   // lookups ahead whose rows are requested from memory

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

// bag_of[j] = the bag of lookup j, from a table's offsets [B] and lookups n. False: bad offsets.
bool bags_of_lookups(const int64_t* offsets, int64_t num_bags, int64_t n, std::vector<int64_t>& bag_of) {
    if (num_bags == 0 ? n != 0 : offsets[0] != 0) return false;
    bag_of.resize(n);
    for (int64_t b = 0; b < num_bags; ++b) {
        int64_t begin = offsets[b], end = b + 1 < num_bags ? offsets[b + 1] : n;
        if (begin < 0 || end < begin || end > n) return false;
        for (int64_t j = begin; j < end; ++j) bag_of[j] = b;
    }
    return true;
}

// One table's pooled bags, written to out + b * out_stride. False: an offset or index out of range.
template <int64_t Dim>
bool forward_table(const float* weight, int64_t rows, const int64_t* index, int64_t n,
                   const int64_t* offset, int64_t num_bags, int64_t dim, float* out, int64_t out_stride) {
    if (num_bags == 0 ? n != 0 : offset[0] != 0) return false;
    for (int64_t b = 0; b < num_bags; ++b) {
        int64_t begin = offset[b], end = b + 1 < num_bags ? offset[b + 1] : n;
        if (begin < 0 || end < begin || end > n) return false;
        float* pooled = out + b * out_stride;
        for (int64_t c = 0; c < dim; ++c) pooled[c] = 0.0f;
        for (int64_t j = begin; j < end; ++j) {
            int64_t r = index[j];
            if (r < 0 || r >= rows) return false;
            if (j + PREFETCH < n) {
                int64_t ahead = index[j + PREFETCH];
                if (ahead >= 0 && ahead < rows) __builtin_prefetch(weight + ahead * dim);
            }
            add_row<Dim>(pooled, weight + r * dim, dim);
        }
    }
    return true;
}

// One table's coalesced gradients, visiting lookups in sorted order: lookup(k) and id(k) for
// k < n. Writes u ids (or addresses) to index and their sums to grad_sum. -> u, or -1.
template <int64_t Dim, class Lookup, class Id>
int64_t coalesce_table(int64_t n, Lookup lookup, Id id, const int64_t* offset, int64_t num_bags,
                       const int64_t* address, const float* grad, int64_t stride_bag, int64_t dim,
                       int64_t* index, float* grad_sum) {
    thread_local std::vector<int64_t> bag_of;
    if (!bags_of_lookups(offset, num_bags, n, bag_of)) return -1;
    int64_t u = -1;
    float* sum = nullptr;
    for (int64_t k = 0; k < n; ++k) {
        int64_t j = lookup(k);
        if (j < 0 || j >= n) return -1;
        if (k + PREFETCH < n) {
            int64_t ahead = lookup(k + PREFETCH);
            if (ahead >= 0 && ahead < n) __builtin_prefetch(grad + bag_of[ahead] * stride_bag);
        }
        const float* g = grad + bag_of[j] * stride_bag;
        if (k == 0 || id(k) != id(k - 1)) {     // a new id: copy its first gradient
            ++u;
            index[u] = address ? address[j] : id(k);
            sum = grad_sum + u * dim;
            std::memcpy(sum, g, dim * sizeof(float));
        } else {                                // the same id: add, in sorted order
            add_row<Dim>(sum, g, dim);
        }
    }
    return u + 1;
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
        if (i + PREFETCH < count) __builtin_prefetch(weight + index[i + PREFETCH] * dim, 1);
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
// offsets[t] [B] of every table t.
int64_t sk_tbe_forward(int64_t num_tables, int64_t num_bags, int64_t dim, const float* const* weights,
                       const int64_t* rows, const int64_t* const* indices, const int64_t* lengths,
                       const int64_t* const* offsets, float* pooled, int64_t threads) {
    std::vector<uint8_t> bad(num_tables, 0);
    by_width(dim, [&](auto width) {
        for_tables(num_tables, threads, [&](int64_t t) {
            bad[t] = !forward_table<width()>(weights[t], rows[t], indices[t], lengths[t], offsets[t],
                                             num_bags, dim, pooled + t * dim, num_tables * dim);
        });
    });
    return first_bad(bad);
}

// The coalesced gradients of every table. Table t has lookups ids[t] [lengths[t]] in bags starting
// at offsets[t] [B]; the gradient of its bag b is grad[b * stride_bag + t * stride_table + 0..dim).
// perm[t], if not null, is torch.sort's permutation of ids[t] (else computed here, see
// sort_like_torch). Writes its u_t distinct ids, ascending (or, where addresses[t] is not null,
// the address of each: the row or slot of its lookups), to index[starts[t] ..], their summed
// gradients to grad_sum[starts[t] ..] [u_t, dim], and u_t to counts[t]. Each table's region must
// hold lengths[t] rows.
int64_t sk_tbe_backward(int64_t num_tables, int64_t num_bags, int64_t dim, const int64_t* const* ids,
                        const int64_t* const* perm, const int64_t* lengths, const int64_t* const* offsets,
                        const int64_t* const* addresses, const float* grad, int64_t stride_bag,
                        int64_t stride_table, const int64_t* starts, int64_t* index, float* grad_sum,
                        int64_t* counts, int64_t threads, int64_t by_id) {
    std::vector<uint8_t> bad(num_tables, 0);
    by_width(dim, [&](auto width) {
        for_tables(num_tables, threads, [&](int64_t t) {
            const int64_t n = lengths[t], *id = ids[t], *order = perm[t];
            const float* grad_t = grad + t * stride_table;
            int64_t* index_t = index + starts[t];
            float* sum_t = grad_sum + starts[t] * dim;
            if (order != nullptr) {
                counts[t] = coalesce_table<width()>(
                    n, [&](int64_t k) { return order[k]; }, [&](int64_t k) { return id[order[k]]; },
                    offsets[t], num_bags, addresses[t], grad_t, stride_bag, dim, index_t, sum_t);
            } else {
                thread_local std::vector<Packed> sorted;
                if (!(by_id ? sort_by_id(id, n, sorted) : sort_like_torch(id, n, sorted))) { bad[t] = 1; return; }
                const Packed* s = sorted.data();
                counts[t] = coalesce_table<width()>(
                    n, [&](int64_t k) { return position_of(s[k]); },
                    [&](int64_t k) { return static_cast<int64_t>(id_of(s[k])); },
                    offsets[t], num_bags, addresses[t], grad_t, stride_bag, dim, index_t, sum_t);
            }
            bad[t] = counts[t] < 0;
        });
    });
    return first_bad(bad);
}

// SGD on every table: weights[t][index[starts[t] + i]] = fma(alpha, grad_sum[starts[t] + i],
// that row) for i < counts[t]; alpha = -lr. The rows of a table must be distinct.
int64_t sk_tbe_sgd(int64_t num_tables, int64_t dim, float* const* weights, const int64_t* rows,
                   const int64_t* index, const float* grad_sum, const int64_t* starts,
                   const int64_t* counts, float alpha, int64_t threads) {
    std::vector<uint8_t> bad(num_tables, 0);
    for (int64_t t = 0; t < num_tables; ++t)       // every row checked before any is written
        for (int64_t i = starts[t]; i < starts[t] + counts[t]; ++i)
            if (index[i] < 0 || index[i] >= rows[t]) bad[t] = 1;
    if (first_bad(bad) >= 0) return first_bad(bad);
    by_width(dim, [&](auto width) {
        auto sgd = sgd_table<width()>();
        for_tables(num_tables, threads, [&](int64_t t) {
            sgd(weights[t], index + starts[t], grad_sum + starts[t] * dim, counts[t], alpha, dim);
        });
    });
    return -1;
}

}  // extern "C"
