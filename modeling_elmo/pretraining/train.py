"""`elmo-pretrain`: train an ELMo biLM with bilm-tf's recipe on the Transformers `Trainer`.

    elmo-pretrain --options options.json --vocab_file vocab.txt --train_files 'corpus/*.txt' --output_dir my-elmo \\
        [--do_eval --eval_files 'heldout/*.txt'] [--model_name_or_path elmo-original] [any TrainingArguments flag]
    elmo-pretrain --do_train False --do_eval --options options.json --vocab_file vocab.txt \\
        --model_name_or_path my-elmo --eval_files 'heldout/*.txt' --output_dir my-elmo-eval
    elmo-pretrain build-vocab --train_files 'corpus/*.txt' --output vocab.txt [--min_count N | --max_size N]

`options.json` is bilm-tf's training options file; its `batch_size` (per process), `n_epochs` and `all_clip_norm_val`
are the defaults of `--per_device_train_batch_size`, `--num_train_epochs` and `--max_grad_norm` (divided by
`unroll_steps`, see `options_training_defaults`), and its `unroll_steps`, `dropout` and `n_negative_samples_batch`
those of the flags of the same names; a flag given on the command line wins. The output folder is a complete
Transformers folder (`ElmoForPreTraining` + config + tokenizer + `vocab.txt` + model card): `AutoModel` loads the biLM
from it for `elmo-embed`, `elmo-train-ner` or the Hub, `elmo-export` writes it back in bilm-tf's format.
"""

import json
import logging
import math
import os
import sys
from pathlib import Path

import torch
from safetensors import SafetensorError
from torch.utils.data import DataLoader
from transformers import (
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..commands.arguments import given, parse_trainer_arguments, training_arguments_problem
from ..configuration_elmo import BILM_ARCHITECTURE_FIELDS, ElmoConfig, ElmoConfigError
from ..formats.corpus import count_positions, resolve_corpus_files
from ..formats.original_checkpoint import read_softmax
from ..formats.vocab import LmVocabulary
from ..foundation.errors import ToolError, ToolInputError, one_line, report
from ..foundation.folder_record import unlisted_entries
from ..foundation.model_location import NO_SUCH_FOLDER, missing_model_folder
from ..foundation.output_folder import check_run_folder, claim_run_folder, foreign_run_entries, seal_run_folder
from ..foundation.output_lock import run_output_dir_lock
from ..hub.model_card import render_pretrained_model_card
from ..lstm_states import ElmoLstmStates
from ..modeling_elmo import ElmoForPreTraining
from ..quantization.config import saved_quantization
from ..runtime.cpu_threads import configure_cpu_threads
from ..tokenization_elmo import ElmoTokenizer
from . import build_vocab
from .arguments import COMMAND_LINE, DEFAULT_LEARNING_RATE, PROG, PretrainingArguments
from .checkpoints import TRAINER_STATE_NAME, check_checkpoint_files, resolve_checkpoint, saved_state
from .evaluation import evaluate_perplexity
from .memory import check_training_memory
from .options import PretrainingOptions, read_pretraining_options
from .streams import LmStreamDataset

logger = logging.getLogger("elmo-pretrain")
VOCAB_FILE = "vocab.txt"
EVALUATION_ONLY = "evaluation only: no training (--do_train False)"


class PretrainingError(ToolInputError, ValueError):
    """A run that cannot start: inputs that disagree with each other."""


def options_training_defaults(options: PretrainingOptions, unroll_steps: int) -> list[str]:
    """TrainingArguments flags taken from options.json. bilm-tf clips the gradients of `loss * unroll_steps` to
    `all_clip_norm_val`; the Trainer clips those of the mean loss, so the same clipping is `all_clip_norm_val /
    unroll_steps`. The learning rate is AdamW's 1e-3 (the Trainer's optimizer; bilm-tf used Adagrad at 0.2)."""
    return [
        "--per_device_train_batch_size", str(options.batch_size),
        "--num_train_epochs", str(options.n_epochs),
        "--max_grad_norm", repr(options.all_clip_norm_val / unroll_steps),
        "--learning_rate", repr(DEFAULT_LEARNING_RATE),
        "--logging_steps", "50",
    ]  # fmt: skip


def parse_arguments(argv: list[str]) -> tuple[PretrainingArguments, TrainingArguments, PretrainingOptions]:
    """Parse the command line, with options.json's values as the defaults of the matching flags. Argument errors
    (an unknown flag, a value of the wrong type) stop with one line, exit status 2."""
    parser = COMMAND_LINE.parser()
    first, _ = parse_trainer_arguments(parser, argv)
    check_arguments(first)
    source = first.model_name_or_path
    if source is not None and missing_model_folder(source):
        raise PretrainingError(f"--model_name_or_path {source}: no ELMo model there ({NO_SUCH_FOLDER}).")
    options = read_pretraining_options(first.options)
    unroll_steps = first.unroll_steps if first.unroll_steps is not None else options.unroll_steps
    defaults = options_training_defaults(options, unroll_steps)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available():
        defaults += ["--use_cpu", "true"]  # the Trainer runs DDP on CPUs (gloo) only with use_cpu
    args, training_args = parse_trainer_arguments(parser, defaults + argv)
    if not given(argv, "--output_dir"):
        parser.error("--output_dir is required: the folder the trained model is written to.")
    if training_args.do_train is None:
        training_args.do_train = True
    return args, training_args, options


def _check_architecture(options: PretrainingOptions, config: ElmoConfig, source: str, options_path: str) -> None:
    for name in BILM_ARCHITECTURE_FIELDS:
        if getattr(options.config, name) != getattr(config, name):
            raise PretrainingError(
                f"{options_path} and {source} disagree on the architecture: {name} is "
                f"{getattr(options.config, name)!r} in the options, {getattr(config, name)!r} in the model."
            )


def _load_softmax(model: ElmoForPreTraining, path: str) -> None:
    """Copy bilm-tf's `softmax.hdf5` (`W` (vocab, dim), `b` (vocab,)) into the model's softmax."""
    softmax = read_softmax(path, PretrainingError)
    for name, parameter in (("W", model.softmax.weight), ("b", model.softmax.bias)):
        values = softmax[name]
        if values.shape != parameter.shape:
            raise PretrainingError(
                f"{path}: {name} has shape {tuple(values.shape)}, the model needs {tuple(parameter.shape)}."
            )
        if not torch.isfinite(values).all():
            raise PretrainingError(f"{path}: {name} holds NaN or infinite values.")
        with torch.no_grad():
            parameter.copy_(values)


def load_elmo_config(source: str | Path, what: str) -> ElmoConfig:
    """The `ElmoConfig` saved in `source` (a folder or Hub id), refusing a missing one or another model type."""
    try:
        config_dict, _ = ElmoConfig.get_config_dict(source)
    except OSError as error:
        raise PretrainingError(f"{what} {source}: no ELMo model there ({one_line(error, first=True)}).") from None
    model_type = config_dict.get("model_type")
    if model_type != ElmoConfig.model_type:
        raise PretrainingError(f"{what} {source} holds a {model_type!r} model, not an ELMo biLM ('elmo').")
    return ElmoConfig.from_pretrained(source)


def build_model(
    args: PretrainingArguments,
    options: PretrainingOptions,
    vocab: LmVocabulary,
    lm_overrides: dict,
    evaluation_only: bool = False,
) -> tuple[ElmoForPreTraining, bool]:
    """The model to train (or, `evaluation_only`, to evaluate: it must have a trained softmax) and whether its
    softmax starts fresh on a pretrained biLM. A quantized folder is refused for training, from its config before its
    weights load: continued pretraining trains the biLM, and a quantized biLM is frozen (its weights are buffers that
    no gradient reaches), so the run would train the softmax alone; it is evaluated as it is, saying so."""
    if args.model_name_or_path is None:
        config = ElmoConfig(**{**options.config.to_dict(), **lm_overrides})
        return ElmoForPreTraining(config), False
    source = args.model_name_or_path
    config = load_elmo_config(source, "--model_name_or_path")
    if (method := saved_quantization(config)) is not None:
        if not evaluation_only:
            raise PretrainingError(
                f"--model_name_or_path {source} holds a quantized biLM ({method!r}), which cannot be trained (its "
                "quantized layers are frozen): continued pretraining trains the biLM; give the float32 folder it was "
                "quantized from."
            )
        logger.info(f"{source} holds a quantized biLM ({method!r}): the perplexity is the quantized model's.")
    _check_architecture(options, config, source, args.options)
    has_softmax = "ElmoForPreTraining" in (config.architectures or [])
    if evaluation_only and not has_softmax and not args.softmax_file:
        raise PretrainingError(
            f"--do_train False: {source} has no softmax (an ElmoModel) to compute a perplexity with; give an "
            "ElmoForPreTraining folder or its bilm-tf softmax with --softmax_file."
        )
    if has_softmax:
        saved = Path(source) / VOCAB_FILE
        if not saved.is_file():
            raise PretrainingError(f"{source} holds a softmax but no {VOCAB_FILE}: its words are unknown.")
        if LmVocabulary.from_file(saved) != vocab:
            raise PretrainingError(
                f"{source} was trained with another vocabulary ({saved}) than {args.vocab_file}: its softmax rows "
                "would mean other words. Use its vocab.txt, or start from its biLM only (export it with "
                "AutoModel.from_pretrained(...).save_pretrained(...))."
            )
    try:
        model = ElmoForPreTraining.from_pretrained(source, **lm_overrides)
    except (OSError, ValueError, RuntimeError, SafetensorError) as error:
        raise PretrainingError(
            f"--model_name_or_path {source}: cannot load its weights ({one_line(error, first=True)})."
        ) from None
    if args.softmax_file:
        _load_softmax(model, args.softmax_file)
    return model, not has_softmax and not args.softmax_file


class SoftmaxWarmupCallback(TrainerCallback):
    """Drop the biLM's gradients (before the optimizer step, after clipping) for the first `steps` optimizer steps,
    so that a fresh softmax learns on a pretrained biLM before the biLM follows its gradients. Dropped (None)
    gradients leave the optimizer's state of those weights untouched, so AdamW starts them afresh afterwards."""

    def __init__(self, model: ElmoForPreTraining, steps: int):
        self.body_parameters = list(model.elmo.parameters())
        self.steps = steps

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if state.global_step < self.steps:
            for parameter in self.body_parameters:
                parameter.grad = None


class ElmoPretrainingTrainer(Trainer):
    """The `Trainer` for `ElmoForPreTraining`: the stream batches come ready-made from `LmStreamDataset` (one
    process reads them in order: a row of one batch continues in the same row of the next), every checkpoint keeps
    the vocabulary, and `evaluate()` computes the sentence-level perplexity of `eval_files` (see `evaluation.py`)."""

    def __init__(self, *args, vocab: LmVocabulary, eval_files: list[Path] | None, eval_batch_sentences: int, **kwargs):
        # `evaluate()` reads `eval_files` itself; the Trainer only needs to know that there is something to evaluate
        super().__init__(*args, eval_dataset=eval_files, **kwargs)
        self.vocab = vocab
        self.eval_files = eval_files
        self.eval_batch_sentences = eval_batch_sentences

    def get_train_dataloader(self) -> DataLoader:
        # batch_size=None: the dataset yields whole batches; not `accelerator.prepare`d, which would split or
        # dispatch them across processes: every process reads its own share of the corpus instead
        return DataLoader(self.train_dataset, batch_size=None, num_workers=0)

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval") -> dict[str, float]:
        if not self.eval_files:
            raise PretrainingError("Evaluation needs --eval_files.")
        metrics = evaluate_perplexity(
            self.accelerator.unwrap_model(self.model),
            self.eval_files,
            self.vocab,
            batch_size=self.eval_batch_sentences,
            rank=self.args.process_index,
            world_size=self.args.world_size,
            progress=not self.args.disable_tqdm and self.args.should_log,
        )
        metrics = {f"{metric_key_prefix}_{name}": value for name, value in metrics.items()}
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics

    def _stream_states_file(self, checkpoint: str) -> Path:
        return Path(checkpoint) / f"stream_states_{self.args.process_index}.pt"

    def _save_rng_state(self, output_dir: str) -> None:
        """With the random states, keep the LSTM states the streams have reached: a resumed run continues exactly."""
        super()._save_rng_state(output_dir)
        states = self.accelerator.unwrap_model(self.model).stream_states
        torch.save(states.layers, self._stream_states_file(output_dir))

    def _load_rng_state(self, checkpoint: str | None) -> None:
        super()._load_rng_state(checkpoint)
        if checkpoint is not None and self._stream_states_file(checkpoint).is_file():
            layers = torch.load(self._stream_states_file(checkpoint), map_location=self.args.device, weights_only=True)
            model = self.accelerator.unwrap_model(self.model)
            model.stream_states = ElmoLstmStates(model.config, layers)

    def _save_checkpoint(self, model, trial) -> None:
        """Save `checkpoint-N`, first removing the `trainer_state.json` of an older save under that name: a save
        killed midway then leaves a folder that reads as incomplete (see `checkpoints.py`)."""
        if self.args.should_save:  # the process that writes trainer_state.json, before it writes it
            checkpoint = Path(self._get_output_dir(trial=trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            (checkpoint / TRAINER_STATE_NAME).unlink(missing_ok=True)
        super()._save_checkpoint(model, trial)

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        super()._save(output_dir, state_dict)
        if self.args.should_save:
            self.vocab.save(Path(output_dir or self.args.output_dir) / VOCAB_FILE)


def _check_checkpoint(
    checkpoint: Path,
    options: PretrainingOptions,
    vocab: LmVocabulary,
    args: PretrainingArguments,
    batch_size: int,
    model: ElmoForPreTraining,
    rows: int,
) -> None:
    """Refuse a checkpoint of another run (another architecture, vocabulary or batch size: its carried LSTM states
    have one row per batch row) or with damaged files. Warn when it holds no carried states (the run then continues
    from zero states)."""
    config = load_elmo_config(checkpoint, "--resume_from_checkpoint")
    _check_architecture(options, config, f"the checkpoint {checkpoint}", args.options)
    saved = checkpoint / VOCAB_FILE
    if (saved.is_file() and LmVocabulary.from_file(saved) != vocab) or config.lm_vocab_size != len(vocab):
        raise PretrainingError(
            f"Cannot resume from {checkpoint}: it was trained with another vocabulary ({saved}) than "
            f"{args.vocab_file}."
        )
    saved_batch_size = saved_state(checkpoint).get("train_batch_size")
    if saved_batch_size is not None and saved_batch_size != batch_size:
        raise PretrainingError(
            f"Cannot resume from {checkpoint}: it was trained with {saved_batch_size} rows per batch, this run has "
            f"{batch_size} (--per_device_train_batch_size); the carried LSTM states have one row per batch row."
        )
    shapes = {name: tuple(parameter.shape) for name, parameter in model.named_parameters()}
    check_checkpoint_files(checkpoint, shapes, layers=model.config.num_hidden_layers, rows=rows)
    if not list(checkpoint.glob("stream_states_*.pt")):
        logger.warning(
            f"{checkpoint} holds no stream_states_*.pt: the LSTM states restart from zero, so the resumed run is not "
            "the exact continuation of the saved one."
        )


def check_arguments(args: PretrainingArguments) -> None:
    """Refuse flag values out of range (argparse checks only their types), naming the flag."""
    for flag, value, minimum in (
        ("--unroll_steps", args.unroll_steps, 1),
        ("--n_negative_samples_batch", args.n_negative_samples_batch, 1),
        ("--softmax_warmup_steps", args.softmax_warmup_steps, 0),
        ("--eval_batch_sentences", args.eval_batch_sentences, 1),
    ):
        if value is not None and value < minimum:
            raise PretrainingError(f"{flag} must be an integer >= {minimum}, got {value}.")
    if args.dropout is not None and not 0 <= args.dropout < 1:  # also refuses NaN
        raise PretrainingError(f"--dropout must be in [0, 1), got {args.dropout}.")


def check_training_arguments(training_args: TrainingArguments) -> None:
    """Refuse `TrainingArguments` values the Trainer accepts but that would fail later, or train nothing or garbage
    silently (see `commands.arguments.TRAINING_ARGUMENT_RULES`)."""
    problem = training_arguments_problem(training_args)
    if problem:
        raise PretrainingError(problem)


def check_run_mode(args: PretrainingArguments, training_args: TrainingArguments) -> None:
    """A training run needs `--train_files`; an evaluation-only run (`--do_train False`) needs a saved model with its
    softmax and something to evaluate."""
    if training_args.do_train:
        if not args.train_files:
            raise PretrainingError("--train_files is required to train (or pass --do_train False to evaluate only).")
        return
    if not training_args.do_eval:
        raise PretrainingError("--do_train False: nothing to do; add --do_eval --eval_files to evaluate a model.")
    if args.model_name_or_path is None:
        raise PretrainingError("--do_train False evaluates a saved model: give it with --model_name_or_path.")
    if training_args.resume_from_checkpoint:
        raise PretrainingError("--resume_from_checkpoint continues training; it cannot go with --do_train False.")


def _trained_positions(state_steps: int, training_args: TrainingArguments, unroll_steps: int) -> int:
    """Input positions the optimizer steps done saw: steps x batch x unroll x accumulation x processes."""
    per_step = training_args.per_device_train_batch_size * unroll_steps * training_args.gradient_accumulation_steps
    return state_steps * per_step * training_args.world_size


def _check_finite(model: ElmoForPreTraining, step: int) -> None:
    if not all(torch.isfinite(parameter).all() for parameter in model.parameters()):
        raise PretrainingError(
            f"Training diverged: the weights hold NaN or infinite values after step {step}; the model was not saved "
            "(lower --learning_rate or --max_grad_norm)."
        )


def _check_output_dir(output_dir: str, resumed_checkpoint: Path | None) -> None:
    """A new or empty `--output_dir` that can be written, or the folder of the run being resumed, holding nothing its
    record does not list: a second run never writes over a first one's files (Transformers 5 has no
    `--overwrite_output_dir`)."""
    resuming_here = (
        resumed_checkpoint is not None and resumed_checkpoint.absolute().parent == Path(output_dir).absolute()
    )
    if resuming_here:
        refusal = f"holds files that {PROG} did not write ({{shown}}); move them away to resume the run saved there."
        check_run_folder(output_dir, lambda folder: foreign_run_entries(folder, PROG, earlier_runs=True), refusal)
    else:
        refusal = "is not empty (it holds {shown}); choose a new folder, or continue the run saved there with "
        refusal += "--resume_from_checkpoint last."
        check_run_folder(output_dir, lambda folder: unlisted_entries(folder, None), refusal)


def run(args: PretrainingArguments, training_args: TrainingArguments, options: PretrainingOptions) -> dict:
    """Train (unless `--do_train False`) and evaluate; returns the final metrics."""
    training = training_args.do_train
    if not training:
        logger.info(EVALUATION_ONLY)
    check_arguments(args)
    check_training_arguments(training_args)
    check_run_mode(args, training_args)
    checkpoint = resolve_checkpoint(training_args.resume_from_checkpoint, training_args.output_dir)
    _check_output_dir(training_args.output_dir, checkpoint)
    with run_output_dir_lock(training_args, PROG):  # claimed before any other work: one run per --output_dir
        _check_output_dir(training_args.output_dir, checkpoint)  # again, claimed: a run may have written there since
        return _train_claimed(args, training_args, options, checkpoint)


def _train_claimed(
    args: PretrainingArguments, training_args: TrainingArguments, options: PretrainingOptions, checkpoint: Path | None
) -> dict:
    """`run` once the `--output_dir` is claimed: the inputs, the model and the Trainer; the final metrics."""
    training = training_args.do_train
    vocab = LmVocabulary.from_file(args.vocab_file)
    vocab.check_size(options.n_tokens_vocab, args.options)
    train_files = resolve_corpus_files(args.train_files, "--train_files") if training else None
    eval_files = resolve_corpus_files(args.eval_files, "--eval_files") if args.eval_files else None
    if (training_args.do_eval or training_args.eval_strategy != "no") and not eval_files:
        raise PretrainingError("--do_eval and --eval_strategy need --eval_files.")
    if eval_files:
        count_positions(eval_files, progress=False)  # refuses an empty or undecodable held-out set before training
    if training_args.dataloader_num_workers:
        logger.warning("The stream batches are read in order by one process: --dataloader_num_workers is ignored.")
    unroll_steps = args.unroll_steps if args.unroll_steps is not None else options.unroll_steps
    negatives = args.n_negative_samples_batch or options.n_negative_samples_batch
    sampled = not args.full_softmax and options.sample_softmax
    if sampled and negatives > len(vocab):
        raise PretrainingError(
            f"--n_negative_samples_batch {negatives} is larger than the vocabulary ({len(vocab)} tokens in "
            f"{args.vocab_file}): the sampled softmax draws them from the vocabulary; give at most {len(vocab)}, or "
            "--full_softmax true."
        )
    lm_overrides = {
        "lm_vocab_size": len(vocab),
        "lm_dropout": options.dropout if args.dropout is None else args.dropout,
        "lm_num_negative_samples": negatives if sampled else None,
    }
    batch_size = training_args.per_device_train_batch_size
    world_size = training_args.world_size
    if training:
        config = ElmoConfig(**{**options.config.to_dict(), **lm_overrides})
        check_training_memory(config, batch_size, unroll_steps, training_args.device)
    set_seed(training_args.seed)
    model, fresh_softmax = build_model(args, options, vocab, lm_overrides, evaluation_only=not training)
    if checkpoint is not None:
        _check_checkpoint(checkpoint, options, vocab, args, training_args.train_batch_size, model, batch_size)
    positions = options.n_train_tokens  # the corpus size, as bilm-tf counts it; counted only when needed
    dataset = None
    if training:
        if training_args.max_steps <= 0:
            positions = positions or count_positions(train_files, progress=training_args.should_log)
            per_step = batch_size * unroll_steps * world_size * training_args.gradient_accumulation_steps
            training_args.max_steps = max(1, math.ceil(training_args.num_train_epochs * positions / per_step))
            logger.info(
                f"{positions:,} positions x {training_args.num_train_epochs} epochs: {training_args.max_steps:,} steps"
            )
        dataset = LmStreamDataset(
            train_files,
            vocab,
            batch_size=batch_size,
            unroll_steps=unroll_steps,
            max_characters_per_token=model.config.max_characters_per_token,
            rank=training_args.process_index,
            world_size=world_size,
            seed=training_args.seed,
        )
    warmup = args.softmax_warmup_steps
    if warmup is None:
        warmup = min(1000, training_args.max_steps // 10) if fresh_softmax else 0
    main_process = training_args.process_index == 0
    if main_process:  # every input checked: the run starts in its folder
        claim_run_folder(training_args.output_dir, PROG)
    trainer = ElmoPretrainingTrainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        processing_class=ElmoTokenizer(max_characters_per_token=model.config.max_characters_per_token),
        callbacks=[SoftmaxWarmupCallback(model, warmup)] if warmup and training else None,
        vocab=vocab,
        eval_files=eval_files,
        eval_batch_sentences=args.eval_batch_sentences,
    )
    metrics: dict = {}
    if training:
        result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        _check_finite(trainer.accelerator.unwrap_model(trainer.model), trainer.state.global_step)
        trainer.save_model()
        trainer.save_state()  # trainer_state.json: the loss and perplexity curves
        metrics.update(result.metrics)
        trainer.save_metrics("train", result.metrics)
    if training_args.do_eval:
        evaluation = trainer.evaluate()
        trainer.save_metrics("eval", evaluation)
        metrics.update(evaluation)
    if training and training_args.should_save:
        card = render_pretrained_model_card(
            trainer.accelerator.unwrap_model(trainer.model).config,
            options=options.to_dict(),
            corpus_files=[str(path) for path in train_files],
            corpus_positions=positions,
            train_steps=trainer.state.global_step,
            train_positions=_trained_positions(trainer.state.global_step, training_args, unroll_steps),
            metrics=metrics,
        )
        (Path(training_args.output_dir) / "README.md").write_text(card, encoding="utf-8")
    if main_process:
        seal_run_folder(training_args.output_dir, PROG)
    return metrics


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the command: this process is its own
        configure_cpu_threads()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["build-vocab"]:
        return build_vocab.main(argv[1:])
    logging.basicConfig(format="%(asctime)s %(name)s: %(message)s", level=logging.INFO)
    try:
        args, training_args, options = parse_arguments(argv)
        metrics = run(args, training_args, options)
    except ElmoConfigError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except ToolError as error:
        return report(PROG, error)
    if metrics and int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps(metrics, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
