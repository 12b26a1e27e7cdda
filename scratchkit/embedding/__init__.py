"""Embedding tables and what every trainer does to them: rows in host memory with their optimizer
state (`tables.py`), the one lookup and sparse update (`optim.py`; all tables in one C++ loop each,
bit for bit the same, in `table_batched.py` and `fused_sgd.py`, over the loops of `tbe_native.py`),
and the caches that look backwards (`device_cache.py`, victim choice in `victims.py`)."""
