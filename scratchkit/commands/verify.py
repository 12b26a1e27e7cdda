"""`scratchkit verify`: every trainer against a plain PyTorch reference, parameter by parameter."""

from __future__ import annotations

import json
from dataclasses import dataclass

from scratchkit.commands.common import add_config_args, fitted_run, progress
from scratchkit.commands.distributed import add_sharding_args, run_sharded
from scratchkit.commands.request import DataRequest, ShardedRequest, TrainingRequest
from scratchkit.config import SummationOrder


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("verify", help="compare trainers' final parameters with plain PyTorch")
    add_config_args(p, default_profile="tiny")  # trains in about a second
    p.add_argument("--trainers", default="gpu-only,hybrid", help="comma-separated, or all (default gpu-only,hybrid)")
    p.add_argument(
        "--steps",
        type=int,
        default=20,
        help="training steps (default 20; fewer where the data has fewer batches, said on stderr)",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=None,
        help="max abs difference allowed (default 0 on CPU: deterministic runs agree bit for bit; 1e-4 on CUDA)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list instead of lines")
    add_sharding_args(p)
    p.set_defaults(run=run)


@dataclass(frozen=True)
class VerifyRequest:
    """What `scratchkit verify` was asked: the batches, the training, the trainers, the steps,
    the tolerance, and whether sharded."""

    data: DataRequest
    training: TrainingRequest
    trainers: str
    steps: int
    tolerance: float | None = None
    json: bool = False
    sharded: ShardedRequest = ShardedRequest()

    @classmethod
    def from_args(cls, args) -> "VerifyRequest":
        if args.tolerance is not None and not args.tolerance >= 0:
            raise ValueError(f"--tolerance must be >= 0, got {args.tolerance}")
        return cls(
            DataRequest.from_args(args),
            TrainingRequest.from_args(args),
            args.trainers,
            args.steps,
            args.tolerance,
            args.json,
            ShardedRequest.from_args(args),
        )


def run(args) -> int:
    return verify_request(VerifyRequest.from_args(args))


def verify_request(request: VerifyRequest) -> int:
    from scratchkit.commands.common import parse_trainer_list
    from scratchkit.measure.verify import verify

    if request.sharded.world_size is not None:
        return run_sharded("verify", request.sharded, request.data, request.training, request.steps)
    trainers = parse_trainer_list(request.trainers)
    source, config, _, steps, _ = fitted_run("verify", request.data, request.training, trainers, request.steps)
    results = list(
        progress(
            verify(config, trainers, steps, source=source, device=request.training.device, tolerance=request.tolerance),
            len(trainers),
            "verify",
        )
    )
    return show(results, request.json, by_id=config.summation_order is SummationOrder.BY_ID)


def show(results, as_json: bool, by_id: bool = False) -> int:
    """Print verify's results (a JSON list, or a line each); -> the exit status (1: any failed)."""
    if as_json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    else:
        for r in results:
            verdict = "OK" if r.passed else "FAIL"
            exact = " (bit-exact)" if r.max_abs_diff == 0.0 else ""
            extra = "".join(f", {k} {v:.6f}" for k, v in r.extras.items() if isinstance(v, float))
            against = r.extras.get("reference", "plain PyTorch")
            ranks = (
                f" on {r.extras['world_size']} ranks ({r.extras['sharding']}-wise, {r.extras['backend']})"
                if "world_size" in r.extras
                else ""
            )
            threads = f", {r.extras['threads']} host threads" if "threads" in r.extras else ""
            print(
                f"{r.trainer:12s} max |diff| {r.max_abs_diff:.3e}{exact} vs {against} after "
                f"{r.steps} steps{ranks} on {r.device}{threads} (tolerance {r.tolerance:g}){extra}: {verdict}"
            )
        if results and results[0].tolerance == 0.0:
            print(
                "On the CPU in deterministic mode the kit and the reference do the same float "
                "operations in the same order, so every difference must be exactly 0.0."
            )
        elif by_id:
            print(
                "--summation-order by-id adds each id's gradients in lookup order, not in torch's: "
                "the sums differ from PyTorch's in their last bits, so the tolerance is not 0."
            )
    return 0 if all(r.passed for r in results) else 1
