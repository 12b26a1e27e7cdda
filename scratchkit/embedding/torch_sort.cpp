// torch.sort's order of a table's ids, and the kit's by-id order (declared in torch_sort.h).
//
// torch.sort on a CPU (ATen's SortingKernel.cpp) sorts a 1-D int64 array shorter than 32768 with
// std::sort over (id, position) pairs compared by id: libstdc++'s introsort, which leaves equal ids
// in an order of its own (longer arrays get a stable radix sort; the caller passes torch's
// permutation for those). We run introsort's own steps, as libstdc++ (GCC 4.5 to 14 at least)
// writes them, each partition done without data-dependent branches (~2x faster than std::sort on
// ids that repeat). The Python side checks on first use that this order is torch's, and otherwise
// passes torch's own permutation.
#include "torch_sort.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace sk {
namespace {

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

}  // namespace

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

}  // namespace sk
