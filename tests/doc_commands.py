"""The command and code blocks of the documentation, for tests/test_documented_commands.py: reads every fenced block
of README.md and docs/*.md with the `<!-- doc-test: ... -->` marker before it, builds a sandbox that looks like the
folder a reader runs the commands in, and runs a block's text as a reader would: a shell block through bash, a Python
block as a script of its own."""

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console", "zsh"})
RUNNABLE_LANGUAGES = SHELL_LANGUAGES | {"python"}
# Runs a Python block, then saves the values it left for the test's check (see run_python).
PYTHON_BLOCK_RUNNER = Path(__file__).resolve().parent / "python_block_runner.py"
MARKER = re.compile(r"^<!--\s*doc-test:\s*(?P<value>.*?)\s*-->$")
SKIP = re.compile(r"^skip\s*\((?P<reason>.+)\)$")
FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
# Folders of the repository that the commands use by relative path (`python examples/embed_sentence.py ...`).
REPOSITORY_FOLDERS = ("examples", "conversion", "benchmarks")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its info string's first word, its text and the marker before it."""

    path: str  # relative to the repository root
    line: int  # 1-based line of the opening fence
    language: str  # "" when the fence has no info string
    text: str
    marker: str | None  # the marker's value ("ID" or "skip (reason)"), None when absent

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        match = SKIP.match(self.marker or "")
        return match["reason"].strip() if match else None

    @property
    def doc_id(self) -> str | None:
        """The block's ID when it is marked runnable."""
        if self.marker is None or self.marker.startswith("skip"):
            return None
        return self.marker


def documentation_files(root: Path) -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def read_blocks(path: Path, root: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with the marker on the last non-blank line before it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence = opening["fence"]
        end = next((j for j in range(index + 1, len(lines)) if _closes(lines[j], fence)), len(lines))
        previous = next((lines[j].strip() for j in range(index - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(previous)
        info = opening["info"].strip()
        blocks.append(
            Block(
                path=str(path.relative_to(root)),
                line=index + 1,
                language=info.split()[0].lower() if info else "",
                text="\n".join(lines[index + 1 : end]) + "\n",
                marker=marker["value"] if marker else None,
            )
        )
        index = end + 1
    return blocks


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def all_blocks(root: Path) -> list[Block]:
    return [block for path in documentation_files(root) for block in read_blocks(path, root)]


def make_sandbox(base: Path, repo_root: Path, shared: Path) -> Path:
    """A folder laid out like a reader's checkout: `base/work` (returned; the commands run there) with the
    repository's example folders linked in, and `base/shared` beside it (`../shared` from the work folder) holding a
    link to the real reference fixtures; a test puts tiny data sets under `base/shared/data` as its block needs."""
    work = base / "work"
    work.mkdir(parents=True)
    (base / "shared" / "data").mkdir(parents=True)
    (base / "shared" / "fixtures").symlink_to(shared / "fixtures", target_is_directory=True)
    for name in REPOSITORY_FOLDERS:
        (work / name).symlink_to(repo_root / name, target_is_directory=True)
    return work


def reader_environment(cwd: Path) -> dict[str, str]:
    """A reader's environment in the sandbox: this interpreter's console scripts first on PATH, offline, and a
    Hugging Face cache inside the sandbox."""
    environment = dict(os.environ)
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}"
    environment["HF_HUB_OFFLINE"] = "1"
    environment["HF_HOME"] = str(cwd.parent / "hf-home")
    environment["OMP_WAIT_POLICY"] = environment.get("OMP_WAIT_POLICY", "PASSIVE")
    return environment


def run_bash(text: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run a block's text through bash in `cwd`, stopping at the first failing command (`set -e`, `pipefail`)."""
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", text],
        cwd=cwd,
        env=reader_environment(cwd),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def python_namespace_path(cwd: Path) -> Path:
    """Where `run_python` saves the values a Python block left (beside the work folder, not in it)."""
    return cwd.parent / "python-namespace.pt"


def run_python(text: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run a Python block's text as a script of its own in `cwd` (a fresh interpreter that has imported nothing for
    it), then save the tensors, arrays and plain values of its global names to `python_namespace_path(cwd)`."""
    script = cwd.parent / "python-block.py"
    script.write_text(text, encoding="utf-8")
    python_namespace_path(cwd).unlink(missing_ok=True)
    return subprocess.run(
        [sys.executable, str(PYTHON_BLOCK_RUNNER), str(script), str(python_namespace_path(cwd))],
        cwd=cwd,
        env=reader_environment(cwd),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_block(block: Block, text: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run `text` (the block's text, or the part of it that runs offline) as the block's language runs."""
    return run_python(text, cwd) if block.language == "python" else run_bash(text, cwd)
