# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Welcome to scratchkit
#
# **Shows:** the kit, a first benchmark, the exactness check
#
# **You write:** nothing yet
#
# Recommendation models such as DLRM keep most of their parameters in **embedding tables**: one row
# per user, item, ad or category, hundreds of GB in production. GPUs hold far less, so the usual design
# keeps the tables in host (CPU) memory and trains only the small MLPs on the GPU: *hybrid CPU-GPU
# training*. Then every step gathers, pools and updates embedding rows at host-memory speed.
#
# This course walks from that baseline to **ScratchPipe** (Kwon & Rhu, ISCA 2022): a GPU *scratchpad*
# that looks **forward** at the mini-batches still to come, so the rows each batch needs are already
# on the device when it trains. You will see it, measure it, and check that it changes where rows
# live but never the math.
#
# **What you will learn here**
# - how the course is organised and what each notebook shows;
# - how to train the kit's trainers on identical data and read their time breakdown;
# - how the kit proves a trainer exact: every parameter compared with plain PyTorch.

# %% [markdown]
# ## The course
#
# Every notebook in this folder, as each one's opening cell describes itself:

# %%
from scratchkit.course.catalogue import course_table

course_table()

# %% [markdown]
# Everything runs on a laptop CPU; on a machine with an NVIDIA GPU the same code runs there.
# From notebook 01 on, cells marked as exercises ask you to write a short function and `check` it:
# until you do, its stub stops that cell with `NotImplementedError`, and the rest of the notebook
# runs without it.
# The logic lives in the `scratchkit` package; the notebooks call it and explain it.

# %%
from scratchkit import detect
print(detect().describe())

# %% [markdown]
# ## A first benchmark
#
# `run_bench` trains each trainer on the *same* batches of the `tiny` profile and reports samples per
# second, the ratio to the first trainer, and milliseconds per step in each stage. `gpu-only` keeps
# every table on the device; `hybrid` keeps them on the host. (On a CPU-only machine the device *is*
# the CPU, so the two take about the same time; notebook 05 shows what the cost model projects for
# real GPU servers.) The same table comes from the command line: `scratchkit bench --profile tiny`.

# %%
from scratchkit.measure.report import bench_table
from scratchkit import run_bench
from scratchkit import get_profile

config = get_profile("tiny")
bench_table(run_bench(config, ["gpu-only", "hybrid"], steps=20))

# %% [markdown]
# ## Exact, not approximately right
#
# Caching must change *where* rows live, never *what* is computed. `verify` trains plain PyTorch
# (`nn.EmbeddingBag(sparse=True)` + `torch.optim.SGD`) next to each trainer, from the same initial
# weights on the same batches, and compares every final parameter. On the CPU the difference is
# exactly 0.0: the kit does the same float operations in the same order.

# %%
# NBVAL_CHECK_OUTPUT
from scratchkit import verify

for result in verify(config, ["gpu-only", "hybrid"], steps=10):
    print(f"{result.trainer:9s} max |difference| = {result.max_abs_diff}")

# %% [markdown]
# ## Try this
#
# 1. Run the benchmark on the `small` profile (`get_profile("small")`) with `steps=30`. Which stage
#    takes the most time per step? *Check:* the largest of the table's `... ms` rows.
# 2. Verify with another optimizer: `from scratchkit.config import OptimizerConfig, OptimizerKind`,
#    then `config.replace(optimizer=OptimizerConfig(kind=OptimizerKind.ADAGRAD))`. *Check:* the
#    differences are still exactly 0.0.
#
# The cell below does both, as written here; change it and run it again.

# %% tags=["try"]
from scratchkit import get_profile, run_bench, verify
from scratchkit.config import OptimizerConfig, OptimizerKind
from scratchkit.measure.report import bench_table

display(bench_table(run_bench(get_profile("small"), ["gpu-only", "hybrid"], steps=30)))
adagrad = config.replace(optimizer=OptimizerConfig(kind=OptimizerKind.ADAGRAD))
for result in verify(adagrad, ["gpu-only", "hybrid"], steps=10):
    print(f"{result.trainer:9s} adagrad: max |difference| = {result.max_abs_diff}")
