"""`elmo-train-ner`: fine-tune ELMo for NER on CoNLL-format files with the Transformers `Trainer`.

    elmo-train-ner --model_name_or_path elmo-original --data_dir ../shared/data/conll2003 \
        --output_dir ner-out --classifier_head bilstm --use_crf --elmo_cache \
        --num_train_epochs 10 --learning_rate 1e-3 --per_device_train_batch_size 32 \
        --eval_strategy epoch --save_strategy epoch --load_best_model_at_end --metric_for_best_model f1

Trains on the train file, keeps the best dev checkpoint (with `--load_best_model_at_end`), saves model + tokenizer to
`--output_dir`, and writes `dev_results.json`, `test_results.json` and `test_report.txt` (seqeval per-type report).
Every `TrainingArguments` flag is accepted (`--push_to_hub`, `--hub_model_id`, ...).
"""

import json
import logging
import sys
from pathlib import Path

from safetensors import SafetensorError
from seqeval.metrics import classification_report
from transformers import (
    AutoConfig,
    AutoModelForTokenClassification,
    AutoTokenizer,
    DataCollatorForTokenClassification,
    TrainingArguments,
    set_seed,
)

from .. import ElmoConfig  # noqa: F401  (importing the package registers the Auto classes)
from ..commands.arguments import NO_SUCH_FOLDER, missing_model_folder
from ..commands.output_lock import OutputFolderInUseError, run_output_dir_lock
from ..finetuning.activation_cache import ElmoActivationCache
from ..finetuning.trainer import (
    ElmoCardTrainer,
    TimeBudgetCallback,
    attach_activation_cache,
    check_model_memory,
)
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


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    model_args, data_args, training_args = COMMAND_LINE.parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)

    set_seed(training_args.seed)  # the head is initialised before the Trainer exists
    try:
        if missing_model_folder(model_args.model_name_or_path):
            raise ValueError(f"--model_name_or_path {model_args.model_name_or_path}: {NO_SUCH_FOLDER}.")
        files = _data_files(data_args)
        # without a train file, evaluate with the fine-tuned model's own labels (an unknown tag is then an error)
        label_names = None if "train" in files else _labels_if_fine_tuned(model_args.model_name_or_path)
        raw = load_conll(files, label_names=label_names)
        model = _load_model(model_args, raw[next(iter(raw))].features["ner_tags"].feature.names, training_args.device)
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
        cache = attach_activation_cache(model, data_args.elmo_cache, data_args.elmo_cache_dir)
    except (OSError, ValueError, SafetensorError) as error:  # missing/unreadable data, model or cache; a bad option
        sys.exit(f"elmo-train-ner: error: {str(error).splitlines()[0] if str(error) else repr(error)}")

    try:
        with run_output_dir_lock(training_args, PROG):
            return _train_and_evaluate(model_args, data_args, training_args, model, tokenizer, raw, cache)
    except OutputFolderInUseError as error:
        sys.exit(f"{PROG}: error: {error}")


def _train_and_evaluate(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TrainingArguments,
    model,
    tokenizer,
    raw: dict,
    cache: ElmoActivationCache | None,
) -> dict[str, dict[str, float]]:
    """Train, evaluate and predict as the command line asks, writing the results, report and card."""
    limits = {"train": data_args.max_train_samples, "validation": data_args.max_eval_samples}
    encoded = {}
    for split, dataset in raw.items():
        if limits.get(split) is not None:
            dataset = dataset.select(range(min(limits[split], len(dataset))))
        encoded[split] = encode_for_elmo(dataset, tokenizer, max_length=data_args.max_length)

    trainer = ElmoCardTrainer(
        model=model,
        args=training_args,
        train_dataset=encoded.get("train"),
        eval_dataset=encoded.get("validation"),
        processing_class=tokenizer,
        data_collator=DataCollatorForTokenClassification(tokenizer),
        compute_metrics=build_compute_metrics(model.config.id2label),
        callbacks=[TimeBudgetCallback(data_args.time_budget_minutes)] if data_args.time_budget_minutes else None,
    )
    results: dict[str, dict[str, float]] = {}
    output_dir = Path(training_args.output_dir)
    if "train" in encoded:
        train_result = trainer.train()
        num_words = sum(sum(1 for label in row if label != -100) for row in encoded["train"]["labels"])
        metrics = dict(train_result.metrics)
        metrics["train_words_per_second"] = num_words * trainer.state.epoch / metrics["train_runtime"]
        results["train"] = metrics
        trainer.save_model()
        trainer.save_state()
    if "validation" in encoded:
        results["dev"] = trainer.evaluate(encoded["validation"], metric_key_prefix="dev")
    if "test" in encoded:
        prediction = trainer.predict(encoded["test"], metric_key_prefix="test")
        results["test"] = prediction.metrics
        gold, predicted = decode_tags(prediction.predictions, prediction.label_ids, model.config.id2label)
        report = classification_report(gold, predicted, digits=4, zero_division=0)
        if trainer.is_world_process_zero():
            output_dir.mkdir(parents=True, exist_ok=True)
            (output_dir / "test_report.txt").write_text(report)
        logger.info("test report:\n%s", report)
    if trainer.is_world_process_zero():
        for name, metrics in results.items():
            (output_dir / f"{name}_results.json").write_text(json.dumps(metrics, indent=2, sort_keys=True))
    if trainer.is_world_process_zero() and {"dev", "test"} <= results.keys():
        card = render_ner_model_card(
            trainer.model,
            base_model=model_args.model_name_or_path,
            dev_scores=_entity_scores(results["dev"], "dev"),
            test_scores=_entity_scores(results["test"], "test"),
            repo_id=training_args.hub_model_id,
            training={
                "epochs": training_args.num_train_epochs,
                "learning rate": training_args.learning_rate,
                "batch size": training_args.per_device_train_batch_size,
            },
        )
        (output_dir / "README.md").write_text(card, encoding="utf-8")
    if cache is not None:  # last: the results above are written even if the cache cannot be
        logger.info("activation cache: %d hits, %d misses", cache.hits, cache.misses)
        if cache.directory is not None:
            cache.save()
    if training_args.push_to_hub:
        trainer.push_to_hub(finetuned_from=model_args.model_name_or_path, tasks="token-classification")
    return results


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
    try:
        main(sys.argv[1:] if argv is None else argv)
    except SystemExit as stop:
        if not isinstance(stop.code, str):
            raise
        print(stop.code, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(cli())
