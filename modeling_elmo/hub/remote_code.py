"""What a saved ELMo folder needs to load and to tag with `trust_remote_code=True` where this package is missing.

`save_pretrained` copies the file defining each class registered with `register_for_auto_class` (see `__init__.py`),
plus every file it imports relatively, into the folder and records the class in an `auto_map`. Only the classes that
were saved get an entry, so every `ElmoConfig` carries the full map (`configuration_elmo.AUTO_MAP`): the same repo
answers to `AutoModel` and `AutoModelForTokenClassification`. Every pipeline that the config declares in
`custom_pipelines` (the ELMo pipeline: `configuration_elmo.CUSTOM_PIPELINES`) must be a class of a shipped file too.
The copied files may import only what Transformers itself needs.
"""

import ast
import json
import sys
from pathlib import Path

from ..configuration_elmo import AUTO_MAP as CONFIG_AUTO_MAP

TOKENIZER_AUTO_CLASS = "AutoTokenizer"
# What the remote code may import: Transformers and its own dependencies, and the standard library.
ALLOWED_TOP_LEVEL_IMPORTS = frozenset(
    {"torch", "transformers", "tokenizers", "numpy", "huggingface_hub"} | set(sys.stdlib_module_names)
)


def _import_problems(name: str, tree: ast.Module, folder: Path) -> list[str]:
    """Imports in module `name` that would fail or go uncopied where only torch and transformers are installed."""
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        elif isinstance(node, ast.ImportFrom):
            if node.level != 1 or node.module is None or "." in node.module:
                problems.append(
                    f"{name}:{node.lineno}: only `from .module import name` is copied with the code, keep it flat"
                )
            elif not (folder / f"{node.module}.py").is_file():
                problems.append(f"{name}:{node.lineno}: imports .{node.module}, but {node.module}.py is missing")
            continue
        else:
            continue
        problems += [
            f"{name}:{node.lineno}: imports {module!r}; remote code may import only torch, transformers, tokenizers, "
            "numpy, huggingface_hub and the standard library"
            for module in modules
            if module.split(".")[0] not in ALLOWED_TOP_LEVEL_IMPORTS
        ]
    return problems


def _relative_imports(tree: ast.Module) -> set[str]:
    """The modules a module imports as `from .module import ...`, those only for type checkers included: Transformers
    copies what a line of that shape names, wherever it stands."""
    return {
        f"{node.module}.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is not None
    }


def _import_cycle_problems(modules: dict[str, ast.Module]) -> list[str]:
    """A cycle of relative imports among `modules` (by file name), which Transformers 4.x's copier
    (`get_relative_import_files`) follows forever: `save_pretrained` and remote-code loading then never return."""
    graph = {name: sorted(_relative_imports(tree) & modules.keys()) for name, tree in modules.items()}
    done: set[str] = set()

    def cycle_from(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return path[path.index(name) :] + [name]
        if name in done:
            return None
        for imported in graph[name]:
            found = cycle_from(imported, [*path, name])
            if found is not None:
                return found
        done.add(name)
        return None

    for name in sorted(graph):
        cycle = cycle_from(name, [])
        if cycle is not None:
            return [f"{' -> '.join(cycle)}: a cycle of relative imports, which Transformers 4.x's copier never leaves"]
    return []


def _class_reference_problems(
    modules: dict[str, ast.Module], source: str, field: str, key: str, reference: object
) -> list[str]:
    """`reference` ("module.Class", the value of `field[key]`) must name a class defined at the top level of a shipped
    module."""
    if reference is None:
        return [f"{source}: {field} has no {key!r} entry"]
    if not isinstance(reference, str):
        return [f"{source}: {field}[{key!r}] must be a 'module.Class' string, got {reference!r}"]
    module, _, class_name = reference.rpartition(".")
    if f"{module}.py" not in modules:
        return [f"{source}: {field}[{key!r}] = {reference!r}, but {module}.py is missing or unreadable"]
    if not any(isinstance(node, ast.ClassDef) and node.name == class_name for node in modules[f"{module}.py"].body):
        return [f"{source}: {field}[{key!r}] = {reference!r}, but {module}.py defines no {class_name}"]
    return []


def _read_field(json_file: Path, field: str) -> object:
    """`field` of the JSON object in `json_file`; `None` when the file, the object or the field is missing."""
    try:
        return json.loads(json_file.read_text(encoding="utf-8")).get(field)
    except (OSError, ValueError, AttributeError):
        return None


def _read_mapping(json_file: Path, field: str) -> dict:
    """`field` of the JSON object in `json_file`; empty when the file, the object or the mapping is missing."""
    mapping = _read_field(json_file, field)
    return mapping if isinstance(mapping, dict) else {}


def _parse_code_files(folder: Path, skip: frozenset[str] = frozenset()) -> tuple[dict[str, ast.Module], list[str]]:
    """The modules of `folder/*.py` (but `skip`) by file name, and the files that are not valid Python."""
    modules, problems = {}, []
    for code_file in sorted(folder.glob("*.py")):
        if code_file.name in skip:
            continue
        try:
            source = code_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) else error
            problems.append(f"{code_file.name}: not a readable Python file ({reason})")
            continue
        try:
            modules[code_file.name] = ast.parse(source, filename=str(code_file))
        except (SyntaxError, ValueError) as error:  # ValueError: a NUL byte
            problems.append(f"{code_file.name}: not valid Python ({error})")
    return modules, problems


def code_folder_problems(folder: str | Path, skip: frozenset[str] = frozenset()) -> list[str]:
    """
    Imports in `folder/*.py` (but `skip`) that would fail or go uncopied as remote code. The package's own folder
    must pass with `skip={"__init__.py"}`: it is the remote-code boundary, and tooling lives in its subpackages.
    """
    return _checked_code_files(Path(folder), skip)[1]


def _checked_code_files(folder: Path, skip: frozenset[str] = frozenset()) -> tuple[dict[str, ast.Module], list[str]]:
    """The parsed modules of `folder/*.py` (but `skip`), and their parse and import problems."""
    modules, problems = _parse_code_files(folder, skip)
    for name, tree in modules.items():
        problems += _import_problems(name, tree, folder)
    return modules, problems + _import_cycle_problems(modules)


def remote_code_problems(folder: str | Path) -> list[str]:
    """Everything that keeps `folder` from loading with `trust_remote_code=True` alone; empty when it is complete."""
    folder = Path(folder)
    modules, problems = _checked_code_files(folder)
    config_map = _read_mapping(folder / "config.json", "auto_map")
    for auto_class in CONFIG_AUTO_MAP:
        problems += _class_reference_problems(
            modules, "config.json", "auto_map", auto_class, config_map.get(auto_class)
        )
    pipelines = _read_field(folder / "config.json", "custom_pipelines")
    if pipelines is not None and not isinstance(pipelines, dict):
        problems.append(f"config.json: custom_pipelines must map each task to its pipeline, got {pipelines!r}")
    for task, entry in _read_mapping(folder / "config.json", "custom_pipelines").items():
        implementation = entry.get("impl") if isinstance(entry, dict) else None
        problems += _class_reference_problems(
            modules, "config.json", f"custom_pipelines[{task!r}]", "impl", implementation
        )
    tokenizer_entry = _read_mapping(folder / "tokenizer_config.json", "auto_map").get(TOKENIZER_AUTO_CLASS)
    # a tokenizer's entry is [slow class, fast class]; ElmoTokenizer is the "slow" (Python) one
    slow_class = tokenizer_entry[0] if isinstance(tokenizer_entry, list) and tokenizer_entry else None
    problems += _class_reference_problems(
        modules, "tokenizer_config.json", "auto_map", TOKENIZER_AUTO_CLASS, slow_class
    )
    return problems


__all__ = ["CONFIG_AUTO_MAP", "code_folder_problems", "remote_code_problems"]
