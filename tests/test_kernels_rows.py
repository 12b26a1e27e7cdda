"""rows.cu (gather / scatter by slot) against plain NumPy indexing, on every engine."""

import numpy as np
import pytest

from scratchkit.kernels import make_engine


def host(engine, a):
    return a if engine.xp is np else engine.xp.asnumpy(a)


@pytest.mark.parametrize("width", [1, 3, 16])
@pytest.mark.parametrize("n", [0, 1, 37])
def test_gather_rows(engine, width, n):
    rng = np.random.default_rng(n * 100 + width)
    table = rng.standard_normal((50, width)).astype(np.float32)
    slots = rng.integers(0, 50, n)  # repeats allowed when reading
    got = host(engine, engine.gather_rows(engine.xp.asarray(table), engine.xp.asarray(slots)))
    assert got.shape == (n, width)
    for i, slot in enumerate(slots):
        np.testing.assert_array_equal(got[i], table[slot])


@pytest.mark.parametrize("width", [1, 3, 16])
@pytest.mark.parametrize("n", [0, 1, 37])
def test_scatter_rows(engine, width, n):
    rng = np.random.default_rng(n * 100 + width)
    table = rng.standard_normal((50, width)).astype(np.float32)
    slots = rng.choice(50, size=n, replace=False)
    src = rng.standard_normal((n, width)).astype(np.float32)
    device_table = engine.xp.asarray(table)
    engine.scatter_rows(device_table, engine.xp.asarray(slots), engine.xp.asarray(src))
    want = table.copy()
    for i, slot in enumerate(slots):
        want[slot] = src[i]
    np.testing.assert_array_equal(host(engine, device_table), want)


def test_host_launches_from_two_threads_at_once_stay_correct():
    """ctypes releases the GIL, so two Python threads really launch host kernels concurrently;
    thread-local threadIdx/blockIdx keep their launches apart (a pipeline does exactly this)."""
    import threading

    engine = make_engine("host", threads_per_block=32)
    rng = np.random.default_rng(0)
    table = rng.standard_normal((500, 24)).astype(np.float32)
    slot_batches = [rng.integers(0, 500, 3000) for _ in range(2)]
    errors = []

    def work(slots):
        for _ in range(200):
            if not np.array_equal(engine.gather_rows(table, slots), table[slots]):
                errors.append("wrong rows")
                return

    threads = [threading.Thread(target=work, args=(s,)) for s in slot_batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
