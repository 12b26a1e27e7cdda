"""Notebook 08's kernel puzzles: each reference solution passes on the CPU (and through CuPy's
launcher with the GPU stand-in), and each check, fed a deliberately wrong kernel, says what is
wrong: the element, the value, the thread; a write past an array's end; a race; an endless loop."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import require_nvrtc
from course_solutions import SOLUTIONS, load_solutions
from scratchkit.course.exercises import check
from scratchkit.course.exercises.kernel_cases import PUZZLES
from scratchkit.course.exercises.kernels import check_kernel
from scratchkit.kernels.signatures import KERNELS
from scratchkit.kernels.traced import library_for, run_traced
from stand_ins import StandInCupy

SOLVED = load_solutions(SOLUTIONS / "08_kernel_puzzles.py")
NO_BOUNDS = ("    if (i >= n) return;\n", "")

RACY_BAG = r"""
extern "C" __global__ void embedding_bag_forward(const float* rows, long long dim, const long long* slots,
                                                 long long nnz, const long long* offsets, long long num_bags,
                                                 float* pooled) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long j = t / dim, c = t % dim;      // one thread per (lookup, column)
    if (j >= nnz) return;
    long long bag = 0;
    while (bag + 1 < num_bags && offsets[bag + 1] <= j) ++bag;
    const float value = rows[slots[j] * dim + c];
    if (j == offsets[bag]) pooled[bag * dim + c] = value;   // the bag's first lookup writes,
    else pooled[bag * dim + c] += value;                   // the others add: unsynchronised
}
"""

# (puzzle, what is wrong, (old, new) edit of the solution or a whole source, words the message must hold)
WRONG = [
    (
        "gather_rows",
        "off-by-one row",
        ("table[slots[i] * width + c]", "table[(slots[i] + 1) * width + c]"),
        ["case 1 of 4", "out[0, 0] = ", "but the NumPy twin gives", "thread 0 (blockIdx.x 0, threadIdx.x 0) wrote it"],
    ),
    (
        "gather_rows",
        "missing bounds check",
        NO_BOUNDS,
        [
            "thread 1184 (blockIdx.x 18, threadIdx.x 32) wrote out[37, 0], past the end of out (37 rows)",
            "if (i >= n) return;",
        ],
    ),
    (
        "scatter_rows",
        "off-by-one slot",
        ("table[slots[i] * width + c]", "table[(slots[i] + 1) * width + c]"),
        ["wrote table[64, 0], past the end of table (64 rows)"],
    ),
    (
        "scatter_rows",
        "missing bounds check",
        NO_BOUNDS,
        [
            "table[0, 0] = NaN",
            "thread 1184 (blockIdx.x 18, threadIdx.x 32) wrote it",
            "thread 1184 has no work here (this case needs threads 0..1183",
            "(if (i >= n) return;)",
        ],
    ),
    (
        "scatter_rows",
        "unsynchronised write: two rows into one slot",
        ("table[slots[i] * width", "table[slots[i / 2] * width"),
        ["race on table[", "both wrote it, not through an atomic", "atomicAdd", "records which thread"],
    ),
    (
        "hashmap_query",
        "off-by-one wrap",
        ("(bucket + 1) & (unsigned long long)mask;", "(bucket + 1) % (unsigned long long)mask;"),
        [
            "case 3 of 4 (chains that wrap around the last bucket)",
            "out_slots[1] = -1, but the NumPy twin gives 4",
            "thread 1 (blockIdx.x 0, threadIdx.x 1) wrote it",
            "(bucket + 1) & mask",
        ],
    ),
    (
        "hashmap_query",
        "missing bounds check",
        NO_BOUNDS,
        ["thread 40 (blockIdx.x 0, threadIdx.x 40) wrote out_slots[40], past the end of out_slots (40 elements)"],
    ),
    (
        "hashmap_query",
        "a probe that never ends",
        ("probe <= mask", "true"),
        ["case 4 of 4 (a full table", "had not finished after 2 s", "after mask + 1 probes"],
    ),
    (
        "hashmap_query",
        "stops at a tombstone",
        ("keys[bucket] == SK_EMPTY", "keys[bucket] < 0"),
        ["(probing past erased ids (tombstones))", "walk past it"],
    ),
    (
        "embedding_bag_forward",
        "off-by-one: the last bag's end",
        ("bag + 1 < num_bags ? offsets[bag + 1] : nnz", "offsets[bag + 1]"),
        ["pooled[11, 0] = 0, but the NumPy twin gives", "thread 88 (blockIdx.x 1, threadIdx.x 24) wrote it"],
    ),
    (
        "embedding_bag_forward",
        "missing bounds check",
        ("    if (t >= num_bags * dim) return;\n", ""),
        ["wrote pooled[12, 0], past the end of pooled (12 rows)"],
    ),
    (
        "embedding_bag_forward",
        "unsynchronised write: += from every lookup",
        RACY_BAG,
        [
            "race on pooled[0, 0]: thread 0 (blockIdx.x 0, threadIdx.x 0) and thread 24 (blockIdx.x 0, threadIdx.x 24) "
            "both wrote it, not through an atomic"
        ],
    ),
]


def wrong_source(puzzle: str, edit) -> str:
    if isinstance(edit, str):
        return edit
    old, new = edit
    source = getattr(SOLVED, puzzle)
    assert old in source, f"the edit does not apply to the {puzzle} solution"
    return source.replace(old, new)


@pytest.mark.parametrize("puzzle", sorted(PUZZLES))
def test_the_reference_solution_passes_on_the_cpu(puzzle):
    result = check(getattr(SOLVED, puzzle))
    assert result.passed and "on the CPU" in result.text(), result.text()


@pytest.mark.parametrize("puzzle", sorted(PUZZLES))
def test_the_reference_solution_passes_through_cupy_with_the_gpu_stand_in(puzzle):
    """The CuPy path: NVRTC compiles the learner's source, the cubin is loaded by name, the
    stand-in checks the packed arguments and runs the same source on the host."""
    require_nvrtc()
    made = []
    result = check_kernel(getattr(SOLVED, puzzle), cupy=lambda host: made.append(StandInCupy(90, host)) or made[-1])
    assert result.passed and "and on the GPU (CuPy)" in result.text(), result.text()
    assert [name for name, _, _ in made[0].launches] == [puzzle] * len(PUZZLES[puzzle].cases())


@pytest.mark.parametrize("puzzle,wrong,edit,words", WRONG, ids=[f"{p}: {w}" for p, w, _, _ in WRONG])
def test_a_wrong_kernel_is_explained(puzzle, wrong, edit, words):
    result = check(wrong_source(puzzle, edit))
    assert not result.passed
    for text in words:
        assert text in result.text(), f"{text!r} not in:\n{result.text()}"


def test_every_puzzle_is_fed_an_off_by_one_and_a_missing_bounds_check():
    for puzzle in PUZZLES:
        kinds = [w for p, w, _, _ in WRONG if p == puzzle]
        assert any("off-by-one" in k for k in kinds) and "missing bounds check" in kinds, puzzle
    assert sum("unsynchronised" in w for _, w, _, _ in WRONG) >= 2


def test_the_template_stub_stops_with_not_implemented():
    stub = getattr(SOLVED, "gather_rows").replace("    if (i >= n) return;\n", "    // YOUR CODE HERE\n")
    with pytest.raises(NotImplementedError, match="gather_rows: write the kernel's body"):
        check(stub)


def test_a_compile_error_names_the_line_of_the_source():
    broken = getattr(SOLVED, "gather_rows").replace("const long long i = t / 32;", "const long long i = t / 32")
    result = check(broken)
    assert "did not compile" in result.text() and "gather_rows.cu:6:" in result.text()


def test_a_source_with_no_puzzle_kernel_is_refused():
    with pytest.raises(ValueError, match="defines gather; a puzzle kernel is one of gather_rows"):
        check('extern "C" __global__ void gather(float* x) {}')


def test_an_atomic_add_is_not_a_race_and_a_plain_add_is():
    """The tracer's rule itself: two threads adding into one element race unless through atomicAdd."""
    kernel = KERNELS["embedding_bag_forward"]
    body = (
        'extern "C" __global__ void embedding_bag_forward(const float* rows, long long dim, '
        "const long long* slots, long long nnz, const long long* offsets, long long num_bags, float* pooled) {"
        " const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; if (j >= nnz) return;"
        " ADD; }"
    )
    args = [
        np.ones((4, 1), np.float32),
        1,
        np.zeros(3, np.int64),
        3,
        np.zeros(1, np.int64),
        1,
        np.zeros((1, 1), np.float32),
    ]
    names = list(PUZZLES["embedding_bag_forward"].names)
    plain = library_for(body.replace("ADD", "pooled[0] += rows[slots[j]]"), kernel.name)
    atomic = library_for(body.replace("ADD", "atomicAdd(&pooled[0], rows[slots[j]])"), kernel.name)
    for library, races in ((plain, True), (atomic, False)):
        run = run_traced(library, kernel, 1, 4, args, names, {6})
        pooled = run.arrays[6]
        assert run.status == "finished" and pooled.data.tolist() == [3.0]
        at = pooled.guard
        assert (pooled.writer[at], pooled.other[at]) == (2, 0)  # the last writer, the first other one
        assert bool(pooled.plain[at]) is races


def test_a_crash_is_caught_in_the_child_and_names_the_thread():
    kernel = KERNELS["gather_rows"]
    wild = getattr(SOLVED, "gather_rows").replace(
        "table[slots[i] * width + c]", "table[(slots[i] + (1LL << 40)) * width + c]"
    )
    case = PUZZLES["gather_rows"].cases()[0]
    run = run_traced(
        library_for(wild, "gather_rows"), kernel, 19, 64, case.args, list(PUZZLES["gather_rows"].names), {4}
    )
    assert run.status == "crashed" and run.signal_name == "SIGSEGV" and run.thread == 0
