// Tables' lookups sorted by id then lookup position, each table's lookups cut into runs for the
// threads (table_batched.cpp's backward, where a table is long enough to be cut). Built in
// sort_runs.cpp.
#pragma once
#include <cstdint>
#include <vector>

#include "torch_sort.h"

namespace sk {

// One table's lookups to sort: ids [n] cut into `runs` runs (run r: lookups n*r/runs ..
// n*(r+1)/runs), sorted through `a` and `spare` ([n] each). Afterwards `sorted` is whichever of
// the two holds the result, or null where an id or n was out of range (below 2^32 each).
struct SortJob {
    const int64_t* ids;
    int64_t n, runs;
    Packed *a, *spare;
    const Packed* sorted = nullptr;
};

// Every job's lookups packed (id << 32 | position) and sorted stably by id: the order sort_by_id
// (torch_sort.cpp) gives, which is unique (ids ascending, equal ids in lookup order), so the same
// whatever the runs and the threads. Each pass of the LSD radix sort counts each run's digits,
// then moves each run's elements to where its digits start: a run's elements keep their order,
// and runs are placed in order, so equal digits keep theirs.
void sort_by_id_in_runs(std::vector<SortJob>& jobs, int64_t threads);

}  // namespace sk
