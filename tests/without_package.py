"""For the scripts that play a user without this package (`python -I -S SCRIPT SITE_PACKAGES ...`:
load_without_package.py, other_major_worker.py): SITE_PACKAGES goes on `sys.path` with `modeling_elmo` hidden. `-S`
already skips an editable install's import hook, but an installed wheel puts `modeling_elmo/` in site-packages itself
(CI's wheel job); hidden, any import of it fails as it would where the package is missing."""

import importlib.abc
import sys

PACKAGE = "modeling_elmo"


class _HiddenPackage(importlib.abc.MetaPathFinder):
    """Answers every import of `modeling_elmo` and its submodules with ModuleNotFoundError, before any other finder."""

    def find_spec(self, name, path=None, target=None):
        if name == PACKAGE or name.startswith(f"{PACKAGE}."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden: this run is without it)", name=name)
        return None


def use_site_packages_without_package(site_packages: str) -> None:
    """Make the packages of `site_packages` importable, except this one."""
    sys.meta_path.insert(0, _HiddenPackage())
    sys.path.append(site_packages)
