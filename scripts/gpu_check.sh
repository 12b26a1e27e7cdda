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
# Knobs (environment): GPU_CHECK_BENCH_ARGS (bench_kernels.py's sizes, default --quick),
# GPU_CHECK_CALIBRATE_ARGS (calibrate's, default none; --quick in a rehearsal),
# GPU_CHECK_PROFILE (verify's and bench_small's profile, default small), GPU_CHECK_EMBEDDING_PROFILE,
# GPU_CHECK_EMBEDDING_ARGS (bench options after the section's own: none on a GPU; in a rehearsal
# "--scale 0.02 --batch-size 256 --steps 10 --warmup 2", as a 2-core CPU runs the full profile's
# 655k lookups a step far slower than the section's budget allows).
# Exit status: 0 every section passed (or is not available in this version); 1 a section failed
# or timed out, or the dry run found something missing; 2 no usable GPU (nothing else runs).
#
# Time: each section runs under `timeout` with its budget (SECTION BUDGETS); with the GPU probe
# they add up to under 8 minutes. Sections for features a later version adds (`scratchkit
# calibrate`, `bench --validate`, the embedding-bound profile, `prefetch-lru`) run when this
# checkout has them and report "not available in this version" otherwise.
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
REPORT="$OUT/report.md"
STATUS=0
NOT_AVAILABLE=3                       # a section's exit code: the feature is not in this version
EMBEDDING_PROFILE="${GPU_CHECK_EMBEDDING_PROFILE:-embedding-bound}"
PROFILE="${GPU_CHECK_PROFILE:-small}"   # verify's and the first bench's (tests rehearse with tiny)
# The device the trainers must use: CUDA in a check, so a CPU-only torch fails loudly instead of
# verifying and benchmarking the CPU; the CPU in a rehearsal.
if [ "$MODE" = rehearse ]; then DEVICE=cpu; else DEVICE=cuda; fi
# calibrate's arguments: the full calibration on a GPU (tens of seconds), a quick one in a
# rehearsal (a shared CPU takes longer than the section's budget for the full one)
if [ "$MODE" = rehearse ]; then CALIBRATE_ARGS="${GPU_CHECK_CALIBRATE_ARGS:---quick}"
else CALIBRATE_ARGS="${GPU_CHECK_CALIBRATE_ARGS:-}"; fi
# The benches' and validation's sizes: a GPU runs them as written; a rehearsal only exercises the
# plumbing, on a CPU that may have 2 shared cores, so it trains slivers to stay well inside each
# budget (the embedding-bound profile at 2% of its rows, a batch of 256).
if [ "$MODE" = rehearse ]; then
    REHEARSAL_ARGS="--scale 0.02 --batch-size 256 --steps 10 --warmup 2"
    BENCH_STEPS="--steps 10 --warmup 2"; VALIDATE_STEPS="--steps 8 --warmup 2"
else BENCH_STEPS="--steps 50"; VALIDATE_STEPS="--steps 30"; fi
EMBEDDING_ARGS="${GPU_CHECK_EMBEDDING_ARGS-${REHEARSAL_ARGS:-}}"

# ---- SECTION BUDGETS (seconds). With the probe they must stay under 480 (8 minutes). ----
PROBE_BUDGET=30
SECTIONS=(wheels env kernel_tests kernel_bench verify distributed bench_small bench_embedding calibrate validate)
declare -A BUDGET=([wheels]=30 [env]=15 [kernel_tests]=75 [kernel_bench]=45 [verify]=60 [distributed]=25
                   [bench_small]=50 [bench_embedding]=60 [calibrate]=40 [validate]=45)
TOTAL_LIMIT=480

say() { echo "$*" | tee -a "$REPORT"; }

# ---- what this checkout has (issue-12 features arrive later) ---------------------------------
py_true() { "$PY" -c "import sys; sys.exit(0 if ($1) else 1)" >/dev/null 2>&1; }
has_trainer() { py_true "'$1' in [k.value for k in __import__('scratchkit.trainers', fromlist=['x']).TrainerKind]"; }
has_profile() { py_true "'$1' in __import__('scratchkit.profiles', fromlist=['x']).PROFILES"; }
has_command() { "$PY" -m scratchkit.commands.cli "$1" --help >/dev/null 2>&1; }
has_bench_option() { "$PY" -m scratchkit.commands.cli bench --help 2>/dev/null | grep -q -- "$1"; }
not_available() { echo "not available in this version: $*"; return $NOT_AVAILABLE; }

bench_trainers() {   # gpu-only, hybrid, lru, then prefetch-lru and scratchpipe-device where they exist, scratchpipe
    local more=""
    if has_trainer prefetch-lru; then more="$more,prefetch-lru"; fi
    more="$more,scratchpipe"
    if has_trainer scratchpipe-device; then more="$more,scratchpipe-device"; fi
    echo "gpu-only,hybrid,lru$more"
}

verify_trainers() {
    "$PY" -c "from scratchkit.trainers import available_trainers; print(','.join(available_trainers()))"
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
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
    "$PY" - "$OUT/env.json" <<'PYEOF'
import json, sys, platform, torch, numpy, scratchkit.backend as b
info = {"describe": b.detect().describe(), "python": platform.python_version(),
        "torch": torch.__version__, "torch_cuda": torch.cuda.is_available(), "numpy": numpy.__version__}
if b.detect().cupy_available:   # which CuPy: the carried one comes first on PYTHONPATH
    info["cupy_module"] = __import__("cupy").__file__
if b.detect().cupy_gpu:
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    info |= {"cupy": cupy.__version__, "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
             "device": props["name"].decode(), "sm": f"{props['major']}{props['minor']}",
             "nvrtc": ".".join(map(str, b.get_nvrtc().getVersion()))}
json.dump(info, open(sys.argv[1], "w"), indent=2)
print("\n".join(f"{k}: {v}" for k, v in info.items()))
PYEOF
    echo "carried libraries: ${LD_LIBRARY_PATH:-none}"
}

section_kernel_tests() {
    # the NVRTC checks for every .cu (also CI's), then every GPU-marked kernel/scratchpad test
    "$PY" -m pytest -q -p no:cacheprovider tests/test_kernels_nvrtc.py tests/test_device.py &&
    "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels*.py tests/test_scratchpad*.py tests/test_device_plan.py
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
    local trainers
    trainers=$(verify_trainers)
    echo "tolerance: 1e-4 on CUDA (float sums reordered by atomics and cuBLAS); 0 on a CPU"
    "$PY" -m scratchkit.commands.cli verify --profile "$PROFILE" --trainers "$trainers" --steps 20 --json --device "$DEVICE" \
        >"$OUT/verify.json" || { cat "$OUT/verify.json"; return 1; }
    "$PY" -m scratchkit.commands.cli verify --profile tiny --optimizer rowwise_adagrad --trainers "$trainers" \
        --steps 20 --device "$DEVICE"
}

distributed_ranks() {   # one rank per GPU, at most 2 (NCCL refuses two ranks on one GPU); 2 on a CPU
    if [ "$DEVICE" = cuda ]; then
        local gpus
        gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
        if [ "$gpus" -ge 2 ]; then echo 2; else echo 1; fi
    else echo 2; fi
}

section_distributed() {
    # Sharded training (scratchkit/distributed) on NCCL: every collective the kit uses on CUDA
    # tensors (all_to_all_single with uneven splits, all_gather, gather_object), against plain
    # PyTorch trained as N micro-batches. One GPU: a 1-rank job, which still runs them all.
    local ranks
    ranks=$(distributed_ranks)
    echo "$ranks rank(s), backend $([ "$DEVICE" = cuda ] && echo nccl || echo gloo); tolerance 1e-4 on CUDA, 0 on a CPU"
    "$PY" -m scratchkit.commands.cli verify --profile tiny --trainers gpu-only,hybrid,scratchpipe --steps 10 \
        --world-size "$ranks" --sharding row --device "$DEVICE" --json >"$OUT/distributed.json" \
        2>"$OUT/distributed.err" || { cat "$OUT/distributed.json" "$OUT/distributed.err"; return 1; }
    cat "$OUT/distributed.err" >&2     # the launcher's words on a job that passed (none, usually)
    "$PY" - "$OUT/distributed.json" <<'PYEOF'
import json, sys
for r in json.load(open(sys.argv[1])):
    print(f"{r['trainer']:12s} {r['world_size']} rank(s) {r['backend']}: max |diff| {r['max_abs_diff']:.2e}"
          f" (tolerance {r['tolerance']:g}) {'OK' if r['passed'] else 'FAIL'}")
PYEOF
}

bench_profile() {   # bench_profile PROFILE OUTPUT.json [FLAGS...]: the trainers, with the cost model's projections
    local profile="$1" json="$2"
    shift 2
    # shellcheck disable=SC2086  # word splitting of the step flags is intended
    "$PY" -m scratchkit.commands.cli bench --profile "$profile" --trainers "$(bench_trainers)" $BENCH_STEPS \
        --project all --json --device "$DEVICE" "$@" >"$json" || return 1
    "$PY" - "$json" <<'PYEOF'
import json, sys
rows = json.load(open(sys.argv[1]))
for r in rows:
    projected = r.get("projected", {}).get("h100-pcie5", {})
    print(f"{r['trainer']:13s} {r['samples_per_s']:>12,.0f} samples/s  ratio {r['ratio']:.3f}  "
          f"(h100-pcie5 projection {projected.get('samples_per_s', 0):>12,.0f}, "
          f"ratio {projected.get('ratio', 0):.3f})")
PYEOF
}

section_bench_small() {
    bench_profile "$PROFILE" "$OUT/bench_small.json"
}

section_bench_embedding() {
    has_profile "$EMBEDDING_PROFILE" || { not_available "profile $EMBEDDING_PROFILE"; return; }
    # shellcheck disable=SC2086   # EMBEDDING_ARGS is a list of options
    bench_profile "$EMBEDDING_PROFILE" "$OUT/bench_embedding.json" $EMBEDDING_ARGS
}

section_calibrate() {
    # this machine's constants, the GPU's and the link's included; saved where this-cpu finds it
    # ($SCRATCHKIT_CACHE_DIR/hardware.json), so the validate section uses them
    has_command calibrate || { not_available "scratchkit calibrate"; return; }
    # shellcheck disable=SC2086  # word splitting of the extra arguments is intended
    "$PY" -m scratchkit.commands.cli calibrate --json $CALIBRATE_ARGS >"$OUT/calibrate.json" && cat "$OUT/calibrate.json"
}

section_validate() {
    # the calibrated this-cpu model beside the trainers on this device, stage by stage
    has_bench_option --validate || { not_available "scratchkit bench --validate"; return; }
    # shellcheck disable=SC2086  # word splitting of the step flags is intended
    "$PY" -m scratchkit.commands.cli bench --profile "$PROFILE" --trainers "$(bench_trainers)" $VALIDATE_STEPS \
        --validate --json --device "$DEVICE" >"$OUT/validate.json" || { cat "$OUT/validate.json"; return 1; }
    "$PY" -c "import json, sys; v = json.load(open(sys.argv[1])); print(v['hardware']); print(v['verdict'])" "$OUT/validate.json"
}

# ---- running a section -----------------------------------------------------------------------
# run_section NAME: section_NAME under `timeout` in a child bash, logged to $OUT/NAME.log,
# summarised in the report and in $OUT/sections.tsv (for gpu_check.json).
run_section() {
    local name="$1" budget="${BUDGET[$1]}" log="$OUT/$1.log" start rc status
    start=$(date +%s)
    timeout --kill-after=10 "$budget" bash -c "section_$name" >"$log" 2>&1
    rc=$?
    local took=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then status="passed"
    elif [ $rc -eq $NOT_AVAILABLE ]; then status="not available in this version"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="TIMED OUT"
    else status="FAILED (exit $rc)"; fi
    {
        echo
        echo "## $name"
        echo "status: $status in ${took} s (budget ${budget} s)"
        echo
        echo '```'
        tail -n 25 "$log"
        echo '```'
    } >>"$REPORT"
    printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$took" "$budget" >>"$OUT/sections.tsv"
    echo "[$name] $status in ${took} s (log: $log)"
    case "$status" in passed|"not available in this version") ;; *) STATUS=1 ;; esac
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
export -f section_wheels section_env section_kernel_tests section_kernel_bench section_verify \
    section_distributed distributed_ranks section_bench_small section_bench_embedding section_calibrate section_validate \
    bench_profile bench_trainers verify_trainers py_true has_trainer has_profile has_command \
    has_bench_option not_available
export PY OUT WHEELS SITE GPU_CHECK_BENCH_ARGS EMBEDDING_PROFILE PROFILE DEVICE NOT_AVAILABLE CALIBRATE_ARGS \
    BENCH_STEPS EMBEDDING_ARGS VALIDATE_STEPS
main "$@"
