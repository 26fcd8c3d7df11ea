"""The package's import rules (issue 30, "one workshop"): no import cycle, no wing importing a wing above it or beside
it, and no underscore name imported from another package. Imports inside functions count; imports only for type
checkers (`if TYPE_CHECKING:`) and the package's front door (`modeling_elmo/__init__.py`, which registers the Auto
classes and defers to `commands`) do not."""

import ast
import sys
from pathlib import Path

import pytest
from shared_paths import PACKAGE_DIR

PACKAGE = PACKAGE_DIR

# Each wing may import the wings of lower levels only: the model files (the Hub remote code) import nothing of the
# package's subpackages; the CPU engine (which registers its implementations with the model's registry,
# `elmo_implementations`, and never reaches the model file itself: see the test below) and the process set-up build on
# the model; the command workshop (its error base class included) come next; the
# foreign formats and the Hub pieces build on those; the tools on all of them; the tools built on other tools
# (fine-tuning heads, the AllenNLP and flair adapters) come next, and the drop-ins built on the AllenNLP adapter last.
LEVELS = {
    "model": 0,
    "foundation": 0,  # errors, checks, file hash, output policy and claims: imports no other wing
    "engine": 1,
    "runtime": 1,
    "commands": 2,
    "quantization": 2,  # quantized biLM layers on the CPU engine's recurrence, with Transformers' quantizer hooks
    "formats": 3,
    "hub": 3,
    "model_cards": 3,  # the card templates (data, read by hub/model_card.py)
    "conversion": 4,
    "deploy": 4,
    "embed": 4,
    "finetuning": 4,
    "pretraining": 4,
    "allennlp": 5,
    "classification": 5,
    "elmoformanylangs": 5,
    "flair": 5,
    "ner": 5,
    "serve": 5,  # elmo serve: on embed's batch computation
    "simple_elmo": 6,  # simple_elmo's API on the AllenNLP adapter's model loading
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def wing(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else "model"


def _runtime_nodes(tree: ast.AST):
    """Every node except those under `if TYPE_CHECKING:`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            yield from (item for child in node.orelse for item in [child, *_runtime_nodes(child)])
            continue
        yield node
        yield from _runtime_nodes(node)


def imports(path: Path) -> list[tuple[str, str]]:
    """(module imported, name imported or '') for each import of the package's modules in `path`."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names if alias.name.startswith("modeling_elmo")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("modeling_elmo"):
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                is_module = (PACKAGE.parent / submodule.replace(".", "/")).with_suffix(".py").is_file()
                found.append((submodule, "") if is_module else (target, alias.name))
    return found


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}
GRAPH = {
    module: {target for target, _ in imports(path) if target in MODULES and target != "modeling_elmo"}
    for module, path in MODULES.items()
    if module != "modeling_elmo"
}


def test_the_wings_table_names_every_subpackage():
    subpackages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert subpackages | {"model"} == LEVELS.keys()


def test_no_import_cycle():
    cycles, state = [], {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = "open"
        for target in sorted(GRAPH.get(module, ())):
            if state.get(target) == "open":
                cycles.append(trail[trail.index(target) :] + [target])
            elif target not in state:
                visit(target, [*trail, target])
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    assert not cycles, [" -> ".join(cycle) for cycle in cycles]


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_a_wing_imports_only_wings_below_it(module):
    own = wing(module)
    above = sorted(target for target in GRAPH[module] if wing(target) != own and LEVELS[wing(target)] >= LEVELS[own])
    assert not above, f"{module} ({own}, level {LEVELS[own]}) imports {above}"


def reachable(module: str) -> set[str]:
    """Every module that importing `module` imports, directly or through others."""
    seen, todo = set(), [module]
    while todo:
        for target in GRAPH.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


@pytest.mark.parametrize("module", sorted(module for module in GRAPH if wing(module) == "engine"))
def test_the_engine_never_reaches_the_model_file(module):
    """Backends receive tensors and weights structures (`elmo_implementations`), not the model's modules: no engine
    module imports `modeling_elmo.py`, directly or through another module."""
    assert "modeling_elmo.modeling_elmo" not in reachable(module)


def package_of(module: str) -> str:
    """The package a module belongs to (a package's `__init__` is the package itself)."""
    if module in MODULES and MODULES[module].name == "__init__.py":
        return module
    return module.rsplit(".", 1)[0]


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_underscore_name_from_another_package(module):
    private = [
        f"{target}.{name}"
        for target, name in imports(MODULES[module])
        if name.startswith("_") and not name.startswith("__") and package_of(target) != package_of(module)
    ]
    assert not private, private


def test_the_rules_find_what_they_look_for(tmp_path, monkeypatch):
    """The reader sees relative, absolute and in-function imports, and skips type-checking ones."""
    source = tmp_path / "modeling_elmo" / "conversion" / "example.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from ..formats.vocab import LmVocabulary\n"
        "from . import convert\n"
        "if TYPE_CHECKING:\n    from ..ner.train import main\n"
        "def f():\n    from modeling_elmo.foundation.output_folder import _hidden\n"
    )
    for name in ("formats/vocab.py", "conversion/convert.py", "foundation/output_folder.py"):
        (tmp_path / "modeling_elmo" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "modeling_elmo" / name).touch()
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "modeling_elmo")
    assert imports(source) == [
        ("modeling_elmo.formats.vocab", "LmVocabulary"),
        ("modeling_elmo.conversion.convert", ""),
        ("modeling_elmo.foundation.output_folder", "_hidden"),
    ]
