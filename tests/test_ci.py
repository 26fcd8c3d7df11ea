"""CI installs exactly what the README's set-up installs, so a newcomer's test run is CI's test run."""

import re
import shlex

from doc_commands import documentation_files, read_blocks
from shared_paths import REPO_ROOT


def pip_install_commands(text: str) -> list[list[str]]:
    """Every `pip install ...` command of a shell text, split into words (a `&&` chain splits into its commands)."""
    commands = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0]
        if "pip install" not in line:  # (other lines may be Python, which shlex does not read)
            continue
        for command in re.split(r"&&|;", line):
            words = shlex.split(command)
            if words[:2] == ["pip", "install"] and "-e" in words:
                commands.append(words)
    return commands


def readme_setup_install() -> list[str]:
    readme = documentation_files(REPO_ROOT)[0]
    quickstart = [block for block in read_blocks(readme, REPO_ROOT) if block.doc_id == "quickstart"]
    assert len(quickstart) == 1, "README.md has no single `<!-- doc-test: quickstart -->` block"
    installs = pip_install_commands(quickstart[0].text)
    assert len(installs) == 1, f"the quick start has {len(installs)} editable pip installs, expected one"
    return installs[0]


def ecosystem_installs() -> list[list[str]]:
    """docs/ecosystem.md's installs of the Transformers 4.x environment and of flair's own, in that order."""
    page = [path for path in documentation_files(REPO_ROOT) if path.name == "ecosystem.md"]
    assert len(page) == 1, "docs/ecosystem.md is missing"
    text = "\n".join(block.text for block in read_blocks(page[0], REPO_ROOT) if block.language == "bash")
    installs = [
        words
        for words in pip_install_commands(text)
        if "transformers==4.52.*" in words or any("flair" in word for word in words)
    ]
    assert len(installs) == 2, f"docs/ecosystem.md has {len(installs)} of its two installs (Transformers 4.x, flair)"
    return installs


def test_ci_installs_with_the_documented_lines():
    """Job 2's environment (the lowest Transformers 4.x, then flair) with docs/ecosystem.md's lines; job 1's with the
    README's."""
    ci_installs = pip_install_commands((REPO_ROOT / ".ci" / "run").read_text())
    assert ci_installs == [*ecosystem_installs(), readme_setup_install()]


def test_pip_install_commands_reads_a_chain():
    text = 'python3 -m venv .venv && pip install torch==2.13.0 -e ".[test]" && pip install -q x  # pip install -e y'
    assert pip_install_commands(text) == [["pip", "install", "torch==2.13.0", "-e", ".[test]"]]
