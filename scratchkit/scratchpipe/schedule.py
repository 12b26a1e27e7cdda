"""Every rule that orders ScratchPipe's stages, in one place. Both drivers run this schedule.

One batch b goes through the stages in this order (the stage names of `Stage`):

    Plan(b) -> Collect(b) -> Write-back(b) -> Transfer(b) -> Insert(b) -> Train(b)

and batches overlap: while Train(b) runs, later batches are being planned, collected, inserted.
Four rules say when a stage of batch b may start; nothing else waits for anything:

1. Plan(b) after Plan(b-1), and never for Train. Plan(b) counts batches b-D..b-1 as in flight
   (their slots held) and b-D-1 and earlier as trained (their slots dirty, free to evict), so its
   decisions depend on the data alone, and the planner may run ahead in another process.
2. Collect(b) after the Write-back of every batch that evicted one of b's misses (invariant 3:
   a row is read from the host only after its newest value has landed there; we order, we do
   not forward). Plan(b) names that batch: `TablePlan.wait_for_write_back`.
3. Write-back(b), Transfer(b) and Insert(b) after Train(b-D-1): they are the first stages that
   touch the slots Plan(b) took, and rule 1 promised Plan(b) that those slots were trained.
   Write-back(b) lands before Insert(b) overwrites the victims' slots, so at every moment a dirty
   row's newest value is in its slot or in the host table: nothing is lost if a stage (or the
   process running it) dies. The three run as one unit under the row stores' lock, so a flush
   between two steps sees the slots at a batch boundary.
4. Train(b) after Insert(b), and in batch order.

The hazard lab's `Hazards` switch rule 2 off (`write_back_order`) or the holds that rule 1 relies
on (`holds`), to watch the run diverge from the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

from scratchkit.scratchpipe.events import Stage

# The stages the host runs for one batch after Plan, in order; rule 3's three hold the lock.
HOST_STAGES = (Stage.COLLECT, Stage.WRITE_BACK, Stage.TRANSFER, Stage.INSERT)
# the stages a CPU run's forked host process runs (host_process.py): Plan and the host stages after it
HOST_PROCESS_STAGES = tuple(stage.value for stage in (Stage.PLAN, *HOST_STAGES))
EVICTING_STAGES = (Stage.WRITE_BACK, Stage.TRANSFER, Stage.INSERT)


@dataclass(frozen=True)
class Hazards:
    """The hazard lab: each switch, when False, removes one safety rule. Both True = correct."""

    holds: bool = True  # invariant 4: never evict a slot a batch in flight still needs
    write_back_order: bool = True  # rule 2 (invariant 3): collect an evicted id only after its write-back


class Schedule:
    """The rules above for look-ahead depth `depth`, as questions a driver asks."""

    def __init__(self, depth: int, hazards: Hazards = Hazards()):
        self.depth, self.hazards = depth, hazards

    def collect_waits_for(self, tables) -> int:
        """Rule 2: the batch whose Write-back Collect(b) must wait for (-1: none); `tables` are
        Plan(b)'s TablePlans. With the hazard lab's switch off, nothing."""
        if not self.hazards.write_back_order:
            return -1
        return max((plan.wait_for_write_back for plan in tables), default=-1)

    def evict_waits_for(self, b: int) -> int:
        """Rule 3: the batch whose Train must finish before Write-back(b), Transfer(b), Insert(b)."""
        return b - self.depth - 1

    def train_sent_for(self, b: int, stop: int) -> bool:
        """Whether a stage of this call waits for Train(b) (rule 3 of batch b+D+1 < stop)."""
        return b + self.depth + 1 < stop


class PipelineError(RuntimeError):
    """A stage failed; the message names the stage and the batch."""

    def __init__(self, stage: Stage, batch: int, error: BaseException):
        super().__init__(f"ScratchPipe stage {stage.value} failed on batch {batch}: {type(error).__name__}: {error}")
        self.stage, self.batch = stage, batch
