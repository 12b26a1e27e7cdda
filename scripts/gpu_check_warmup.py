"""The warm-up section of scripts/gpu_check.sh: pay every cold start once, timed, before the sections
that are held to budgets.

    python scripts/gpu_check_warmup.py DEVICE OUT.json

A fresh machine pays, once, for: compiling torch's and CuPy's Python files (kept, by the check, in
$PYTHONPYCACHEPREFIX where the machine keeps none), the CUDA context and cuBLAS, NVRTC compiling
the kit's `.cu` files for this GPU (into $SCRATCHKIT_CACHE_DIR), g++ building the kit's C++ loops,
and CuPy compiling each of its own elementwise and reduction kernels on first use (into
$CUPY_CACHE_DIR). Here each trainer trains a few steps of the `tiny` profile on DEVICE, and the
plain PyTorch reference too, so every later section finds those caches filled. Each part's
seconds are printed and written to OUT.json; a part that fails is named, the others still run,
and the exit status is 1.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback

STEPS = 3  # a step or two compiles what a trainer's steps use; the third runs warm


def main(argv: list[str]) -> int:
    device, out = argv[0], argv[1]
    parts: list[dict] = []

    def part(what: str, run) -> None:
        started = time.perf_counter()
        try:
            note = run()
            ok = True
        except Exception:  # named in the report; the other parts still run
            note, ok = traceback.format_exc(limit=3).strip().splitlines()[-1], False
        seconds = time.perf_counter() - started
        parts.append({"part": what, "seconds": seconds, "ok": ok, "note": note or ""})
        print(f"  {what:40s} {seconds:7.2f} s  {'' if ok else 'FAILED: '}{note or ''}", flush=True)

    print(f"warm-up on {device}: seconds for each part (a cold machine pays them once)", flush=True)
    part("import torch", lambda: importlib.import_module("torch").__version__)
    part("import scratchkit's trainers", lambda: importlib.import_module("scratchkit.trainers").__name__)
    if device.startswith("cuda"):
        part("CUDA context, cuBLAS", lambda: cuda_context(device))
        part("NVRTC: the kit's .cu files for this GPU", compile_kernels)
    from scratchkit.profiles import get_profile
    from scratchkit.trainers import available_trainers

    config = get_profile("tiny")
    for name in available_trainers():
        part(f"{name}: {STEPS} steps of tiny", lambda name=name: train(name, config, device))
    part(f"plain PyTorch reference: {STEPS} steps", lambda: reference(config, device))
    dynamo = "torch._dynamo" in sys.modules
    print(f"torch._dynamo imported: {'yes (by the reference: torch.optim)' if dynamo else 'no'}")
    with open(out, "w") as f:
        json.dump(parts, f, indent=2)
    return 0 if all(p["ok"] for p in parts) else 1


def cuda_context(device: str) -> str:
    import torch

    a = torch.ones(64, 64, device=device)
    (a @ a).sum().item()
    return torch.cuda.get_device_name(torch.device(device))


def compile_kernels() -> str:
    from scratchkit.backend import get_cupy
    from scratchkit.kernels.cupy_loader import cuda_binary, target_for
    from scratchkit.kernels.signatures import SOURCES

    target = target_for(int(get_cupy().cuda.Device().compute_capability))
    for source in SOURCES:
        cuda_binary(source, target)
    return f"{len(SOURCES)} files for {target}"


def train(name: str, config, device: str) -> str:
    from scratchkit.trainers import make_trainer

    with make_trainer(name, config, device=device) as trainer:
        records = list(trainer.train(STEPS))
    return f"loss {records[-1].loss:.4f}"


def reference(config, device: str) -> str:
    from scratchkit.data.synthetic import SyntheticSource
    from scratchkit.measure.reference import ReferenceRun

    losses = ReferenceRun(config, SyntheticSource(config.data), device=device).train(STEPS)
    return f"loss {losses[-1]:.4f}"


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
