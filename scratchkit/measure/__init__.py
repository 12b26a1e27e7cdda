"""Measuring the trainers: side-by-side benchmarks (`bench.py`), the exactness check against plain
PyTorch (`verify.py`, `reference.py`), the cost model and its hardware profiles (`costmodel.py`,
`hardware.py`), and the fault campaign (`faults.py`)."""
