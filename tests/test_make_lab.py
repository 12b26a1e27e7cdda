"""`make lab` opens JupyterLab on 127.0.0.1 with a token: start it, fetch /lab, stop it.
It serves notebooks/ through jupytext's contents manager, so a save there writes the .py source too."""
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
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


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_lab_serves_the_course_with_a_token(tmp_path):
    if not (REPO / ".venv" / ".installed").exists():
        pytest.skip("make lab's venv is not set up (run make test first)")
    port, token = free_port(), secrets.token_hex(8)
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"), JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"))
    proc = subprocess.Popen(["make", "-s", "lab", f"PORT={port}", f"TOKEN={token}"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline, last = time.time() + 90, None
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=5) as r:
                    body = r.read().decode()
                    assert r.status == 200 and "JupyterLab" in body
                    break
            except (urllib.error.URLError, ConnectionError) as err:
                last = err
                time.sleep(1)
        else:
            pytest.fail(f"JupyterLab did not answer on port {port}: {last}")
        # only jupytext's contents manager reads a .py as a notebook (the plain one answers 400):
        # proof that saves in this JupyterLab write both files of a pair (tests/test_browser.py saves one)
        url = f"http://127.0.0.1:{port}/api/contents/00_welcome.py?type=notebook&token={token}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
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
