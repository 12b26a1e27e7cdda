# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · The hybrid baseline: where a training step's time goes
#
# **Shows:** the DLRM model, a mini-batch's `ids`/`offsets`, where a hybrid training step's time
# goes
#
# **You write:** an embedding bag's forward (`bag_sums`), the embedding share of a step, the Criteo
# scale for a memory budget
#
# A recommendation model such as **DLRM** turns a user's context into the probability of a click.
# It reads two kinds of input: a few *dense* numbers (counts, prices, ages), and many *sparse*
# categorical features (user id, ad id, city, ...). Each categorical feature has an **embedding
# table**: one learned row of `dim` numbers per possible value. Those tables are where almost all the
# parameters are, and in production they are far larger than a GPU's memory.
#
# The usual answer is **hybrid CPU-GPU training**: keep the tables in host (CPU) memory and put only
# the small neural networks (MLPs) on the GPU. This notebook measures what that costs.
#
# **Learning goals**
# - read a DLRM: bottom MLP, one pooled embedding bag per table, pairwise dot products, top MLP;
# - see how lopsided it is: thousands of MLP weights, millions of embedding numbers;
# - read a mini-batch in the `ids` / `offsets` form the embedding bags take;
# - measure where the time of a hybrid training step goes, stage by stage.

# %% [markdown]
# ## The model
#
# `get_profile("small")` is the course's default setup: 8 tables of 20,000 rows, rows of `dim = 16`
# numbers, 256 samples per batch, 8 ids per sample and table (the *pooling factor* `L`). The
# dense part of the model is a plain PyTorch module; the embeddings are *not* inside it, because
# each trainer keeps them somewhere else (host, device, a cache, a scratchpad) and hands the pooled
# vectors in.

# %%
from scratchkit.model import init_dense_model
from scratchkit import criteo_like, get_profile

config = get_profile("small")
model = init_dense_model(config.model, config.data.num_dense, len(config.data.table_sizes), seed=0)
model

# %%
# NBVAL_CHECK_OUTPUT

mlp_weights = sum(p.numel() for p in model.parameters())
embedding_numbers = sum(config.data.table_sizes) * config.model.dim
print(f"MLP weights:       {mlp_weights:>12,}")
print(f"embedding numbers: {embedding_numbers:>12,}  ({embedding_numbers // mlp_weights}x the MLPs)")
full = criteo_like(1.0)   # the 26 tables of the Criteo Kaggle dataset at their real sizes
print(f"Criteo Kaggle tables at dim 16: {sum(full.data.table_sizes) * 16 * 4 / 2**30:.1f} GiB of float32")

# %% [markdown]
# The Criteo Kaggle dataset is small by industry standards; production tables with wider rows reach
# hundreds of GB to TBs. A GPU has tens of GB. That gap is the whole story of this course.
#
# ## A mini-batch: `ids` and `offsets`
#
# For each table, a batch lists the row ids it looks up (`ids`, flattened) and where each sample's
# *bag* of ids starts (`offsets`). The embedding bag sums the rows of each bag into one vector: the
# *pooled* embedding. Batches are generated on demand and are always the same for the same seed.

# %%
# NBVAL_CHECK_OUTPUT

from scratchkit import SyntheticSource

source = SyntheticSource(config.data)
batch = source.batch(0)
print("table 0 ids[:16]:    ", batch.ids[0][:16])
print("table 0 offsets[:4]: ", batch.offsets[0][:4], " (bag b is ids[offsets[b]:offsets[b+1]])")
print("lookups in this batch:", batch.lookups(), "=", config.data.batch_size, "samples x",
      len(config.data.table_sizes), "tables x", config.data.pooling, "ids")

# %% [markdown]
# ### Exercise: pool the bags yourself
#
# Write `bag_sums`: what an embedding bag's forward does. `check` runs it on a few inputs (two bags, an
# id twice in a bag, an empty bag, the last bag, a real batch) and compares with PyTorch's own
# `embedding_bag`; a wrong answer names the input that failed, what came back, what was expected, and a
# hint. Until you write it, the stub raises `NotImplementedError` and the cell stops there: the rest
# of the notebook does not need it.

# %% tags=["exercise", "raises-exception"]
from scratchkit.course.exercises import check


def bag_sums(table, ids, offsets):
    """Row b of the result is the sum of table[i] over the ids i of bag b.

    table [num_rows, dim] float32, ids [n] int64, offsets [num_bags] int64: bag b is
    ids[offsets[b]:offsets[b + 1]], and the last bag runs to the end of ids. Returns [num_bags, dim].
    """
    raise NotImplementedError("bag_sums: write it, then run this cell again")


check(bag_sums)

# %% [markdown]
# ## One hybrid step, stage by stage
#
# The `hybrid` trainer does what hybrid CPU-GPU training does:
#
# | stage | where | what |
# |---|---|---|
# | `embedding_forward` | host | gather the rows of every bag from the host tables and sum them |
# | `transfer` | host <-> device | pooled vectors to the device; their gradients back |
# | `mlp` | device | forward and backward of the MLPs, and their optimizer step |
# | `embedding_backward` | host | turn the pooled gradients into one gradient per touched row |
# | `update` | host | the sparse optimizer step on those rows |
# | `data` | host | wait for the batch, which a thread of its own made ahead (synthetic here) |
#
# Every stage is timed on every step, so the breakdown below is a measurement, not a guess.
# `gpu-only` (all tables on the device) is beside it for comparison. On this machine the "device" is
# the CPU too, so both run at host-memory speed; notebook 05 uses the cost model to project the
# same steps onto GPU servers.

# %%
from scratchkit.measure.report import bench_table
from scratchkit import run_bench
from scratchkit.course.viz import stage_breakdown

results = run_bench(config, ["hybrid", "gpu-only"], steps=30, warmup=5)
display(bench_table(results))
stage_breakdown(results, share=True)

# %% [markdown]
# The embedding stages (forward, backward, update) take most of the step although the MLPs hold
# almost no parameters: each step touches thousands of scattered rows in a large table, which is
# memory-bound work. On a real hybrid system they run at host-memory speed on the CPU while the GPU
# waits, and the pooled vectors cross the PCIe link twice per step.
#
# How much data is that per step? It can be counted without a clock:

# %%
# NBVAL_CHECK_OUTPUT

B, T, L, dim = config.data.batch_size, len(config.data.table_sizes), config.data.pooling, config.model.dim
unique_rows = sum(len(set(ids.tolist())) for ids in batch.ids)
print(f"rows read per step:    {B * T * L:,} lookups of {unique_rows:,} distinct rows")
print(f"row bytes gathered:    {B * T * L * dim * 4 / 2**20:.2f} MiB")
print(f"pooled vectors across: {B * T * dim * 4 / 2**10:.0f} KiB each way")

# %% [markdown]
# ## Speed over a run
#
# `training_curves` plots samples per second (over the last 10 steps), the loss and, for trainers
# with a cache, the hit rate, step by step.

# %%
from scratchkit import make_trainer
from scratchkit.course.viz import training_curves

with make_trainer("hybrid", config) as trainer:
    records = list(trainer.train(60))
training_curves({"hybrid": records})

# %% [markdown]
# ## Exercises
#
# 1. **The embedding share.** Write `embedding_share(stage_seconds)`: from one trainer's seconds per
#    stage (a dict, as `results[0].stage_seconds` above), the share the embedding stages take.
# 2. **More ids per bag.** Make the bags four times longer (`pooling=32`) and guess first: does the
#    embedding share of a hybrid step grow or shrink? The cell after the exercise measures it beside
#    the course's `pooling=8`.
# 3. **Table memory.** Write `criteo_scale_for(gib, dim)`: the smallest Criteo scale, in steps of
#    0.01, at which the 26 tables (`criteo_like(scale).data.table_sizes`) need *more* than `gib` GiB
#    of float32 at that `dim`.

# %% tags=["exercise", "raises-exception"]
def embedding_share(stage_seconds):
    """Share of a step's time in the embedding stages: embedding_forward, embedding_backward, update."""
    raise NotImplementedError("embedding_share: write it, then run this cell again")


check(embedding_share)

# %%
from scratchkit.course.analysis import embedding_share as kit_share

longer = get_profile("small", pooling=32)
(result32,) = run_bench(longer, ["hybrid"], steps=15, warmup=3)
shares = {8: kit_share(results[0].stage_seconds), 32: kit_share(result32.stage_seconds)}
print("embedding share of a hybrid step:", ", ".join(f"pooling {p}: {100 * share:.0f}%" for p, share in shares.items()))

# %% tags=["exercise", "raises-exception"]
def criteo_scale_for(gib, dim):
    """The smallest scale k / 100 (k = 1, 2, ...) at which the Criteo tables need more than gib GiB."""
    raise NotImplementedError("criteo_scale_for: write it, then run this cell again")


check(criteo_scale_for)
