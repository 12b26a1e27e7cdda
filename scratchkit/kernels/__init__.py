"""The scratchpad's kernels: CUDA source, a NumPy twin of each, and three ways to run them.

    hashmap.cu        id -> slot map: open addressing, linear probing, atomicCAS insert, tombstones
    rows.cu           gather / scatter whole rows by slot
    embedding_bag.cu  pooled forward by slot; backward fused with SGD / (row-wise) Adagrad
    cuda_compat.h     just enough CUDA for g++ to build and run the .cu files on a CPU
    twin.py           NumPy twins: the readable specification the kernels are tested against
    host_build.py     g++ build into a cache folder + ctypes launcher (CI runs the .cu this way)
    cupy_loader.py    cupy.RawModule launcher for a real GPU (compiled on first use)
    launched.py       the kernels as Python functions, for either launcher
    engine.py         EngineKind (AUTO, TWIN, HOST, CUPY) and make_engine
    traced.py         a kernel given as source text, built for the CPU with traced_launch.h: which
                      thread wrote each element (notebook 08's puzzles, their race check)

Nothing here imports CuPy or compiles anything at import time.
"""

from .engine import EngineKind, make_engine, resolve

__all__ = ["EngineKind", "make_engine", "resolve"]
