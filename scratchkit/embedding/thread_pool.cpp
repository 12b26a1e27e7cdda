// The host threads of the table-batched loops (declared in thread_pool.h).
//
// Workers wait on a condition variable between calls (a thread started per call costs ~30 us).
// A forked child has none of its parent's threads, so a pool belongs to the process that made it
// and a child makes its own. Pools are never destroyed: their detached threads end with the process.
#include "thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace sk {
namespace {

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

}  // namespace

void for_items(int64_t n, int64_t threads, const std::function<void(int64_t)>& work) {
    if (threads <= 1 || n <= 1) {
        for (int64_t k = 0; k < n; ++k) work(k);
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
    mine->run(n, threads, work);
}

}  // namespace sk
