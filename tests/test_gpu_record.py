"""scripts/gpu_record.py: a GPU session's run kept as a record, its benches priced again here."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import gpu_record  # noqa: E402

CHECK_OUT = """[wheels] passed in 0 s (log: /root/out/gpu-report/wheels.log)
[kernel_tests] TIMED OUT in 60 s (log: /root/out/gpu-report/kernel_tests.log)
[verify] FAILED (exit 1) in 12 s (log: /root/out/gpu-report/verify.log)
report: /root/out/gpu-report/report.md
"""


def test_the_check_s_section_lines_are_read_with_their_status_and_time():
    assert gpu_record.sections(CHECK_OUT) == {
        "wheels": {"status": "passed", "seconds": 0},
        "kernel_tests": {"status": "TIMED OUT", "seconds": 60},
        "verify": {"status": "FAILED (exit 1)", "seconds": 12},
    }


def test_a_bench_row_is_priced_again_beside_what_the_device_measured(tmp_path):
    """A tiny bench's rows (as `bench --json` writes them) become the record's rows: measured,
    the projection then, the model's now, and measured over projected."""
    rows = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-m",
                "scratchkit.commands.cli",
                "bench",
                "--profile",
                "tiny",
                "--trainers",
                "gpu-only,lru",
                "--quick",
                "--json",
                "--project",
                "h200",
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
        ).stdout
    )
    (tmp_path / "gpu_check.out").write_text(CHECK_OUT)
    (tmp_path / "tiny.json").write_text(json.dumps(rows))
    out = tmp_path / "record.json"
    gpu_record.main(
        [
            str(tmp_path),
            "--bench",
            "tiny=tiny.json",
            "--commit",
            "abc1234",
            "--date",
            "2026-12-04 00:00 UTC",
            "--machine",
            "a GPU",
            "--command",
            "bash scripts/gpu_check.sh",
            "--record",
            str(out),
        ]
    )
    record = json.loads(out.read_text())
    assert record["commit"] == "abc1234" and record["figures"]["sections"]["verify"]["status"] == "FAILED (exit 1)"
    for row in rows:
        mine = record["figures"]["benches"]["tiny"][row["trainer"]]
        assert mine["measured_samples_per_s"] == round(row["samples_per_s"])
        assert mine["projected_then"] == round(row["projected"]["h200"]["samples_per_s"])
        assert mine["measured_over_projected_now"] == round(row["samples_per_s"] / mine["projected_now"], 3)
        assert set(mine["measured_ms"]) == set(row["stage_seconds"])
