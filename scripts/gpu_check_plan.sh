# scripts/gpu_check_plan.sh: `gpu_check.sh --dry-run`, sourced by gpu_check.sh (not run alone).
# It prints every step the check would run, with its budget, and checks that everything the check
# needs is here. Nothing runs, nothing is installed, nothing is written. A missing GPU (no
# nvidia-smi, or one that lists no device) is reported, not fatal: the dry run is for any machine.

DRY_FAILED=0

check() {   # check OK|FAIL|NOTE WHAT: one line of the dry run's checklist
    case "$1" in FAIL) DRY_FAILED=$((DRY_FAILED + 1)) ;; esac
    printf '  [%-4s] %s\n' "$1" "$2"
}

plan_of() {   # plan_of SECTION: what the section runs, as one line
    case "$1" in
        wheels)
            local found=("$WHEELS"/*.whl)
            if [ -e "${found[0]}" ]; then
                echo "pip install --no-index --no-deps --target $SITE: ${found[*]##*/}; their nvidia/*/lib on LD_LIBRARY_PATH"
            else echo "no carried wheels in $WHEELS: nothing to install"; fi ;;
        env) echo "nvidia-smi --query-gpu=...; scratchkit.backend describe, CuPy, NVRTC and the targets it builds, device -> env.json" ;;
        warmup) echo "scripts/gpu_check_warmup.py $DEVICE: imports, CUDA context, NVRTC and g++ builds, every trainer and the reference 3 steps of tiny, each timed -> warmup.json" ;;
        kernel_tests) echo "pytest -o addopts='' tests/test_kernels_nvrtc.py tests/test_device.py (the targets this NVRTC builds; skips named); pytest -m gpu tests/test_kernels*.py tests/test_scratchpad*.py tests/test_device_plan.py" ;;
        kernel_bench) echo "benchmarks/bench_kernels.py ${GPU_CHECK_BENCH_ARGS:---quick}: lookups/s, gather GB/s vs the device's copy GB/s -> kernel_bench.json" ;;
        verify) echo "scratchkit verify --profile tiny --trainers all --steps ${VERIFY_STEPS%% *} --device $DEVICE (tolerance 1e-4 on CUDA), and with rowwise_adagrad (${VERIFY_STEPS##* } steps) -> verify.json" ;;
        distributed) echo "scratchkit verify --profile tiny --trainers all --steps 6 --world-size $(distributed_ranks) --sharding row --device $DEVICE: NCCL, one rank per GPU (at most 2) -> distributed.json" ;;
        bench_small) echo "scratchkit bench --profile $PROFILE --trainers $BENCH_TRAINERS $BENCH_STEPS --project all --device $DEVICE -> bench_small.json" ;;
        bench_embedding) echo "scratchkit bench --profile $EMBEDDING_PROFILE --trainers $EMBEDDING_TRAINERS $BENCH_STEPS --project all --device $DEVICE${EMBEDDING_ARGS:+ $EMBEDDING_ARGS} -> bench_embedding.json" ;;
        calibrate) echo "scratchkit calibrate --json${CALIBRATE_ARGS:+ $CALIBRATE_ARGS} -> calibrate.json (and this-cpu's profile)" ;;
        validate) echo "scratchkit bench --profile $PROFILE --trainers $BENCH_TRAINERS $VALIDATE_STEPS --validate --json --device $DEVICE -> validate.json" ;;
    esac
}

dry_run_checks() {
    local version
    if version=$("$PY" -c "import platform; print(platform.python_version())" 2>/dev/null); then
        check OK "python: $PY ($version)"
    else check FAIL "python: $PY does not run (set PYTHON=...)"; return; fi
    if version=$("$PY" -c "import torch; print(torch.__version__, 'CUDA', torch.cuda.is_available())" 2>/dev/null); then
        check OK "torch importable: $version"
    else check FAIL "torch: not importable by $PY"; fi
    if "$PY" -c "import scratchkit.commands.cli" 2>/dev/null; then check OK "scratchkit importable from $REPO"
    else check FAIL "scratchkit: not importable from $REPO"; fi
    # the test sections' needs: pytest and hypothesis; nbval, jupyter and libcachesim are not
    if version=$("$PY" -c "import pytest, hypothesis; print('pytest', pytest.__version__, 'hypothesis', hypothesis.__version__)" 2>/dev/null); then
        check OK "test sections: $version (they run without nbval's ini options)"
    else check FAIL "test sections: pytest or hypothesis not importable by $PY"; fi
    if [ -n "${PYTHONPYCACHEPREFIX:-}" ]; then check NOTE "compiled Python files: kept in $PYTHONPYCACHEPREFIX (set here)"
    elif [ "$(pycache_plan)" = none ]; then
        check NOTE "compiled Python files: none for torch here; the check keeps them in $OUT/pycache (PYTHONPYCACHEPREFIX)"
    else check OK "compiled Python files: torch's are here"; fi
    local wheels=("$WHEELS"/*.whl) has_cupy_wheel=0
    if [ -e "${wheels[0]}" ]; then
        check OK "carried wheels in $WHEELS: ${wheels[*]##*/}"
        case "${wheels[*]##*/}" in *cupy*) has_cupy_wheel=1 ;; esac
    else check NOTE "carried wheels: none in $WHEELS (the check uses what $PY has)"; fi
    local scratch   # CuPy makes its cache folder on import: not in $OUT, which a dry run leaves alone
    scratch=$(mktemp -d)
    version=$(CUPY_CACHE_DIR="$scratch" "$PY" - 2>/dev/null <<'PYEOF'
import cupy
from scratchkit.backend import get_nvrtc
from scratchkit.kernels.cupy_loader import nvrtc_targets
nvrtc = get_nvrtc()
targets, skipped = nvrtc_targets(nvrtc)
left_out = "".join(f"; skips {t}: {why}" for t, why in skipped.items())
print(cupy.__version__, "NVRTC", ".".join(map(str, nvrtc.getVersion())), "builds", ", ".join(targets) + left_out)
PYEOF
)
    local cupy_rc=$?
    rm -rf "$scratch"
    if [ $cupy_rc = 0 ]; then
        check OK "cupy importable: $version"
    elif [ $has_cupy_wheel = 1 ]; then check OK "cupy: not in $PY, but carried as a wheel"
    else check FAIL "cupy: not importable by $PY and no cupy wheel in $WHEELS"; fi
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        check OK "nvidia-smi: $(nvidia-smi -L | head -n 1)"
    else check NOTE "nvidia-smi: no GPU here (missing, or lists no device); a real run stops at the probe"; fi
    command -v timeout >/dev/null 2>&1 && check OK "coreutils timeout" || check FAIL "coreutils timeout: missing"
    local missing=()
    for f in tests/test_kernels_nvrtc.py tests/test_device.py tests/test_device_plan.py benchmarks/bench_kernels.py \
             scripts/gpu_check_warmup.py scripts/gpu_check_summary.py docs/gpu-expected.json; do
        [ -e "$REPO/$f" ] || missing+=("$f")
    done
    [ ${#missing[@]} = 0 ] && check OK "files the sections use are here" || check FAIL "missing: ${missing[*]}"
    local total=$PROBE_BUDGET name
    for name in "${SECTIONS[@]}"; do total=$((total + BUDGET[$name])); done
    if [ $total -lt $TOTAL_LIMIT ]; then check OK "budgets: ${total} s with the GPU probe, under ${TOTAL_LIMIT} s"
    else check FAIL "budgets: ${total} s with the GPU probe, not under ${TOTAL_LIMIT} s"; fi
}

dry_run() {
    echo "gpu_check --dry-run: nothing runs, nothing is installed"
    echo "checks:"
    dry_run_checks
    echo "steps (OUT=$OUT):"
    local step=1 name
    printf '  %d. %-16s %4s  %s\n' $step wheels "${BUDGET[wheels]}s" "$(plan_of wheels)"
    step=$((step + 1))
    printf '  %d. %-16s %4s  %s\n' $step gpu_probe "${PROBE_BUDGET}s" "nvidia-smi -L; $PY -c 'cupy.cuda.is_available()' (no GPU: stop, exit 2)"
    for name in "${SECTIONS[@]:1}"; do
        step=$((step + 1))
        printf '  %d. %-16s %4s  %s\n' $step "$name" "${BUDGET[$name]}s" "$(plan_of "$name")"
    done
    printf '  %d. %-16s %4s  %s\n' $((step + 1)) summary "-" "scripts/gpu_check_summary.py -> report.md, gpu_check.json (beside docs/gpu-expected.json)"
    if [ $DRY_FAILED = 0 ]; then echo "dry run: every check passed"; return 0; fi
    echo "dry run: $DRY_FAILED check(s) FAILED"
    return 1
}
