"""Check the sdist and the wheel that `python -m build` wrote into DIST_DIR (the wheel built from the sdist) against
the files git tracks: every file under modeling_elmo/ ships in both (every package folder, its modules, its model
card templates); the sdist also holds what building the wheel reads (pyproject.toml, README.md, LICENSE); the wheel
holds nothing but the package and its metadata.

    python .ci/check_dist.py DIST_DIR

Prints one line per problem and exits 1, or one line naming what it checked.
"""

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

PACKAGE = "modeling_elmo"
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE")


def tracked_package_files(repo: Path) -> list[str]:
    """Every file git tracks under modeling_elmo/, relative to the repository."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--", PACKAGE], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    return sorted(name for name in listing.split("\0") if name)


def wheel_problems(names: list[str], package_files: list[str]) -> list[str]:
    """What the wheel whose members are `names` lacks of `package_files`, and what it holds besides the package."""
    shipped = set(names)
    problems = [f"the wheel lacks {name}" for name in package_files if name not in shipped]
    return problems + [
        f"the wheel holds {name}, which is neither {PACKAGE}/ nor the distribution's metadata"
        for name in names
        if not name.startswith(f"{PACKAGE}/") and ".dist-info/" not in name
    ]


def sdist_problems(names: list[str], package_files: list[str]) -> list[str]:
    """What the sdist whose members are `names` (under one top folder, `NAME-VERSION/`) lacks of the build's inputs
    and of `package_files`."""
    shipped = {name.split("/", 1)[1] for name in names if "/" in name}
    return [f"the sdist lacks {name}" for name in (*BUILD_INPUTS, *package_files) if name not in shipped]


def single(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise SystemExit(f"check_dist: {folder} holds {len(found)} files {pattern}, expected one")
    return found[0]


def main(dist_dir: str) -> int:
    folder = Path(dist_dir)
    wheel, sdist = single(folder, "*.whl"), single(folder, "*.tar.gz")
    package_files = tracked_package_files(Path(__file__).resolve().parent.parent)
    with zipfile.ZipFile(wheel) as archive:
        problems = wheel_problems(archive.namelist(), package_files)
    with tarfile.open(sdist) as archive:
        problems += sdist_problems(archive.getnames(), package_files)
    for problem in problems:
        print(f"check_dist: {problem}", file=sys.stderr)
    if not problems:
        print(f"check_dist: {wheel.name} and {sdist.name} hold the {len(package_files)} files of {PACKAGE}/")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python .ci/check_dist.py DIST_DIR")
    sys.exit(main(sys.argv[1]))
