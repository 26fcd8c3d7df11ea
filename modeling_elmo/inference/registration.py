"""
ELMo registered with Transformers' Auto classes, in one place: the config, the models and the tokenizer (and for
`save_pretrained`'s remote code), the CPU and GPU engines' implementations and the quantization config. The package's
front door calls `register_auto_classes` on import, except in the process of a console command that answers `--help`
and argument errors first (`light_start`): the command registers once its arguments are parsed (`commands.elmo`), and
`loading.load_model` registers before it loads, wherever it is called from.

This module imports only the standard library at import time: registering imports torch and Transformers (seconds).
"""

import os
import sys

# the console scripts (pyproject.toml's [project.scripts]): `elmo` and its aliases (`commands.elmo.ALIASES`)
LIGHT_START_COMMANDS = frozenset(
    {
        "elmo",
        "elmo-convert",
        "elmo-embed",
        "elmo-export",
        "elmo-export-onnx",
        "elmo-pretrain",
        "elmo-publish",
        "elmo-run-legacy",
        "elmo-serve",
        "elmo-train-classifier",
        "elmo-train-ner",
    }
)

_registered = False


def light_start() -> bool:
    """Whether this process is a console command of `LIGHT_START_COMMANDS` (its script's name is `sys.argv[0]`)."""
    argv = getattr(sys, "argv", None) or [""]
    return os.path.basename(argv[0]) in LIGHT_START_COMMANDS


def register_auto_classes() -> None:
    """Register the config, the models and the tokenizer with the Auto classes and for `save_pretrained`'s remote
    code, once (the engines' implementations and `ElmoQuantizationConfig` with them)."""
    global _registered
    if _registered:
        return
    from transformers import (
        AutoConfig,
        AutoModel,
        AutoModelForPreTraining,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
    )

    from ..transformers_compat import register_tokenizer  # first: it names a Transformers below the floor in one line

    # isort: split
    from ..configuration_elmo import ElmoConfig
    from ..engine import CpuImplementation  # noqa: F401  (importing the engine registers its implementations)
    from ..modeling_elmo import (
        ElmoForPreTraining,
        ElmoForSequenceClassification,
        ElmoForTokenClassification,
        ElmoModel,
    )
    from ..quantization import register_quantization
    from ..tokenization_elmo import ElmoTokenizer

    register_quantization()  # `ElmoQuantizationConfig`
    models = {
        AutoModel: ElmoModel,
        AutoModelForTokenClassification: ElmoForTokenClassification,
        AutoModelForSequenceClassification: ElmoForSequenceClassification,
        AutoModelForPreTraining: ElmoForPreTraining,
    }
    AutoConfig.register(ElmoConfig.model_type, ElmoConfig)
    for auto_class, model in models.items():
        auto_class.register(ElmoConfig, model)
    register_tokenizer(ElmoConfig, ElmoTokenizer)
    # save_pretrained / push_to_hub then copy the code files and write `auto_map`, so that saved folders also load
    # with `trust_remote_code=True` where this package is not installed (see `modeling_elmo.hub.remote_code`).
    ElmoConfig.register_for_auto_class()
    for auto_class, model in models.items():
        model.register_for_auto_class(auto_class.__name__)
    ElmoTokenizer.register_for_auto_class("AutoTokenizer")
    _registered = True
