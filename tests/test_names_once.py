"""Names written once (docs/design.md): a closed choice's names are written in one place.

A choice is an enum (its members' values) or a registry (the keys of the dict it is built from).
Two choices may share a word with one meaning ("raise" stops with an error wherever it is a
choice), never a list of names: where two choices share two or more, the later takes them from
the earlier (the `lru` design's name is `VictimPolicy.LRU.value`), and the sim policies have no enum
beside their registry. A word shared with the caches' victim rules means that rule.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from scratchkit.config import VictimPolicy
from scratchkit.sim import POLICIES, policy_name, simulate
from scratchkit.designs import DESIGNS

PACKAGE = Path(__file__).resolve().parents[1] / "scratchkit"


def written_names(tree: ast.AST) -> dict[str, list[str]]:
    """choice -> the names it writes as string literals: an enum's member values, the literal keys
    of the dict a `Registry(what, {...})` is built from."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any("Enum" in ast.unparse(base) for base in node.bases):
            found[node.name] = [
                st.value.value
                for st in node.body
                if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str)
            ]
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "Registry"
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Dict)
        ):
            found[f"Registry({ast.unparse(node.args[0])})"] = [
                key.value for key in node.args[1].keys if isinstance(key, ast.Constant)
            ]
    return found


def choices_in(paths) -> dict[str, list[str]]:
    return {
        f"{path.relative_to(PACKAGE.parent)}:{choice}": names
        for path in paths
        for choice, names in written_names(ast.parse(path.read_text())).items()
    }


def lists_written_twice(choices: dict[str, list[str]]) -> list[str]:
    return [
        f"{a} and {b} both write {sorted(set(x) & set(y))}"
        for (a, x), (b, y) in itertools.combinations(choices.items(), 2)
        if len(set(x) & set(y)) > 1
    ]


def test_no_two_choices_write_the_same_names():
    choices = choices_in(sorted(PACKAGE.rglob("*.py")))
    assert len(choices) > 10  # the scan finds the kit's enums and registries
    assert lists_written_twice(choices) == []


def test_the_check_catches_an_enum_beside_its_registry():
    source = """
class VictimPolicy(str, Enum):
    FURTHEST = "furthest"
    LRU = "lru"

class Policy(str, Enum):
    LRU = "lru"
    OPT = "opt"

POLICIES = Registry("cache policy ", {"lru": 1, "opt": 2})
"""
    # one shared word (lru) is a word; two (lru, opt) a list written twice
    assert lists_written_twice(written_names(ast.parse(source))) == [
        "Policy and Registry('cache policy ') both write ['lru', 'opt']"
    ]


def test_the_sim_policy_names_are_the_registrys_keys_alone():
    import scratchkit.sim as sim

    enums = {
        choice: names
        for choice, names in choices_in(sorted((PACKAGE / "sim").rglob("*.py"))).items()
        if "Registry(" not in choice
    }
    assert enums == {} and not hasattr(sim, "Policy")
    for name in POLICIES:
        assert policy_name(f" {name.upper()} ") == name
    with pytest.raises(ValueError, match="unknown cache policy 'fifo'; choose from static, lru, lfu"):
        policy_name("fifo")


@pytest.mark.parametrize("rule", list(VictimPolicy))
def test_a_name_shared_with_a_victim_rule_means_that_rule(rule):
    if rule.value in POLICIES:
        assert POLICIES[rule.value].victim is rule
        assert policy_name(rule) == rule.value
        assert simulate([1, 2, 1, 3, 1, 4], rule, 2).hits == simulate([1, 2, 1, 3, 1, 4], rule.value, 2).hits
    if rule.value in DESIGNS:
        assert DESIGNS[rule.value].trainer_class().policy is rule
    assert rule.value in POLICIES or rule.value in DESIGNS or rule is VictimPolicy.FURTHEST
    # FURTHEST is ScratchPipe's own rule, which its simulator and trainers follow under their names
    assert POLICIES["lookahead"].victim is VictimPolicy.FURTHEST


def test_the_kits_trainers_take_their_names_from_their_designs():
    """A trainer's `name` is its design's: the kit's own classes write DESIGN.name (scratchkit/designs),
    never the name again."""
    written = [
        f"{path.name}:{node.name}"
        for path in sorted((PACKAGE / "trainers").glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        for st in node.body
        if isinstance(st, ast.Assign) and ast.unparse(st.targets[0]) == "name" and isinstance(st.value, ast.Constant)
    ]
    assert written == []
    assert {DESIGNS[name].trainer_class().name for name in DESIGNS} == set(DESIGNS)
