// Tables' lookups sorted by id in runs on many threads (declared in sort_runs.h).
#include "sort_runs.h"

#include <algorithm>

#include "thread_pool.h"

namespace sk {
namespace {

constexpr int RADIX = 11;                      // bits of id a pass, as sort_by_id's
constexpr int64_t DIGITS = int64_t(1) << RADIX;

inline uint32_t digit(Packed e, int shift) { return (id_of(e) >> shift) & (DIGITS - 1); }

}  // namespace

void sort_by_id_in_runs(std::vector<SortJob>& jobs, int64_t threads) {
    // every (job, run) is an item; item k is run run_of[k] of job job_of[k]
    std::vector<int64_t> job_of, run_of;
    for (size_t j = 0; j < jobs.size(); ++j)
        for (int64_t r = 0; r < jobs[j].runs; ++r) job_of.push_back(j), run_of.push_back(r);
    const int64_t items = static_cast<int64_t>(job_of.size());
    auto bounds = [&](int64_t k, int64_t& first, int64_t& last) {
        const SortJob& job = jobs[job_of[k]];
        first = job.n * run_of[k] / job.runs, last = job.n * (run_of[k] + 1) / job.runs;
    };

    // pack each run, and the bits its ids use
    const int64_t limit = int64_t(1) << 32;
    std::vector<uint32_t> bits(items, 0);
    std::vector<uint8_t> bad(items, 0);
    for_items(items, threads, [&](int64_t k) {
        const SortJob& job = jobs[job_of[k]];
        int64_t first, last;
        bounds(k, first, last);
        uint32_t used = 0;
        for (int64_t i = first; i < last; ++i) {
            int64_t id = job.ids[i];
            if (id < 0 || id >= limit || job.n >= limit) { bad[k] = 1; return; }
            job.a[i] = (Packed(id) << 32) | Packed(i);
            used |= static_cast<uint32_t>(id);
        }
        bits[k] = used;
    });
    std::vector<uint32_t> used(jobs.size(), 0);
    std::vector<uint8_t> good(jobs.size(), 1);
    std::vector<Packed*> from(jobs.size()), to(jobs.size());
    for (int64_t k = 0; k < items; ++k) used[job_of[k]] |= bits[k], good[job_of[k]] &= !bad[k];
    for (size_t j = 0; j < jobs.size(); ++j) from[j] = jobs[j].a, to[j] = jobs[j].spare;

    // the passes, as many as each job's largest id needs; counts[k * DIGITS + d]: run k's
    // elements of digit d, then where the first of them goes
    std::vector<uint32_t> counts(items * DIGITS);
    for (int shift = 0; shift < 32; shift += RADIX) {
        auto active = [&](size_t j) { return good[j] && (used[j] >> shift) != 0; };
        if (std::none_of(job_of.begin(), job_of.end(), [&](int64_t j) { return active(j); })) break;
        for_items(items, threads, [&](int64_t k) {
            if (!active(job_of[k])) return;
            int64_t first, last;
            bounds(k, first, last);
            uint32_t* count = counts.data() + k * DIGITS;
            std::fill(count, count + DIGITS, 0u);
            const Packed* in = from[job_of[k]];
            for (int64_t i = first; i < last; ++i) ++count[digit(in[i], shift)];
        });
        std::vector<int64_t> first_item(jobs.size() + 1, 0);
        for (size_t j = 0; j < jobs.size(); ++j) first_item[j + 1] = first_item[j] + jobs[j].runs;
        for_items(static_cast<int64_t>(jobs.size()), threads, [&](int64_t j) {
            if (!active(j)) return;
            uint32_t at = 0;                   // digit by digit, run by run: where each run's go
            for (int64_t d = 0; d < DIGITS; ++d)
                for (int64_t k = first_item[j]; k < first_item[j + 1]; ++k) {
                    uint32_t c = counts[k * DIGITS + d];
                    counts[k * DIGITS + d] = at, at += c;
                }
        });
        for_items(items, threads, [&](int64_t k) {
            if (!active(job_of[k])) return;
            int64_t first, last;
            bounds(k, first, last);
            uint32_t* next = counts.data() + k * DIGITS;
            const Packed* in = from[job_of[k]];
            Packed* out = to[job_of[k]];
            for (int64_t i = first; i < last; ++i) out[next[digit(in[i], shift)]++] = in[i];
        });
        for (size_t j = 0; j < jobs.size(); ++j)
            if (active(j)) std::swap(from[j], to[j]);
    }
    for (size_t j = 0; j < jobs.size(); ++j) jobs[j].sorted = good[j] ? from[j] : nullptr;
}

}  // namespace sk
