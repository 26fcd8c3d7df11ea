#!/usr/bin/env bash
# Fetch Transformers' generic model tests (ModelTesterMixin in tests/test_modeling_common.py, ConfigTester in
# tests/test_configuration_common.py) for the *installed* transformers version, from its source distribution on PyPI,
# into a cache outside the repository, as the importable package `transformers_tests`. Prints the directory to put
# on PYTHONPATH; a second run only prints it.
#
#   .ci/fetch_upstream_tests.sh [VERSION [SHA256]]
#   upstream=$(.ci/fetch_upstream_tests.sh) && PYTHONPATH="$upstream" python -m pytest tests/test_modeling_elmo_upstream.py
#
# VERSION: refuse to run unless the installed transformers is this version (CI pins it). SHA256: the expected hash
# of the sdist, checked after the download. Cache: $ELMO_UPSTREAM_TESTS_CACHE, by default
# ${XDG_CACHE_HOME:-~/.cache}/elmo-transformers/upstream-tests, one folder per version.
#
# Stand-ins. The sdist ships the top-level tests/*.py only, not tests/__init__.py nor the subpackages that the two
# mixins import. These are written next to them:
# - __init__.py files (test_configuration_common.py imports the package through its __init__.py);
# - exporters/test_export.py: an empty ExportTesterMixin, so the export tests of ModelTesterMixin do not run;
# - generation/test_utils.py: an empty GenerationTesterMixin (used in an issubclass() check only);
# - utils/test_configuration_utils.py: `config_common_kwargs`, transformers 5.x's dict, whose keys are the public
#   fields of PreTrainedConfig() (checked below against the installed version).
set -euo pipefail

installed=$(python -c 'import transformers; print(transformers.__version__)')
expected=${1:-$installed}
expected_sha256=${2:-}
if [ "$installed" != "$expected" ]; then
    echo "fetch_upstream_tests: transformers $installed is installed, $expected expected" >&2
    exit 1
fi
root=${ELMO_UPSTREAM_TESTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/elmo-transformers/upstream-tests}/transformers-$installed
package=$root/transformers_tests

if [ ! -f "$package/.complete" ]; then
    mkdir -p "$root"
    work=$(mktemp -d "$root/.download.XXXXXX")  # in the cache, so that the final move is a rename
    trap 'rm -rf "$work"' EXIT
    pip download -q --no-deps --no-binary :all: "transformers==$installed" -d "$work" >&2
    sdist=$work/transformers-$installed.tar.gz
    if [ -n "$expected_sha256" ] && [ "$(sha256sum "$sdist" | cut -d' ' -f1)" != "$expected_sha256" ]; then
        echo "fetch_upstream_tests: $(basename "$sdist") does not have the sha256 $expected_sha256" >&2
        exit 1
    fi
    tar -xzf "$sdist" -C "$work" "transformers-$installed/tests"
    staged=$work/transformers-$installed/tests
    mkdir -p "$staged/exporters" "$staged/generation" "$staged/utils"
    touch "$staged/__init__.py" "$staged/exporters/__init__.py" "$staged/generation/__init__.py" \
        "$staged/utils/__init__.py"
    cat >"$staged/exporters/test_export.py" <<'EOF'
# Stand-in written by .ci/fetch_upstream_tests.sh: the sdist lacks tests/exporters/. No export tests run.
class ExportTesterMixin:
    pass
EOF
    cat >"$staged/generation/test_utils.py" <<'EOF'
# Stand-in written by .ci/fetch_upstream_tests.sh: the sdist lacks tests/generation/. ModelTesterMixin only uses it
# in an issubclass() check.
class GenerationTesterMixin:
    pass
EOF
    cat >"$staged/utils/test_configuration_utils.py" <<'EOF'
# Stand-in written by .ci/fetch_upstream_tests.sh: the sdist lacks tests/utils/. transformers 5.x's dict: a
# non-default value for every public field of PreTrainedConfig().
config_common_kwargs = {
    "return_dict": False,
    "output_hidden_states": True,
    "output_attentions": True,
    "dtype": "float16",
    "chunk_size_feed_forward": 5,
    "architectures": ["BertModel"],
    "id2label": {0: "label"},
    "label2id": {"label": "0"},
    "problem_type": "regression",
}
EOF
    # the stand-in must still cover every public field of the installed PreTrainedConfig
    PYTHONPATH="$staged/utils" python - <<'EOF'
from test_configuration_utils import config_common_kwargs
from transformers import PreTrainedConfig

fields = {name for name in vars(PreTrainedConfig()) if not name.startswith("_")}
missing = fields - set(config_common_kwargs) - {"is_encoder_decoder", "transformers_version"}
if missing:
    raise SystemExit(f"fetch_upstream_tests: config_common_kwargs lacks {sorted(missing)}: update the stand-in")
EOF
    touch "$staged/.complete"
    [ -f "$package/.complete" ] || rm -rf "$package"  # an incomplete copy; a complete one: another run finished
    mv -T "$staged" "$package" 2>/dev/null || [ -f "$package/.complete" ]
fi
echo "$root"
