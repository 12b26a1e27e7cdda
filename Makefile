# The two commands: `make lab` opens the course, `make test` runs every test.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# kernels-ci everywhere: CuPy's NVRTC compiles and checks every .cu file with no GPU (CI included).
# The gpu extra only where an NVIDIA driver answers; CPU machines get torch's CPU build.
EXTRAS := notebooks,dev,kernels-ci$(shell nvidia-smi >/dev/null 2>&1 && echo ,gpu)
# torch's CPU build. Here `torch==2.13.0` resolves to the CPU wheel; on another Linux machine PyPI's
# wheel is a multi-GB CUDA build, so point pip at PyTorch's CPU wheel index there:
#   make test PIP_TORCH_ARGS="--index-url <PyTorch's CPU wheel index>"
TORCH_SPEC ?= torch==2.13.0
PIP_TORCH_ARGS ?=
PORT ?= 8888
# TOKEN: pass one, or the lab recipe makes one. Made in the recipe's one shell, once: a make
# variable `TOKEN ?= $(shell ...)` is expanded again at each use, so the URL printed and the
# server's token would be two different random tokens.
TOKEN ?=

.PHONY: lab test install bench peers clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(PIP_TORCH_ARGS) "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

install: $(VENV)/.installed

lab: install
	@token="$(TOKEN)"; [ -n "$$token" ] || token=$$($(PY) -c "import secrets; print(secrets.token_hex(16))"); \
	echo "Open http://127.0.0.1:$(PORT)/lab?token=$$token"; \
	exec $(VENV)/bin/jupyter lab --no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT) \
	  --ServerApp.token=$$token --ServerApp.root_dir=notebooks --LabApp.news_url=None \
	  $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)

test: install
	$(VENV)/bin/ruff check .   # lint: errors and likely bugs ([tool.ruff.lint] in pyproject.toml)
	$(VENV)/bin/ruff format --check .   # the code's layout: `ruff format .` writes it
	$(VENV)/bin/python -m pytest -q -rs   # -rs: every skip and why (no GPU, no chromium) in the summary

bench: install
	$(VENV)/bin/scratchkit bench --profile small --trainers gpu-only,hybrid

# FBGEMM's CPU table-batched embedding, the third peer of benchmarks/bench_peers.py (optional: the
# tests skip it where absent). It needs only numpy, so pip leaves torch alone; the check says so.
peers: install
	$(PY) -m pip install -q -e ".[peers]"
	$(PY) -c "import torch, fbgemm_gpu; assert torch.__version__.split('+')[0] == '$(TORCH_SPEC)'.split('==')[-1], torch.__version__"

clean:
	rm -rf $(VENV) build *.egg-info test-output
