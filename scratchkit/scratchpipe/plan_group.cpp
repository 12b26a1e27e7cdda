/* Every planner of a batch (tables x stripes, plan_loop.cpp) in one call, on a pool of threads.
 *
 * Why. Calling each planner from Python costs tens of microseconds per call (ctypes, a thread
 * pool's futures, the arrays of its answer), under Python's lock: with 8 tables x 4 stripes and four
 * calls per batch that is milliseconds, as long as the plan itself on a GPU server. Here Python
 * makes one call per batch and step (see, shortfall, plan, retire); the group runs the planners on
 * `threads` threads that live as long as the group, then merges each table's stripes (as
 * stripes.py's merge_plans does) straight into the arrays Python gave.
 *
 * The pool: workers sleep on a condition variable; `run(count, job)` hands out job indices through
 * an atomic counter (the calling thread works too) and returns when all are done. With one thread
 * there are no workers at all: a group made in a process that is later forked (the host-stage
 * process, drivers.py) never has threads that the fork would lose.
 */
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

extern "C" {   // one planner (plan_loop.cpp)
void sk_plan_free(void *handle);
int64_t sk_plan_see(void *handle, int64_t k, const int64_t *ids, int64_t n);
int64_t sk_plan_shortfall(void *handle, int64_t b);
int64_t sk_plan_batch(void *handle, int64_t b, int64_t stop, int64_t *unique, int64_t *slots,
                      uint8_t *hit, int64_t *lookup_slots, int64_t *miss_ids, int64_t *miss_slots,
                      int64_t *victim_ids, int64_t *victim_slots, uint8_t *victim_dirty,
                      int64_t *held_before, int64_t *counts);
void sk_plan_retire(void *handle, int64_t k);
}

namespace {

class Pool {
public:
    explicit Pool(int64_t threads) {
        for (int64_t i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
    }
    ~Pool() {
        { std::lock_guard<std::mutex> lock(m_); stop_ = true; }
        wake_.notify_all();
        for (auto &w : workers_) w.join();
    }
    void run(int64_t count, const std::function<void(int64_t)> &job) {
        if (workers_.empty()) { for (int64_t i = 0; i < count; ++i) job(i); return; }
        {
            std::lock_guard<std::mutex> lock(m_);
            job_ = &job; count_ = count; next_ = 0; busy_ = (int64_t)workers_.size(); ++generation_;
        }
        wake_.notify_all();
        take();
        std::unique_lock<std::mutex> lock(m_);
        done_.wait(lock, [this] { return busy_ == 0; });
        job_ = nullptr;
    }

private:
    void take() { for (int64_t i; (i = next_.fetch_add(1)) < count_;) (*job_)(i); }
    void work() {
        int64_t seen = 0;
        for (;;) {
            {
                std::unique_lock<std::mutex> lock(m_);
                wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
                if (stop_) return;
                seen = generation_;
            }
            take();
            std::lock_guard<std::mutex> lock(m_);
            if (--busy_ == 0) done_.notify_one();
        }
    }
    std::vector<std::thread> workers_;
    std::mutex m_;
    std::condition_variable wake_, done_;
    const std::function<void(int64_t)> *job_ = nullptr;
    std::atomic<int64_t> next_{0};
    int64_t count_ = 0, busy_ = 0, generation_ = 0;
    bool stop_ = false;
};

struct Answer {                                   // one planner's Plan(b), before the merge
    std::vector<int64_t> unique, slots, miss_ids, miss_slots, victim_ids, victim_slots, held;
    std::vector<uint8_t> hit, victim_dirty;
    int64_t counts[5] = {0, 0, 0, 0, -1};         // u, m, v, held, wait
};

struct Group {
    std::vector<void *> planners;                 // table-major: table t's stripes are together
    std::vector<int64_t> table_of;                // [planners]
    int64_t tables, stripes;
    std::vector<Answer> answers;                  // [planners]
    Pool pool;
    Group(void **p, int64_t count, int64_t stripes, int64_t threads)
        : planners(p, p + count), tables(count / stripes), stripes(stripes), answers(count), pool(threads) {
        for (int64_t i = 0; i < count; ++i) table_of.push_back(i / stripes);
    }
    ~Group() { for (void *p : planners) sk_plan_free(p); }
};

// Table t's answer from its stripes': the working set merged back into id order (each stripe's is
// sorted, its ids are stripe mod S: merge S runs), the rest concatenated in stripe order.
void merge(Group *g, int64_t t, int64_t *const *out, int64_t *counts) {
    const Answer *a = &g->answers[t * g->stripes];
    const int64_t S = g->stripes;
    int64_t *unique = out[0], *slots = out[1], *miss_ids = out[3], *miss_slots = out[4];
    int64_t *victim_ids = out[5], *victim_slots = out[6], *held = out[8];
    uint8_t *hit = reinterpret_cast<uint8_t *>(out[2]), *victim_dirty = reinterpret_cast<uint8_t *>(out[7]);
    std::vector<int64_t> at(S, 0);
    int64_t u = 0, m = 0, v = 0, h = 0, wait = -1;
    for (int64_t s = 0; s < S; ++s) { u += a[s].counts[0]; wait = std::max(wait, a[s].counts[4]); }
    for (int64_t i = 0; i < u; ++i) {             // S small: pick the least head of S runs
        int64_t best = -1;
        for (int64_t s = 0; s < S; ++s)
            if (at[s] < a[s].counts[0] && (best < 0 || a[s].unique[at[s]] < a[best].unique[at[best]])) best = s;
        const int64_t j = at[best]++;
        unique[i] = a[best].unique[j]; slots[i] = a[best].slots[j]; hit[i] = a[best].hit[j];
    }
    for (int64_t s = 0; s < S; ++s) {
        for (int64_t j = 0; j < a[s].counts[1]; ++j, ++m) { miss_ids[m] = a[s].miss_ids[j]; miss_slots[m] = a[s].miss_slots[j]; }
        for (int64_t j = 0; j < a[s].counts[2]; ++j, ++v) {
            victim_ids[v] = a[s].victim_ids[j]; victim_slots[v] = a[s].victim_slots[j]; victim_dirty[v] = a[s].victim_dirty[j];
        }
        for (int64_t j = 0; j < a[s].counts[3]; ++j) held[h++] = a[s].held[j];
    }
    counts[0] = u; counts[1] = m; counts[2] = v; counts[3] = h; counts[4] = wait;
}

}  // namespace

extern "C" {

// A group of `count` planners (made by sk_plan_new, table-major, `stripes` per table), which it
// owns from now on, run on `threads` threads.
void *sk_group_new(void **planners, int64_t count, int64_t stripes, int64_t threads) {
    return new Group(planners, count, stripes, std::max<int64_t>(1, threads));
}

void sk_group_free(void *group) { delete static_cast<Group *>(group); }

// Batch k: table t's ids are ids[t], n[t] of them. -> 0, or -1 - the first planner whose batch
// had too many distinct ids (sk_plan_see).
int64_t sk_group_see(void *group, int64_t k, const int64_t *const *ids, const int64_t *n) {
    Group *g = static_cast<Group *>(group);
    std::atomic<int64_t> failed{-1};
    g->pool.run((int64_t)g->planners.size(), [&](int64_t i) {
        const int64_t t = g->table_of[i];
        if (sk_plan_see(g->planners[i], k, ids[t], n[t]) < 0) failed = i;
    });
    return failed < 0 ? 0 : -1 - failed.load();
}

// The most victims any planner needs for Plan(b) (<= 0: none).
int64_t sk_group_shortfall(void *group, int64_t b) {
    Group *g = static_cast<Group *>(group);
    std::vector<int64_t> need(g->planners.size());
    g->pool.run((int64_t)need.size(), [&](int64_t i) { need[i] = sk_plan_shortfall(g->planners[i], b); });
    return *std::max_element(need.begin(), need.end());
}

// Plan(b) for every table. out[t * 10 + f] is table t's array f, each sized for its n[t] lookups:
// 0 unique, 1 slots, 2 hit (uint8), 3 miss_ids, 4 miss_slots, 5 victim_ids, 6 victim_slots,
// 7 victim_dirty (uint8), 8 held_before (sized capacity), 9 lookup_slots; counts[t * 5 ...] as
// sk_plan_batch's. -> 0, or -1 - the first planner short of unheld slots.
int64_t sk_group_plan(void *group, int64_t b, int64_t stop, const int64_t *n, const int64_t *held_size,
                      int64_t *const *out, int64_t *counts) {
    Group *g = static_cast<Group *>(group);
    std::atomic<int64_t> failed{-1};
    g->pool.run((int64_t)g->planners.size(), [&](int64_t i) {
        const int64_t t = g->table_of[i];
        Answer &a = g->answers[i];
        const size_t size = (size_t)n[t];
        for (auto *v : {&a.unique, &a.slots, &a.miss_ids, &a.miss_slots, &a.victim_ids, &a.victim_slots}) v->resize(size);
        a.hit.resize(size); a.victim_dirty.resize(size); a.held.resize((size_t)held_size[t]);
        if (sk_plan_batch(g->planners[i], b, stop, a.unique.data(), a.slots.data(), a.hit.data(),
                          out[t * 10 + 9], a.miss_ids.data(), a.miss_slots.data(), a.victim_ids.data(),
                          a.victim_slots.data(), a.victim_dirty.data(), a.held.data(), a.counts) < 0)
            failed = i;
    });
    if (failed >= 0) return -1 - failed.load();
    g->pool.run(g->tables, [&](int64_t t) { merge(g, t, out + t * 10, counts + t * 5); });
    return 0;
}

// Train(k) has finished: every planner retires it.
void sk_group_retire(void *group, int64_t k) {
    Group *g = static_cast<Group *>(group);
    g->pool.run((int64_t)g->planners.size(), [&](int64_t i) { sk_plan_retire(g->planners[i], k); });
}

}  // extern "C"
