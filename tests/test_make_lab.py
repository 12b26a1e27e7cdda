"""`make lab` opens JupyterLab on 127.0.0.1 with a token: start it, open the URL it prints, stop it.
It serves notebooks/ through jupytext's contents manager, so a save there writes the .py source too.

The test passes no TOKEN: it reads the URL `make lab` prints, as a user copies it, and opens it.
(With `TOKEN ?= $(shell ...)` the Makefile made a new token at each use, and the URL it printed
was refused; a test that passed TOKEN= itself could not see that.)"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def printed_url(proc: subprocess.Popen, timeout: float) -> tuple[str, list[str]]:
    """The first http URL the process prints, and the lines it printed; its output is then
    drained on a thread (a full pipe would stall the server)."""
    lines: list[str] = []
    found = threading.Event()

    def read():
        for line in iter(proc.stdout.readline, b""):
            lines.append(line.decode(errors="replace"))
            if re.search(r"http://\S+", lines[-1]):
                found.set()

    threading.Thread(target=read, daemon=True).start()
    if not found.wait(timeout):
        pytest.fail(f"make lab printed no URL in {timeout} s:\n{''.join(lines)}")
    url = next(m.group(0) for line in lines if (m := re.search(r"http://\S+", line)))
    return url, lines


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_lab_prints_a_url_that_opens_the_course(tmp_path):
    if not (REPO / ".venv" / ".installed").exists():
        pytest.skip("make lab's venv is not set up (run make test first)")
    port = free_port()
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"), JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"))
    env.pop("TOKEN", None)
    proc = subprocess.Popen(
        ["make", "-s", "lab", f"PORT={port}"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        url, lines = printed_url(proc, 60)
        assert url.startswith(f"http://127.0.0.1:{port}/lab?token=")
        token = url.split("token=", 1)[1]
        deadline, last = time.time() + 90, None
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    body, landed = r.read().decode(), r.geturl()
                    break
            except (urllib.error.URLError, ConnectionError) as err:
                last = err
                time.sleep(1)
        else:
            pytest.fail(f"JupyterLab did not answer on port {port}: {last}\n{''.join(lines)}")
        # a wrong token lands on the login page (status 200 too): the URL must open the lab itself
        assert "/login" not in landed and "JupyterLab" in body, f"{url} landed on {landed}"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=10) as r:
            assert r.status == 200
        # only jupytext's contents manager reads a .py as a notebook (the plain one answers 400):
        # proof that saves in this JupyterLab write both files of a pair (tests/test_browser.py saves one)
        api = f"http://127.0.0.1:{port}/api/contents/00_welcome.py?type=notebook&token={token}"
        try:
            with urllib.request.urlopen(api, timeout=10) as r:
                model = json.load(r)
        except urllib.error.HTTPError as err:
            pytest.fail(f"jupytext's contents manager is not in use (`jupyter server extension list`): {err}")
        assert model["type"] == "notebook" and model["content"]["cells"]
        # without the token the API refuses
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents", timeout=5)
        assert refused.value.code == 403
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
