# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Looking forward
#
# **Shows:** reuse between batches, the working set of a look-ahead window, OPT, look-forward
# caching at 100% hits
#
# **You write:** the working set of a look-ahead window, the minimum scratchpad size
#
# A cache that looks backwards guesses which rows will be needed. But in training there is nothing
# to guess: the mini-batches still to come are already in the dataset, and their ids can be read
# before they train. That observation is the heart of **ScratchPipe** (Kwon & Rhu, ISCA 2022).
#
# **Learning goals**
# - measure how much consecutive batches share (reuse between batches);
# - compute the *working set* of a look-ahead window: the distinct rows that the batch in training
#   and the `D` batches planned ahead of it touch together;
# - compare LRU with **OPT** (Belady's optimal policy, which knows the future);
# - see a look-forward cache hit **100%** once it can hold the window's working set.

# %% [markdown]
# ## Reuse between consecutive batches
#
# The *working set* `U_b` of batch `b` is the set of distinct ids it touches (per table). How much of
# `U_b` did batch `b-1` already touch? Those rows would still be on the device if the previous
# batch's rows were kept.

# %%
from scratchkit.course.analysis import consecutive_reuse, window_sizes, working_sets
from scratchkit import SyntheticSource
from scratchkit import get_profile
from scratchkit.course.viz import reuse_figure

config = get_profile("small")
source = SyntheticSource(config.data)
sets = working_sets(source, table=0, num_batches=30)
reuse = consecutive_reuse(sets)
reuse_figure(reuse)

# %%
# NBVAL_CHECK_OUTPUT

print(f"batch 0 makes {source.batch(0).ids[0].size} lookups in table 0, of {sets[0].size} distinct rows")
print(f"on average {100 * reuse.mean():.1f}% of a batch's rows were touched by the batch before")

# %% [markdown]
# ## The working set of a look-ahead window
#
# Suppose batch `b` trains while batches `b+1 .. b+D` are already being prepared: `D` is the
# **look-ahead depth**. All their rows must be on the device at once, so the device needs room for
# `|U_b ∪ U_b+1 ∪ ... ∪ U_b+D|` rows. If no id ever repeated, that would be `(D+1)·B·L`; skew makes
# it much smaller.

# %%
from scratchkit.course.viz import window_figure

sizes = window_sizes(source, table=0, depths=range(0, 9), num_batches=30)
window_figure(sizes)

# %%
# NBVAL_CHECK_OUTPUT

for d, largest, bound in zip(sizes.depths, sizes.max, sizes.no_reuse):
    print(f"depth {d}: the largest window touches {largest:6,} rows (no-reuse bound {bound:6,})")

# %% [markdown]
# ### Exercise: the working set of a window
#
# Write `window_working_set(sets, b, depth)`: `sets[k]` is `U_k`, the distinct ids of batch `k` (a
# sorted NumPy array, as `sets` above holds them); return how many distinct rows batches `b .. b+depth`
# touch together. `check` holds it to the kit's window count, the one the ScratchPipe trainer uses to
# size its scratchpad. Then write `min_scratchpad(sets, depth)`: the fewest rows a scratchpad needs so
# that *every* window of `depth + 1` consecutive batches fits (with fewer batches than that, the one
# window is all of them). Until you write them, the stubs raise `NotImplementedError`.

# %% tags=["exercise", "raises-exception"]
from scratchkit.course.exercises import check


def window_working_set(sets, b, depth):
    """|U_b u U_b+1 u ... u U_b+depth|: the distinct ids of batches b .. b+depth."""
    raise NotImplementedError("window_working_set: write it, then run this cell again")


check(window_working_set)

# %% tags=["exercise", "raises-exception"]
def min_scratchpad(sets, depth):
    """The largest working set of depth + 1 consecutive batches: the fewest rows that fit them all."""
    raise NotImplementedError("min_scratchpad: write it, then run this cell again")


outcome = check(min_scratchpad)
display(outcome)
if outcome:
    print(f"depth 2 over these 30 batches: {min_scratchpad(sets, 2):,} rows; the figure's largest window: "
          f"{int(sizes.max[2]):,}")

# %% [markdown]
# ## OPT: the best a cache can do when it knows the future
#
# Belady's OPT evicts the row whose next use is furthest away. No real cache that decides from the
# past can beat it. The gap between LRU and OPT is what knowing the future is worth to a cache that
# still fetches on demand.

# %%
from scratchkit.course.hit_curves import HitCurves
from scratchkit.course.viz import hit_rate_curves

curves = HitCurves(config.data, table=0, num_batches=30)
zipf, depth = 1.05, 2
needed = curves.needed(zipf, depth)
hit_rate_curves(100 * curves.load_factors,
                {p: curves.curve(zipf, p, depth) for p in ("lru", "opt", "lookahead")},
                needed=100 * needed / curves.num_rows, x_title="load factor (% of the table's rows)")

# %%
# NBVAL_CHECK_OUTPUT

for capacity in (1000, 4000):
    lru, opt = (curves.hit_rate(zipf, p, capacity) for p in ("lru", "opt"))
    print(f"{capacity:5,} rows: LRU {100 * lru:.1f}%, OPT {100 * opt:.1f}% hits")
print(f"a look-ahead window at depth {depth} needs {needed:,} rows")

# %% [markdown]
# ## Look-forward caching: every lookup hits
#
# The `lookahead` simulator does what ScratchPipe does with the trace cut into batches: before batch
# `b` trains, it makes every row of batches `b .. b+D` resident, fetching the missing ones *ahead of
# time*, and never evicts a row that a batch in flight still needs. Victims are the rows whose next
# use is furthest away. At use time, every lookup hits: the fetches still happen, but no step waits
# for them, so they can be hidden behind the training of earlier batches (notebook 04 shows how).

# %%
# NBVAL_CHECK_OUTPUT

from scratchkit.sim import simulate

trace = curves.trace(zipf)
ahead = simulate(trace, "lookahead", needed, batch_size=curves.batch_lookups, depth=depth)
lru = simulate(trace, "lru", needed)
print(f"lookahead, {needed:,} rows: {100 * ahead.hit_rate:.1f}% hits at use, {ahead.fetched_rows:,} rows fetched ahead")
print(f"LRU,       {needed:,} rows: {100 * lru.hit_rate:.1f}% hits, {lru.misses:,} misses that each stall a step")

# %% [markdown]
# A capacity below the window's working set cannot work: some row would have to be evicted while a
# batch in flight still needs it. The simulator (and the ScratchPipe trainer) refuses it and names
# the minimum:

# %%
# NBVAL_CHECK_OUTPUT

try:
    simulate(trace, "lookahead", needed - 1, batch_size=curves.batch_lookups, depth=depth)
except ValueError as error:
    print("refused:", error)

# %% [markdown]
# ## Try this
#
# Guess first, then run the cell below.
#
# 1. **Deeper look-ahead.** How many rows does a window need at depth 8? Read it off the window
#    figure (or ask your `min_scratchpad`).
# 2. **No skew.** With `zipf = 0`, how much of a batch's working set did the previous batch touch?
#    (Think of how many of the 20,000 rows one batch touches.)
# 3. **OPT vs look-forward.** At the capacity `needed`, OPT also sees the future. Does it reach 100%?
#    Why not? (Hint: OPT fetches on demand.)

# %% tags=["try"]
print("depth 8 needs", curves.needed(1.05, 8), "rows")
uniform = SyntheticSource(get_profile("small", zipf=0.0).data)
print(f"zipf 0: reuse {100 * consecutive_reuse(working_sets(uniform, 0, 10)).mean():.1f}%")
print(f"OPT at {needed} rows: {100 * curves.hit_rate(1.05, 'opt', needed):.1f}%")
