// cuda_compat.h: just enough CUDA to run the kernels of this folder on a CPU.
//
// The .cu files are plain CUDA; nvcc and NVRTC compile them as they are. To *run* them where no
// GPU exists (CI, laptops), scratchkit/kernels/host_build.py compiles, with the system g++, a small
// translation unit that includes this header, then a .cu file, then one SK_HOST_EXPORT line per
// kernel. This header supplies:
//
//   * the CUDA keywords (__global__, __device__, __forceinline__) as plain C++;
//   * threadIdx / blockIdx / blockDim / gridDim as thread-local variables;
//   * a launcher that runs the kernel once for every (block, thread) pair, serially, in the order
//     block 0 thread 0, block 0 thread 1, ..., i.e. in increasing global thread index;
//   * the atomics the kernels use, as plain read-modify-write operations.
//
// Plain operations are enough for the atomics because one launch runs its threads one after the
// other: no two threads of a launch ever overlap. (Two launches on the same arrays from two host
// threads would race, exactly as two unsynchronised CUDA streams would; callers do not do that.)
// Serial execution also makes the host build deterministic: wherever a kernel's result depends on
// the order threads reach an atomic, the host build gives the "thread order" result, which is the
// order the NumPy twins use, so host build and twin can be compared bit for bit.
//
// Limits, on purpose: no __syncthreads and no __shared__. A serial launcher cannot run a block's
// threads up to a barrier and then resume them, so a kernel that needs one fails to build here
// with a message, rather than running wrong.
#pragma once

#if defined(__CUDACC__)
#error "cuda_compat.h is for host (g++) builds only; nvcc and NVRTC compile the .cu files directly"
#endif

#include <math.h>

// A kernel is an ordinary function here; always_inline lets the launcher's loop absorb its body.
#define __global__ __attribute__((always_inline)) inline
#define __device__
#define __host__
#define __forceinline__ inline
#define __syncthreads() static_assert(sizeof(int) == 0, "__syncthreads cannot run in the serial host build")
#define __shared__ static_assert(sizeof(int) == 0, "__shared__ memory is not supported by the host build");

struct uint3 {
    unsigned int x, y, z;
};

struct dim3 {
    unsigned int x, y, z;
};

// One copy per host thread, so two Python threads may launch (different) kernels at once.
// `static` (one translation unit per .cu) lets g++ find the thread's copies once per launch.
static thread_local uint3 threadIdx = {0, 0, 0};
static thread_local uint3 blockIdx = {0, 0, 0};
static thread_local dim3 blockDim = {1, 1, 1};
static thread_local dim3 gridDim = {1, 1, 1};

// ---- atomics: each returns the old value, as CUDA's do --------------------------------------
// SK_ATOMIC_HOOK(address) runs first in each: nothing here; traced_launch.h defines it to note
// which elements a thread changed through an atomic (a race detector must not flag those).
#ifndef SK_ATOMIC_HOOK
#define SK_ATOMIC_HOOK(address)
#endif

inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare,
                                    unsigned long long value) {
    SK_ATOMIC_HOOK(address);
    unsigned long long old = *address;
    if (old == compare) *address = value;
    return old;
}

inline unsigned long long atomicExch(unsigned long long* address, unsigned long long value) {
    SK_ATOMIC_HOOK(address);
    unsigned long long old = *address;
    *address = value;
    return old;
}

inline unsigned long long atomicAdd(unsigned long long* address, unsigned long long value) {
    SK_ATOMIC_HOOK(address);
    unsigned long long old = *address;
    *address = old + value;
    return old;
}

inline float atomicAdd(float* address, float value) {
    SK_ATOMIC_HOOK(address);
    float old = *address;
    *address = old + value;
    return old;
}

inline int atomicAdd(int* address, int value) {
    SK_ATOMIC_HOOK(address);
    int old = *address;
    *address = old + value;
    return old;
}

// ---- the launcher -----------------------------------------------------------------------------
namespace sk {

template <auto Kernel>
struct launcher;

// launcher<&k>::run(grid, block, args...) is the host version of k<<<grid, block>>>(args...):
// a 1-D grid of 1-D blocks, every thread run to completion before the next one starts.
// SK_BEFORE_THREAD / SK_AFTER_THREAD(global thread index) and SK_AFTER_LAUNCH() are empty here;
// traced_launch.h defines them to record which thread changed what.
#ifndef SK_BEFORE_THREAD
#define SK_BEFORE_THREAD(thread)
#define SK_AFTER_THREAD(thread)
#define SK_AFTER_LAUNCH()
#endif

template <typename... Args, void (*Kernel)(Args...)>
struct launcher<Kernel> {
    static void run(unsigned int grid, unsigned int block, Args... args) {
        gridDim = {grid, 1, 1};
        blockDim = {block, 1, 1};
        for (unsigned int b = 0; b < grid; ++b) {
            blockIdx = {b, 0, 0};
            for (unsigned int t = 0; t < block; ++t) {
                threadIdx = {t, 0, 0};
                SK_BEFORE_THREAD((long long)b * block + t);
                Kernel(args...);
                SK_AFTER_THREAD((long long)b * block + t);
            }
        }
        SK_AFTER_LAUNCH();
    }
};

}  // namespace sk

// SK_HOST_EXPORT(k) exports `void* sk_launcher_k(void)`, which returns the address of
// launcher<&k>::run. Python (ctypes) calls it once and wraps the address in a CFUNCTYPE whose
// argument types are (unsigned grid, unsigned block, <the kernel's own arguments>).
#define SK_HOST_EXPORT(name)                                                        \
    extern "C" __attribute__((visibility("default"))) void* sk_launcher_##name(void) { \
        return reinterpret_cast<void*>(&sk::launcher<&name>::run);                 \
    }
