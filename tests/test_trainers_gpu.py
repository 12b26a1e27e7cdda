"""On a CUDA GPU: every trainer agrees with plain PyTorch on the GPU within the stated tolerance.

Atomics in CUDA's embedding backward and cuBLAS reorder float sums, so GPU runs are compared with
`scratchkit.measure.verify.GPU_TOLERANCE` instead of 0.0. Skipped where there is no GPU (CI).
"""

import pytest

from scratchkit.backend import detect
from scratchkit.config import CacheParams
from scratchkit.measure.verify import GPU_TOLERANCE, verify

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (detect().torch_cuda and detect().cupy_gpu), reason="needs torch CUDA and CuPy on an NVIDIA GPU"
    ),
]


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_all_trainers_match_the_reference_on_the_gpu(tiny_config, depth):
    config = tiny_config.replace(cache=CacheParams(capacity=200, depth=depth))
    results = list(
        verify(
            config,
            ["gpu-only", "hybrid", "static", "lru", "lfu", "prefetch-lru", "scratchpipe"],
            steps=20,
            device="cuda",
        )
    )
    for r in results:
        print(f"depth {depth} {r.trainer}: max |diff| {r.max_abs_diff:.3e}")
        assert r.device == "cuda" and r.tolerance == GPU_TOLERANCE
        assert r.max_abs_diff <= GPU_TOLERANCE, r
    assert results[-1].extras["train_hit_rate"] == 1.0
