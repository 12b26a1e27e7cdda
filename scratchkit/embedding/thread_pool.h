// The host threads the table-batched loops run on (table_batched.cpp, sort_runs.cpp), and how a
// loop cuts its tables into runs for them. Built in thread_pool.cpp.
#pragma once
#include <cstdint>
#include <functional>

namespace sk {

// work(k) for every k in [0, n), on up to `threads` threads (the caller's among them), each k
// taken by the next free thread in order; returns when all are done. threads <= 1: in turn here.
void for_items(int64_t n, int64_t threads, const std::function<void(int64_t)>& work);

// How many runs a loop cuts each of `tables` tables into on `threads` threads, a run at least
// `least` of a table's `size` (bags, rows or lookups). Where there are no more threads than
// tables, whole tables keep them busy: 1. Else about RUNS_A_THREAD runs a thread: cut into
// ceil(threads / tables) runs, 14 threads on 8 tables would take 16 runs in two rounds, no faster
// than 8 threads; in ~4 runs a thread, the threads end within a quarter of a run of each other.
constexpr int64_t RUNS_A_THREAD = 4;
inline int64_t runs_per_table(int64_t threads, int64_t tables, int64_t size, int64_t least) {
    if (tables <= 0 || threads <= tables) return 1;
    int64_t runs = (RUNS_A_THREAD * threads + tables - 1) / tables;
    runs = runs < size / least ? runs : size / least;
    return runs > 1 ? runs : 1;
}

}  // namespace sk
