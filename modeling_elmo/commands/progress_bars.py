"""`--verbose`, a flag of every `elmo` subcommand but run-legacy: without it a command's output has no progress bars of
Transformers' own ("Loading weights", "Writing model shards": a model loaded or saved); the command's own bars
(elmo-embed's, the Trainer's) and the Hub's download and upload bars stay. Only a command's run hides them
(`commands.elmo.run_subcommand`), and shows them again after it if they were: a library user's process is left as it
is.

Transformers decides when `transformers.utils.logging` is imported whether its bars are shown. A command imports
Transformers late (after `--help` and its argument errors, see `commands/elmo.py`), so the bars are hidden either at
once (Transformers already imported) or right after that module is imported, by a one-time import hook: nothing is
imported early. This module imports only the standard library.
"""

import importlib.abc
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType

VERBOSE_FLAG = "--verbose"
# the last line of a subcommand's `--help` (its own parser never sees the flag)
VERBOSE_HELP = "--verbose: show Transformers' own progress bars too (loading and saving a model; hidden otherwise)"
_LOGGING_MODULE = "transformers.utils.logging"


def take_verbose_flag(argv: Sequence[str]) -> tuple[bool, list[str]]:
    """Whether `--verbose` is among a subcommand's arguments (before a `--`: what follows is positional), and the
    arguments without it (the command's own parser never sees it)."""
    argv = list(argv)
    end = argv.index("--") if "--" in argv else len(argv)
    own = argv[:end]
    return VERBOSE_FLAG in own, [argument for argument in own if argument != VERBOSE_FLAG] + argv[end:]


def asks_for_help(argv: Sequence[str]) -> bool:
    """Whether `argv` (a subcommand's arguments) holds `-h` or `--help` before a `--`."""
    argv = list(argv)
    return any(argument in ("-h", "--help") for argument in argv[: argv.index("--") if "--" in argv else None])


@contextmanager
def transformers_progress_bars_hidden() -> Iterator[None]:
    """No progress bars of Transformers' own in the block, whether Transformers is imported before it or in it; after
    it, they are shown again if they were (the Hub's bars keep their setting throughout)."""
    logging = sys.modules.get(_LOGGING_MODULE)
    hook = _HideBarsOnImport()
    if logging is not None:
        hook.hide(logging)
    else:
        sys.meta_path.insert(0, hook)
    try:
        yield
    finally:
        if hook in sys.meta_path:
            sys.meta_path.remove(hook)
        if hook.were_shown:
            _set_bars(sys.modules[_LOGGING_MODULE], shown=True)


def _set_bars(logging: ModuleType, shown: bool) -> None:
    """Show or hide Transformers' bars (`transformers.utils.logging`); its switches turn the Hub's bars on or off too:
    those are put back as they were."""
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    hub_shown = not are_progress_bars_disabled()
    logging.enable_progress_bar() if shown else logging.disable_progress_bar()
    if hub_shown and not shown:
        enable_progress_bars()
    elif shown and not hub_shown:
        disable_progress_bars()


class _HideBarsOnImport(importlib.abc.MetaPathFinder):
    """Hides Transformers' bars (`hide`), remembering whether they were shown; in `sys.meta_path`, it finds
    `transformers.utils.logging` as the other finders do, with a loader that hides them once the module has run, and
    leaves `sys.meta_path`."""

    were_shown = False

    def hide(self, logging: ModuleType) -> None:
        self.were_shown = logging.is_progress_bar_enabled()
        _set_bars(logging, shown=False)

    def find_spec(self, name, path, target=None):
        if name != _LOGGING_MODULE:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _ThenHide(spec.loader, self)
                return spec
        return None


class _ThenHide(importlib.abc.Loader):
    """`loader`, which then hides the bars (`hook.hide`); anything else asked of it (its source, its file) is
    `loader`'s."""

    def __init__(self, loader: importlib.abc.Loader, hook: _HideBarsOnImport):
        self.loader, self.hook = loader, hook

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        self.hook.hide(module)

    def __getattr__(self, name: str):
        return getattr(self.loader, name)
