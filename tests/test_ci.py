"""CI installs exactly what the README's set-up installs, so a newcomer's test run is CI's test run; its wheel job
installs the same from the wheel; docs/install.md gives every extra's install line; .ci/check_dist.py finds what a
wheel or an sdist lacks."""

import importlib.util
import re
import shlex
import tomllib

from doc_commands import documentation_files, read_blocks
from shared_paths import REPO_ROOT


def load_check_dist():
    spec = importlib.util.spec_from_file_location("check_dist", REPO_ROOT / ".ci" / "check_dist.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_dist = load_check_dist()


def pip_install_commands(text: str, editable: bool = True) -> list[list[str]]:
    """Every editable (or, with `editable=False`, every other) `pip install ...` command of a shell text, split into
    words (a `&&` chain splits into its commands)."""
    commands = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0]
        if "pip install" not in line:  # (other lines may be Python, which shlex does not read)
            continue
        for command in re.split(r"&&|;", line):
            words = shlex.split(command)
            if words[:2] == ["pip", "install"] and ("-e" in words) == editable:
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


def test_the_wheel_jobs_install_the_readme_set_up_from_the_wheel():
    """Job 4 installs the README's torch and extras from the built wheel instead of the checkout, with the serve extra
    (`elmo serve`'s tests run there), the clients extra (LangChain and chromadb against it) and the bench extra (the
    load test's tests); job 5, in the same
    environment, the README's with the serve extra and the optional engines' extras (ray, spark, gpu) added."""
    wheel_installs = [
        words
        for words in pip_install_commands((REPO_ROOT / ".ci" / "run").read_text(), editable=False)
        if any(".whl" in word or word.startswith("$wheel") for word in words)
    ]
    readme = readme_setup_install()
    extras = readme[readme.index("-e") + 1].removeprefix(".")
    from_the_wheel = [word for word in readme if word != "-e" and not word.startswith(".[")]
    with_serve = extras.removesuffix("]") + ",serve]"
    with_clients = with_serve.removesuffix("]") + ",clients,bench]"
    with_engines = with_serve.removesuffix("]") + ",ray,spark,gpu]"
    assert wheel_installs == [[*from_the_wheel, f"$wheel{with_clients}"], [*from_the_wheel, f"$wheel{with_engines}"]]


def tier_commands() -> list[str]:
    """The documented commands that run a whole tier of the suite: the README's, then docs/development.md's."""
    pages = [path for path in documentation_files(REPO_ROOT) if path.name in ("README.md", "development.md")]
    texts = [block.text.strip() for page in pages for block in read_blocks(page, REPO_ROOT)]
    return [text for text in texts if text.startswith("python -m pytest")]


def test_ci_runs_each_tier_with_its_documented_command():
    """Job 1 runs the README's command as written (the whole unit tier); job 4 runs docs/development.md's command of
    the integration tier, with the variable that fails its skips."""
    unit, integration = tier_commands()
    assert (unit, integration) == ("python -m pytest -q", "python -m pytest -q -m integration")
    lines = (REPO_ROOT / ".ci" / "run").read_text().replace("\\\n", " ").splitlines()
    assert any(line.endswith(f" {unit}") for line in lines)
    assert any(f" {integration} " in line and "ELMO_REQUIRE_INTEGRATION=1" in line for line in lines)


def test_every_extra_has_its_install_line():
    """docs/install.md shows `pip install -e ".[EXTRA]"` for every extra users install (the test extra is the quick
    start's), and installs from the repository that pyproject.toml names."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    page = (REPO_ROOT / "docs" / "install.md").read_text()
    missing = [name for name in project["optional-dependencies"] if name != "test" and f'-e ".[{name}]"' not in page]
    assert missing == []
    assert f'pip install "elmo-transformers @ git+{project["urls"]["Repository"]}"' in page


# Until the package is on PyPI, a paragraph (or a fenced block) that installs it by name says that it is not yet
# published; docs/releasing.md says to drop the test once a release is on PyPI.
INDEX_INSTALL = re.compile(r"""pip install\s+["']?elmo-transformers""")
NOT_YET_PUBLISHED = re.compile(
    r"not (yet )?(published|on the package index|on PyPI)|once (it is )?published|when (it is )?published", re.I
)


def test_an_install_by_name_says_the_package_is_not_yet_published():
    problems = [
        f"{path.relative_to(REPO_ROOT)}: {paragraph.strip().splitlines()[0]}"
        for path in documentation_files(REPO_ROOT)
        for paragraph in re.split(r"\n\s*\n|^\s*(?:```|~~~).*$", path.read_text(encoding="utf-8"), flags=re.M)
        if INDEX_INSTALL.search(paragraph) and not NOT_YET_PUBLISHED.search(paragraph)
    ]
    assert problems == []


def test_check_dist_names_what_the_wheel_lacks_and_what_it_should_not_hold():
    package_files = ["modeling_elmo/__init__.py", "modeling_elmo/engine/__init__.py", "modeling_elmo/model_cards/a.md"]
    wheel = [
        "modeling_elmo/__init__.py",
        "modeling_elmo/model_cards/a.md",
        "tests/test_x.py",
        "elmo_transformers-0.1.0.dist-info/METADATA",
    ]
    assert check_dist.wheel_problems(wheel, package_files) == [
        "the wheel lacks modeling_elmo/engine/__init__.py",
        "the wheel holds tests/test_x.py, which is neither modeling_elmo/ nor the distribution's metadata",
    ]
    assert check_dist.wheel_problems([*package_files, "elmo_transformers-0.1.0.dist-info/RECORD"], package_files) == []


def test_check_dist_names_what_the_sdist_lacks():
    package_files = ["modeling_elmo/__init__.py", "modeling_elmo/model_cards/a.md"]
    top = "elmo_transformers-0.1.0"
    sdist = [top, f"{top}/pyproject.toml", f"{top}/README.md", f"{top}/modeling_elmo/__init__.py"]
    assert check_dist.sdist_problems(sdist, package_files) == [
        "the sdist lacks LICENSE",
        "the sdist lacks modeling_elmo/model_cards/a.md",
    ]
    complete = [*sdist, f"{top}/LICENSE", f"{top}/modeling_elmo/model_cards/a.md"]
    assert check_dist.sdist_problems(complete, package_files) == []
