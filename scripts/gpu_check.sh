#!/usr/bin/env bash
# scripts/gpu_check.sh: every check that needs an NVIDIA GPU, in one short run, with a report.
#
#   OUT=gpu-report PYTHON=.venv/bin/python bash scripts/gpu_check.sh
#
# What it expects (it installs nothing, from the network or otherwise):
#   * an NVIDIA GPU and driver: `nvidia-smi -L` lists a device;
#   * a Python that already has scratchkit's dependencies, pytest and CuPy (cupy-cuda12x or
#     cupy-cuda13x matching the driver): $PYTHON if set, else the repo's .venv/bin/python, else
#     python3. scratchkit is imported from this checkout (PYTHONPATH), installed or not.
# What it writes, into ${OUT:-gpu-report}/:
#   report.md            one section per check: status, time, the lines that matter
#   <section>.log        full output of each check
#   bench_kernels.json   kernel benchmark figures
#   bench_trainers.json  gpu-only, hybrid and scratchpipe samples/s on the GPU (small profile)
# GPU_CHECK_BENCH_ARGS overrides the kernel benchmark's size arguments (default: --quick).
# GPU_CHECK_DRY_RUN=1 skips the GPU probe and runs every section anyway: that tests this script
# on a CPU machine (the GPU tests then skip, the benchmark measures twin and host only).
# Exit status: 0 all sections passed; 1 some section failed or timed out; 2 no usable GPU (the
# report says why; nothing else runs).
#
# Time: every section runs under `timeout` with its own budget, and the budgets add up to less
# than 5 minutes (SECTION BUDGETS below). To add checks (e.g. the trainers'), write a
# `section_<name>` function like the ones here, export it (bottom of the file), call it from
# `main` with `run_section <name> <budget>`, and take
# its budget from the spare time or from another section.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
REPO="$(pwd)"
OUT="${OUT:-gpu-report}"
if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"
elif [ -x "$REPO/.venv/bin/python" ]; then PY="$REPO/.venv/bin/python"
else PY="python3"; fi
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export CUPY_CACHE_DIR="${CUPY_CACHE_DIR:-$OUT/cupy-cache}"   # NVRTC binaries stay with the report
REPORT="$OUT/report.md"
STATUS=0

# ---- SECTION BUDGETS (seconds; sum must stay under 300 with ~20 s to spare) ----
BUDGET_ENV=20
BUDGET_KERNEL_TESTS=90
BUDGET_KERNEL_BENCH=60
BUDGET_TRAINER_TESTS=60
BUDGET_TRAINER_BENCH=50

say() { echo "$*" | tee -a "$REPORT"; }

# run_section NAME BUDGET: run the function section_NAME under `timeout` (in a child bash, which
# sees the exported functions), log to $OUT/NAME.log, summarise in the report.
run_section() {
    local name="$1" budget="$2"
    local log="$OUT/$name.log" start rc
    start=$(date +%s)
    timeout --kill-after=10 "$budget" bash -c "section_$name" >"$log" 2>&1
    rc=$?
    local took=$(( $(date +%s) - start ))
    {
        echo
        echo "## $name"
        if [ $rc -eq 0 ]; then echo "status: passed in ${took} s (budget ${budget} s)"
        elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "status: TIMED OUT after ${budget} s"
        else echo "status: FAILED (exit $rc) after ${took} s"; fi
        echo
        echo '```'
        tail -n 25 "$log"
        echo '```'
    } >>"$REPORT"
    echo "[$name] exit $rc in ${took} s (log: $log)"
    [ $rc -eq 0 ] || STATUS=1
}

require_gpu() {
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        say "gpu_check: no NVIDIA GPU here (nvidia-smi is missing or lists no device): nothing to check."
        exit 2
    fi
    if ! timeout 60 "$PY" -c "import cupy, sys; sys.exit(0 if cupy.cuda.is_available() else 1)" \
            >"$OUT/cupy-probe.log" 2>&1; then
        say "gpu_check: $PY cannot run CuPy on the GPU (CuPy missing, or it does not match the driver);"
        say "see $OUT/cupy-probe.log. Install cupy-cuda12x or cupy-cuda13x into that Python first."
        exit 2
    fi
}

section_env() {
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
    "$PY" -c "
import torch, numpy, scratchkit.backend as b
print(b.detect().describe())
print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'numpy', numpy.__version__)
if b.detect().cupy_gpu:
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    print('cupy', cupy.__version__, 'CUDA runtime', cupy.cuda.runtime.runtimeGetVersion(),
          'device', props['name'].decode(), 'sm', props['major'], props['minor'])"
}

section_kernel_tests() {
    "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels*.py tests/test_scratchpad*.py
}

section_kernel_bench() {
    # shellcheck disable=SC2086  # word splitting of the extra arguments is intended
    "$PY" benchmarks/bench_kernels.py ${GPU_CHECK_BENCH_ARGS:---quick} --json "$OUT/bench_kernels.json"
}

section_trainer_tests() {
    # every trainer against plain PyTorch on the GPU, within scratchkit.verify.GPU_TOLERANCE
    "$PY" -m pytest -q -s -m gpu -p no:cacheprovider tests/test_trainers_gpu.py
}

section_trainer_bench() {
    # measured side by side in one run: ScratchPipe against gpu-only and hybrid on the GPU
    "$PY" -m scratchkit.cli bench --profile small --trainers gpu-only,hybrid,scratchpipe \
        --steps 50 --json >"$OUT/bench_trainers.json" || return 1
    "$PY" - "$OUT/bench_trainers.json" <<'PYEOF'
import json, sys
rows = {r["trainer"]: r for r in json.load(open(sys.argv[1]))}
for name, r in rows.items():
    print(f"{name:12s} {r['samples_per_s']:>12,.0f} samples/s")
sp = rows["scratchpipe"]["samples_per_s"]
print(f"scratchpipe/gpu-only = {sp / rows['gpu-only']['samples_per_s']:.3f}")
print(f"scratchpipe/hybrid   = {sp / rows['hybrid']['samples_per_s']:.3f}")
PYEOF
}

main() {
    mkdir -p "$OUT"
    : >"$REPORT"
    say "# scratchkit GPU check ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
    if [ "${GPU_CHECK_DRY_RUN:-0}" = 1 ]; then
        say "DRY RUN (GPU_CHECK_DRY_RUN=1): no GPU probe; GPU tests will skip. Not a GPU check."
    else
        require_gpu
    fi
    run_section env "$BUDGET_ENV"
    run_section kernel_tests "$BUDGET_KERNEL_TESTS"
    run_section kernel_bench "$BUDGET_KERNEL_BENCH"
    run_section trainer_tests "$BUDGET_TRAINER_TESTS"
    run_section trainer_bench "$BUDGET_TRAINER_BENCH"
    echo
    echo "report: $REPORT"
    exit $STATUS
}

# `timeout` runs a program, not a shell function: export the sections for its child bash.
export -f section_env section_kernel_tests section_kernel_bench section_trainer_tests section_trainer_bench
export PY OUT GPU_CHECK_BENCH_ARGS
main "$@"
