"""The package's shape, checked from the code's own imports (docs/design.md, "Layout"):

- every module is at most 400 lines;
- no import circle, not even one broken only by `if TYPE_CHECKING:` or an import inside a function;
- no folder imports one above it: every import between two parts of the house (`FLOORS`) goes down;
- no module imports another module's private name (`from x import _name`, `x._name`);
- scratchkit/sim imports neither torch nor the widgets and plotting libraries;
- scratchkit/designs and scratchkit/projection load no torch when imported;
- only scratchkit/commands parses arguments (argparse) or lays out text tables (ljust/rjust);
- only scratchkit/backend.py imports CuPy (NVRTC included);
- the package cites its own docs, never a document outside the repository;
- every package says in one line what it is for.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "scratchkit"
MODULES = sorted(PACKAGE.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


NAMES = {module_name(p): p for p in MODULES}


def imports_of(path: Path) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import anywhere in the file."""
    tree = ast.parse(path.read_text())
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [alias.name for alias in node.names]
            found.append((base, names))
            found += [(f"{base}.{n}", []) for n in names if f"{base}.{n}" in NAMES]  # submodules
    return found


def graph() -> dict[str, set[str]]:
    edges = {}
    for name, path in NAMES.items():
        edges[name] = {target for target, _ in imports_of(path) if target in NAMES and target != name}
    return edges


# The house's floors, lowest first: a module may import its own floor or one below it, never one above.
# The top-level modules (scratchkit/*.py) are floors of their own, so that `native.py`, which builds
# with the kernels' compiler search (kernels/host_build.py), sits between kernels/ and the folders
# that call compiled loops. A package's `__main__.py` is a program (what `python -m` runs), on the
# command line's floor; the package's own `__init__.py` (its lazy public names) is the roof.
FLOORS = (
    "measured",
    "choices",
    "config",
    "device_work",
    "device_ops",
    "backend",
    "allocator",
    "device",
    "model",
    "profiles",
    "kernels",
    "native",
    "sim",
    "data",
    "embedding",
    "scratchpipe",
    "designs",
    "costmodel",
    "trainers",
    "calibration",
    "projection",
    "measure",
    "distributed",
    "course",
    "commands",
    "scratchkit",
)


def floor_of(module: str) -> str:
    parts = module.split(".")
    if parts[-1] == "__main__":
        return "commands"
    return parts[1] if len(parts) > 1 else "scratchkit"


def test_every_part_of_the_house_has_a_floor():
    parts = {floor_of(name) for name in NAMES}
    assert parts - set(FLOORS) == set(), "place each new folder or top-level module in FLOORS"


def test_no_folder_imports_one_above_it():
    level = {name: i for i, name in enumerate(FLOORS)}
    upward = sorted(
        f"{name} ({floor_of(name)}) imports {target} ({floor_of(target)})"
        for name, targets in graph().items()
        for target in targets
        if level.get(floor_of(target), -1) > level.get(floor_of(name), len(FLOORS))
    )
    assert upward == [], "imports up the house:\n" + "\n".join(upward)


def test_every_module_is_at_most_400_lines():
    long = {module_name(p): n for p in MODULES if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}


def test_no_import_circle():
    edges, cycles = graph(), []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(edges[node]):
            if nxt.startswith("scratchkit") and nxt != node:
                # a package's __init__ importing its own modules is not a circle with them
                if node == nxt.rpartition(".")[0] or nxt == node.rpartition(".")[0] and node in edges[nxt]:
                    continue
                if state.get(nxt) == 1:
                    cycles.append(path[path.index(nxt) :] + [nxt])
                elif state.get(nxt) is None:
                    visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if state.get(node) is None:
            visit(node, [node])
    assert cycles == []


def test_no_private_name_crosses_a_module():
    crossing = []
    for path in MODULES:
        for target, names in imports_of(path):
            if target.startswith("scratchkit") and target != module_name(path):
                crossing += [f"{module_name(path)} imports {target}.{n}" for n in names if n.startswith("_")]
        tree = ast.parse(path.read_text())
        aliases = {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.Import)
            for a in n.names
            if a.name.startswith("scratchkit")
        }
        crossing += [
            f"{module_name(path)} reads {n.value.id}.{n.attr}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id in aliases
            and n.attr.startswith("_")
        ]
    assert crossing == []


@pytest.mark.parametrize("banned", ["torch", "ipywidgets", "plotly", "IPython"])
def test_the_simulators_import_no_torch_and_no_widgets(banned):
    sim = [p for p in MODULES if "sim" in p.relative_to(PACKAGE).parts[:1]]
    assert sim
    users = [module_name(p) for p in sim if any(t.split(".")[0] == banned for t, _ in imports_of(p))]
    assert users == []


@pytest.mark.parametrize(
    "package", ["scratchkit.designs", "scratchkit.projection.project", "scratchkit.projection.counters"]
)
def test_the_designs_and_the_projection_load_no_torch(package):
    """A price needs no trainer: importing the designs or the projection, in a fresh interpreter,
    leaves torch out of sys.modules (the trainers it names are imported only when one is made)."""
    import subprocess
    import sys

    probe = f"import sys, {package}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')[:3])"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"importing {package} loads {done.stdout.strip()}"


WIDTH = __import__("re").compile(r"^(.?[<>^=])?[+\- ]?#?0?\d")  # a field width: `:>12`, `:8.3f`, `:<{w}`


def lays_out_columns(path: Path) -> bool:
    """Whether a module pads text into columns: str.ljust/rjust, or an f-string field width."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("ljust", "rjust", "center"):
            return True
        if isinstance(node, ast.FormattedValue) and isinstance(node.format_spec, ast.JoinedStr):
            spec = "".join(v.value if isinstance(v, ast.Constant) else "9" for v in node.format_spec.values)
            if WIDTH.match(spec):
                return True
    return False


def test_only_the_commands_parse_arguments_or_lay_out_tables():
    outside = [p for p in MODULES if p.relative_to(PACKAGE).parts[0] != "commands"]
    parsing = [module_name(p) for p in outside if any(t == "argparse" for t, _ in imports_of(p))]
    laying_out = [module_name(p) for p in outside if lays_out_columns(p)]
    assert parsing == [] and laying_out == []


def test_only_the_backend_imports_cupy():
    loads = __import__("re").compile(r"""import_module\(\s*["']cupy""")
    users = [
        module_name(p)
        for p in MODULES
        if any(t.split(".")[0] == "cupy" for t, _ in imports_of(p)) or loads.search(p.read_text())
    ]
    assert users == ["scratchkit.backend"]


def test_the_package_cites_only_its_own_docs():
    citing = [module_name(p) for p in MODULES if "DESIGN.md" in p.read_text() or "../shared" in p.read_text()]
    assert citing == []
    for path in MODULES:
        for doc in set(__import__("re").findall(r"docs/[\w./-]+\.md", path.read_text())):
            assert (PACKAGE.parent / doc).exists(), f"{module_name(path)} cites {doc}, which is missing"


def test_every_package_says_what_it_is_for():
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and doc.strip(), f"{init.relative_to(PACKAGE.parent)} has no docstring"


def test_the_checker_sees_a_circle_and_a_private_import(tmp_path, monkeypatch):
    """The checks can fail: a made-up package with both faults is caught."""
    fake = tmp_path / "scratchkit"
    (fake / "a").mkdir(parents=True)
    (fake / "__init__.py").write_text('"""x"""\n')
    (fake / "a" / "__init__.py").write_text('"""x"""\n')
    (fake / "a" / "one.py").write_text("from scratchkit.a.two import _hidden\n")
    (fake / "a" / "two.py").write_text("def f():\n    from scratchkit.a import one\n_hidden = 1\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    monkeypatch.setattr(__import__(__name__), "MODULES", sorted(fake.rglob("*.py")))
    monkeypatch.setattr(__import__(__name__), "NAMES", {module_name(p): p for p in sorted(fake.rglob("*.py"))})
    with pytest.raises(AssertionError):
        test_no_import_circle()
    with pytest.raises(AssertionError):
        test_no_private_name_crosses_a_module()


def test_the_checker_sees_a_folder_import_one_above_it(tmp_path, monkeypatch):
    """A low floor importing a high one, even inside a function, is caught."""
    fake = tmp_path / "scratchkit"
    for folder in ("data", "measure"):
        (fake / folder).mkdir(parents=True)
        (fake / folder / "__init__.py").write_text('"""x"""\n')
    (fake / "__init__.py").write_text('"""x"""\n')
    (fake / "measure" / "bench.py").write_text("from scratchkit.data import rows\n")
    (fake / "data" / "rows.py").write_text("def f():\n    from scratchkit.measure import bench\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    monkeypatch.setattr(__import__(__name__), "NAMES", {module_name(p): p for p in sorted(fake.rglob("*.py"))})
    with pytest.raises(
        AssertionError, match=r"scratchkit.data.rows \(data\) imports scratchkit.measure.bench \(measure\)"
    ):
        test_no_folder_imports_one_above_it()
