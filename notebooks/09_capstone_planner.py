# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 · Capstone: your planner in the real pipeline
#
# **Shows:** your planner in the real ScratchPipe trainer: exact vs plain PyTorch, every lookup a
# hit; a broken rule stopped at its Plan; the hazard lab when nothing stops it; beside the kit's
# planner
#
# **You write:** ScratchPipe's planner in four steps (working set, misses and free slots, victims
# that respect holds, furthest next use), then whole (`plan_batch`)
#
# Notebooks 03 and 04 took ScratchPipe's planner apart: the working set of a batch, the victims
# that respect holds, the furthest next use. Here you write the planner itself, in plain Python, and
# the real ScratchPipe trainer runs it: the same pipeline, schedule, holds and write-back order as
# with the kit's own planner. Only Plan's decisions are yours.
#
# **Learning goals**
# - write Plan(b) for one table: each id's slot, the misses to collect, the victims to evict;
# - train `small` with it, exact against plain PyTorch, every lookup in Train a hit;
# - see a broken rule stopped at the Plan where it broke, and what happens when nothing stops it;
# - compare your planner with the kit's on the same batches.
#
# **The interface.** For every table of every batch, in batch order, the trainer calls
#
# ```python
# plan_batch(b, ids, slot_ids, held, window) -> Plan(batch=b, slots=..., misses=..., victims=...)
# ```
#
# | argument | what it is |
# |---|---|
# | `b` | the batch to plan |
# | `ids` | `[n]` the batch's ids in this table, one per lookup, repeats included |
# | `slot_ids` | `[capacity]` the slot map: the id each slot will hold once the batches planned so far are inserted; `-1` is a free slot |
# | `held` | `[capacity]` bool: the slots a batch in flight (`b-D .. b-1`) still needs |
# | `window` | the ids of the next batches, `window[0]` is batch `b+1`: the look-ahead (there when Plan must evict) |
#
# and you return each lookup's slot (`slots`, `[n]`), the ids to collect from the host table
# (`misses`) and the slots whose ids leave to make room (`victims`). The kit keeps the rest: it holds
# your batch's slots until Train(b) is done, marks them dirty, writes victims home before Insert
# overwrites them, and makes each Collect wait for the write-back it needs (notebook 04's rules).

# %%
import numpy as np

from scratchkit import get_profile
from scratchkit.scratchpipe.own_planner import Plan

small = get_profile("small")
print(f"small: {len(small.data.table_sizes)} tables of {small.data.table_sizes[0]:,} rows, a scratchpad of "
      f"{small.cache.capacity:,} slots each, {small.data.batch_size * small.data.pooling:,} lookups per table "
      f"and batch, look-ahead depth {small.cache.depth}")

# %% [markdown]
# ## Step 1: the working set and its hits
#
# Write `working_set(ids, slot_ids)`: the batch's distinct ids, ascending (`unique`), and for each
# the slot it is in now, `-1` if none (`found`). An id looked up five times is one row: one slot.

# %% tags=["exercise", "raises-exception"]
from scratchkit.course.exercises import check


def working_set(ids, slot_ids):
    """(unique, found): the distinct ids ascending, and the slot of each (-1: not resident)."""
    raise NotImplementedError("working_set: write it, then run this cell again")


check(working_set)

# %% [markdown]
# ## Step 2: misses and free slots
#
# Write `misses_and_free(unique, found, slot_ids)`: the ids to collect from the host table (those
# in no slot) and the free slots, ascending. Misses take free slots first; only the misses beyond
# the free slots need victims.

# %% tags=["exercise", "raises-exception"]
def misses_and_free(unique, found, slot_ids):
    """(misses, free): the ids of the working set in no slot, and the slots holding no id."""
    raise NotImplementedError("misses_and_free: write it, then run this cell again")


check(misses_and_free)

# %% [markdown]
# ## Step 3: victims that respect the holds
#
# Write `unheld_victims(slot_ids, held, keep, count)`: `count` slots to evict, ascending, lowest
# first. A victim holds a row, is not held by a batch in flight ([invariant 4: no eviction of a
# held slot](../docs/design.md#the-invariants-and-the-test-that-holds-each)), and is not in
# `keep`, the slots of this batch's own hits (not held yet, but this batch looks them up). Too few
# candidates: raise `ValueError`.

# %% tags=["exercise", "raises-exception"]
def unheld_victims(slot_ids, held, keep, count):
    """The `count` lowest slots that hold a row, are not held, and are not in keep."""
    raise NotImplementedError("unheld_victims: write it, then run this cell again")


check(unheld_victims)

# %% [markdown]
# ## Step 4: the furthest next use
#
# ScratchPipe sees the future, so among the candidates it evicts the rows needed furthest ahead:
# an id's next use is the first batch of the window that has it (`window[0]` is 1 batch ahead), and
# an id the window never uses is the furthest of all. Write `furthest_victims(slot_ids, held, keep,
# window, count)`: the same candidates as step 3, furthest next use first, lowest slot among equals.

# %% tags=["exercise", "raises-exception"]
def furthest_victims(slot_ids, held, keep, window, count):
    """The `count` candidates whose ids come back last (or never), ascending."""
    raise NotImplementedError("furthest_victims: write it, then run this cell again")


check(furthest_victims)

# %% [markdown]
# ## Step 5: the whole plan
#
# Put the steps together: `plan_batch(b, ids, slot_ids, held, window)` returns
# `Plan(batch=b, slots=..., misses=..., victims=...)`. Hits keep their slots; the misses take the
# free slots, then the victims (as many as the misses beyond the free slots, `keep` = the hits'
# slots); `slots` has one entry per lookup of `ids`. The check holds each plan to every rule, the
# very check the trainer runs on every plan of a run.

# %% tags=["exercise", "raises-exception"]
def plan_batch(b, ids, slot_ids, held, window):
    """Plan(b) for one table: each lookup's slot, the misses to collect, the victims to evict."""
    raise NotImplementedError("plan_batch: write it, then run this cell again")


check(plan_batch)

# %% [markdown]
# ## Train with it
#
# `make_trainer("scratchpipe", config, own_planner=plan_batch)` runs your planner in the trainer's
# pipeline (on its threads; `where=` says where the kit's planner runs instead). `verify` trains it and plain PyTorch on the same batches and compares
# every parameter: 0.0 means bit for bit. 32 batches are enough for every scratchpad to fill and
# evict. (Until your `plan_batch` passes its check, a stand-in made of the checks' references plans
# in its place, so the notebook runs through.)

# %%
from scratchkit.course.capstone import ready

planner = ready(plan_batch)

# %%
# NBVAL_CHECK_OUTPUT

from scratchkit.course.capstone import planner_name
from scratchkit.measure.verify import verify

(result,) = verify(small, ["scratchpipe"], 32, own_planner=planner)
print(f"{planner_name(planner)}: max |difference| from plain PyTorch: {result.max_abs_diff}; "
      f"Train's hit rate: {result.extras['train_hit_rate']}")

# %% [markdown]
# ## A broken rule, stopped where it breaks
#
# Every plan is checked before any stage uses it. Here is a planner that forgets the holds (it is
# told nothing is held), on the hazard lab's smallest scratchpad, which evicts on most batches. The
# run stops at the Plan that chose a held victim, with the rule and the batch that holds it; the
# trainer flushes, and the host tables equal plain PyTorch's after the batches that trained.

# %%
from scratchkit import make_trainer
from scratchkit.course.hazard_lab import HazardLab
from scratchkit.measure.reference import ReferenceRun
from scratchkit.scratchpipe.own_planner import PlanMistake


def forgets_the_holds(b, ids, slot_ids, held, window):
    return planner(b, ids, slot_ids, np.zeros_like(held), window)


lab = HazardLab(small, steps=12)
with make_trainer("scratchpipe", lab.config, own_planner=forgets_the_holds) as trainer:
    try:
        list(trainer.train(12))
    except PlanMistake as mistake:
        print("stopped:", mistake)
    trained, host = trainer.next_batch, trainer.embedding_weights()
reference = ReferenceRun(lab.config, trainer.source)
reference.train(trained)
print(f"{trained} batches trained; host tables vs plain PyTorch after them: max |difference| =",
      max(float((a - b).abs().max()) for a, b in zip(host, reference.embedding_weights())))

# %% [markdown]
# ## When nothing stops it: the hazard lab
#
# The hazard lab's `Hazards(holds=False)` switches the holds off in the kit itself: no slot is
# held, so your planner is told nothing is held, the check has nothing to hold it to, and it evicts
# slots that batches in flight still need. The lab compares the run with the exact baseline and
# says which invariant broke; the replay of its events finds the first Plan that did it, and the
# rows.

# %%
from scratchkit.course.capstone import first_held_victim
from scratchkit.trainers.scratchpipe import Hazards

unsafe = lab.run(Hazards(holds=False), own_planner=planner)
for line in unsafe.verdict():
    print(line)
print(first_held_victim(unsafe))

# %% [markdown]
# ## Your planner beside the kit's
#
# The same 16 batches of `small` on the hazard lab's smallest scratchpad, where every batch evicts,
# on the same driver (threads): once with your planner, once with the kit's (the C++ loop of
# `plan_loop.cpp`, or its NumPy twin where no compiler is found). Both choose victims by furthest
# next use, so they may well move the same rows; what differs is how long Plan takes. The figure
# shows where a step's time goes: Plan runs on its own thread beside Train, and a Plan slower than
# Train sets the pace.

# %%
from scratchkit.course.capstone import breakdown_figure, side_by_side

runs = side_by_side(lab.config, 16, planner)
for run in runs:
    print(run.line())
breakdown_figure(runs)

# %% [markdown]
# ## Try this
#
# 1. **The lowest slot instead.** Replace `furthest_victims` in `plan_batch` by `unheld_victims`
#    (the lowest unheld slots, whatever comes next: no look-ahead), run its cell, then the cell
#    below. Still exact? How many more rows move?
# 2. **Each mistake once.** Make `plan_batch` give two misses the same slot, or leave a miss out of
#    `misses`, or return `Plan(batch=b + 1, ...)`: which rule does each message name?
# 3. **Deeper.** The cell below trains with `small.replace(cache=CacheParams(capacity=8192,
#    depth=4))`: what changes in your planner's work, and in the figure?

# %% tags=["try", "nbval-skip"]
from scratchkit import CacheParams
from scratchkit.course.capstone import breakdown_figure, ready, side_by_side

deeper = small.replace(cache=CacheParams(capacity=8192, depth=4))
runs = side_by_side(deeper, 16, ready(plan_batch))
for run in runs:
    print(run.line())
breakdown_figure(runs)
