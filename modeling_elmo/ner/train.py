"""`elmo-train-ner`: fine-tune ELMo for NER on CoNLL-format files with the Transformers `Trainer`.

    elmo-train-ner --model_name_or_path elmo-original --data_dir ../shared/data/conll2003 \
        --output_dir ner-out --classifier_head bilstm --use_crf --elmo_cache \
        --num_train_epochs 10 --learning_rate 1e-3 --per_device_train_batch_size 32 \
        --eval_strategy epoch --save_strategy epoch --load_best_model_at_end --metric_for_best_model f1

Trains on the train file, keeps the best dev checkpoint (with `--load_best_model_at_end`), saves model + tokenizer to
`--output_dir`, and writes `dev_results.json`, `test_results.json` and `test_report.txt` (seqeval per-type report).
Every `TrainingArguments` flag is accepted (`--push_to_hub`, `--hub_model_id`, ...).
"""

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from seqeval.metrics import classification_report
from transformers import AutoConfig, AutoModelForTokenClassification, DataCollatorForTokenClassification

from ..finetuning.command import FineTuningCommand, FineTuningRun
from ..finetuning.trainer import check_model_memory
from ..foundation.model_location import NO_SUCH_FOLDER, missing_model_folder
from ..hub.model_card import render_ner_model_card
from ..runtime.cpu_threads import configure_cpu_threads
from .arguments import COMMAND_LINE, PROG, DataArguments, ModelArguments
from .conll import encode_for_elmo, load_conll
from .metrics import build_compute_metrics, decode_tags

logger = logging.getLogger(PROG)


def _data_files(data: DataArguments) -> dict[str, str]:
    files = {"train": data.train_file, "validation": data.validation_file, "test": data.test_file}
    if data.data_dir:
        defaults = {"train": "train.txt", "validation": "dev.txt", "test": "test.txt"}
        files = {split: path or str(Path(data.data_dir) / defaults[split]) for split, path in files.items()}
    files = {split: path for split, path in files.items() if path}
    if "train" not in files and "test" not in files:
        raise ValueError("Give --data_dir or at least one of --train_file / --test_file.")
    return files


def _load_model(model_args: ModelArguments, label_names: list[str] | None, device):
    overrides = model_args.config_overrides()
    if label_names is not None:
        overrides.update(
            num_labels=len(label_names),
            id2label=dict(enumerate(label_names)),
            label2id={label: index for index, label in enumerate(label_names)},
        )
    check_model_memory(AutoModelForTokenClassification, model_args.model_name_or_path, overrides, device)
    return AutoModelForTokenClassification.from_pretrained(model_args.model_name_or_path, **overrides)


class NerCommand(FineTuningCommand):
    """`elmo-train-ner`'s parts of the fine-tuning sequence (`modeling_elmo.finetuning.command`)."""

    command_line = COMMAND_LINE
    hub_task = "token-classification"
    eval_prefix = "dev"
    data_collator = DataCollatorForTokenClassification

    def prepare(self, run: FineTuningRun) -> tuple[dict, Any]:
        model_name_or_path = run.model_args.model_name_or_path
        if missing_model_folder(model_name_or_path):
            raise ValueError(f"--model_name_or_path {model_name_or_path}: {NO_SUCH_FOLDER}.")
        files = _data_files(run.data_args)
        # without a train file, evaluate with the fine-tuned model's own labels (an unknown tag is then an error)
        label_names = None if "train" in files else _labels_if_fine_tuned(model_name_or_path)
        raw = load_conll(files, label_names=label_names)
        tags = raw[next(iter(raw))].features["ner_tags"].feature.names
        return raw, _load_model(run.model_args, tags, run.training_args.device)

    def encode(self, run: FineTuningRun) -> dict[str, Any]:
        limits = {"train": run.data_args.max_train_samples, "validation": run.data_args.max_eval_samples}
        encoded = {}
        for split, dataset in run.data.items():
            if limits.get(split) is not None:
                dataset = dataset.select(range(min(limits[split], len(dataset))))
            encoded[split] = encode_for_elmo(dataset, run.tokenizer, max_length=run.data_args.max_length)
        return encoded

    def compute_metrics(self, run: FineTuningRun) -> Callable:
        return build_compute_metrics(run.model.config.id2label)

    def train(self, run: FineTuningRun) -> dict[str, float]:
        metrics = super().train(run)
        num_words = sum(sum(1 for label in row if label != -100) for row in run.encoded["train"]["labels"])
        metrics["train_words_per_second"] = num_words * run.trainer.state.epoch / metrics["train_runtime"]
        return metrics

    def predicted(self, run: FineTuningRun, prediction) -> tuple[dict[str, float] | None, dict[str, str]]:
        gold, predicted = decode_tags(prediction.predictions, prediction.label_ids, run.model.config.id2label)
        report = classification_report(gold, predicted, digits=4, zero_division=0)
        logger.info("test report:\n%s", report)
        return prediction.metrics, {"test_report.txt": report}

    def model_card(self, run: FineTuningRun) -> str | None:
        if not {"dev", "test"} <= run.results.keys():
            return None
        return render_ner_model_card(
            run.trainer.model,
            base_model=run.model_args.model_name_or_path,
            dev_scores=_entity_scores(run.results["dev"], "dev"),
            test_scores=_entity_scores(run.results["test"], "test"),
            repo_id=run.training_args.hub_model_id,
            training=self.training_card(run),
        )


COMMAND = NerCommand()


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Run `elmo-train-ner` on `argv` (default: `sys.argv[1:]`); the metrics per split."""
    return COMMAND.main(argv)


def _entity_scores(metrics: dict[str, float], prefix: str) -> dict[str, float]:
    """Micro precision / recall / F1 from the Trainer's `{prefix}_f1`-style metrics."""
    return {name: metrics[f"{prefix}_{name}"] for name in ("precision", "recall", "f1")}


def _labels_if_fine_tuned(model_name_or_path: str) -> list[str] | None:
    """The label names of an already fine-tuned model (evaluation without a train file), else None."""
    config = AutoConfig.from_pretrained(model_name_or_path)
    architectures = config.architectures or []
    if not any(name.endswith("ForTokenClassification") for name in architectures):
        return None
    return [config.id2label[index] for index in range(config.num_labels)]


def cli(argv: list[str] | None = None) -> int:
    """The `elmo-train-ner` command. Bad input (the one-line error `main` stops with) exits with status 2, as an
    argparse usage error and `elmo-train-classifier` do. Without `argv` (the console script) this process is its own:
    its CPU threads are chosen first."""
    if argv is None:
        configure_cpu_threads()
    return COMMAND.exit_status(argv)


if __name__ == "__main__":
    sys.exit(cli())
