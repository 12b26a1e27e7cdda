"""The course in a real browser: JupyterLab in headless chromium, notebooks run, widgets driven.

Starts JupyterLab on 127.0.0.1 (free port, random token, its own process group, HOME and Jupyter
dirs in a temp folder), opens notebooks in Debian's chromium through Python playwright (never a
browser download) and runs all their cells from the Run menu (cells tagged `raises-exception`, the
exercises, do not stop the run). Then every control of the course's three widgets is used as a
learner would, with the keyboard or the mouse: the cache explorer (02), the pipeline visualizer
(04) and the training dashboard (05). Each use must change what is *drawn* (tests/browser_drive.py:
the plots' SVG paths, texts and images, frame by frame), and its latency from the key press to the
first changed frame is recorded; a control that changes nothing fails. The latency table (median and
max per control) is printed at the end of the run and written to test-output/widget-latency.txt.
Each widget must fit one screen (SCREEN px tall), and the drawn page must show no table wider than
1,000 px or with a wrapped row, no legend hiding entries, no overlapping value labels, no cut widget
label. Every notebook is also run on a page 540 px wide, and every figure checked as drawn
(browser_drive.FIGURE_PROBLEMS): each axis within a small factor of its data's span, no label on
another, outside its figure or too small to read; each exercise not yet written shows one line.
Notebook 04's reruns must update its figure in place and keep the controls busy until the new run
is drawn (their latency and the page's longest task are in the table). Each widget's live figure
must follow its output's width at 1400 and 540 px and back, with no text of the widget on another
or cut short, and 05's stop button must answer within twice 04's step button's time, also right
after a start, while ScratchPipe plans its first chunk. It also edits a cell of
notebook 00 through the editor, saves with Ctrl-S and checks that jupytext wrote the edit to both
files of the pair (NN_name.py and .ipynb). Screenshots go to test-output/. The server and its kernels are stopped by process group at the end, also on failure.
Where /usr/bin/chromium exists the tests run: a missing playwright fails them.

Screenshots of any notebooks:  .venv/bin/python tests/test_browser.py 02 04 05 08 [--docs]
(--docs also writes the README's picture, docs/course.png, from notebook 04)
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest
from browser_drive import (
    Drawn,
    figure_problems,
    latency_table,
    layout_problems,
    rerun_drawn,
    wait_until,
    widget_at_width,
)
from course_solutions import exercise_cells
from test_notebook_pairs import first_difference

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
OUT = REPO / "test-output"
NOTEBOOKS = {
    "01": "01_hybrid_baseline.ipynb",
    "02": "02_looking_backwards.ipynb",
    "03": "03_looking_forward.ipynb",
    "04": "04_pipeline_step_by_step.ipynb",
    "05": "05_scratchpipe_training.ipynb",
    "06": "06_your_own_data.ipynb",
    "07": "07_beyond_one_process.ipynb",
    "08": "08_kernel_puzzles.ipynb",
    "09": "09_capstone_planner.ipynb",
}
WIDTHS = (1400, 540)  # px: a wide window, and a narrow one (half a laptop's screen)
NARROW = WIDTHS[-1]  # px: every notebook's figures are read at this width
FOLLOWS = 0.05  # a live figure's width within this share of its output's
SCREEN = 900  # px: what a 1080-line display shows of a notebook, below the browser's and JupyterLab's bars
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]

pytestmark = pytest.mark.browser


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (Linux /proc), e.g. the server's kernels."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def stop_group(pgid: int, timeout: float = 15, process: subprocess.Popen | None = None) -> None:
    """SIGTERM the process group, wait up to `timeout`, then SIGKILL whatever is left in it.

    `process`: the group leader when it is our child; it is reaped with wait() (a zombie would
    still count as a member of the group)."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.time() + timeout
    if process is not None:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    else:
        while time.time() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def shutdown_kernels(base: str, token: str) -> None:
    """Ask the server to shut its kernels down (DELETE /api/kernels/<id>); errors are ignored."""
    try:
        with urllib.request.urlopen(f"{base}/api/kernels?token={token}", timeout=5) as r:
            ids = [k["id"] for k in json.load(r)]
        for kernel in ids:
            request = urllib.request.Request(f"{base}/api/kernels/{kernel}?token={token}", method="DELETE")
            urllib.request.urlopen(request, timeout=15).close()
    except (OSError, ValueError):
        pass


def course_copy(home: Path) -> Path:
    """The notebooks, their .py sources and jupytext.toml (which pairs them) copied under `home`, so
    the browser never saves into the repository (the Criteo sample, where placed, is read from the
    repository's datasets/real/ by its absolute path: scratchkit/data/samples.py)."""
    notebooks = home / "course" / "notebooks"
    notebooks.mkdir(parents=True)
    for path in (REPO / "notebooks").iterdir():
        if path.suffix in (".ipynb", ".py", ".toml"):
            shutil.copy2(path, notebooks / path.name)
    # no autosave, no news prompt
    settings = home / "lab-settings" / "@jupyterlab"
    (settings / "docmanager-extension").mkdir(parents=True)
    (settings / "docmanager-extension" / "plugin.jupyterlab-settings").write_text('{"autosave": false}')
    (settings / "apputils-extension").mkdir(parents=True)
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    # every cell laid out, on screen or not: what the figure checks measure is what a learner scrolls to
    (settings / "notebook-extension").mkdir(parents=True)
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    return notebooks


@contextmanager
def jupyter_lab(home: Path):
    """A JupyterLab server on a copy of notebooks/: yields its base URL with the token."""
    port, token = free_port(), secrets.token_hex(16)
    root = course_copy(home)
    env = dict(
        os.environ,
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CACHE_HOME=str(home / "cache"),
        XDG_RUNTIME_DIR=str(home / "runtime"),
        JUPYTER_CONFIG_DIR=str(home / "jupyter-config"),
        JUPYTER_RUNTIME_DIR=str(home / "jupyter-runtime"),
        IPYTHONDIR=str(home / "ipython"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        JUPYTERLAB_SETTINGS_DIR=str(home / "lab-settings"),
    )
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=None",
    ]
    if os.getuid() == 0:
        command.append("--allow-root")
    log = open(home / "jupyter.log", "wb")
    server = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    kernels: set[int] = set()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"JupyterLab did not start:\n{(home / 'jupyter.log').read_text()[-3000:]}")
                time.sleep(0.3)
        yield base, token, lambda: kernels.update(children(server.pid))
    finally:
        kernels.update(children(server.pid))
        shutdown_kernels(base, token)  # politely first: a killed kernel is restarted
        stop_group(server.pid, timeout=10, process=server)
        for pid in kernels:  # each kernel runs in a session (process group) of its own
            stop_group(pid, timeout=5)
        log.close()


def playwright_api():
    """playwright's sync API. With chromium installed these tests must run, so a missing playwright
    (a dev dependency) fails them instead of skipping them unseen."""
    try:
        from playwright import sync_api
    except ImportError as err:
        pytest.fail(f"chromium is installed but playwright is not ({err}): make install")
    return sync_api


@contextmanager
def browser(home: Path):
    sync_api = playwright_api()
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(home / "chromium-profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1200, "height": 1000},
            env={"HOME": str(home)},
        )
        try:
            yield context
        finally:
            context.close()


def open_and_run(context, base: str, token: str, notebook: str, plots: int, width: int | None = None):
    """Open a notebook (on a page `width` px wide, its left sidebar closed, else the browser's),
    wait for its cells and an idle kernel, Run All, wait for `plots` plots."""
    page = context.new_page()
    if width:
        page.set_viewport_size({"width": width, "height": 1000})
    # a workspace of its own, reset: only this notebook open, nothing restored from an earlier page
    workspace = notebook.split("_")[0]
    page.goto(f"{base}/lab/workspaces/nb{workspace}/tree/{notebook}?token={token}&reset")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    if width:  # the notebook has the page: the left sidebar (the file browser) closed
        close_sidebar(page)
    wait_idle(page)
    started = (
        "Array.from(document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-InputPrompt'))"
        ".some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))"
    )
    run_all(page, started, notebook)
    try:
        deadline = time.time() + 120
        while not page.evaluate(f"document.querySelectorAll('.js-plotly-plot').length >= {plots}"):
            if accept_kernel_dialog(page):  # a kernel slow to start on a busy machine: asked again
                run_all(page, started, notebook)
            if time.time() > deadline:
                raise AssertionError(f"{notebook}: fewer than {plots} plots drawn within 120 s")
            page.wait_for_timeout(500)
        wait_idle(page, settle=2.0)
    except Exception:
        print("screenshot of the failure:", screenshot(page, f"failed-{notebook}.png"))
        raise
    decline = page.get_by_role("button", name="No", exact=True)  # JupyterLab's news prompt
    if decline.count():
        decline.first.click()
    return page


def close_sidebar(page) -> None:
    """Close the left sidebar (the file browser), if it is open."""
    current = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
    if current.count():
        current.first.click()


def run_all(page, started: str, notebook: str) -> None:
    """Run All Cells from the Run menu, until the page shows a cell running (`started`)."""
    for attempt in range(3):  # a Run All sent before the kernel is really ready is lost: retry
        accept_kernel_dialog(page)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        try:
            page.wait_for_function(started, timeout=15_000)
            return
        except Exception:
            if attempt == 2:
                print("screenshot of the failure:", screenshot(page, f"failed-{notebook}.png"))
                raise
            page.keyboard.press("Escape")


def accept_kernel_dialog(page) -> bool:
    """JupyterLab sometimes asks which kernel to start (on a busy machine the first start is slow):
    take the one it proposes, the notebook's own python3. Whether it asked."""
    dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
    if dialog.count():
        dialog.get_by_role("button", name="Select", exact=True).click()
        page.wait_for_timeout(1000)
        return True
    return False


def wait_idle(page, timeout: float = 120, settle: float = 1.0) -> None:
    """Until the kernel status says Idle for `settle` seconds in a row."""
    deadline, since = time.time() + timeout, None
    status = page.locator(".jp-Notebook-ExecutionIndicator, .jp-StatusBar-TextItem", has_text="Idle")
    while time.time() < deadline:
        idle = status.count() > 0 and page.locator(".jp-Notebook-ExecutionIndicator[data-status='busy']").count() == 0
        if idle:
            since = since or time.time()
            if time.time() - since >= settle:
                return
        else:
            since = None
        page.wait_for_timeout(250)
    raise AssertionError("the kernel never became idle")


def screenshot(page, name: str) -> Path:
    OUT.mkdir(exist_ok=True)
    path = OUT / name
    page.screenshot(path=str(path))
    return path


@pytest.fixture(scope="module")
def latencies(request):
    """{control: [ms, ...]} of every widget test; laid out and written out at the end."""
    found: dict[str, list[float]] = {}
    yield found
    if found:
        table = latency_table(found)
        OUT.mkdir(exist_ok=True)
        (OUT / "widget-latency.txt").write_text(table + "\n")
        request.config.widget_latency = table  # tests/conftest.py prints it in the summary
        print("\n" + table)


@pytest.fixture(scope="module")
def lab_session():
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium: apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="scratchkit-browser-") as tmp:
        home = Path(tmp)
        with jupyter_lab(home) as (base, token, note_kernels), browser(home) as context:
            yield base, token, context, note_kernels, home / "course" / "notebooks"


def test_an_edit_saved_in_jupyterlab_reaches_the_py_source(lab_session):
    """Type into a code cell of notebook 00, save with Ctrl-S: jupytext's contents manager writes the
    edit to the .py source and to the .ipynb, and the pair still agrees (test_notebook_pairs.py)."""
    base, token, context, note_kernels, root = lab_session
    notebook = root / "00_welcome.ipynb"
    mark = f"# edited in JupyterLab {secrets.token_hex(4)}"
    assert mark not in notebook.with_suffix(".py").read_text()
    page = context.new_page()
    page.goto(f"{base}/lab/workspaces/nb00/tree/{notebook.name}?token={token}&reset")
    editor = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .cm-content").first
    editor.wait_for(timeout=60_000)
    note_kernels()
    editor.click()
    page.keyboard.press("Control+End")  # the end of the cell's text, whatever it says
    page.keyboard.press("Enter")
    page.keyboard.type(mark)
    page.keyboard.press("Control+s")
    source = wait_for_text(notebook.with_suffix(".py"), mark)
    wait_for_text(notebook, mark)
    code = [cell for cell in source.split("# %%") if mark in cell]
    assert len(code) == 1 and "course_table()" in code[0], "the edit should land in the cell it was typed in"
    cells = json.loads(notebook.read_text())["cells"]
    assert [i for i, cell in enumerate(cells) if mark in "".join(cell["source"])] == [2], (
        "cell 2 is 00's first code cell"
    )
    assert first_difference(notebook) is None, "JupyterLab's save left the pair out of step"
    page.close()


def wait_for_text(path: Path, text: str, timeout: float = 30) -> str:
    """The file's contents once they hold `text` (a save lands a moment after Ctrl-S)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        contents = path.read_text()
        if text in contents:
            return contents
        time.sleep(0.2)
    raise AssertionError(f"{path.name} never got the edit saved in JupyterLab:\n{path.read_text()[:1500]}")


def widget(page, inside: str):
    """The output of the cell whose widget holds `inside` (a selector): (locator, element handle)."""
    output = page.locator(f".jp-OutputArea-output:has({inside})").first
    output.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    output.scroll_into_view_if_needed()
    page.wait_for_timeout(1000)
    return output, output.element_handle()


def assert_fits(page, drawn: Drawn, name: str) -> None:
    OUT.mkdir(exist_ok=True)
    drawn.output.screenshot(path=str(OUT / f"widget-{name.split()[-1]}.png"))
    assert drawn.height() <= SCREEN, f"{name} is {drawn.height():.0f} px tall: more than one screen ({SCREEN} px)"
    assert layout_problems(page, drawn.output) == []


def assert_follows_every_width(page, output, name: str) -> None:
    """At each of WIDTHS and back (a resize either way), the notebook alone on the page: the live
    figure as wide as its output (within FOLLOWS), no text of the widget on another or cut short,
    no label of its figure on another or outside it."""
    close_sidebar(page)
    for width in (*WIDTHS, WIDTHS[0]):
        page.set_viewport_size({"width": width, "height": 1000})
        output.scroll_into_view_if_needed()
        seen = {}

        def follows() -> bool:
            seen.update(widget_at_width(page, output))
            return abs(seen["figure"] - seen["output"]) <= FOLLOWS * seen["output"]

        try:
            wait_until(follows, 15, f"{name}'s figure to follow its output at {width} px")
        except AssertionError:
            raise AssertionError(
                f"{name} at {width} px: the figure is {seen['figure']:.0f} px wide in an output of "
                f"{seen['output']:.0f} px"
            ) from None
        page.wait_for_timeout(500)  # the relayout drawn
        OUT.mkdir(exist_ok=True)
        output.screenshot(path=str(OUT / f"widget-{name.split()[-1]}-{width}.png"))
        problems = widget_at_width(page, output)["problems"] + figure_problems(page, output)
        assert problems == [], f"{name} at {width} px:\n" + "\n".join(problems)


def use(page, drawn: Drawn, control: str, action, times: int = 1, quiet: float = 0.3) -> None:
    """Use a control `times` times, each timed until it draws, then until the kernel is idle."""
    for _ in range(times):
        drawn.press(control, action)
        wait_idle(page, settle=quiet)


def no_errors_but_the_exercises(page) -> None:
    """Tracebacks only from exercise stubs (NotImplementedError) in the page."""
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    others = [text for text in errors.all_inner_texts() if "Traceback" in text and "NotImplementedError" not in text]
    assert others == [], others[0][:2000] if others else ""


@pytest.mark.parametrize("key", ["01", "02", "03", "04", "05", "06", "07", "08", "09"])
def test_every_figure_as_drawn_spans_its_data_and_every_label_can_be_read(lab_session, key):
    """Run All on a page NARROW px wide; then every figure, as drawn (browser_drive.FIGURE_PROBLEMS):
    each axis within a small factor of its data's span, no label on another, none outside its
    figure or too small to read. Each exercise not yet written shows one line, no traceback."""
    base, token, context, note_kernels, root = lab_session
    page = open_and_run(context, base, token, NOTEBOOKS[key], plots=0 if key == "08" else 1, width=NARROW)
    note_kernels()
    page.wait_for_timeout(1500)  # the last figures' drawing
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")
    problems = figure_problems(page, notebook)
    print("screenshot:", screenshot(page, f"figures-{key}.png"))
    errors = notebook.locator(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
    ).all_text_contents()
    page.close()
    assert problems == [], "\n".join(problems)
    exercises = len(exercise_cells(nbformat.read(root / NOTEBOOKS[key], as_version=4)))
    unwritten = [text.strip() for text in errors if "is not written yet" in text]
    assert len(unwritten) == exercises and all(len(text.splitlines()) == 1 for text in unwritten), unwritten
    assert not [text for text in errors if "Traceback" in text], errors


def test_notebook_02_every_explorer_control_redraws_the_figure(lab_session, latencies):
    base, token, context, note_kernels, _ = lab_session
    page = open_and_run(context, base, token, NOTEBOOKS["02"], plots=5)
    note_kernels()
    output, handle = widget(page, ".widget-slider")
    drawn = Drawn(page, handle, latencies)
    assert_fits(page, drawn, "the cache explorer")
    sliders = output.locator(".widget-slider .noUi-handle")
    key = lambda: page.keyboard.press("ArrowRight")
    for control, slider, presses in (
        ("02 explorer: load factor slider (key)", 0, 10),
        ("02 explorer: look-ahead depth slider (key)", 2, 4),
        ("02 explorer: locality slider (key)", 1, 2),
    ):
        sliders.nth(slider).focus()
        use(page, drawn, control, key, presses)
    option = output.locator(".widget-select-multiple option", has_text="opt")
    use(page, drawn, "02 explorer: policies (ctrl-click)", lambda: option.click(modifiers=["Control"]))
    print("screenshot:", screenshot(page, "course-02.png"))
    assert_follows_every_width(page, output, "the cache explorer")
    no_errors_but_the_exercises(page)
    page.close()


def test_notebook_04_every_visualizer_control_redraws_the_figure(lab_session, latencies):
    base, token, context, note_kernels, _ = lab_session
    page = open_and_run(context, base, token, NOTEBOOKS["04"], plots=3)
    note_kernels()
    output, handle = widget(page, "button[title='step forward']")
    drawn = Drawn(page, handle, latencies)
    assert_fits(page, drawn, "the pipeline visualizer")
    assert output.locator(".widget-html-content", has_text="Plan(0)").count() > 0
    clicks = [
        ("04 visualizer: step button", "button[title='step forward']", 6),
        ("04 visualizer: step back button", "button[title='step back']", 3),
    ]
    for control, selector, times in clicks:
        use(page, drawn, control, output.locator(selector).first.click, times)
    output.locator(".widget-slider .noUi-handle").first.focus()
    use(page, drawn, "04 visualizer: moment slider (key)", lambda: page.keyboard.press("ArrowRight"), 3)
    play = output.locator(".widget-play button").first
    drawn.press("04 visualizer: play button", play.click)
    output.locator(".widget-play button").nth(1).click()  # pause
    wait_idle(page, settle=0.5)
    # each switch reruns (untick: a broken run; tick again), as does the button: each new run is
    # drawn into the same figure (its traces updated in place, not drawn anew), and the controls
    # stay busy until it is drawn; the latency to the drawn run and the longest task are reported
    busy = "button[title='train the run again']"
    reruns = [
        (f"04 visualizer: {name}", output.locator(".widget-checkbox", has_text=label).locator("input").click)
        for name, label in (("holds switch", "holds"), ("write-back switch", "write-back before collect"))
        for _ in range(2)
    ] + [("04 visualizer: rerun button", output.locator(busy).first.click)]
    # The runs one click away are trained in the background once a run is drawn (the bar turns
    # green): a click then only draws, it trains nothing ("training..." never shows)
    ready = output.locator(".progress-bar-success")
    for control, action in reruns:
        ready.wait_for(state="attached", timeout=120_000)
        seen = rerun_drawn(page, drawn, control, action, busy)
        assert seen["kept"], f"{control}: the figure was drawn anew, not updated in place"
        assert seen["busy_until_drawn"], f"{control}: the controls came back before the new run was drawn"
        assert not seen["trained"], f"{control}: the click trained its run instead of drawing one trained ahead"
        wait_idle(page, settle=0.5)
    print("screenshot:", screenshot(page, "course-04.png"))
    assert_follows_every_width(page, output, "the pipeline visualizer")
    no_errors_but_the_exercises(page)
    page.close()


def test_notebook_05_every_dashboard_control_redraws_and_the_page_reads_well(lab_session, latencies):
    base, token, context, note_kernels, _ = lab_session
    page = open_and_run(context, base, token, NOTEBOOKS["05"], plots=3)
    note_kernels()
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").element_handle()
    assert layout_problems(page, notebook) == []
    output, handle = widget(page, "button:has-text('start')")
    drawn = Drawn(page, handle, latencies)
    assert_fits(page, drawn, "the training dashboard")
    select = output.locator(".widget-dropdown select").first
    for trainer in ("lru", "scratchpipe"):
        use(page, drawn, "05 dashboard: trainer dropdown (choice)", lambda: select.select_option(trainer))
    sliders = output.locator(".widget-slider .noUi-handle")
    for control, slider in (("05 dashboard: load factor slider (key)", 0), ("05 dashboard: depth slider (key)", 1)):
        sliders.nth(slider).focus()
        use(page, drawn, control, lambda: page.keyboard.press("ArrowRight"))
    start = output.locator("button", has_text="start").first
    drawn.press(
        "05 dashboard: start button (first feedback)",
        start.click,
        also={"05 dashboard: start button (first step drawn)": ".scatterlayer path"},
    )
    page.wait_for_timeout(3000)  # "press stop after a few seconds": the run goes on until stopped
    stop = output.locator("button", has_text="stop").first
    drawn.press("05 dashboard: stop button", stop.click)
    closed = output.locator(".widget-html-content", has_text="trainer closed").first
    closed.wait_for(timeout=60_000)
    assert "stopped, trainer closed" in closed.inner_text(), closed.inner_text()
    # right after a start, the run's first chunk is being planned (ScratchPipe plans a chunk whole
    # before its first step): stop then answers as soon, though the run ends only once it is planned
    start.click()
    output.locator(".widget-html-content", has_text="starting").first.wait_for(timeout=30_000)
    drawn.press("05 dashboard: stop button (while a chunk is planned)", stop.click)
    closed.wait_for(timeout=60_000)
    wait_idle(page, settle=0.5)
    step = latencies.get("04 visualizer: step button")
    if step:  # the module's 04 test ran first: stop lands within twice the step button's time
        for control in ("05 dashboard: stop button", "05 dashboard: stop button (while a chunk is planned)"):
            ms, twice = statistics.median(latencies[control]), 2 * statistics.median(step)
            assert ms <= twice, f"{control}: {ms:.0f} ms, more than twice the step button's ({twice / 2:.0f} ms)"
    print("screenshot:", screenshot(page, "course-05.png"))
    assert_follows_every_width(page, output, "the training dashboard")
    no_errors_but_the_exercises(page)
    page.close()


def take_screenshots(keys: list[str], docs: bool = False) -> None:
    """Run the given notebooks in JupyterLab and save a screenshot of each with its widget in use;
    with `docs`, also the README's picture (notebook 04's visualizer) as docs/course.png."""
    with tempfile.TemporaryDirectory(prefix="scratchkit-browser-") as tmp:
        home = Path(tmp)
        with jupyter_lab(home) as (base, token, note_kernels), browser(home) as context:
            for key in keys:
                page = open_and_run(context, base, token, NOTEBOOKS[key], plots=1)
                note_kernels()
                if key == "05":  # the dashboard: start a run and let it draw for a while
                    start = page.locator("button.widget-button", has_text="start").first
                    start.scroll_into_view_if_needed()
                    start.click()
                    page.wait_for_timeout(8000)
                    page.locator("button.widget-button", has_text="stop").first.click()
                elif key == "04":  # the visualizer: a few steps in
                    step = page.locator("button[title='step forward']").first
                    step.scroll_into_view_if_needed()
                    for _ in range(9):
                        step.click()
                        page.wait_for_timeout(300)
                else:
                    widget = page.locator(".widget-slider").first
                    if widget.count():
                        widget.scroll_into_view_if_needed()
                page.wait_for_timeout(2000)
                print(screenshot(page, f"course-{key}.png"))
                if docs and key == "04":
                    page.set_viewport_size({"width": 1200, "height": 1000})
                    widget = page.locator(".jp-OutputArea-output:has(button[title='step forward'])").first
                    widget.evaluate("e => e.scrollIntoView({block: 'start'})")  # the whole widget: one screen
                    page.wait_for_timeout(1500)
                    (REPO / "docs").mkdir(exist_ok=True)
                    page.screenshot(path=str(REPO / "docs" / "course.png"))
                    print(REPO / "docs" / "course.png")
                page.close()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--docs"]
    take_screenshots(args or ["02", "04"], docs="--docs" in sys.argv)
