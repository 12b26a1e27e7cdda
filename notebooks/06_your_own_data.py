# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · Your own data
#
# **Shows:** a Criteo file (the kit's sample, or yours): its report, its skew, its miss-ratio
# curves, the minimum scratchpad, and every trainer on it
#
# **You write:** the rows a loaded column gets (`table_rows`), the skew of a trace (`hottest_share`)
#
# Everything so far trained on synthetic batches. This notebook does the same on a real click
# log: the Criteo format (one ad impression a line: a click label, 13 counts, 26 hashed
# categories), read with the kit's streaming loader.
#
# **Learning goals**
# - load a data file in one call, and read what the loader did to it (its report);
# - see how skewed real ids are, and what that means for LRU and OPT caches (miss-ratio curves);
# - find the smallest scratchpad ScratchPipe accepts for this data, at each look-ahead depth;
# - run every trainer on it, side by side;
# - write two of the kit's measures yourself: the rows a loaded column gets, and the skew of a trace.
#
# The kit ships a tiny *synthetic* file in the Criteo format (`datasets/samples/criteo-synthetic.tsv`,
# 48 made-up rows). Where the real 7,200-row Criteo Kaggle sample is in `datasets/real/`
# (`criteo-kaggle-sample/train.tsv`, datasets/README.md), this notebook reads that instead. To use your own
# file, set `YOUR_FILE` below to its path (a Criteo TSV, plain or `.gz`; for MovieLens use
# `scratchkit.data.open("movielens", path)`, for TorchRec's `.npy` files `"criteo-npy"`).

# %%
import scratchkit
from scratchkit.course.own_data import COMMITTED_SAMPLE, criteo_file

YOUR_FILE = None            # e.g. "/data/criteo/train.txt"
path, batch_size = criteo_file(YOUR_FILE)
print(f"reading {path.name} in batches of {batch_size}")

# %% [markdown]
# ## One call: a source and the config that matches it
#
# `scratchkit.data.open` streams the file into columns on disk (memory does not grow with the
# file) and returns a batch source and a `TrainConfig` derived from it: one embedding table per
# category, with **one row per distinct value** of that category (`max_rows=N` would cap each
# table at N rows, hashing the larger features), the data's batch size and dense features, and
# the Criteo profiles' DLRM. Every missing, clipped or skipped value is counted in the report.
# First the committed sample, whose report (its path taken relative to this folder) is the same on
# every machine:

# %%
# NBVAL_CHECK_OUTPUT
import os

committed, _ = scratchkit.data.open("criteo", os.path.relpath(COMMITTED_SAMPLE), batch_size=4)
print(committed.report)
print("table sizes:", committed.table_sizes)

# %% [markdown]
# And the file this notebook studies:

# %%
source, config = scratchkit.data.open("criteo", path, batch_size=batch_size)
print(source)
print(source.report)

# %% [markdown]
# ### Exercise: a column's rows
#
# Write `table_rows(values, max_rows)`: `values` is one categorical column as the loader reads it
# (the 8 hex digits of a Criteo hash as a `uint32`, a missing value as 0); return the row of its
# table that each value lands in, as `scratchkit/data/row_maps.py` maps them: one row per distinct
# value, in sorted order of the values, unless the column has more than `max_rows` distinct values
# (`max_rows=None`: no cap); then it is hashed, `value % max_rows`. `check` holds it to the loader's
# own maps. Until you write it, the stub raises `NotImplementedError`.

# %% tags=["exercise", "raises-exception"]
from scratchkit.course.exercises import check


def table_rows(values, max_rows):
    """values [n] uint32 -> [n] rows: the rank among the sorted distinct values, or value % max_rows."""
    raise NotImplementedError("table_rows: write it, then run this cell again")


check(table_rows)

# %% [markdown]
# ## How skewed are real ids?
#
# The access trace lists every lookup in order (each table's rows offset so that tables do not
# collide). The curve shows what share of the lookups the most popular ids serve: far above the
# diagonal, as notebook 02 found for Zipf-like synthetic data.

# %%
from scratchkit.course.analysis import top_share
from scratchkit.course.viz import skew_cdf
from scratchkit.data.trace import make_trace

trace = make_trace(source, len(source))
print(f"{trace.size:,} lookups of {len(set(trace.tolist())):,} distinct ids; the hottest 1% "
      f"serve {100 * top_share(trace, 0.01):.0f}% of them")
skew_cdf({path.name: trace})

# %% [markdown]
# ### Exercise: how skewed is a trace?
#
# Write `hottest_share(trace, fraction)`: the share of the lookups in `trace` (ids, one per lookup)
# that the hottest `fraction` of its *distinct* ids serve, the ids ranked by their number of lookups
# and their number rounded up (at least one id). An empty trace has no share: refuse it with a
# `ValueError`. `check` holds it to `top_share`, the measure printed above.

# %% tags=["exercise", "raises-exception"]
def hottest_share(trace, fraction):
    """Share of trace's lookups served by the ceil(fraction x distinct ids) most looked-up ids."""
    raise NotImplementedError("hottest_share: write it, then run this cell again")


outcome = check(hottest_share)
display(outcome)
if outcome:
    print(f"the hottest 1% of {path.name}'s ids: {100 * hottest_share(trace, 0.01):.1f}% of its lookups "
          f"(top_share: {100 * top_share(trace, 0.01):.1f}%)")

# %% [markdown]
# ## Miss-ratio curves: LRU and OPT at every size
#
# LRU's hit rate at every capacity comes from one pass over the trace (Mattson's stack
# distances); OPT (Belady: evict the row used furthest in the future) is the best any cache that
# looks only at single lookups can do. ScratchPipe does not need either curve to be high: it
# fetches every row before its batch trains.

# %%
from scratchkit.course.own_data import lru_and_opt
from scratchkit.course.viz import hit_rate_curves

capacities, curves = lru_and_opt(trace)
hit_rate_curves(capacities, curves, x_title="cache rows (all tables together)")

# %% [markdown]
# ## The smallest scratchpad
#
# ScratchPipe holds the rows of the D+1 batches in flight at once, so a table's scratchpad needs
# the largest union of D+1 consecutive working sets: `scratchkit.minimum_capacities(source,
# depth)`. The command line's `--capacity min` asks for the same number.

# %%
from scratchkit.course.own_data import minimum_by_depth

for depth, rows in minimum_by_depth(source).items():
    print(f"depth {depth}: {rows:,} rows a table (worst case, no reuse: {(depth + 1) * batch_size:,})")

# %% [markdown]
# ## Every trainer on this data
#
# The scratchpad and the caches get the minimum for depth 2; all trainers train on the same
# batches from the same initial weights (`scratchkit verify --data criteo:PATH` checks that they
# end with plain PyTorch's parameters, bit for bit).

# %%
from scratchkit.measure.report import bench_table

need = max(scratchkit.minimum_capacities(source, depth=2))
config = config.replace(cache=scratchkit.CacheParams(capacity=need, depth=2))
steps = min(20, len(source) - 2)
results = scratchkit.run_bench(config, ["gpu-only", "hybrid", "static", "lru", "lfu", "scratchpipe"],
                               steps=steps, warmup=2, source=source)
bench_table(results)

# %% [markdown]
# The same from a shell: `.venv/bin/scratchkit bench --data criteo:PATH --trainers
# gpu-only,hybrid,static,lru,lfu,scratchpipe --capacity min`.
