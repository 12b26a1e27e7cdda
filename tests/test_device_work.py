"""The counts of host waits and kernel launches (scratchkit/device_work.py): per path, per thread."""

import threading

from scratchkit.device_work import Path, launched, on_path, snapshot, waited


def test_a_step_s_waits_and_launches_are_the_difference_of_two_snapshots():
    before = snapshot(Path.TRAIN)
    waited("loss")
    launched("embedding_bag", 3)
    step = snapshot(Path.TRAIN) - before
    assert (step.host_syncs, step.kernel_launches) == (1, 3)
    assert step.waits == {"loss": 1} and step.launches == {"embedding_bag": 3}


def test_a_thread_on_the_plan_path_counts_there_and_not_on_train():
    train, plan = snapshot(Path.TRAIN), snapshot(Path.PLAN)

    def planner():
        with on_path(Path.PLAN):
            waited("plan sizes")
            launched("victim_keys")
        waited("outside the path")  # back on TRAIN once the block ends

    worker = threading.Thread(target=planner)
    worker.start()
    worker.join()
    on_plan, on_train = snapshot(Path.PLAN) - plan, snapshot(Path.TRAIN) - train
    assert (on_plan.host_syncs, on_plan.kernel_launches) == (1, 1)
    assert on_train.waits == {"outside the path": 1} and on_train.kernel_launches == 0


def test_counts_from_many_threads_are_all_kept():
    before = snapshot(Path.DATA)

    def loader():
        with on_path(Path.DATA):
            for _ in range(1000):
                launched("copy")

    workers = [threading.Thread(target=loader) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert (snapshot(Path.DATA) - before).kernel_launches == 4000


def test_a_threads_own_counts_leave_out_another_thread_on_the_same_path():
    """Plan(b)'s work is its thread's alone, though the row moves' threads count on Plan's path
    beside it: `snapshot_here` sees one thread, `snapshot` the whole path."""
    import threading

    from scratchkit.device_work import snapshot_here

    with on_path(Path.PLAN):
        mine, path = snapshot_here(), snapshot(Path.PLAN)
        waited("plan sizes")

        def mover():
            with on_path(Path.PLAN):
                waited("train's update")

        other = threading.Thread(target=mover)
        other.start()
        other.join()
        assert (snapshot_here() - mine).waits == {"plan sizes": 1}
        assert (snapshot(Path.PLAN) - path).waits == {"plan sizes": 1, "train's update": 1}
