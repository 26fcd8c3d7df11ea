"""`elmo-train-classifier`: sentence or sentence-pair classification (or regression) with ELMo and the `Trainer`,
the way Transformers' `run_classification.py` works.

    elmo-train-classifier --model_name_or_path elmo-small --train_file train.jsonl --validation_file dev.jsonl \
        --test_file test.jsonl --text_column_names sentence --label_column_name label --output_dir out \
        --do_train --do_eval --do_predict --elmo_cache
    elmo-train-classifier ... --head_fit trainer --num_train_epochs 5 --learning_rate 2e-3 \
        --eval_strategy epoch --save_strategy epoch --load_best_model_at_end --metric_for_best_model accuracy
    elmo-train-classifier prepare-sst --data_dir ../shared/data/sst --output_dir sst2 --binary

Labels come from the training file (strings or integers, sorted: numbers numerically, else as strings) into
`id2label` / `label2id`; a float label column (or `--regression`) makes a regression (`num_labels == 1`). Writes the
model and tokenizer, `eval_results.json`, `test_results.json` (when the test file has labels), `predict_results.txt`
(label names) and a model card to `--output_dir`. Every `TrainingArguments` flag is accepted. Bad input: one line,
exit 2, nothing written. With a frozen biLM and a new default head, the head is fitted as a logistic regression
(`--head_fit lbfgs`, `head_fit.py`); `--head_fit trainer` trains it with the `Trainer`'s flags.
"""

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from datasets import Dataset
from transformers import AutoConfig, AutoModelForSequenceClassification, DataCollatorWithPadding, TrainingArguments

from ..finetuning.command import FineTuningCommand, FineTuningRun
from ..finetuning.trainer import check_model_memory
from ..foundation.model_location import NO_SUCH_FOLDER, missing_model_folder
from ..hub.model_card import render_classifier_model_card
from ..runtime.cpu_threads import configure_cpu_threads
from . import data as task_data
from .arguments import COMMAND_LINE, DataArguments, ModelArguments
from .defaults import new_head_defaults
from .head_fit import check_fit_memory, choose_head_fit, fit_linear_head
from .metrics import build_compute_metrics


@dataclass
class Task:
    """What the data says: the checked tables per split, the label mapping and the kind of problem."""

    tables: dict[str, Dataset]
    labels: dict[str, list[int] | list[float]]  # per split; a test file may have none
    label_names: list[str] | None  # None for a regression
    problem_type: str
    words_given: bool  # the text columns hold lists of words
    files: dict[str, str]  # the file of each split used


def _text_columns(data: DataArguments) -> tuple[str, ...]:
    return task_data.Columns.parse(data.text_column_names, data.label_column_name).texts


def _files(data: DataArguments, training: TrainingArguments) -> dict[str, str]:
    wanted = {"train": training.do_train, "validation": training.do_eval, "test": training.do_predict}
    given = {"train": data.train_file, "validation": data.validation_file, "test": data.test_file}
    flags = {"train": "--train_file", "validation": "--validation_file", "test": "--test_file"}
    actions = {"train": "--do_train", "validation": "--do_eval", "test": "--do_predict"}
    if not any(wanted.values()):
        raise task_data.DataError("Nothing to do: give --do_train, --do_eval and/or --do_predict.")
    for split, needed in wanted.items():
        if needed and not given[split]:
            raise task_data.DataError(f"{actions[split]} needs {flags[split]}.")
    return {split: given[split] for split, needed in wanted.items() if needed}


def _check_model_folder(model_name_or_path: str) -> None:
    """Refuse a model argument naming a folder that does not exist, before any Hub round trip."""
    if missing_model_folder(model_name_or_path):
        raise task_data.DataError(f"--model_name_or_path {model_name_or_path}: {NO_SUCH_FOLDER}.")


def _is_classifier(config) -> bool:
    return any(name.endswith("ForSequenceClassification") for name in config.architectures or [])


def _fine_tuned_labels(model_name_or_path: str) -> tuple[str, list[str] | None]:
    """(problem type, label names) of an already fine-tuned classifier, for evaluation without a train file."""
    _check_model_folder(model_name_or_path)
    config = AutoConfig.from_pretrained(model_name_or_path)
    if not _is_classifier(config):
        raise task_data.DataError(
            f"Without --do_train, --model_name_or_path must be a fine-tuned classifier; {model_name_or_path} is not."
        )
    if config.num_labels == 1:
        return task_data.REGRESSION, None
    return task_data.SINGLE_LABEL, [config.id2label[index] for index in range(config.num_labels)]


def read_task(files: dict[str, str], data: DataArguments, model_name_or_path: str, seed: int = 0) -> Task:
    """Read and check every file: columns, texts, labels (those of validation/test must occur in training)."""
    columns = task_data.Columns.parse(data.text_column_names, data.label_column_name)
    limits = {"train": data.max_train_samples, "validation": data.max_eval_samples, "test": data.max_predict_samples}
    tables, kinds = {}, set()
    for split, path in files.items():
        table = task_data.read_table(path)
        if split == "train" and data.shuffle_train_dataset:  # files sorted by label would give one-class subsets
            table = table.shuffle(seed=seed)
        if limits[split] is not None:
            table = table.select(range(min(limits[split], len(table))))
        has_labels = split != "test" or columns.label in table.column_names
        task_data.check_columns(table, path, [*columns.texts, *([columns.label] if has_labels else [])])
        kinds.add(task_data.text_input_kind(table, path, columns.texts))
        task_data.check_texts(table, path, columns.texts)
        tables[split] = table
    if len(kinds) > 1:
        raise task_data.DataError("Some files give raw strings and others lists of words; use one kind throughout.")

    if "train" in tables:
        problem = task_data.problem_type(tables["train"], files["train"], columns.label, data.regression)
        names = (
            None
            if problem == task_data.REGRESSION
            else task_data.class_names(tables["train"], files["train"], columns.label)
        )
    else:
        problem, names = _fine_tuned_labels(model_name_or_path)
    labels = {}
    for split, table in tables.items():
        if columns.label not in table.column_names:
            continue
        if names is None:
            labels[split] = task_data.regression_targets(table, files[split], columns.label)
        else:
            label2id = {name: index for index, name in enumerate(names)}
            labels[split] = task_data.label_ids(table, files[split], columns.label, label2id)
    if names is not None and len(names) < 2 and "train" in tables:
        hint = " (the first --max_train_samples records; --shuffle_train_dataset picks them at random)"
        raise task_data.DataError(
            f"{files['train']}: only one label ({names[0]!r}){hint if data.max_train_samples else ''}; "
            "a classifier needs two or more."
        )
    return Task(tables, labels, names, problem, kinds.pop(), files)


def _load_model(model_args: ModelArguments, task: Task, trains: bool, pairs: bool, device):
    _check_model_folder(model_args.model_name_or_path)
    """The model to train or evaluate: a new head on a biLM gets `new_head_defaults` for the head flags not given, a
    classifier trained before keeps its own values."""
    overrides = model_args.config_overrides()
    if trains and not _is_classifier(base := AutoConfig.from_pretrained(model_args.model_name_or_path)):
        overrides = {**new_head_defaults(overrides.get("classifier_head", base.classifier_head)), **overrides}
    if trains:
        names = task.label_names or ["score"]
        overrides.update(
            num_labels=len(names),
            id2label=dict(enumerate(names)),
            label2id={name: index for index, name in enumerate(names)},
            problem_type=task.problem_type,
            classifier_sentence_pairs=pairs,
        )
    check_model_memory(AutoModelForSequenceClassification, model_args.model_name_or_path, overrides, device)
    model = AutoModelForSequenceClassification.from_pretrained(model_args.model_name_or_path, **overrides)
    if model.config.classifier_sentence_pairs != pairs:
        kind = "text pairs" if model.config.classifier_sentence_pairs else "single texts"
        raise task_data.DataError(
            f"{model_args.model_name_or_path} classifies {kind}, but --text_column_names gives "
            f"{'two columns' if pairs else 'one column'}."
        )
    return model


def encode(table: Dataset, labels: list | None, tokenizer, task: Task, data: DataArguments) -> Dataset:
    """Tokenize the text column(s) (a pair: two texts per record) and attach `labels`."""
    text_columns = _text_columns(data)
    truncation = {"truncation": True, "max_length": data.max_seq_length} if data.max_seq_length else {}

    def encode_batch(batch: dict, indices: list[int]) -> dict:
        encoding = tokenizer(
            *(batch[name] for name in text_columns), is_split_into_words=task.words_given, **truncation
        )
        if labels is not None:
            encoding["labels"] = [labels[index] for index in indices]
        return dict(encoding)

    return table.map(encode_batch, batched=True, with_indices=True, remove_columns=table.column_names)


class ClassifierCommand(FineTuningCommand):
    """`elmo-train-classifier`'s parts of the fine-tuning sequence (`modeling_elmo.finetuning.command`)."""

    command_line = COMMAND_LINE
    hub_task = "text-classification"
    eval_prefix = "eval"
    data_collator = DataCollatorWithPadding

    def prepare(self, run: FineTuningRun) -> tuple[Task, Any]:
        files = _files(run.data_args, run.training_args)
        task = read_task(files, run.data_args, run.model_args.model_name_or_path, run.training_args.seed)
        pairs = len(_text_columns(run.data_args)) == 2
        model = _load_model(run.model_args, task, "train" in files, pairs, run.training_args.device)
        if "train" in files:
            run.data_args.head_fit = choose_head_fit(
                run.data_args.head_fit, model.config, task.problem_type, run.training_args.world_size
            )
            if run.data_args.head_fit == "lbfgs":
                check_fit_memory(
                    model, sum(len(task.tables[split]) for split in ("train", "validation") if split in task.tables)
                )
        return task, model

    def encode(self, run: FineTuningRun) -> dict[str, Dataset]:
        task = run.data
        return {
            split: encode(table, task.labels.get(split), run.tokenizer, task, run.data_args)
            for split, table in task.tables.items()
        }

    def compute_metrics(self, run: FineTuningRun) -> Callable:
        return build_compute_metrics(run.model.config.num_labels)

    def fit(self, run: FineTuningRun) -> dict[str, float]:
        """The Trainer's loop, or with `--head_fit lbfgs` the head fitted as a logistic regression (`head_fit`)."""
        if run.data_args.head_fit != "lbfgs":
            return super().fit(run)
        metrics, run.training_card = fit_linear_head(run.trainer, run.encoded["train"], run.encoded.get("validation"))
        return metrics

    def train(self, run: FineTuningRun) -> dict[str, float]:
        metrics = super().train(run)
        if run.cache is not None:  # sentences the biLM ran on (misses) and skipped (hits) while training
            metrics.update(train_cache_hits=run.cache.hits, train_cache_misses=run.cache.misses)
        return metrics

    def predicted(self, run: FineTuningRun, prediction) -> tuple[dict[str, float] | None, dict[str, str]]:
        metrics = prediction.metrics if "test" in run.data.labels else None
        return metrics, {"predict_results.txt": format_predictions(prediction.predictions, run.model.config)}

    def model_card(self, run: FineTuningRun) -> str | None:
        if "train" not in run.results:
            return None
        return render_classifier_model_card(
            run.trainer.model,
            base_model=run.model_args.model_name_or_path,
            scores={split: run.results[split] for split in ("eval", "test") if split in run.results},
            data_files=run.data.files,
            text_columns=_text_columns(run.data_args),
            repo_id=run.training_args.hub_model_id,
            training=self.training_card(run),
        )


COMMAND = ClassifierCommand()


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Run `elmo-train-classifier` on `argv` (default: `sys.argv[1:]`); the metrics per split."""
    return COMMAND.main(argv)


def format_predictions(logits: np.ndarray | tuple, config) -> str:
    """`predict_results.txt` as `run_classification.py` writes it: `index<TAB>prediction`, with label names (or the
    predicted value of a regression)."""
    logits = np.asarray(logits[0] if isinstance(logits, tuple) else logits)
    if config.num_labels == 1:
        predictions = [f"{value:.6g}" for value in logits.reshape(-1)]
    else:
        predictions = [config.id2label[int(index)] for index in logits.argmax(axis=-1)]
    return "index\tprediction\n" + "".join(f"{index}\t{label}\n" for index, label in enumerate(predictions))


def cli(argv: list[str] | None = None) -> int:
    """The `elmo-train-classifier` command (`elmo-train-classifier prepare-sst ...` runs the SST reader). Without
    `argv` (the console script) this process is its own: its CPU threads are chosen first."""
    if argv is None:
        configure_cpu_threads()
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments[:1] == ["prepare-sst"]:
        from .sst import main as prepare_sst

        return prepare_sst(arguments[1:])
    return COMMAND.exit_status(arguments)


__all__ = ["DataArguments", "ModelArguments", "encode", "format_predictions", "main", "read_task"]

if __name__ == "__main__":
    sys.exit(cli())
