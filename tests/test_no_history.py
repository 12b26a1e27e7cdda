"""Package code says what it does and why, never when or what a run once measured: a dated line,
a validation run's letter or an issue number belongs in a run record (results/) or the docs."""

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "scratchkit"
HISTORY = re.compile(r"20[0-9]{2}-[0-9]{2}-[0-9]{2}|validation runs? [a-p]\b|issue[- ][0-9]+")


def test_no_date_run_letter_or_issue_number_in_the_package():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert found == [], "\n".join(found)
