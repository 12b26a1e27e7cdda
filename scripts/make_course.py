"""Write the course notebooks 01-05 from the cells below, then execute them and keep checked outputs.

    .venv/bin/python scripts/make_course.py [01 02 ...]      # write the notebooks (all by default)
    .venv/bin/python scripts/refresh_notebooks.py notebooks/0[1-5]_*.ipynb   # run; store checked outputs

Cells are ("md", text) or ("code", source). Code cells stay thin (an import, a call, a figure); the
logic lives in the package. `# NBVAL_CHECK_OUTPUT` marks the deterministic teaching cells whose
printed numbers nbval compares on every `make test`; never mark a timing.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from new_notebook import write_notebook  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CHECK = "# NBVAL_CHECK_OUTPUT\n"


def nb01():
    return [
        ("md", """
# 01 · The hybrid baseline: where a training step's time goes

A recommendation model such as **DLRM** turns a user's context into the probability of a click.
It reads two kinds of input: a few *dense* numbers (counts, prices, ages), and many *sparse*
categorical features (user id, ad id, city, ...). Each categorical feature has an **embedding
table**: one learned row of `dim` numbers per possible value. Those tables are where almost all the
parameters are, and in production they are far larger than a GPU's memory.

The usual answer is **hybrid CPU-GPU training**: keep the tables in host (CPU) memory and put only
the small neural networks (MLPs) on the GPU. This notebook measures what that costs.

**Learning goals**
- read a DLRM: bottom MLP, one pooled embedding bag per table, pairwise dot products, top MLP;
- see how lopsided it is: thousands of MLP weights, millions of embedding numbers;
- read a mini-batch in the `ids` / `offsets` form the embedding bags take;
- measure where the time of a hybrid training step goes, stage by stage.
"""),
        ("md", """
## The model

`get_profile("small")` is the course's default setup: 8 tables of 20,000 rows, rows of `dim = 16`
numbers, 256 samples per batch, 8 ids per sample and table (the *pooling factor* `L`). The
dense part of the model is a plain PyTorch module; the embeddings are *not* inside it, because
each trainer keeps them somewhere else (host, device, a cache, a scratchpad) and hands the pooled
vectors in.
"""),
        ("code", """
from scratchkit.model import init_dense_model
from scratchkit.profiles import criteo_like, get_profile

config = get_profile("small")
model = init_dense_model(config.model, config.data.num_dense, len(config.data.table_sizes), seed=0)
model
"""),
        ("code", CHECK + """
mlp_weights = sum(p.numel() for p in model.parameters())
embedding_numbers = sum(config.data.table_sizes) * config.model.dim
print(f"MLP weights:       {mlp_weights:>12,}")
print(f"embedding numbers: {embedding_numbers:>12,}  ({embedding_numbers // mlp_weights}x the MLPs)")
full = criteo_like(1.0)   # the 26 tables of the Criteo Kaggle dataset at their real sizes
print(f"Criteo Kaggle tables at dim 16: {sum(full.data.table_sizes) * 16 * 4 / 2**30:.1f} GiB of float32")
"""),
        ("md", """
The Criteo Kaggle dataset is small by industry standards; production tables with wider rows reach
hundreds of GB to TBs. A GPU has tens of GB. That gap is the whole story of this course.

## A mini-batch: `ids` and `offsets`

For each table, a batch lists the row ids it looks up (`ids`, flattened) and where each sample's
*bag* of ids starts (`offsets`). The embedding bag sums the rows of each bag into one vector: the
*pooled* embedding. Batches are generated on demand and are always the same for the same seed.
"""),
        ("code", CHECK + """
from scratchkit.data.synthetic import SyntheticSource

source = SyntheticSource(config.data)
batch = source.batch(0)
print("table 0 ids[:16]:    ", batch.ids[0][:16])
print("table 0 offsets[:4]: ", batch.offsets[0][:4], " (bag b is ids[offsets[b]:offsets[b+1]])")
print("lookups in this batch:", batch.lookups(), "=", config.data.batch_size, "samples x",
      len(config.data.table_sizes), "tables x", config.data.pooling, "ids")
"""),
        ("md", """
## One hybrid step, stage by stage

The `hybrid` trainer does what hybrid CPU-GPU training does:

| stage | where | what |
|---|---|---|
| `embedding_forward` | host | gather the rows of every bag from the host tables and sum them |
| `transfer` | host <-> device | pooled vectors to the device; their gradients back |
| `mlp` | device | forward and backward of the MLPs, and their optimizer step |
| `embedding_backward` | host | turn the pooled gradients into one gradient per touched row |
| `update` | host | the sparse optimizer step on those rows |
| `data` | host | make the batch (synthetic here) |

Every stage is timed on every step, so the breakdown below is a measurement, not a guess.
`gpu-only` (all tables on the device) is beside it for comparison. On this machine the "device" is
the CPU too, so both run at host-memory speed; notebook 05 uses the cost model to project the
same steps onto GPU servers.
"""),
        ("code", """
from scratchkit.bench import format_table, run_bench
from scratchkit.viz import stage_breakdown

results = run_bench(config, ["hybrid", "gpu-only"], steps=30, warmup=5)
print(format_table(results))
stage_breakdown(results, share=True)
"""),
        ("md", """
The embedding stages (forward, backward, update) take most of the step although the MLPs hold
almost no parameters: each step touches thousands of scattered rows in a large table, which is
memory-bound work. On a real hybrid system they run at host-memory speed on the CPU while the GPU
waits, and the pooled vectors cross the PCIe link twice per step.

How much data is that per step? It can be counted without a clock:
"""),
        ("code", CHECK + """
B, T, L, dim = config.data.batch_size, len(config.data.table_sizes), config.data.pooling, config.model.dim
unique_rows = sum(len(set(ids.tolist())) for ids in batch.ids)
print(f"rows read per step:    {B * T * L:,} lookups of {unique_rows:,} distinct rows")
print(f"row bytes gathered:    {B * T * L * dim * 4 / 2**20:.2f} MiB")
print(f"pooled vectors across: {B * T * dim * 4 / 2**10:.0f} KiB each way")
"""),
        ("md", """
## Speed over a run

`training_curves` plots samples per second (over the last 10 steps), the loss and, for trainers
with a cache, the hit rate, step by step.
"""),
        ("code", """
from scratchkit.trainers import make_trainer
from scratchkit.viz import training_curves

with make_trainer("hybrid", config) as trainer:
    records = list(trainer.train(60))
training_curves({"hybrid": records})
"""),
        ("md", """
## Try this

1. **More ids per bag.** Make the bags four times longer with `get_profile("small", pooling=32)`
   and rerun the benchmark. Does the embedding share of the step grow or shrink?
   *Check:* the cell below prints the embedding share for the config you give it.
2. **Table memory.** At what Criteo scale do the tables need more than 1 GiB at `dim = 16`?
   *Check:* change `scale` in the second cell below until the printed size passes 1.0 GiB.
"""),
        ("code", """
from scratchkit.analysis import embedding_share

exercise = get_profile("small", pooling=32)    # try other values
(result,) = run_bench(exercise, ["hybrid"], steps=15, warmup=3)
print(f"embedding stages take {100 * embedding_share(result.stage_seconds):.0f}% of a hybrid step")
"""),
        ("code", """
scale = 0.5                                    # try other values
tables = criteo_like(scale)
print(f"scale {scale}: {sum(tables.data.table_sizes) * 16 * 4 / 2**30:.2f} GiB")
"""),
    ]


def nb02():
    return [
        ("md", """
# 02 · Caches that look backwards

Hybrid training reads every row from host memory. But the rows are not read equally often: in
click logs a few ids (popular items, big cities) appear in a large share of the samples. So a
natural fix is to **cache** the hot rows in the GPU's memory and read them there. This notebook
measures how well caches that decide from the *past* do.

**Learning goals**
- measure *skew*: what share of the lookups the hottest rows serve;
- compare three classic caches: **static** (pin the rows that were hot in a profiled sample),
  **LRU** (evict the least recently used row) and **LFU** (evict the least frequently used);
- read a hit-rate-vs-capacity curve, and explore it with sliders;
- see why a cache's misses cap the speed-up it can give (Amdahl's law).

Vocabulary: a cache of `capacity` rows for a table of `num_rows` rows has **load factor**
`capacity / num_rows`. The **hit rate** is hits / lookups, counted per lookup.
"""),
        ("md", """
## Skew

The synthetic data draws ids from a *Zipf* law: the k-th most popular row is drawn with weight
`1 / k^s`. The exponent `s` (the `zipf` knob) is the locality: `0` is uniform, around `1` looks like
real click logs. A curve above the diagonal means a few ids serve most lookups. When the Criteo
Kaggle sample is present beside the project (`../shared/data`), its curve is drawn too.
"""),
        ("code", """
from pathlib import Path

from scratchkit.data.criteo import load_criteo
from scratchkit.data.trace import make_trace
from scratchkit.hit_curves import HitCurves
from scratchkit.profiles import get_profile
from scratchkit.viz import skew_cdf

config = get_profile("small")
curves = HitCurves(config.data, table=0, num_batches=30)   # table 0: 20,000 rows, 30 batches
traces = {f"synthetic, zipf {z}": curves.trace(z) for z in (0.0, 0.8, 1.05, 1.3)}
criteo = Path("../../shared/data/criteo-kaggle-sample/train.tsv")
if criteo.exists():
    real = load_criteo(criteo, table_sizes=1 << 24, batch_size=256)
    traces["Criteo Kaggle sample (26 tables)"] = make_trace(real, real.num_batches)
skew_cdf(traces)
"""),
        ("code", CHECK + """
from scratchkit.analysis import top_share

for z in (0.0, 0.8, 1.05, 1.3):
    print(f"zipf {z:4}: the hottest 1% of ids serve {100 * top_share(curves.trace(z), 0.01):5.1f}% of the lookups")
"""),
        ("md", """
## Hit rate vs cache size

Each policy is simulated on the same access trace (table 0 over 30 batches, 61,440 lookups):

- **static** counts ids on the first 10% of the trace and pins the most frequent; it never changes;
- **LRU** keeps the most recently used rows; a miss evicts the one unused for longest;
- **LFU** keeps the most frequently used rows (ties: least recently used).

LRU's whole curve comes from one pass over the trace (Mattson's stack distances); the others run
one simulation per size. Every number is an exact count, checked against libCacheSim in the tests.
"""),
        ("code", """
from scratchkit.viz import hit_rate_curves

zipf = 1.05
policies = ("static", "lru", "lfu")
hit_rate_curves(100 * curves.load_factors, {p: curves.curve(zipf, p) for p in policies},
                x_title="load factor (% of the table's rows)")
"""),
        ("code", CHECK + """
capacity = 1000   # 5% of the table
for policy in policies:
    print(f"{policy:6s} at {capacity} rows: {100 * curves.hit_rate(zipf, policy, capacity):.1f}% hits")
"""),
        ("md", """
## Explore

Move the sliders: **load factor** (cache size), **locality** (the Zipf exponent; a new value takes
a second the first time, while its trace and curves are computed), and **look-ahead depth** (used
in notebook 03: the green dashed line is where a cache that looks *forward* would hit 100%). Pick
policies in the list (ctrl/cmd-click for several). The text above the plot gives exact hit rates
at the chosen size.
"""),
        ("code", """
from scratchkit.widgets import CacheExplorer

CacheExplorer(curves, policies=("static", "lru", "lfu", "lookahead"), load_factor=0.05, zipf=1.05, depth=2)
"""),
        ("md", """
## Why misses cap the speed-up

Say a hit is served `s` times faster than a miss (GPU memory vs host memory and PCIe). With hit
rate `h` the embedding work takes `(1 - h) + h / s` of its hybrid time. However large `s`, the
speed-up stays below `1 / (1 - h)`: with 80% hits, at most 5x. To go further, the misses
themselves must go, which is what looking forward does (notebook 03).
"""),
        ("code", """
from scratchkit.viz import amdahl_figure

lru_rate = curves.hit_rate(zipf, "lru", capacity)
amdahl_figure(hit_speedups=(2, 10, 100), marker=lru_rate)
"""),
        ("code", CHECK + """
from scratchkit.analysis import amdahl_speedup

for s in (10, 100, 1_000_000):
    print(f"LRU's {100 * lru_rate:.1f}% hits, hits {s:>9,}x faster: embedding work {amdahl_speedup(lru_rate, s):.2f}x faster")
"""),
        ("md", """
## Try this

1. **Uniform ids.** With `zipf = 0` every row is equally likely. What hit rate does LRU get with a
   10% cache (2,000 rows)? Guess first, then *check* with the cell below.
2. **Enough for 80%?** At `zipf = 1.05`, find the smallest load factor at which LRU reaches 80%
   hits, using the explorer's slider. *Check:* set `capacity` below to your answer x 20,000.
3. **The cap.** If LRU hit 95%, what is the largest speed-up any hit speed could give?
   *Check:* `amdahl_speedup(0.95, 1e12)`.
"""),
        ("code", """
print(f"uniform ids, LRU with 2,000 rows: {100 * curves.hit_rate(0.0, 'lru', 2000):.1f}% hits")
capacity = 4000                                 # your answer to 2, in rows
print(f"zipf 1.05, LRU with {capacity} rows: {100 * curves.hit_rate(1.05, 'lru', capacity):.1f}% hits")
print(f"95% hits cap the speed-up at {amdahl_speedup(0.95, 1e12):.1f}x")
"""),
    ]


def nb03():
    return [
        ("md", """
# 03 · Looking forward

A cache that looks backwards guesses which rows will be needed. But in training there is nothing
to guess: the mini-batches still to come are already in the dataset, and their ids can be read
before they train. That observation is the heart of **ScratchPipe** (Kwon & Rhu, ISCA 2022).

**Learning goals**
- measure how much consecutive batches share (reuse between batches);
- compute the *working set* of a look-ahead window: the distinct rows that the batch in training
  and the `D` batches planned ahead of it touch together;
- compare LRU with **OPT** (Belady's optimal policy, which knows the future);
- see a look-forward cache hit **100%** once it can hold the window's working set.
"""),
        ("md", """
## Reuse between consecutive batches

The *working set* `U_b` of batch `b` is the set of distinct ids it touches (per table). How much of
`U_b` did batch `b-1` already touch? Those rows would still be on the device if the previous
batch's rows were kept.
"""),
        ("code", """
from scratchkit.analysis import consecutive_reuse, window_sizes, working_sets
from scratchkit.data.synthetic import SyntheticSource
from scratchkit.profiles import get_profile
from scratchkit.viz import reuse_figure

config = get_profile("small")
source = SyntheticSource(config.data)
sets = working_sets(source, table=0, num_batches=30)
reuse = consecutive_reuse(sets)
reuse_figure(reuse)
"""),
        ("code", CHECK + """
print(f"batch 0 makes {source.batch(0).ids[0].size} lookups in table 0, of {sets[0].size} distinct rows")
print(f"on average {100 * reuse.mean():.1f}% of a batch's rows were touched by the batch before")
"""),
        ("md", """
## The working set of a look-ahead window

Suppose batch `b` trains while batches `b+1 .. b+D` are already being prepared: `D` is the
**look-ahead depth**. All their rows must be on the device at once, so the device needs room for
`|U_b ∪ U_b+1 ∪ ... ∪ U_b+D|` rows. If no id ever repeated, that would be `(D+1)·B·L`; skew makes
it much smaller.
"""),
        ("code", """
from scratchkit.viz import window_figure

sizes = window_sizes(source, table=0, depths=range(0, 9), num_batches=30)
window_figure(sizes)
"""),
        ("code", CHECK + """
for d, largest, bound in zip(sizes.depths, sizes.max, sizes.no_reuse):
    print(f"depth {d}: the largest window touches {largest:6,} rows (no-reuse bound {bound:6,})")
"""),
        ("md", """
## OPT: the best a cache can do when it knows the future

Belady's OPT evicts the row whose next use is furthest away. No real cache that decides from the
past can beat it. The gap between LRU and OPT is what knowing the future is worth to a cache that
still fetches on demand.
"""),
        ("code", """
from scratchkit.hit_curves import HitCurves
from scratchkit.viz import hit_rate_curves

curves = HitCurves(config.data, table=0, num_batches=30)
zipf, depth = 1.05, 2
needed = curves.needed(zipf, depth)
hit_rate_curves(100 * curves.load_factors,
                {p: curves.curve(zipf, p, depth) for p in ("lru", "opt", "lookahead")},
                needed=100 * needed / curves.num_rows, x_title="load factor (% of the table's rows)")
"""),
        ("code", CHECK + """
for capacity in (1000, 4000):
    lru, opt = (curves.hit_rate(zipf, p, capacity) for p in ("lru", "opt"))
    print(f"{capacity:5,} rows: LRU {100 * lru:.1f}%, OPT {100 * opt:.1f}% hits")
print(f"a look-ahead window at depth {depth} needs {needed:,} rows")
"""),
        ("md", """
## Look-forward caching: every lookup hits

The `lookahead` simulator does what ScratchPipe does with the trace cut into batches: before batch
`b` trains, it makes every row of batches `b .. b+D` resident, fetching the missing ones *ahead of
time*, and never evicts a row that a batch in flight still needs. Victims are the rows whose next
use is furthest away. At use time, every lookup hits: the fetches still happen, but no step waits
for them, so they can be hidden behind the training of earlier batches (notebook 04 shows how).
"""),
        ("code", CHECK + """
from scratchkit.sim import simulate

trace = curves.trace(zipf)
ahead = simulate(trace, "lookahead", needed, batch_size=curves.batch_lookups, depth=depth)
lru = simulate(trace, "lru", needed)
print(f"lookahead, {needed:,} rows: {100 * ahead.hit_rate:.1f}% hits at use, {ahead.fetched_rows:,} rows fetched ahead")
print(f"LRU,       {needed:,} rows: {100 * lru.hit_rate:.1f}% hits, {lru.misses:,} misses that each stall a step")
"""),
        ("md", """
A capacity below the window's working set cannot work: some row would have to be evicted while a
batch in flight still needs it. The simulator (and the ScratchPipe trainer) refuses it and names
the minimum:
"""),
        ("code", CHECK + """
try:
    simulate(trace, "lookahead", needed - 1, batch_size=curves.batch_lookups, depth=depth)
except ValueError as error:
    print("refused:", error)
"""),
        ("md", """
## Try this

1. **Deeper look-ahead.** How many rows does a window need at depth 8? Read it off the window
   figure, then *check* with `curves.needed(1.05, 8)`.
2. **No skew.** With `zipf = 0`, how much of a batch's working set did the previous batch touch?
   Guess (think of how many of the 20,000 rows one batch touches), then *check* with the cell below.
3. **OPT vs look-forward.** At the capacity `needed`, OPT also sees the future. Does it reach 100%?
   *Check:* `curves.hit_rate(1.05, "opt", needed)`. Why not? (Hint: OPT fetches on demand.)
"""),
        ("code", """
print("depth 8 needs", curves.needed(1.05, 8), "rows")
uniform = SyntheticSource(get_profile("small", zipf=0.0).data)
print(f"zipf 0: reuse {100 * consecutive_reuse(working_sets(uniform, 0, 10)).mean():.1f}%")
print(f"OPT at {needed} rows: {100 * curves.hit_rate(1.05, 'opt', needed):.1f}%")
"""),
    ]


def nb04():
    return [
        ("md", """
# 04 · The pipeline, step by step

Notebook 03 showed that a scratchpad which looks forward hits 100%. This notebook opens the
machine that makes it so: **ScratchPipe**'s pipeline, which prepares the rows of the next batches
*while* the current batch trains, and the rules that keep it exact.

**Learning goals**
- name the stages a batch goes through and what each one does;
- read a pipeline timeline: several batches in different stages at the same moment;
- follow the scratchpad's slots: free, held by a batch in flight, chosen as a victim, just filled;
- use the hazard lab to break a safety rule on purpose and see which guarantee fails.

*A note on names.* Only the paper's abstract was at hand when this kit was written; the stage names
below are the kit's own decomposition and may differ from the paper's. All numbers shown are
measured by the kit, on this machine.
"""),
        ("md", """
## The stages of one batch

| stage | where | what |
|---|---|---|
| **Plan**(b) | host | find the distinct ids `U_b`; look them up in the scratchpad's id -> slot map; split **hits** and **misses**; give each miss a free slot or evict a **victim** (a slot no batch in flight needs); **hold** every slot of `U_b`; rewrite the batch's ids as slots |
| **Collect**(b) | host | gather the missed rows (and their optimizer state) from the host tables into a staging buffer |
| **Transfer**(b) | host <-> device | copy the staging buffer to the device, and the victims' rows back to the host |
| **Insert**(b) | device | write the fetched rows into their slots (the victims' rows are already out) |
| **Write-back**(b) | host | store the victims' rows into the host tables |
| **Train**(b) | device | forward, backward and update, reading and writing rows only in the scratchpad, through slots; then release batch b's holds |

Plan runs up to `D` batches ahead of Train (the look-ahead depth), so while batch `b` trains, the
host stages already work on batches `b+1 .. b+D`. Two rules keep it exact:
- **holds**: a victim is never a slot that a planned-but-not-yet-trained batch uses;
- **write-back ordering**: a row evicted by one batch and needed again soon is read from the host
  only after its write-back landed.
"""),
        ("md", """
## A small run, recorded

The run below is tiny on purpose (2 tables of 200 and 100 rows, 8 samples of 2 ids, depth 2, 12
steps) so that every slot can be seen. Its scratchpads are sized at the *minimum* the data allows,
so Plan must evict often. The trainer records every stage of every batch (start and end time) and
every Plan decision. The same steps are also trained by the exact `gpu-only` baseline.
"""),
        ("code", """
from scratchkit.hazard_lab import HazardLab
from scratchkit.viz import timeline
from scratchkit.widgets import visualizer_config

lab = HazardLab(visualizer_config(), steps=12)
result = lab.run()
timeline(result.events)
"""),
        ("code", CHECK + """
print("scratchpad slots per table:", result.capacities)
print("stage events recorded:     ", len(result.events.stages), "(6 stages x 12 batches)")
print("Train hit rate per step:   ", result.train_hit_rate.tolist())
print("largest difference from the baseline's rows:", result.max_abs_diff)
"""),
        ("md", """
In the timeline each row is a stage, each bar a batch (labelled and coloured by batch). Bars of
different batches overlap in time: that overlap is the pipeline. (On this CPU the stages share two
cores; on a GPU server Transfer uses the PCIe link, Insert and Train the GPU, the rest the host.)

## The scratchpad at one moment

`replay` walks the recorded events in order and rebuilds the slots of one table at every moment.
Here is the first Plan that had to evict: red slots are its victims, coloured slots are held by
the batch of that colour, grey slots hold a row no batch in flight needs, white slots are free.
"""),
        ("code", """
from scratchkit.pipeline_replay import SlotState, replay
from scratchkit.viz import scratchpad_map

moments = replay(result.events, table=0, capacity=result.capacities[0])
evicting = next(m for m in moments if m.count(SlotState.VICTIM))
print(evicting.words)
scratchpad_map(evicting, columns=12)
"""),
        ("md", """
## Step through it yourself

**step** and **step back** move one event at a time; **play** runs through them. Above the plot:
which batch each stage is on, what the current event did, and how many slots are in each state.
In the plot: the event highlighted in the timeline, the slot map at that moment, and, at the
bottom, the Train stage's hit rate and the loss's difference from the baseline, per step.
"""),
        ("code", """
from scratchkit.widgets import PipelineVisualizer

PipelineVisualizer(lab, table=0, columns=12)
"""),
        ("md", """
## Invariant 5: the scratchpad must be big enough

The batches in flight must fit together. A scratchpad smaller than the largest working set of
`D+1` consecutive batches is refused before training starts, with the minimum in the message:
"""),
        ("code", CHECK + """
from scratchkit.config import CacheParams
from scratchkit.trainers import make_trainer

too_small = lab.config.replace(cache=CacheParams(capacity=lab.config.cache.capacity - 1, depth=2))
try:
    list(make_trainer("scratchpipe", too_small).train(12))
except ValueError as error:
    print("refused:", error)
"""),
        ("md", """
## The hazard lab

Now switch a rule off and compare with the baseline. Without **holds**, Plan may evict a slot
that a batch in flight still needs: that batch then trains on another id's row. Without
**write-back ordering**, Collect may read a row from the host before the newer value written back
by an eviction has landed. (With the ordering off, the lab slows Write-back down a little, as a
busy host would, so this race shows up in a few steps.) Whether and when a race bites depends on
timing, so your numbers will differ from run to run; the broken invariants will not.
"""),
        ("code", """
from scratchkit.trainers.scratchpipe import Hazards

for hazards in (Hazards(holds=False), Hazards(write_back_order=False)):
    broken = lab.run(hazards)
    print(hazards)
    for line in broken.verdict():
        print("   ", line)
"""),
        ("md", """
In the visualizer above, untick a rule and press **rerun**: black slots on the map are victims
that a batch in flight still held, and the bottom plot shows the Train hit rate dropping and the
loss leaving the baseline.

## Try this

1. **How far ahead?** At depth 2, while Train works on batch 3, what is the furthest batch whose
   Insert can have run? Think about the rule "Insert(b) waits for Train(b-D-1)" (Plan itself may
   run further ahead: it only decides). *Check:* the first cell below prints the Insert batches
   seen while Train(3) ran.
2. **Find the hazard.** Switch off the holds and rerun. At which event does the first black slot
   appear, and which invariant does it break? *Check:* the second cell below.
3. **Deeper pipeline, bigger scratchpad.** How many slots does the same data need at depth 4?
   *Check:* the third cell below.
"""),
        ("code", """
from scratchkit.events import Stage

train3 = next(m.event for m in moments if m.event.stage is Stage.TRAIN and m.event.batch == 3)
inserted = [e.batch for e in result.events.stages if e.stage is Stage.INSERT and e.start < train3.end]
print("Insert had reached batch", max(inserted), "by the end of Train(3); the rule allows at most", 3 + 2)
"""),
        ("code", """
unsafe = lab.run(Hazards(holds=False))
hazard = next((m for m in replay(unsafe.events, 0, unsafe.capacities[0]) if m.count(SlotState.CONFLICT)), None)
print(hazard.words if hazard else "no held victim this time: rerun the cell")
"""),
        ("code", """
from dataclasses import replace

deeper = visualizer_config()
deeper = deeper.replace(cache=replace(deeper.cache, depth=4))
print("depth 4 needs", HazardLab(deeper, steps=12).config.cache.capacity, "slots per table;",
      "depth 2 needed", lab.config.cache.capacity)
"""),
    ]


def nb05():
    return [
        ("md", """
# 05 · ScratchPipe training, side by side

Time to train. Every trainer in the kit runs the same model on the same batches with the same
optimizer; they differ only in *where the embedding rows live* and *how they get to the
computation*:

| trainer | where the rows live |
|---|---|
| `gpu-only` | every table in device memory (the upper bound, when it fits) |
| `hybrid` | host memory; the host gathers, pools and updates (notebook 01) |
| `static`, `lru`, `lfu` | host, plus a device cache that looks backwards; a miss stalls the step (notebook 02) |
| `scratchpipe` | host, plus a scratchpad filled ahead by the pipeline; Train always hits (notebooks 03, 04) |

**Learning goals**
- measure all trainers on identical batches and read where each one's time goes;
- watch them train live, and change the cache size and depth while they run;
- check that every trainer ends with exactly the parameters of plain PyTorch;
- use the cost model to project the same steps onto GPU servers, and see what bounds each one.

All numbers here are the kit's own, measured on this machine or computed by its cost model.
"""),
        ("md", """
## Measured here

`run_bench` trains each trainer for a few warm-up steps, then times 30 steps, on the same batches.
The caches and the scratchpad get a quarter of each table (`load_factor=0.25`); ScratchPipe plans 2
batches ahead. On this CPU-only machine "device" memory *is* host memory, so no trainer can gain
from moving rows to the device: what the measurements show here is each design's overhead, and
the stage breakdown. The projections further down say what the same work costs on GPU servers.
"""),
        ("code", """
from scratchkit.bench import format_table, run_bench
from scratchkit.config import CacheParams
from scratchkit.profiles import get_profile
from scratchkit.trainers import available_trainers
from scratchkit.viz import stage_breakdown

config = get_profile("small").replace(cache=CacheParams(load_factor=0.25, depth=2))
trainers = available_trainers()
results = run_bench(config, trainers, steps=30, warmup=5)
print(format_table(results))
stage_breakdown(results)
"""),
        ("md", """
For `scratchpipe` the stage times are summed over the threads and processes that run them, so
they add up to more than the step: Plan, Collect and Write-back of later batches run *while* Train
works (on a CPU, in a process of their own).

## Live

Pick a trainer and press **start**: it trains in a background thread, so the notebook stays
responsive, and the plot updates every 0.1 s with samples/s, loss and hit rate. Move the
**load factor** or **depth** slider while it runs and the run restarts with the new setting;
**stop** ends it after the current step and closes the trainer, which writes the scratchpad's
changed rows back to the host tables. Run several trainers one after another to compare them on
one plot. (A scratchpad too small for the depth is refused, and the message says the minimum.)
"""),
        ("code", """
from scratchkit.widgets import TrainingDashboard

board = TrainingDashboard(config, steps=300, load_factor=0.25, depth=2)
board
"""),
        ("md", """
## Exact, every one of them

`verify` trains plain PyTorch (`nn.EmbeddingBag` + `torch.optim.SGD`) next to each trainer, from
the same initial weights on the same batches, and compares every parameter: dense weights,
embedding rows, optimizer state. On the CPU the kit does the same float operations in the same
order, so the difference must be exactly 0.0. For ScratchPipe it also reports the Train stage's
hit rate, which must be exactly 1.0.
"""),
        ("code", CHECK + """
from scratchkit.verify import verify

for result in verify(config, trainers, steps=20):
    extra = f"   Train hit rate {result.extras['train_hit_rate']}" if "train_hit_rate" in result.extras else ""
    print(f"{result.trainer:12s} max |difference| = {result.max_abs_diff}{extra}")
"""),
        ("md", """
## Projected onto GPU servers

The cost model counts what each stage of each trainer *does* per step (bytes through host memory,
PCIe and device memory, rows gathered, FLOPs, kernel launches) and divides by the speeds of a
hardware profile: `this-cpu` (measured on this machine when the cell runs), a PCIe-3 V100 server
and a PCIe-5 H100 server. For sequential trainers the step is the sum of its stages; for
ScratchPipe's pipeline it is the busiest resource (host stages, PCIe link, or GPU). The bars are
samples/s relative to `hybrid` in each series, the measurement here beside the projections.
"""),
        ("code", """
from scratchkit.costmodel import project_bench
from scratchkit.viz import trainer_comparison

profiles = ["this-cpu", "v100-pcie3", "h100-pcie5"]
projections = project_bench(config, results, profiles)
measured = {r.trainer: r.samples_per_s for r in results}
projected = {p: {row[p].trainer: row[p].samples_per_s for row in projections} for p in profiles}
trainer_comparison(measured, projected, relative_to="hybrid")
"""),
        ("code", """
for row in projections:
    print(f"{row['h100-pcie5'].trainer:12s}", "  ".join(f"{p}: bound by {row[p].bound_stage}" for p in profiles))
"""),
        ("md", """
How far can a model be trusted? `validate` sets the `this-cpu` prediction beside the stage times
just measured, stage by stage (positive error: the model predicts more time than measured).
"""),
        ("code", """
from scratchkit.costmodel import format_validation, validate

report = {r.trainer: validate(r.stage_seconds, row["this-cpu"], r.seconds / r.steps)
          for r, row in zip(results, projections) if r.trainer in ("hybrid", "scratchpipe")}
print(format_validation(report))
"""),
        ("md", """
## Try this

1. **A smaller scratchpad.** Does ScratchPipe train with `load_factor=0.05` at depth 4? Guess from
   notebook 03's window sizes, then *check* with the first cell below (a refusal names the minimum).
2. **Stop means flushed.** Start `scratchpipe` in the dashboard, press **stop** after a few
   seconds, then run the second cell below: it trains `gpu-only` for the same number of steps and
   compares its embedding rows with the host tables the stopped trainer left. *Check:* 0.0.
3. **What bounds the pipeline?** On the H100 server, which stage bounds `scratchpipe`, and which
   bounds `lru`? *Check:* the table printed above the validation; then try `depth=1`.
"""),
        ("code", """
from scratchkit.trainers import make_trainer

small = config.replace(cache=CacheParams(load_factor=0.05, depth=4))
try:
    with make_trainer("scratchpipe", small) as trainer:
        list(trainer.train(10))
    print("it trains")
except ValueError as error:
    print("refused:", error)
"""),
        ("code", """
if board.run is None or board.run.running:
    print("start a run in the dashboard and stop it first")
else:
    steps = len(board.run.records)
    with make_trainer("gpu-only", board.train_config()) as reference:
        list(reference.train(steps))
        rows = reference.embedding_weights()
    host = board.run.trainer.embedding_weights()
    print(f"after {steps} steps: max |difference| =", max(float((a - b).abs().max()) for a, b in zip(host, rows)))
"""),
    ]


BUILDERS = {"01": ("01_hybrid_baseline", nb01), "02": ("02_looking_backwards", nb02),
            "03": ("03_looking_forward", nb03), "04": ("04_pipeline_step_by_step", nb04),
            "05": ("05_scratchpipe_training", nb05)}


def main(argv: list[str]) -> int:
    chosen = argv or list(BUILDERS)
    for key in chosen:
        if key not in BUILDERS:
            print(f"unknown notebook {key!r}; choose from {', '.join(BUILDERS)}", file=sys.stderr)
            return 2
        name, build = BUILDERS[key]
        path = NOTEBOOKS / f"{name}.ipynb"
        write_notebook(str(path), build())
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
