"""The one sequence of the fine-tuning commands (`elmo-train-ner`, `elmo-train-classifier`), written once:

1. parse the command line (`TrainerCommandLine`: a bad flag or value is one line, exit status 2);
2. read and check the data, load the model, its tokenizer and the activation cache (`FineTuningCommand.prepare`);
   bad input is one line, exit status 2, before anything is written;
3. take the `--output_dir` (its claim; a folder holding files the command did not write is refused);
4. encode the data, build the `Trainer`, train (`FineTuningCommand.fit`, the `Trainer`'s loop, which a command may
   replace with its own way of fitting; then the model and the Trainer's state are saved), evaluate on the
   validation split and predict on the test split;
5. write the results, the command's prediction files and model card, save the activation cache, record every file
   written in the folder's record and push to the Hub when asked.

A command supplies its parts by subclassing `FineTuningCommand`; `FineTuningRun` carries what the steps share.
"""

import json
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NoReturn

from safetensors import SafetensorError
from transformers import AutoTokenizer, TrainingArguments, set_seed

from .. import ElmoConfig  # noqa: F401  (importing the package registers the Auto classes)
from ..commands.trainer_command import TrainerCommandLine
from ..foundation.errors import ToolError, one_line
from ..foundation.output_folder import (
    check_run_folder,
    claim_run_folder,
    foreign_run_entries,
    seal_run_folder,
    write_text_atomically,
)
from ..foundation.output_lock import run_output_dir_lock
from .activation_cache import ElmoActivationCache
from .trainer import ElmoCardTrainer, TimeBudgetCallback, attach_activation_cache


class CommandStop(SystemExit):
    """A fine-tuning command stopped: its text is the line `PROG: error: MESSAGE` (already printed on stderr), its
    `code` the exit status (2: bad input)."""

    def __init__(self, line: str, status: int = 2):
        super().__init__(line)
        self.code = status


@dataclass
class FineTuningRun:
    """What the steps of one run share: the parsed arguments, then what each step adds (`data`: the command's own
    reading of its files; `encoded`: the tokenized splits `train`, `validation`, `test` that are used)."""

    model_args: Any
    data_args: Any
    training_args: TrainingArguments
    data: Any = None
    model: Any = None
    tokenizer: Any = None
    cache: ElmoActivationCache | None = None
    encoded: dict[str, Any] = field(default_factory=dict)
    trainer: ElmoCardTrainer | None = None
    results: dict[str, dict[str, float]] = field(default_factory=dict)
    training_card: dict[str, Any] | None = None  # what the model card says of the training (None: the Trainer's)

    @property
    def output_dir(self) -> Path:
        return Path(self.training_args.output_dir)


class FineTuningCommand:
    """One fine-tuning command: the parts `main` runs in its fixed order (see the module docstring). The command
    records what it wrote in its `--output_dir` (`foundation.folder_record`) and refuses a folder holding anything
    else."""

    command_line: ClassVar[TrainerCommandLine]
    hub_task: ClassVar[str]  # the `tasks` of `Trainer.push_to_hub`
    eval_prefix: ClassVar[str]  # the metric prefix and results file name of the validation split
    data_collator: ClassVar[type]  # the `Trainer`'s collator class, built on the tokenizer

    @property
    def prog(self) -> str:
        return self.command_line.prog

    def prepare(self, run: FineTuningRun) -> tuple[Any, Any]:
        """Read and check the data files; (the data, the model). Raise `ValueError` or `OSError` on bad input."""
        raise NotImplementedError

    def encode(self, run: FineTuningRun) -> dict[str, Any]:
        """The tokenized splits (`train`, `validation`, `test`) of `run.data`."""
        raise NotImplementedError

    def compute_metrics(self, run: FineTuningRun) -> Callable:
        """The `Trainer`'s `compute_metrics` for the command's task."""
        raise NotImplementedError

    def fit(self, run: FineTuningRun) -> dict[str, float]:
        """Train the model with the `Trainer`'s loop; the training metrics."""
        return dict(run.trainer.train().metrics)

    def train(self, run: FineTuningRun) -> dict[str, float]:
        """`fit`, then save the model and the Trainer's state; the training metrics."""
        metrics = self.fit(run)
        run.trainer.save_model()
        run.trainer.save_state()
        return metrics

    def training_card(self, run: FineTuningRun) -> dict[str, Any] | None:
        """What the model card says of the training: the command's own (`run.training_card`), else what the
        `Trainer` ran (epochs, steps, learning rate, batch size); None where nothing was trained."""
        if "train" not in run.results:
            return None
        if run.training_card is not None:
            return run.training_card
        state, arguments = run.trainer.state, run.training_args
        return {
            "epochs": round(state.epoch or 0.0, 2),
            "steps": state.global_step,
            "learning rate": arguments.learning_rate,
            "batch size": arguments.per_device_train_batch_size,
        }

    def predicted(self, run: FineTuningRun, prediction) -> tuple[dict[str, float] | None, dict[str, str]]:
        """From the test split's `PredictionOutput`: the test metrics to report (None: the split has no labels) and
        the files to write into the output folder (name -> text)."""
        raise NotImplementedError

    def model_card(self, run: FineTuningRun) -> str | None:
        """The model card (README.md) for `run.results`, or None where there is none to write."""
        raise NotImplementedError

    def fail(self, message: str, status: int = 2) -> NoReturn:
        """Stop with one line on stderr and exit status `status`."""
        line = f"{self.prog}: error: {message}"
        print(line, file=sys.stderr)
        raise CommandStop(line, status)

    def check_output_dir(self, output_dir: Path) -> None:
        """Refuse an `--output_dir` holding files the command did not write (an earlier run's may be written over)."""
        refusal = f"holds files that {self.prog} did not write ({{shown}}); choose an empty or new folder."
        check_run_folder(output_dir, lambda folder: foreign_run_entries(folder, self.prog), refusal)

    def main(self, argv: list[str] | None = None) -> dict[str, dict[str, float]]:
        """Run the command on `argv` (default: `sys.argv[1:]`); the metrics per split."""
        parsed = self.command_line.parse(sys.argv[1:] if argv is None else argv)
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
        run = FineTuningRun(*parsed)
        set_seed(run.training_args.seed)  # the head is initialised before the Trainer exists
        try:
            self.check_output_dir(run.output_dir)
        except (OSError, ValueError) as error:
            self.fail(one_line(error, first=True))
        try:
            with run_output_dir_lock(run.training_args, self.prog):  # claimed before any other work
                self.check_output_dir(run.output_dir)  # again, claimed: another run may have written there since
                try:
                    run.data, run.model = self.prepare(run)
                    run.tokenizer = AutoTokenizer.from_pretrained(run.model_args.model_name_or_path)
                    cache = attach_activation_cache(run.model, run.data_args.elmo_cache, run.data_args.elmo_cache_dir)
                    run.cache = cache
                except (OSError, ValueError, SafetensorError) as error:  # bad data, model, cache or option
                    self.fail(one_line(error, first=True))
                if run.training_args.process_index == 0:
                    claim_run_folder(run.output_dir, self.prog)
                return self._train_and_evaluate(run)
        except ToolError as error:  # the folder in use or not ours (exit status 2), a file that cannot be written (1)
            self.fail(str(error), error.exit_status)

    def exit_status(self, argv: list[str] | None = None) -> int:
        """`main` as a command: 0, or 2 after the one-line error of bad input."""
        try:
            self.main(argv)
        except CommandStop as stop:
            return stop.code
        return 0

    def _train_and_evaluate(self, run: FineTuningRun) -> dict[str, dict[str, float]]:
        """Train, evaluate and predict as the command line asks, writing the results, predictions and card."""
        arguments, data_args = run.training_args, run.data_args
        run.encoded = self.encode(run)
        run.trainer = ElmoCardTrainer(
            model=run.model,
            args=arguments,
            train_dataset=run.encoded.get("train"),
            eval_dataset=run.encoded.get("validation"),
            processing_class=run.tokenizer,
            data_collator=self.data_collator(run.tokenizer),
            compute_metrics=self.compute_metrics(run),
            callbacks=[TimeBudgetCallback(data_args.time_budget_minutes)] if data_args.time_budget_minutes else None,
        )
        main_process = run.trainer.is_world_process_zero()
        if "train" in run.encoded:
            run.results["train"] = self.train(run)
        if "validation" in run.encoded:
            evaluation = run.trainer.evaluate(run.encoded["validation"], metric_key_prefix=self.eval_prefix)
            run.results[self.eval_prefix] = evaluation
        if "test" in run.encoded:
            metrics, files = self.predicted(run, run.trainer.predict(run.encoded["test"], metric_key_prefix="test"))
            if metrics is not None:
                run.results["test"] = metrics
            for name, text in files.items() if main_process else ():
                write_text_atomically(run.output_dir / name, text, ToolError)
        if main_process:
            for name, metrics in run.results.items():
                text = json.dumps(metrics, indent=2, sort_keys=True) + "\n"
                write_text_atomically(run.output_dir / f"{name}_results.json", text, ToolError)
            card = self.model_card(run)
            if card is not None:
                write_text_atomically(run.output_dir / "README.md", card, ToolError)
        if run.cache is not None:  # after the results: they are written even if the cache cannot be
            logging.getLogger(self.prog).info("activation cache: %d hits, %d misses", run.cache.hits, run.cache.misses)
            if run.cache.directory is not None:
                run.cache.save()
        if main_process:
            seal_run_folder(run.output_dir, self.prog)
        if arguments.push_to_hub:
            run.trainer.push_to_hub(finetuned_from=run.model_args.model_name_or_path, tasks=self.hub_task)
        return run.results


__all__ = ["CommandStop", "FineTuningCommand", "FineTuningRun"]
