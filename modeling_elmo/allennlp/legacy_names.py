"""
AllenNLP's module names for unchanged programs, served by this package: what `elmo run-legacy` (the command in
`modeling_elmo/commands/run_legacy.py`) gives the program it runs. `LEGACY_MODULES` lists each AllenNLP module served
and the names it holds; `serve("allennlp")`, called by the `allennlp` package of the program's temporary folder, fills
that package and answers every `allennlp.*` import from the table. Nothing calls it anywhere else: importing
`modeling_elmo` never makes `allennlp` importable.

An AllenNLP module outside the table is a `ModuleNotFoundError`, a name outside it an `AttributeError` (an
`ImportError` in `from ... import`), both saying what is served.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any

from .bilm import _ElmoBiLm, _ElmoCharacterEncoder
from .boundaries import add_sentence_boundary_token_ids, remove_sentence_boundaries
from .characters import ELMoCharacterMapper, batch_to_ids
from .checkpoint import ConfigurationError
from .elmo import DEFAULT_OPTIONS_FILE, DEFAULT_WEIGHT_FILE, Elmo, ElmoTokenEmbedder
from .embedder import DEFAULT_BATCH_SIZE, ElmoEmbedder
from .scalar_mix import ScalarMix

ROOT = "allennlp"
# AllenNLP module: the names it holds here (AllenNLP 0.9's names, and 2.x's `ElmoTokenEmbedder`)
LEGACY_MODULES: dict[str, dict[str, Any]] = {
    "allennlp": {},
    "allennlp.commands": {},
    "allennlp.commands.elmo": {
        "DEFAULT_BATCH_SIZE": DEFAULT_BATCH_SIZE,
        "DEFAULT_OPTIONS_FILE": DEFAULT_OPTIONS_FILE,
        "DEFAULT_WEIGHT_FILE": DEFAULT_WEIGHT_FILE,
        "ElmoEmbedder": ElmoEmbedder,
        "empty_embedding": ElmoEmbedder._empty_embedding,
        # what 0.9's module imported
        "ConfigurationError": ConfigurationError,
        "_ElmoBiLm": _ElmoBiLm,
        "batch_to_ids": batch_to_ids,
        "remove_sentence_boundaries": remove_sentence_boundaries,
    },
    "allennlp.common": {},
    "allennlp.common.checks": {"ConfigurationError": ConfigurationError},
    "allennlp.data": {},
    "allennlp.data.token_indexers": {},
    "allennlp.data.token_indexers.elmo_indexer": {"ELMoCharacterMapper": ELMoCharacterMapper},
    "allennlp.modules": {"Elmo": Elmo, "ScalarMix": ScalarMix},
    "allennlp.modules.elmo": {
        "Elmo": Elmo,
        "_ElmoBiLm": _ElmoBiLm,
        "_ElmoCharacterEncoder": _ElmoCharacterEncoder,
        "batch_to_ids": batch_to_ids,
    },
    "allennlp.modules.scalar_mix": {"ScalarMix": ScalarMix},
    "allennlp.modules.token_embedders": {"ElmoTokenEmbedder": ElmoTokenEmbedder},
    "allennlp.modules.token_embedders.elmo_token_embedder": {"ElmoTokenEmbedder": ElmoTokenEmbedder},
    "allennlp.nn": {},
    "allennlp.nn.util": {
        "add_sentence_boundary_token_ids": add_sentence_boundary_token_ids,
        "remove_sentence_boundaries": remove_sentence_boundaries,
    },
}
DOCS = "docs/migrate-seqvec.md"


def children(name: str) -> list[str]:
    """The served modules directly inside `name`."""
    return [other for other in LEGACY_MODULES if other.rpartition(".")[0] == name]


def _refuse_other_names(module_name: str):
    """A module `__getattr__` whose `AttributeError` says which names the served module holds."""
    served = ", ".join(LEGACY_MODULES[module_name]) or "no names of its own"

    def __getattr__(name: str) -> Any:
        raise AttributeError(
            f"module {module_name!r} has no attribute {name!r}: elmo run-legacy serves AllenNLP's ELMo names from "
            f"modeling_elmo.allennlp, and {module_name} holds {served} (see {DOCS})"
        )

    return __getattr__


def fill(module: ModuleType) -> None:
    """Give `module`, an AllenNLP module of the table, its names (and, for a package, its served submodules)."""
    name = module.__name__
    module.__dict__.update(LEGACY_MODULES[name])
    module.__all__ = list(LEGACY_MODULES[name])
    module.__getattr__ = _refuse_other_names(name)
    module.__doc__ = f"Not AllenNLP: AllenNLP's `{name}` names served by modeling_elmo.allennlp (elmo run-legacy)."
    for child in children(name):
        importlib.import_module(child)


class LegacyNamesFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and loads the `allennlp.*` modules of `LEGACY_MODULES`; any other `allennlp.*` module is a
    `ModuleNotFoundError` that names what is served."""

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None):
        if not fullname.startswith(f"{ROOT}."):
            return None
        if fullname not in LEGACY_MODULES:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: elmo run-legacy serves AllenNLP's ELMo modules only "
                f"({', '.join(name for name in LEGACY_MODULES if LEGACY_MODULES[name])}; see {DOCS})",
                name=fullname,
            )
        return importlib.machinery.ModuleSpec(fullname, self, is_package=bool(children(fullname)))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module

    def exec_module(self, module: ModuleType) -> None:
        if module.__spec__.submodule_search_locations is not None:
            module.__path__ = []
        fill(module)


def serve(root: str) -> None:
    """Called by the `allennlp` package of `elmo run-legacy`'s folder (`root` is its `__name__`): fill it and answer
    every `allennlp.*` import from `LEGACY_MODULES`."""
    if root != ROOT:
        raise ImportError(f"modeling_elmo.allennlp.legacy_names serves {ROOT!r}, not {root!r}")
    if not any(isinstance(finder, LegacyNamesFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, LegacyNamesFinder())
    fill(sys.modules[root])
