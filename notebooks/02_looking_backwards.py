# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Caches that look backwards
#
# Hybrid training reads every row from host memory. But the rows are not read equally often: in
# click logs a few ids (popular items, big cities) appear in a large share of the samples. So a
# natural fix is to **cache** the hot rows in the GPU's memory and read them there. This notebook
# measures how well caches that decide from the *past* do.
#
# **Learning goals**
# - measure *skew*: what share of the lookups the hottest rows serve;
# - compare three classic caches: **static** (pin the rows that were hot in a profiled sample),
#   **LRU** (evict the least recently used row) and **LFU** (evict the least frequently used);
# - read a hit-rate-vs-capacity curve, and explore it with sliders;
# - see why a cache's misses cap the speed-up it can give (Amdahl's law).
#
# Vocabulary: a cache of `capacity` rows for a table of `num_rows` rows has **load factor**
# `capacity / num_rows`. The **hit rate** is hits / lookups, counted per lookup.

# %% [markdown]
# ## Skew
#
# The synthetic data draws ids from a *Zipf* law: the k-th most popular row is drawn with weight
# `1 / k^s`. The exponent `s` (the `zipf` knob) is the locality: `0` is uniform, around `1` looks like
# real click logs. A curve above the diagonal means a few ids serve most lookups. When the Criteo
# Kaggle sample is present beside the project (`../shared/data`), its curve is drawn too.

# %%
from pathlib import Path

from scratchkit.data.criteo import load_criteo
from scratchkit.data.trace import make_trace
from scratchkit.course.hit_curves import HitCurves
from scratchkit import get_profile
from scratchkit.course.viz import skew_cdf

config = get_profile("small")
curves = HitCurves(config.data, table=0, num_batches=30)   # table 0: 20,000 rows, 30 batches
traces = {f"synthetic, zipf {z}": curves.trace(z) for z in (0.0, 0.8, 1.05, 1.3)}
criteo = Path("../../shared/data/criteo-kaggle-sample/train.tsv")
if criteo.exists():
    real = load_criteo(criteo, table_sizes=1 << 24, batch_size=256)
    traces["Criteo Kaggle sample (26 tables)"] = make_trace(real, real.num_batches)
skew_cdf(traces)

# %%
# NBVAL_CHECK_OUTPUT

from scratchkit.course.analysis import top_share

for z in (0.0, 0.8, 1.05, 1.3):
    print(f"zipf {z:4}: the hottest 1% of ids serve {100 * top_share(curves.trace(z), 0.01):5.1f}% of the lookups")

# %% [markdown]
# ## Hit rate vs cache size
#
# Each policy is simulated on the same access trace (table 0 over 30 batches, 61,440 lookups):
#
# - **static** counts ids on the first 10% of the trace and pins the most frequent; it never changes;
# - **LRU** keeps the most recently used rows; a miss evicts the one unused for longest;
# - **LFU** keeps the most frequently used rows (ties: least recently used).
#
# LRU's whole curve comes from one pass over the trace (Mattson's stack distances); the others run
# one simulation per size. Every number is an exact count, checked against libCacheSim in the tests.

# %%
from scratchkit.course.viz import hit_rate_curves

zipf = 1.05
policies = ("static", "lru", "lfu")
hit_rate_curves(100 * curves.load_factors, {p: curves.curve(zipf, p) for p in policies},
                x_title="load factor (% of the table's rows)")

# %%
# NBVAL_CHECK_OUTPUT

capacity = 1000   # 5% of the table
for policy in policies:
    print(f"{policy:6s} at {capacity} rows: {100 * curves.hit_rate(zipf, policy, capacity):.1f}% hits")

# %% [markdown]
# ## Explore
#
# Move the sliders: **load factor** (cache size), **locality** (the Zipf exponent; a new value takes
# a second the first time, while its trace and curves are computed), and **look-ahead depth** (used
# in notebook 03: the green dashed line is where a cache that looks *forward* would hit 100%). Pick
# policies in the list (ctrl/cmd-click for several). The text above the plot gives exact hit rates
# at the chosen size.

# %%
from scratchkit.course.widgets import CacheExplorer

CacheExplorer(curves, policies=("static", "lru", "lfu", "lookahead"), load_factor=0.05, zipf=1.05, depth=2)

# %% [markdown]
# ## Why misses cap the speed-up
#
# Say a hit is served `s` times faster than a miss (GPU memory vs host memory and PCIe). With hit
# rate `h` the embedding work takes `(1 - h) + h / s` of its hybrid time. However large `s`, the
# speed-up stays below `1 / (1 - h)`: with 80% hits, at most 5x. To go further, the misses
# themselves must go, which is what looking forward does (notebook 03).

# %%
from scratchkit.course.viz import amdahl_figure

lru_rate = curves.hit_rate(zipf, "lru", capacity)
amdahl_figure(hit_speedups=(2, 10, 100), marker=lru_rate)

# %%
# NBVAL_CHECK_OUTPUT

from scratchkit.course.analysis import amdahl_speedup

for s in (10, 100, 1_000_000):
    print(f"LRU's {100 * lru_rate:.1f}% hits, hits {s:>9,}x faster: embedding work {amdahl_speedup(lru_rate, s):.2f}x faster")

# %% [markdown]
# ## Try this
#
# 1. **Uniform ids.** With `zipf = 0` every row is equally likely. What hit rate does LRU get with a
#    10% cache (2,000 rows)? Guess first, then *check* with the cell below.
# 2. **Enough for 80%?** At `zipf = 1.05`, find the smallest load factor at which LRU reaches 80%
#    hits, using the explorer's slider. *Check:* set `capacity` below to your answer x 20,000.
# 3. **The cap.** If LRU hit 95%, what is the largest speed-up any hit speed could give?
#    *Check:* `amdahl_speedup(0.95, 1e12)`.

# %%
print(f"uniform ids, LRU with 2,000 rows: {100 * curves.hit_rate(0.0, 'lru', 2000):.1f}% hits")
capacity = 4000                                 # your answer to 2, in rows
print(f"zipf 1.05, LRU with {capacity} rows: {100 * curves.hit_rate(1.05, 'lru', capacity):.1f}% hits")
print(f"95% hits cap the speed-up at {amdahl_speedup(0.95, 1e12):.1f}x")
