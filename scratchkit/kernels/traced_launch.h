// traced_launch.h: cuda_compat.h's serial launcher, recording which thread changed which element.
//
// A kernel typed by a learner (notebook 08) is built for the CPU like the kit's own .cu files, with
// this header in front of cuda_compat.h. Its launcher runs the threads one after the other, as
// cuda_compat.h's does, and after each thread compares every watched array with a copy taken after
// the thread before: an element that differs was written by this thread. So, for every element,
// the checker learns the last thread that changed it (`writer`), an earlier, different thread that
// also changed it (`other`), and whether any change came without an atomic (`plain`): an element
// with two writers, one of them plain, is a race, since on a GPU the two threads run at the same
// time and either value may land. A thread that writes the very value an element already holds
// changes nothing and is not seen; such a write cannot make a result wrong in any order either.
//
// cuda_compat.h's launcher and atomics call hooks, empty there, defined here: SK_BEFORE_THREAD
// notes the thread running now in `progress[0]` (the checker names it when the kernel crashes or
// never ends), SK_AFTER_THREAD compares the watched arrays, SK_AFTER_LAUNCH sets `progress[1]`, and
// SK_ATOMIC_HOOK(address) notes an atomic's address, so a change of that element by this thread
// counts as atomic. The library exports the launcher as any host build does (SK_HOST_EXPORT).
#pragma once

#include <string.h>

#include <vector>

namespace sk_trace {

// One array the kernel may write. Python lays out the same fields (ctypes, kernels/traced.py).
struct Watch {
    unsigned char* data;       // the array, guard zones included
    unsigned char* copy;       // its contents after the previous thread
    long long elements;        // elements, guard zones included
    long long elem_bytes;      // bytes per element (4 or 8)
    long long* writer;         // [elements] the last thread that changed it, -1 = none
    long long* other;          // [elements] an earlier, different thread that changed it, -1 = none
    unsigned char* plain;      // [elements] 1 when some change was not through an atomic
};

// What the launch watches, set by sk_trace_setup before it.
static Watch* watches = nullptr;
static long long watch_count = 0;
static long long* progress = nullptr;

// Addresses this thread changed through an atomic (cleared before each thread).
static std::vector<const unsigned char*> atomic_addresses;

inline void note_atomic(const void* address) {
    atomic_addresses.push_back(static_cast<const unsigned char*>(address));
}

inline bool through_atomic(const unsigned char* element, long long bytes) {
    for (const unsigned char* a : atomic_addresses)
        if (a >= element && a < element + bytes) return true;
    return false;
}

inline void before_thread(long long thread) {
    progress[0] = thread;
    atomic_addresses.clear();
}

// After thread `thread`: who changed what, then a fresh copy of what changed.
inline void after_thread(long long thread) {
    for (long long w = 0; w < watch_count; ++w) {
        Watch& watch = watches[w];
        const long long size = watch.elem_bytes;
        if (memcmp(watch.data, watch.copy, (size_t)(watch.elements * size)) == 0) continue;
        for (long long e = 0; e < watch.elements; ++e) {
            unsigned char* now = watch.data + e * size;
            unsigned char* before = watch.copy + e * size;
            if (memcmp(now, before, (size_t)size) == 0) continue;
            if (watch.writer[e] >= 0 && watch.writer[e] != thread && watch.other[e] < 0)
                watch.other[e] = watch.writer[e];
            watch.writer[e] = thread;
            if (!through_atomic(now, size)) watch.plain[e] = 1;
            memcpy(before, now, (size_t)size);
        }
    }
}

}  // namespace sk_trace

// The checker calls this once before each launch (ctypes): the arrays to watch, and where to
// write the running thread (progress[0]) and the end of the launch (progress[1] = 1).
extern "C" __attribute__((visibility("default"))) void sk_trace_setup(sk_trace::Watch* watches,
                                                                      long long count,
                                                                      long long* progress) {
    sk_trace::watches = watches;
    sk_trace::watch_count = count;
    sk_trace::progress = progress;
}

#define SK_ATOMIC_HOOK(address) sk_trace::note_atomic(address)
#define SK_BEFORE_THREAD(thread) sk_trace::before_thread(thread)
#define SK_AFTER_THREAD(thread) sk_trace::after_thread(thread)
#define SK_AFTER_LAUNCH() (sk_trace::progress[1] = 1)
#include "cuda_compat.h"
