"""pytest's run of the course as shipped (nbval, notebooks/): an exercise cell (cell tag `exercise`)
must stop with NotImplementedError, its stub's, and no other, shown as one line (what to write and
where) rather than a traceback; every other cell must run, as nbval already demands.
tests/test_course_exercises.py runs the course again with the solutions filled in."""

from __future__ import annotations

import pytest

EXERCISE = "exercise"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    cell = getattr(item, "cell", None)  # nbval's cell items have one
    if call.when != "call" or cell is None or EXERCISE not in cell.get("metadata", {}).get("tags", []):
        return
    errors = [o for o in (getattr(item, "test_outputs", None) or []) if o.get("output_type") == "error"]
    raised = [o.get("ename") for o in errors]
    if report.outcome != "passed":
        return
    if raised != ["NotImplementedError"]:
        report.outcome = "failed"
        report.longrepr = (
            f"exercise cell {item.cell_num}: as shipped its stub must raise NotImplementedError; "
            f"it raised {', '.join(raised) or 'nothing'}"
        )
    elif len(errors[0].get("traceback", [])) != 1:
        report.outcome = "failed"
        report.longrepr = (
            f"exercise cell {item.cell_num}: an unwritten exercise should show one line, not a "
            f"{len(errors[0].get('traceback', []))}-line traceback"
        )
