#!/usr/bin/env bash
# scripts/gpu_check.sh: every check that needs an NVIDIA GPU, in one short run, with a report.
#
#   bash scripts/gpu_check.sh              the check (needs a GPU); under 8 minutes on an H100/H200
#   bash scripts/gpu_check.sh --dry-run    on any machine: print every step, check what it needs
#   bash scripts/gpu_check.sh --rehearse   on a CPU: run every section anyway (GPU tests skip)
#
# What it needs, and never fetches from the network:
#   * an NVIDIA GPU and driver: `nvidia-smi -L` lists a device;
#   * a Python with scratchkit's dependencies, pytest and CuPy: $PYTHON if set, else the repo's
#     .venv/bin/python, else python3. scratchkit is imported from this checkout (PYTHONPATH).
#   * optionally, carried wheels in ${GPU_CHECK_WHEELS:-.whl/} (git-ignored): the first step
#     installs them with `pip install --no-index --no-deps --target $OUT/site` and puts that folder
#     first on PYTHONPATH (their NVIDIA libraries on LD_LIBRARY_PATH), and the report names each
#     one. Carry what the machine lacks: cupy-cuda12x, nvidia-cuda-nvrtc-cu12, cuda-pathfinder
#     (docs/gpu.md says how to fetch them).
# What it writes, into ${OUT:-gpu-report}/:
#   report.md        the text summary: each section's status, time and key lines, the figures
#                    beside the cost model's projections (docs/gpu-expected.json)
#   gpu_check.json   the same as one JSON (scripts/gpu_check_summary.py)
#   calibrate.json   this machine's hardware; validate.json the cost model's validation
#   <section>.log    full output of each section; <section>.json its figures
# Knobs (environment): GPU_CHECK_REHEARSAL_SLACK (a rehearsal's budgets, times the check's: 3),
# GPU_CHECK_BENCH_ARGS (bench_kernels.py's sizes, default --quick),
# GPU_CHECK_CALIBRATE_ARGS (calibrate's, default --quick), GPU_CHECK_PROFILE (bench_small's and
# validate's profile, default small), GPU_CHECK_EMBEDDING_PROFILE, GPU_CHECK_EMBEDDING_ARGS (bench
# options after the section's own: "--loader-threads 8 --batches-ahead 16" on a GPU; in a rehearsal
# "--scale 0.02 --batch-size 256",
# as a 2-core CPU runs the full profile's 655k lookups a step far slower than the budget allows).
# Exit status: 0 every section passed; 1 a section failed or timed out, or the dry run found
# something missing; 2 no usable GPU (nothing else runs).
#
# Time: each section runs under `timeout` with its budget (SECTION BUDGETS); with the GPU probe
# they add up to under 8 minutes, from a cold start: the warmup section pays, once and timed,
# what a fresh machine pays on first use (compiled Python files, the CUDA context, NVRTC and g++
# builds of the kit's kernels and loops, CuPy's own kernels), so the sections after it are held
# to what they check. A section out of time gets SIGABRT: every Python in it (PYTHONFAULTHANDLER)
# writes where each of its threads was to the section's log, so a hang names its line.
# To add a check: write `section_<name>`, add it to SECTIONS with a budget and a line in `plan_of`.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
REPO="$(pwd)"
MODE=check
case "${1:-}" in
    "") ;;
    --dry-run) MODE=dry-run ;;
    --rehearse) MODE=rehearse ;;
    -h|--help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown option $1 (use --dry-run, --rehearse or nothing)"; exit 2 ;;
esac
OUT="${OUT:-gpu-report}"
case "$OUT" in /*) ;; *) OUT="$REPO/$OUT" ;; esac
if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"
elif [ -x "$REPO/.venv/bin/python" ]; then PY="$REPO/.venv/bin/python"
else PY="python3"; fi
WHEELS="${GPU_CHECK_WHEELS:-$REPO/.whl}"
SITE="$OUT/site"                      # carried wheels are installed here, never into $PY
export PYTHONPATH="$SITE:$REPO${PYTHONPATH:+:$PYTHONPATH}"
export CUPY_CACHE_DIR="${CUPY_CACHE_DIR:-$OUT/cupy-cache}"   # NVRTC binaries stay with the report
export SCRATCHKIT_CACHE_DIR="${SCRATCHKIT_CACHE_DIR:-$OUT/scratchkit-cache}"
export PYTHONFAULTHANDLER=1           # a section stopped by SIGABRT shows every thread's stack
REPORT="$OUT/report.md"
STATUS=0
EMBEDDING_PROFILE="${GPU_CHECK_EMBEDDING_PROFILE:-embedding-bound}"
PROFILE="${GPU_CHECK_PROFILE:-small}"   # bench_small's and validate's (tests rehearse with tiny)
# The device the trainers must use: CUDA in a check, so a CPU-only torch fails loudly instead of
# verifying and benchmarking the CPU; the CPU in a rehearsal.
if [ "$MODE" = rehearse ]; then DEVICE=cpu; else DEVICE=cuda; fi
# calibrate's arguments: the quick calibration (a few seconds: the check exercises calibrate and
# validate; a full calibration of this machine, `scratchkit calibrate`, is a run of its own)
CALIBRATE_ARGS="${GPU_CHECK_CALIBRATE_ARGS:---quick}"
# The benches' and validation's sizes: a GPU runs the profiles whole; a rehearsal only exercises the
# plumbing, on a CPU that may have 2 shared cores, so it trains slivers to stay well inside each
# budget (the embedding-bound profile at 2% of its rows, a batch of 256).
# On a GPU the embedding-bound batches are made by 8 loader threads, 16 ahead: one host core makes
# such a batch in tens of ms, where the device trains it in a few (docs/gpu.md's H200 run).
if [ "$MODE" = rehearse ]; then
    EMBEDDING_DEFAULT="--scale 0.02 --batch-size 256"
    BENCH_STEPS="--steps 10 --warmup 2"; VALIDATE_STEPS="--steps 8 --warmup 2"; VERIFY_STEPS="6 4"
else BENCH_STEPS="--steps 20 --warmup 3"; VALIDATE_STEPS="--steps 20"; VERIFY_STEPS="20 10"
    EMBEDDING_DEFAULT="--loader-threads 8 --batches-ahead 16"; fi
EMBEDDING_ARGS="${GPU_CHECK_EMBEDDING_ARGS-$EMBEDDING_DEFAULT}"
# The trainers the benches compare: on small, every kind of trainer; on the embedding-bound profile
# the five whose measured speed is set beside the projection (the baseline, the device peers and
# the device pipeline), each making its own 8 x 1M-row tables.
BENCH_TRAINERS="gpu-only,hybrid,lru,prefetch-lru,scratchpipe,scratchpipe-device,prefetch-lru-device"
EMBEDDING_TRAINERS="gpu-only,hybrid,lru-device,prefetch-lru-device,scratchpipe-device"

# ---- SECTION BUDGETS (seconds). With the probe they must stay under 480 (8 minutes). ----
PROBE_BUDGET=20
SECTIONS=(wheels env warmup kernel_tests kernel_bench verify distributed calibrate bench_small bench_embedding validate)
declare -A BUDGET=([wheels]=15 [env]=25 [warmup]=80 [kernel_tests]=60 [kernel_bench]=20 [verify]=50
                   [distributed]=35 [bench_small]=35 [bench_embedding]=70 [calibrate]=30 [validate]=35)
TOTAL_LIMIT=480
# A rehearsal tests the script on a CPU that may be shared and slow, not a GPU's budgets: each
# section gets GPU_CHECK_REHEARSAL_SLACK (default 3) times its budget there.
if [ "$MODE" = rehearse ]; then
    for name in "${!BUDGET[@]}"; do BUDGET[$name]=$(( BUDGET[$name] * ${GPU_CHECK_REHEARSAL_SLACK:-3} )); done
fi

say() { echo "$*" | tee -a "$REPORT"; }

# pytest as the check runs it: without the ini's addopts, whose notebook options (--nbval-lax ...)
# pytest refuses where nbval is not installed (a bare GPU machine); every skip's reason in the log
check_pytest() { "$PY" -m pytest -q -rs -o addopts="" -p no:cacheprovider "$@"; }

# Compiled Python files: a machine whose site-packages has none for torch, and may keep none
# (read-only, or PYTHONDONTWRITEBYTECODE), compiles torch's sources again in every Python the check
# starts (seconds each). Then they are kept in $OUT/pycache for the whole run.
pycache_plan() {
    "$PY" - <<'PYEOF' 2>/dev/null
import importlib.util, os
spec = importlib.util.find_spec("torch")  # finds the package without importing it
pyc = importlib.util.cache_from_source(spec.origin) if spec and spec.origin else ""
print("kept" if pyc and os.path.exists(pyc) else "none")
PYEOF
}

# ---- the sections: each runs in a child bash under `timeout` (functions exported below) ----
section_wheels() {
    local found=("$WHEELS"/*.whl)
    if [ ! -e "${found[0]}" ]; then
        echo "no carried wheels in $WHEELS: using the packages $PY already has"
        return 0
    fi
    echo "installing ${#found[@]} carried wheel(s) from $WHEELS into $SITE (no index, no deps):"
    printf '  %s\n' "${found[@]##*/}"
    "$PY" -m pip install --no-index --no-deps --disable-pip-version-check -q --target "$SITE" "${found[@]}"
}

# CuPy 14 looks for the NVIDIA wheels' libraries (libnvrtc) in site-packages, not in a --target
# folder on PYTHONPATH: name their lib folders to the loader. Called after the wheels section.
use_carried_libraries() {
    local dir
    for dir in "$SITE"/nvidia/*/lib; do
        [ -d "$dir" ] && LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    done
    export LD_LIBRARY_PATH
}

section_env() {
    command -v nvidia-smi >/dev/null 2>&1 &&
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    "$PY" - "$OUT/env.json" <<'PYEOF'
import json, sys, platform, torch, numpy, scratchkit.backend as b
info = {"describe": b.detect().describe(), "python": platform.python_version(),
        "torch": torch.__version__, "torch_cuda": torch.cuda.is_available(), "numpy": numpy.__version__}
if b.detect().cupy_available:   # which CuPy: the carried one comes first on PYTHONPATH
    info["cupy_module"] = __import__("cupy").__file__
try:
    from scratchkit.kernels.cupy_loader import nvrtc_targets
    nvrtc = b.get_nvrtc()
    targets, skipped = nvrtc_targets(nvrtc)
    info |= {"nvrtc": ".".join(map(str, nvrtc.getVersion())), "nvrtc_targets": list(targets),
             "nvrtc_skipped": skipped, "nvrtc_archs": b.nvrtc_architectures(nvrtc)[1]}
except b.NvrtcUnavailable as err:
    info["nvrtc"] = f"none: {err}"
if b.detect().cupy_gpu:
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    info |= {"cupy": cupy.__version__, "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
             "device": props["name"].decode(), "sm": f"{props['major']}{props['minor']}"}
json.dump(info, open(sys.argv[1], "w"), indent=2)
print("\n".join(f"{k}: {v}" for k, v in info.items()))
PYEOF
    echo "carried libraries: ${LD_LIBRARY_PATH:-none}"
    echo "compiled Python files: ${PYTHONPYCACHEPREFIX:-beside the sources (site-packages has them)}"
}

section_warmup() {
    # every cold start once, each part timed (scripts/gpu_check_warmup.py says what it pays for)
    "$PY" "$REPO/scripts/gpu_check_warmup.py" "$DEVICE" "$OUT/warmup.json"
}

section_kernel_tests() {
    # the NVRTC checks for every .cu, for the targets this NVRTC builds (the log names those it
    # skipped, and why), the trainers' CUDA lines through the stand-in, then every GPU-marked
    # kernel and scratchpad test
    check_pytest tests/test_kernels_nvrtc.py tests/test_device.py &&
    check_pytest -m gpu tests/test_kernels*.py tests/test_scratchpad*.py tests/test_device_plan.py
}

section_kernel_bench() {
    # lookups/s and gather GB/s per engine, next to the device's own copy bandwidth (same run)
    # shellcheck disable=SC2086  # word splitting of the extra arguments is intended
    "$PY" benchmarks/bench_kernels.py ${GPU_CHECK_BENCH_ARGS:---quick} --json "$OUT/kernel_bench.json"
}

section_verify() {
    # Every trainer against plain PyTorch on the same device. Tolerance on CUDA: 1e-4 absolute
    # (scratchkit.measure.verify.GPU_TOLERANCE), ~100 float32 ulps of parameters of magnitude ~1: CUDA's
    # embedding backward uses atomics and cuBLAS picks its own summation order, so the reference
    # itself is not bit-reproducible there. On the CPU the same command demands exactly 0.
    # The tiny profile: its caches and scratchpads (200 rows, for tables of 500 and 300 rows) must
    # evict, so misses, victims and write-backs all run, and a step is a few launches' time, so
    # every trainer and the reference, twice (SGD, row-wise Adagrad), fit the budget.
    echo "tolerance: 1e-4 on CUDA (float sums reordered by atomics and cuBLAS); 0 on a CPU"
    local steps
    read -r -a steps <<<"$VERIFY_STEPS"   # the SGD run's, then the row-wise Adagrad run's
    "$PY" -m scratchkit.commands.cli verify --profile tiny --trainers all --steps "${steps[0]}" --json \
        --device "$DEVICE" >"$OUT/verify.json" || { cat "$OUT/verify.json"; return 1; }
    "$PY" -m scratchkit.commands.cli verify --profile tiny --optimizer rowwise_adagrad --trainers all \
        --steps "${steps[1]}" --device "$DEVICE"
}

distributed_ranks() {   # one rank per GPU, at most 2 (NCCL refuses two ranks on one GPU); 2 on a CPU
    if [ "$DEVICE" = cuda ]; then
        local gpus
        gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
        if [ "$gpus" -ge 2 ]; then echo 2; else echo 1; fi
    else echo 2; fi
}

section_distributed() {
    # Sharded training (scratchkit/distributed) on NCCL: every trainer, and every collective the kit
    # uses on CUDA tensors (all_to_all_single with uneven splits, all_gather, gather_object), against
    # plain PyTorch trained as N micro-batches. One GPU: a 1-rank job, which still runs them all.
    # Each rank starts its own Python (torch, CUDA, NCCL): tiny and 6 steps keep it to that.
    local ranks
    ranks=$(distributed_ranks)
    echo "$ranks rank(s), backend $([ "$DEVICE" = cuda ] && echo nccl || echo gloo); tolerance 1e-4 on CUDA, 0 on a CPU"
    "$PY" -m scratchkit.commands.cli verify --profile tiny --trainers all --steps 6 \
        --world-size "$ranks" --sharding row --device "$DEVICE" --json >"$OUT/distributed.json" \
        2>"$OUT/distributed.err" || { cat "$OUT/distributed.json" "$OUT/distributed.err"; return 1; }
    cat "$OUT/distributed.err" >&2     # the launcher's words on a job that passed (none, usually)
    "$PY" - "$OUT/distributed.json" <<'PYEOF'
import json, sys
for r in json.load(open(sys.argv[1])):
    print(f"{r['trainer']:19s} {r['world_size']} rank(s) {r['backend']}: max |diff| {r['max_abs_diff']:.2e}"
          f" (tolerance {r['tolerance']:g}) {'OK' if r['passed'] else 'FAIL'}")
PYEOF
}

bench_profile() {   # bench_profile PROFILE TRAINERS OUTPUT.json [FLAGS...]: with the cost model's projections
    local profile="$1" trainers="$2" json="$3"
    shift 3
    # shellcheck disable=SC2086  # word splitting of the step flags is intended
    "$PY" -m scratchkit.commands.cli bench --profile "$profile" --trainers "$trainers" $BENCH_STEPS \
        --project all --json --device "$DEVICE" "$@" >"$json" || return 1
    "$PY" - "$json" <<'PYEOF'
import json, sys
rows = json.load(open(sys.argv[1]))
for r in rows:
    projected = r.get("projected", {}).get("h200", {})
    print(f"{r['trainer']:19s} {r['samples_per_s']:>12,.0f} samples/s  ratio {r['ratio']:.3f}  "
          f"(h200 projection {projected.get('samples_per_s', 0):>12,.0f}, ratio {projected.get('ratio', 0):.3f}); "
          f"set-up {r.get('setup_s', 0):.1f} s, warm-up {r.get('warmup_s', 0):.1f} s")
PYEOF
}

section_bench_small() {
    bench_profile "$PROFILE" "$BENCH_TRAINERS" "$OUT/bench_small.json"
}

section_bench_embedding() {
    # shellcheck disable=SC2086   # EMBEDDING_ARGS is a list of options
    bench_profile "$EMBEDDING_PROFILE" "$EMBEDDING_TRAINERS" "$OUT/bench_embedding.json" $EMBEDDING_ARGS
}

section_calibrate() {
    # this machine's constants, the GPU's and the link's included; saved where this-cpu finds it
    # ($SCRATCHKIT_CACHE_DIR/hardware.json), so the benches' projections (--project all) and the
    # validate section use them, and none of them calibrates again
    # shellcheck disable=SC2086  # word splitting of the extra arguments is intended
    "$PY" -m scratchkit.commands.cli calibrate --json $CALIBRATE_ARGS >"$OUT/calibrate.json" && cat "$OUT/calibrate.json"
}

section_validate() {
    # the calibrated this-cpu model beside the trainers on this device, stage by stage
    # shellcheck disable=SC2086  # word splitting of the step flags is intended
    "$PY" -m scratchkit.commands.cli bench --profile "$PROFILE" --trainers "$BENCH_TRAINERS" $VALIDATE_STEPS \
        --validate --json --device "$DEVICE" >"$OUT/validate.json" || { cat "$OUT/validate.json"; return 1; }
    "$PY" -c "import json, sys; v = json.load(open(sys.argv[1])); print(v['hardware']); print(v['verdict'])" "$OUT/validate.json"
}

# ---- running a section -----------------------------------------------------------------------
# run_section NAME: section_NAME under `timeout` in a child bash, logged to $OUT/NAME.log,
# summarised in the report and in $OUT/sections.tsv (for gpu_check.json). Out of time, the section's
# processes get SIGABRT (Python's fault handler prints their stacks), then SIGKILL 10 s later.
run_section() {
    local name="$1" budget="${BUDGET[$1]}" log="$OUT/$1.log" start rc status lines=25
    start=$(date +%s)
    (ulimit -c 0; timeout --signal=ABRT --kill-after=10 "$budget" bash -c "section_$name") >"$log" 2>&1
    rc=$?
    local took=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then status="passed"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="TIMED OUT"
    else status="FAILED (exit $rc)"; fi
    [ "$status" = passed ] || lines=80    # a failure's stacks and errors, not just its last lines
    {
        echo
        echo "## $name"
        echo "status: $status in ${took} s (budget ${budget} s)"
        echo
        echo '```'
        tail -n "$lines" "$log"
        echo '```'
    } >>"$REPORT"
    printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$took" "$budget" >>"$OUT/sections.tsv"
    echo "[$name] $status in ${took} s (log: $log)"
    [ "$status" = passed ] || STATUS=1
}

require_gpu() {
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        say "gpu_check: no NVIDIA GPU here (nvidia-smi is missing or lists no device): nothing to check."
        exit 2
    fi
    if ! timeout "$PROBE_BUDGET" "$PY" -c "import cupy, sys; sys.exit(0 if cupy.cuda.is_available() else 1)" \
            >"$OUT/cupy-probe.log" 2>&1; then
        say "gpu_check: $PY cannot run CuPy on the GPU (CuPy missing, or it does not match the driver);"
        say "see $OUT/cupy-probe.log. Carry cupy-cuda12x (or -cuda13x) wheels in $WHEELS."
        exit 2
    fi
}

# shellcheck source=scripts/gpu_check_plan.sh
. "$REPO/scripts/gpu_check_plan.sh"   # plan_of, dry_run

main() {
    if [ "$MODE" = dry-run ]; then dry_run; exit $?; fi
    mkdir -p "$OUT"
    : >"$REPORT"
    : >"$OUT/sections.tsv"
    say "# scratchkit GPU check ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null))"
    run_section wheels                   # before the probe: the carried CuPy may be what it needs
    use_carried_libraries
    if [ -z "${PYTHONPYCACHEPREFIX:-}" ] && [ "$(pycache_plan)" = none ]; then
        export PYTHONPYCACHEPREFIX="$OUT/pycache"
        unset PYTHONDONTWRITEBYTECODE
    fi
    if [ "$MODE" = rehearse ]; then
        say "REHEARSAL (--rehearse): no GPU probe; GPU tests skip. Not a GPU check."
    else
        require_gpu
    fi
    for name in "${SECTIONS[@]:1}"; do run_section "$name"; done
    "$PY" "$REPO/scripts/gpu_check_summary.py" "$OUT" "$MODE" >>"$REPORT" || STATUS=1
    echo
    echo "report: $REPORT; JSON: $OUT/gpu_check.json"
    exit $STATUS
}

# `timeout` runs a program, not a shell function: export the sections and their helpers.
export -f section_wheels section_env section_warmup section_kernel_tests section_kernel_bench section_verify \
    section_distributed distributed_ranks section_bench_small section_bench_embedding section_calibrate \
    section_validate bench_profile check_pytest
export PY OUT REPO WHEELS SITE GPU_CHECK_BENCH_ARGS EMBEDDING_PROFILE PROFILE DEVICE CALIBRATE_ARGS \
    BENCH_STEPS EMBEDDING_ARGS VALIDATE_STEPS BENCH_TRAINERS EMBEDDING_TRAINERS VERIFY_STEPS
main "$@"
