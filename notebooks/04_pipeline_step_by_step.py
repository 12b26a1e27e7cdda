# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · The pipeline, step by step
#
# **Shows:** ScratchPipe's stages on a timeline, the scratchpad's slots, a step-by-step visualizer
# and the hazard lab
#
# **You write:** a victim choice that respects holds, the rule for when Insert may start
#
# Notebook 03 showed that a scratchpad which looks forward hits 100%. This notebook opens the
# machine that makes it so: **ScratchPipe**'s pipeline, which prepares the rows of the next batches
# *while* the current batch trains, and the rules that keep it exact.
#
# **Learning goals**
# - name the stages a batch goes through and what each one does;
# - read a pipeline timeline: several batches in different stages at the same moment;
# - follow the scratchpad's slots: free, held by a batch in flight, chosen as a victim, just filled;
# - use the hazard lab to break a safety rule on purpose and see which guarantee fails.
#
# *A note on names.* Only the paper's abstract was at hand when this kit was written; the stage names
# below are the kit's own decomposition and may differ from the paper's. All numbers shown are
# measured by the kit, on this machine.

# %% [markdown]
# ## The stages of one batch
#
# | stage | where | what |
# |---|---|---|
# | **Plan**(b) | host | find the distinct ids `U_b`; look them up in the scratchpad's id -> slot map; split **hits** and **misses**; give each miss a free slot or evict a **victim** (a slot no batch in flight needs); **hold** every slot of `U_b`; rewrite the batch's ids as slots |
# | **Collect**(b) | host | gather the missed rows (and their optimizer state) from the host tables into a staging buffer |
# | **Write-back**(b) | host / copy | the victims' rows, read from their slots, go home into the host tables (only rows that changed) |
# | **Transfer**(b) | host -> device | copy the staging buffer to the device |
# | **Insert**(b) | device | write the fetched rows into their slots (the victims' rows are already home) |
# | **Train**(b) | device | forward, backward and update, reading and writing rows only in the scratchpad, through slots; then release batch b's holds |
#
# Plan runs up to `D` batches ahead of Train (the look-ahead depth), so while batch `b` trains, the
# host stages already work on batches `b+1 .. b+D`. Write-back(b), Transfer(b) and Insert(b) are the
# first stages to touch the slots Plan(b) took, so they wait for Train(b-D-1), the last batch that
# trained with them; Write-back(b) lands before Insert(b) overwrites a victim's slot. Two more rules
# keep it exact:
# - **holds**: a victim is never a slot that a planned-but-not-yet-trained batch uses;
# - **write-back ordering**: a row evicted by one batch and needed again soon is read from the host
#   only after its write-back landed.

# %% [markdown]
# ## A small run, recorded
#
# The run below is tiny on purpose (2 tables of 200 and 100 rows, 8 samples of 2 ids, depth 2, 12
# steps) so that every slot can be seen. Its scratchpads are sized at the *minimum* the data allows,
# so Plan must evict often. The trainer records every stage of every batch (start and end time) and
# every Plan decision. The same steps are also trained by the exact `gpu-only` baseline.

# %%
from scratchkit.course.hazard_lab import HazardLab
from scratchkit.course.viz import timeline
from scratchkit.course.pipeline_visualizer import visualizer_config

lab = HazardLab(visualizer_config(), steps=12)
result = lab.run()
timeline(result.events)

# %%
# NBVAL_CHECK_OUTPUT

print("scratchpad slots per table:", result.capacities)
print("stage events recorded:     ", len(result.events.stages), "(6 stages x 12 batches)")
print("Train hit rate per step:   ", result.train_hit_rate.tolist())
print("largest difference from the baseline's rows:", result.max_abs_diff)

# %% [markdown]
# In the timeline each row is a stage, each bar a batch (labelled and coloured by batch). Bars of
# different batches overlap in time: that overlap is the pipeline. (On this CPU the stages share two
# cores; on a GPU server Transfer uses the PCIe link, Insert and Train the GPU, the rest the host.)
#
# ## The scratchpad at one moment
#
# `replay` walks the recorded events in order and rebuilds the slots of one table at every moment.
# Here is the first Write-back that sent victims home: red slots are the victims whose rows go back to
# the host tables, coloured slots are held by the batch of that colour, grey slots hold a row no batch
# in flight needs, white slots are free. What it says depends on the data alone (Plan decides from
# the ids), so it is the same on every run; only the timeline around it changes.

# %%
# NBVAL_CHECK_OUTPUT
from scratchkit.course.pipeline_replay import SlotState, replay
from scratchkit.scratchpipe.events import Stage

moments = replay(result.events, table=0, capacity=result.capacities[0])
writing_back = next(m for m in moments if m.event.stage is Stage.WRITE_BACK and m.count(SlotState.VICTIM))
print(writing_back.words)

# %%
from scratchkit.course.viz import scratchpad_map

scratchpad_map(writing_back, columns=12)

# %% [markdown]
# ### Exercise: choose the victims
#
# Plan(b) must find a slot for each miss. Free slots first; then it evicts **victims**. Write
# `choose_victims(slot_ids, held, next_use, count)`: `slot_ids[s]` is the id in slot `s` (-1: free),
# `held[s]` says whether a batch in flight holds slot `s`, and `next_use` maps an id to the batch
# that needs it next (an id missing from it is never needed again). Return the `count` slots to
# evict, in ascending order: among the slots that hold a row and are not held, those whose next use
# is furthest away (ties: the lowest slot). With fewer such slots than `count`, raise `ValueError`.
# `check` holds it to the planner's own order.

# %% tags=["exercise", "raises-exception"]
from scratchkit.course.exercises import check


def choose_victims(slot_ids, held, next_use, count):
    """The `count` slots to evict (ascending): unheld, holding a row, furthest next use first."""
    raise NotImplementedError("choose_victims: write it, then run this cell again")


check(choose_victims)

# %% [markdown]
# ## Step through it yourself
#
# **step** and **step back** move one event at a time; **play** runs through them. Above the plot:
# which batch each stage is on, what the current event did, and how many slots are in each state.
# In the plot: the event highlighted in the timeline, the slot map at that moment, and, beside it,
# the Train stage's hit rate and the loss's difference from the baseline, per step. The hazard lab's
# switches are under the step controls (see the hazard lab below).

# %%
from scratchkit.course.pipeline_visualizer import PipelineVisualizer

PipelineVisualizer(lab, table=0, columns=12, result=result)   # the run recorded above

# %% [markdown]
# ## The scratchpad must be big enough
#
# The batches in flight must fit together: [invariant 5: the scratchpad holds every batch in
# flight](../docs/design.md#the-invariants-and-the-test-that-holds-each). A scratchpad smaller than
# the largest working set of `D+1` consecutive batches is refused before training starts, with the
# minimum in the message:

# %%
# NBVAL_CHECK_OUTPUT

from scratchkit import CacheParams
from scratchkit import make_trainer

too_small = lab.config.replace(cache=CacheParams(capacity=lab.config.cache.capacity - 1, depth=2))
try:
    list(make_trainer("scratchpipe", too_small).train(12))
except ValueError as error:
    print("refused:", error)

# %% [markdown]
# ## The hazard lab
#
# Now switch a rule off and compare with the baseline. Without **holds**, Plan may evict a slot
# that a batch in flight still needs: that batch then trains on another id's row. Without
# **write-back ordering**, Collect may read a row from the host before the newer value written back
# by an eviction has landed. (With the ordering off, the lab slows Write-back down a little, as a
# busy host would, so this race shows up in a few steps.) Whether and when a race bites depends on
# timing, so your numbers will differ from run to run; the broken invariants will not.

# %%
from scratchkit.trainers.scratchpipe import Hazards

for hazards in (Hazards(holds=False), Hazards(write_back_order=False)):
    broken = lab.run(hazards)
    print(hazards)
    for line in broken.verdict():
        print("   ", line)

# %% [markdown]
# In the visualizer above, untick a rule (the run is retrained at once with it off; **rerun** trains
# again with the same switches, as races differ from run to run): black slots on the map are victims
# that a batch in flight still held, and the plot of the run shows the Train hit rate dropping and the
# loss leaving the baseline.
#
# ## Exercises and questions
#
# 1. **When may Insert start?** Write `insert_can_start(b, trained_through, depth)`: whether Insert(b)
#    may run once every batch up to `trained_through` has trained (-1: none yet), by the rule above.
#    Then: at depth 2, while Train works on batch 3, what is the furthest batch whose Insert can have
#    run? (Plan itself may run further ahead: it only decides.) The cell after the exercise prints the
#    Insert batches seen while Train(3) ran.
# 2. **Find the hazard.** Switch off the holds and rerun. At which event does the first black slot
#    appear, and which invariant does it break? *Check:* the second cell below.
# 3. **Deeper pipeline, bigger scratchpad.** How many slots does the same data need at depth 4?
#    *Check:* the third cell below.

# %% tags=["exercise", "raises-exception"]
def insert_can_start(b, trained_through, depth):
    """Whether Insert(b) may run at look-ahead depth `depth` once Train has finished batches 0..trained_through."""
    raise NotImplementedError("insert_can_start: write it, then run this cell again")


check(insert_can_start)

# %%
train3 = next(m.event for m in moments if m.event.stage is Stage.TRAIN and m.event.batch == 3)
inserted = [e.batch for e in result.events.stages if e.stage is Stage.INSERT and e.start < train3.end]
print("Insert had reached batch", max(inserted), "by the end of Train(3); the rule allows at most", 3 + 2)

# %%
unsafe = lab.run(Hazards(holds=False))
hazard = next((m for m in replay(unsafe.events, 0, unsafe.capacities[0]) if m.count(SlotState.CONFLICT)), None)
print(hazard.words if hazard else "no held victim this time: rerun the cell")

# %%
from dataclasses import replace

deeper = visualizer_config()
deeper = deeper.replace(cache=replace(deeper.cache, depth=4))
print("depth 4 needs", HazardLab(deeper, steps=12).config.cache.capacity, "slots per table;",
      "depth 2 needed", lab.config.cache.capacity)
