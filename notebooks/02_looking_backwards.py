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
# **Shows:** skew of synthetic (and real Criteo) ids; static, LRU and LFU hit rate vs cache size
# with a slider explorer; exact vs sampled (SHARDS) LRU curves; why misses cap the speed-up (Amdahl)
#
# **You write:** an LRU cache's hit count, Amdahl's bound, the smallest cache for a hit rate
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
# Kaggle sample is in `datasets/real/` (datasets/README.md), its curve is drawn too.

# %%
from scratchkit.data.criteo import load_criteo
from scratchkit.data.samples import KAGGLE_SAMPLE
from scratchkit.data.trace import make_trace
from scratchkit.course.hit_curves import HitCurves
from scratchkit import get_profile
from scratchkit.course.viz import skew_cdf

config = get_profile("small")
curves = HitCurves(config.data, table=0, num_batches=30)   # table 0: 20,000 rows, 30 batches
traces = {f"synthetic, zipf {z}": curves.trace(z) for z in (0.0, 0.8, 1.05, 1.3)}
criteo = KAGGLE_SAMPLE
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
# ### Exercise: count LRU's hits yourself
#
# Write `lru_hits(trace, capacity)`: how many lookups of `trace` find their id already cached in an
# LRU cache of `capacity` rows that starts empty. (A Python `collections.OrderedDict` makes a fine
# LRU list: `move_to_end` on a hit, `popitem(last=False)` to evict.) `check` compares your count with
# the kit's simulator, which the tests hold to libCacheSim, on small traces that each test one rule.
# Until you write it the stub raises `NotImplementedError`; nothing below needs it.

# %% tags=["exercise", "raises-exception"]
from scratchkit.course.exercises import check


def lru_hits(trace, capacity):
    """Hits of an LRU cache of `capacity` rows (empty at first) over the ids of `trace`, in order."""
    raise NotImplementedError("lru_hits: write it, then run this cell again")


check(lru_hits)

# %% [markdown]
# ## Exact or sampled?
#
# One pass of Mattson's stack gives LRU's hits at *every* size. On a trace of billions of lookups
# even that pass is long, so profilers sample: **SHARDS** keeps only the ids whose hash falls below a
# threshold (a share `R` of the ids, with all their reuses) and scales what it sees by `1/R`. Below
# `1/R` rows a sampled curve has less than one sampled id per row, so it is trusted from there up.
# Here the exact curve of the same trace beside two sampled ones, and what sampling costs: its error
# against the exact curve (hit-rate percentage points) and its time. On a trace this small the exact
# pass takes milliseconds too; sampling pays off on traces too long for one pass, and its memory
# follows the sample, not the distinct ids.

# %%
from scratchkit.course.analysis import sampled_lru
from scratchkit.course.tables import sampling_table
from scratchkit.course.viz import sampled_curves

samples = sampled_lru(curves.trace(zipf), rates=(1.0, 0.1, 0.01))
display(sampling_table(samples))
sampled_curves(samples, curves.num_rows)

# %% [markdown]
# ## Explore
#
# Move the sliders: **load factor** (cache size), **locality** (the Zipf exponent; a new value takes
# a second the first time, while its trace and curves are computed), and **look-ahead depth** (used
# in notebook 03: the green dashed line is where a cache that looks *forward* would hit 100%). Pick
# policies in the list (ctrl/cmd-click for several). The text above the plot gives exact hit rates
# at the chosen size.

# %%
from scratchkit.course.cache_explorer import CacheExplorer

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
# ## Exercises
#
# 1. **Amdahl.** Write `embedding_speedup(hit_rate, hit_speedup)`: how much faster the embedding work
#    gets when a `hit_rate` share of its lookups runs `hit_speedup` times faster and the misses do not.
# 2. **Enough for 80%?** First find it with the explorer's slider: at `zipf = 1.05`, the smallest load
#    factor at which LRU reaches 80% hits. Then write `smallest_capacity(hits, lookups, target)`, where
#    `hits[c - 1]` is LRU's hit count with `c` rows (`curves.lru_hits(zipf)` is that array, from one
#    pass): the smallest capacity whose hit rate reaches `target`, or `None`. The cell prints your
#    function's answer on the real curve once its check passes.
# 3. **Uniform ids.** With `zipf = 0` every row is equally likely. What hit rate does LRU get with a
#    10% cache (2,000 rows)? Guess first, then run the last cell.

# %% tags=["exercise", "raises-exception"]
def embedding_speedup(hit_rate, hit_speedup):
    """Speed-up of the embedding work when hits run hit_speedup times faster than misses."""
    raise NotImplementedError("embedding_speedup: write it, then run this cell again")


check(embedding_speedup)

# %% tags=["exercise", "raises-exception"]
def smallest_capacity(hits, lookups, target):
    """The smallest capacity c >= 1 with hits[c - 1] / lookups >= target; None if there is none."""
    raise NotImplementedError("smallest_capacity: write it, then run this cell again")


outcome = check(smallest_capacity)
display(outcome)
if outcome:
    rows = smallest_capacity(curves.lru_hits(1.05), curves.trace(1.05).size, 0.8)
    print(f"LRU reaches 80% at {rows:,} rows: load factor {rows / curves.num_rows:.3f}")

# %%
print(f"uniform ids, LRU with 2,000 rows: {100 * curves.hit_rate(0.0, 'lru', 2000):.1f}% hits")
