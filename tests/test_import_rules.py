"""The package's import rules (issue 30, "one workshop"; issue 52, "an inference core below the tools"): no import
cycle, no wing importing a wing above it or beside it, no underscore name imported from another package, the library
side importing nothing of `commands/` (the commands' workshop), `serve/` nothing of `embed/`, and the quantization
methods named once, in a module that imports no torch. Imports inside functions count; imports only for type checkers
(`if TYPE_CHECKING:`) do not. The package's front door (`modeling_elmo/__init__.py`) is a module like the others."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from shared_paths import PACKAGE_DIR

PACKAGE = PACKAGE_DIR

# Each wing may import the wings of lower levels only: the model files (the Hub remote code) import nothing of the
# package's subpackages; the CPU engine (which registers its implementations with the model's registry,
# `elmo_implementations`, and never reaches the model file itself: see the test below) and the process set-up build on
# the model; quantization on the engine; the inference core (Auto-class registration, the one loader, a batch through
# the model) on those, beside the foreign formats and the Hub pieces; the front door (`modeling_elmo/__init__.py`,
# which registers through the core) and the command workshop (its error base class included) come next; the tools on
# all of them; the tools built on other tools (fine-tuning heads, the AllenNLP and flair adapters, elmo serve) next,
# and the drop-ins built on the AllenNLP adapter last.
FRONT_DOOR = "front door"
LEVELS = {
    "model": 0,
    "foundation": 0,  # errors, checks, file hash, output policy and claims, model locations: imports no other wing
    "engine": 1,
    "runtime": 1,
    "quantization": 2,  # quantized biLM layers on the CPU engine's recurrence, with Transformers' quantizer hooks
    "formats": 3,
    "hub": 3,
    "inference": 3,  # the inference core: registration, loading (folder or Hub id), a batch through the model
    "model_cards": 3,  # the card templates (data, read by hub/model_card.py)
    FRONT_DOOR: 4,  # modeling_elmo/__init__.py: the exports, registering through the inference core
    "commands": 4,
    "conversion": 5,
    "deploy": 5,
    "embed": 5,
    "finetuning": 5,
    "pretraining": 5,
    "allennlp": 6,
    "classification": 6,
    "elmoformanylangs": 6,
    "flair": 6,
    "ner": 6,
    "serve": 6,  # elmo serve: on the inference core (its command line on the commands' workshop)
    "simple_elmo": 7,  # simple_elmo's API on the AllenNLP adapter's model loading
}

# The library side imports nothing of `commands/`, directly or through another module: the front door, the model
# files, every wing below the tools, the drop-ins and the server (all of `serve/` but its command line).
LIBRARY_WINGS = {
    FRONT_DOOR,
    "model",
    "foundation",
    "engine",
    "runtime",
    "quantization",
    "formats",
    "hub",
    "inference",
    "allennlp",
    "elmoformanylangs",
    "simple_elmo",
    "flair",
    "serve",
}
COMMAND_LINES = {"modeling_elmo.serve.cli", "modeling_elmo.serve.arguments"}  # may use the commands' workshop
METHODS_MODULE = "modeling_elmo.quantization.methods"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def wing(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return FRONT_DOOR
    return parts[1] if (PACKAGE / parts[1]).is_dir() else "model"


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
GRAPH = {module: {target for target, _ in imports(path) if target in MODULES} for module, path in MODULES.items()}


def test_the_wings_table_names_every_subpackage():
    subpackages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert subpackages | {"model", FRONT_DOOR} == LEVELS.keys()


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


def library_side(module: str) -> bool:
    return wing(module) in LIBRARY_WINGS and module not in COMMAND_LINES


@pytest.mark.parametrize("module", sorted(module for module in GRAPH if library_side(module)))
def test_the_library_side_imports_nothing_of_the_commands_workshop(module):
    """`commands/` is the commands' workshop: the front door, the model, the engine, quantization, the inference core,
    the Hub pieces, the drop-ins and the server reach none of it (only `serve/cli.py` and `serve/arguments.py`, the
    server's command line, may)."""
    reached = sorted(target for target in {*GRAPH[module], *reachable(module)} if wing(target) == "commands")
    assert not reached, f"{module} reaches {reached}"


@pytest.mark.parametrize("module", sorted(module for module in GRAPH if wing(module) == "serve"))
def test_serve_imports_nothing_of_embed(module):
    """The server runs batches through the inference core, not through `elmo-embed`'s modules."""
    reached = sorted(target for target in reachable(module) if wing(target) == "embed")
    assert not reached, f"{module} reaches {reached}"


def test_the_quantization_methods_import_no_torch():
    """Naming or checking a quantization method (what a command checks `--quantization` against before torch loads)
    imports neither torch nor Transformers: the methods module imports nothing, and nor does its package's `__init__`
    where the front door defers the registration (a console command's process)."""
    source = MODULES[METHODS_MODULE].read_text(encoding="utf-8")
    assert not [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import | ast.ImportFrom)]
    script = (
        "import sys\nsys.argv[0] = 'elmo-embed'\n"
        "from modeling_elmo.quantization.methods import METHODS, check_method\ncheck_method(METHODS[0])\n"
        "print(sorted(name for name in ('torch', 'transformers') if name in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def defines_the_methods(tree: ast.AST) -> bool:
    """Whether `tree` holds a tuple, list or set of strings naming the quantization methods (two of them at least)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            strings = {item.value for item in node.elts if isinstance(item, ast.Constant)}
            if {"int8_weight_only", "bf16"} <= strings:
                return True
    return False


def test_the_quantization_methods_are_named_once():
    """`quantization/methods.py` alone lists the methods; every other module (the kernels, the layers' check, the
    config, the tools' choices) imports them from there."""
    listing = sorted(
        module for module, path in MODULES.items() if defines_the_methods(ast.parse(path.read_text(encoding="utf-8")))
    )
    assert listing == [METHODS_MODULE]


def test_the_methods_finder_sees_a_copy():
    assert defines_the_methods(ast.parse('QUANTIZATIONS = ("int8", "int8_weight_only", "bf16")'))
    assert not defines_the_methods(ast.parse('ROW_STABLE = ("int8", "bf16")'))
