"""How `elmo-train-classifier`'s defaults were chosen (issue 31, item 7): head (pooling, dropout) and recipe (learning
rate, schedule, epochs) on SST-2 and SST-5 with the biLM of `benchmarks/pretrain_quality.py`, several seeds, picked
on dev, the chosen settings reported once on test; a logistic-regression baseline on the same pooled layers; the
small separable set of the tests on the fixture biLM.

    python benchmarks/pretrain_quality.py --work_dir work/clf/bilm --steps prepare,vocab,options,pretrain,random \
        --data_dir ../shared/data/conll2003
    elmo-train-classifier prepare-sst --data_dir ../shared/data/sst --output_dir work/clf/data/sst2 --binary
    elmo-train-classifier prepare-sst --data_dir ../shared/data/sst --output_dir work/clf/data/sst5
    python benchmarks/classifier_defaults_study.py --bilm work/clf/bilm/pretrained --data_dir work/clf/data \
        --work_dir work/clf/study --fixture_model work/clf/tiny \
        --steps features,baseline,grid,final,sizes,separable,report

(work/clf/tiny: the fixture biLM of ../shared/fixtures/elmo converted with `elmo-convert`.)

Frozen runs are cheap: `features` runs the biLM once per distinct sentence (as the activation cache does) and keeps
its layers; every head is then trained in this process on those layers with the model's own head modules
(`ElmoForSequenceClassification`'s scalar mix or concatenated layers, dropout, pooler, batch norm and linear layer)
and the `Trainer`'s optimisation (AdamW with its weight decay groups, learning-rate schedules, gradient clipping at
1.0, a freshly shuffled order each epoch). Dev picks;
test is computed only in `final` (the chosen settings) and `baseline` (the chosen L2 strength).

Steps:
  features   biLM layers of every sentence of the SST-2 and SST-5 files -> WORK/features.pt
  baseline   scikit-learn logistic regression (L2, C picked on dev) on the pooled layers (mean, mean+max)
  lbfgs      the command's default fit (`--head_fit lbfgs`: `modeling_elmo.classification.head_fit.fit_head` on the
             pooled layers, written into the model, scored by the model's forward on the words), C picked on dev and,
             as without a validation file, on 10% of train held out: every seed, dev and test
  lbfgs_sizes  SST training subsets of --sizes and all (one draw per seed): the lbfgs fit and the AdamW recipe
             (--final), dev and test
  converged  the baseline's chosen C (`baseline` rows) run to scikit-learn's tolerance 1e-4 and 1e-8 and by
             `fit_head`, on the same float64 standardised features: penalised objective, dev and test
  grid       the centre (--centre) and changes to it (VARIANTS: head and recipe), every seed, dev only; settings
             with mean pooling and no dropout train on the mean-pooled layers (the same outputs, far cheaper)
  final      the settings given by --final (the defaults) on every seed, on the words: dev and test
  sizes      the final settings and alternatives on SST-2 training subsets (dev only)
  separable  the separable set of the tests on the fixture biLM: the final settings, the old defaults, the lbfgs fit
             and logistic regression
  finetune   elmo-train-classifier --freeze_elmo False runs (their own processes), a small grid: see --finetune_*
  report     Markdown tables from WORK/results.jsonl
Every run appends one JSON line to WORK/results.jsonl (a step run again adds rows; `report` keeps the last row of
each run).
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import product
from pathlib import Path

import torch
from transformers import AutoConfig, AutoTokenizer, Trainer, get_scheduler

from modeling_elmo import ElmoForSequenceClassification
from modeling_elmo.classification.defaults import NEW_HEAD_DEFAULTS
from modeling_elmo.classification.head_fit import (
    class_logits,
    fit_head,
    fit_logistic_regression,
    penalised_loss,
    write_head,
)

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "classification"))
from separable_sentences import separable_sentences  # noqa: E402  (the tests' set, built the same way)

TASKS = ("sst2", "sst5")
SPLITS = ("train", "validation", "test")
# the recipe of the command before this study: the Trainer's defaults and the config's head
OLD_DEFAULTS = {
    "pooling": "mean_max", "dropout": 0.5, "lr": 5e-5, "epochs": 3, "schedule": "linear", "warmup": 0.0, "batch": 8,
    "batch_norm": 0.0, "concat": 0.0, "weight_decay": 0.0,
}  # fmt: skip


# the grid: changes to the candidate (--final), one at a time
VARIANTS = [
    {},
    {"concat": 0.0},
    {"lr": 1e-3},
    {"lr": 1e-2},
    {"epochs": 20},
    {"epochs": 40},
    {"weight_decay": 0.01},
    {"weight_decay": 0.1},
    {"weight_decay": 1.0},
    {"batch_norm": 0.0},
    {"batch": 64},
    {"schedule": "constant"},
    {"epochs": 20, "weight_decay": 0.1},
    {"epochs": 40, "weight_decay": 0.1},
    {"lr": 1e-2, "weight_decay": 0.1},
    {"batch": 64, "epochs": 20},
    {"batch": 64, "epochs": 40},
    {"batch": 64, "epochs": 20, "weight_decay": 0.1},
    {"batch": 64, "epochs": 20, "lr": 1e-2},
    {"batch": 128, "epochs": 40, "lr": 1e-2},
    {"batch": 64, "epochs": 20, "weight_decay": 1.0},
    {"batch": 64, "epochs": 20, "weight_decay": 3.0},
    {"batch": 64, "epochs": 20, "weight_decay": 10.0},
    {"weight_decay": 3.0},
    {"weight_decay": 10.0},
    {"lr": 1e-2, "batch": 64, "epochs": 40},
    {"lr": 1e-2, "batch": 64, "epochs": 40, "weight_decay": 0.1},
    {"lr": 1e-2, "batch": 256, "epochs": 40},
    {"lr": 1e-2, "batch": 64, "epochs": 80},
    {"pooling": "mean_max"},
    {"dropout": 0.2},
    {"pooling": "max"},
    OLD_DEFAULTS,
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bilm", type=Path, required=True, help="the pretrained biLM folder")
    parser.add_argument("--data_dir", type=Path, required=True, help="prepare-sst outputs: DIR/sst2, DIR/sst5")
    parser.add_argument("--work_dir", type=Path, default=Path(tempfile.gettempdir()) / "elmo-clf-study")
    parser.add_argument("--fixture_model", type=Path, default=None, help="the fixture biLM converted (separable)")
    parser.add_argument("--steps", default="features,baseline,grid,final,sizes,separable,report")
    parser.add_argument("--tasks", default="sst2,sst5")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--centre",
        default="pooling=mean,dropout=0,lr=3e-3,epochs=10,schedule=linear,warmup=0.1,batch=32,batch_norm=1,concat=1",
        help="the settings the grid changes (VARIANTS)",
    )
    parser.add_argument(
        "--final",
        default=(
            "pooling=mean,dropout=0,lr=3e-3,epochs=20,schedule=linear,warmup=0.1,batch=64,batch_norm=1,concat=1,"
            "weight_decay=0.1"
        ),
        help="the chosen settings (the defaults) of final, sizes and separable",
    )
    parser.add_argument("--variants", default=None, help="grid: only these changes, e.g. 'candidate;lr 0.003'")
    parser.add_argument("--strengths", default="0.001,0.01,0.1,1", help="logistic regression: C values tried on dev")
    parser.add_argument("--sizes", default="200,1000,3000", help="SST training subsets of the sizes steps")
    parser.add_argument("--sizes_epochs", default="10,30", help="epochs of the sizes step")
    parser.add_argument("--finetune_lr", default="1e-3,3e-3")
    parser.add_argument("--finetune_epochs", type=float, default=2)
    parser.add_argument("--finetune_train_samples", type=int, default=500)
    parser.add_argument("--finetune_tasks", default="sst2")
    args = parser.parse_args(argv)
    args.steps = [step.strip() for step in args.steps.split(",") if step.strip()]
    args.tasks = [task for task in args.tasks.split(",") if task]
    args.seeds = [int(seed) for seed in args.seeds.split(",")]
    args.centre, args.final = parse_settings(args.centre), parse_settings(args.final)
    args.strengths = [float(value) for value in args.strengths.split(",")]
    return args


def parse_settings(text: str) -> dict:
    settings = dict(OLD_DEFAULTS)
    for item in text.split(","):
        name, value = item.split("=")
        settings[name] = value if name in ("pooling", "schedule") else float(value)
    settings["epochs"], settings["batch"] = int(settings["epochs"]), int(settings["batch"])
    return settings


# features


def read_split(data_dir: Path, task: str, split: str) -> tuple[list[tuple[str, ...]], list[int]]:
    sentences, labels = [], []
    with open(data_dir / task / f"{split}.jsonl", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            sentences.append(tuple(record["sentence"]))
            labels.append(int(record["label"]))
    return sentences, labels


@torch.no_grad()
def bilm_layers(model_dir: Path, sentences: list[tuple[str, ...]], batch_size: int = 64) -> dict:
    """sentence -> its biLM layers (num_layers, words, dim), as the activation cache holds them."""
    model = ElmoForSequenceClassification.from_pretrained(model_dir, num_labels=2).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    distinct = sorted(set(sentences), key=len)
    layers = {}
    for start in range(0, len(distinct), batch_size):
        batch = distinct[start : start + batch_size]
        encoding = tokenizer(
            [list(words) for words in batch], is_split_into_words=True, padding=True, return_tensors="pt"
        )
        mask = encoding["attention_mask"].bool()
        stacked = torch.stack(model.elmo_layers(encoding["input_ids"], encoding["attention_mask"]))
        for row, words in enumerate(batch):
            layers[words] = stacked[:, row, mask[row]].contiguous()
    return layers


def features_step(args: argparse.Namespace) -> None:
    splits = {(task, split): read_split(args.data_dir, task, split) for task in TASKS for split in SPLITS}
    everything = [words for sentences, _ in splits.values() for words in sentences]
    start = time.monotonic()
    layers = bilm_layers(args.bilm, everything)
    seconds = time.monotonic() - start
    print(f"[features] {len(layers):,} distinct sentences in {seconds:.0f} s", flush=True)
    torch.save({"layers": layers, "splits": splits, "seconds": seconds}, args.work_dir / "features.pt")


class Data:
    """One task's splits: per sentence its layers (num_layers, words, dim), and the labels."""

    def __init__(self, layers: dict, splits: dict, task: str):
        self.task = task
        self.sets = {}
        for split in SPLITS:
            sentences, labels = splits[(task, split)]
            self.sets[split] = ([layers[words] for words in sentences], torch.tensor(labels))
        self.num_labels = int(self.sets["train"][1].max()) + 1

    def mean_pooled(self) -> "Data":
        """Every sentence's layers replaced by their mean over its words, as a one-word sentence (num_layers, 1,
        dim): for a head with mean pooling and no dropout, the model's forward gives the same logits (the scalar mix
        and the per-layer pooling are linear in the words), at a fraction of the cost."""
        copy = object.__new__(Data)
        copy.task, copy.num_labels = self.task, self.num_labels
        copy.sets = {
            split: ([item.mean(dim=1, keepdim=True) for item in items], labels)
            for split, (items, labels) in self.sets.items()
        }
        return copy

    def subset(self, count: int, seed: int) -> "Data":
        """The first `count` training sentences after a seeded shuffle (as --shuffle_train_dataset)."""
        copy = object.__new__(Data)
        copy.task, copy.num_labels, copy.sets = self.task, self.num_labels, dict(self.sets)
        order = torch.randperm(len(self.sets["train"][1]), generator=torch.Generator().manual_seed(seed))[:count]
        items, labels = self.sets["train"]
        copy.sets["train"] = ([items[index] for index in order.tolist()], labels[order])
        return copy


def load_data(args: argparse.Namespace) -> dict[str, Data]:
    saved = torch.load(args.work_dir / "features.pt", weights_only=False)
    return {task: Data(saved["layers"], saved["splits"], task) for task in args.tasks}


def pad(items: list[torch.Tensor]) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """Per-sentence layers (L, words, D) -> L tensors (batch, max words, D), zero at padding, and the word mask."""
    lengths = [item.shape[1] for item in items]
    batch = items[0].new_zeros(items[0].shape[0], len(items), max(lengths), items[0].shape[-1])
    mask = torch.zeros(len(items), max(lengths), dtype=torch.bool)
    for row, (item, length) in enumerate(zip(items, lengths, strict=True)):
        batch[:, row, :length] = item
        mask[row, :length] = True
    return tuple(batch.unbind(0)), mask


# the head, trained on the layers


class GivenLayers:
    """Stands in for the activation cache: `contextual_layers` returns the layers set in `batch`, so the model's own
    `forward` (mix, dropout, pooling, normalisation, linear layer, loss) runs on precomputed layers."""

    def __init__(self):
        self.batch: tuple[torch.Tensor, ...] = ()

    def layers(self, model, input_ids, attention_mask) -> tuple[torch.Tensor, ...]:
        return self.batch


def head_output(model, layers: tuple[torch.Tensor, ...], mask: torch.Tensor, labels: torch.Tensor | None = None):
    """`model(...)` on the biLM layers of a batch (single texts); the character ids are never read."""
    model.activation_cache.batch = layers
    placeholder_ids = torch.zeros(*mask.shape, 1, dtype=torch.long)
    return model(input_ids=placeholder_ids, attention_mask=mask.long(), labels=labels)


@torch.no_grad()
def accuracy(model, items: list[torch.Tensor], labels: torch.Tensor, batch_size: int = 256) -> float:
    model.eval()
    correct = 0
    for start in range(0, len(items), batch_size):
        layers, mask = pad(items[start : start + batch_size])
        logits = head_output(model, layers, mask).logits
        correct += int((logits.argmax(-1) == labels[start : start + batch_size]).sum())
    return correct / len(items)


def train_head(config, data: Data, settings: dict, seed: int, splits=("validation",)) -> dict:
    """Train the head with `settings` (pooling, dropout, lr, epochs, schedule, warmup, batch) as the Trainer would;
    returns accuracies on `splits` and the seconds it took."""
    start = time.monotonic()
    torch.manual_seed(seed)
    config = type(config).from_dict(
        {
            **config.to_dict(),
            "classifier_pooling": settings["pooling"],
            "classifier_dropout": settings["dropout"],
            "classifier_batch_norm": bool(settings.get("batch_norm", False)),
            "classifier_concat_layers": bool(settings.get("concat", False)),
            "scalar_mix_layer_norm": bool(settings.get("layer_norm", False)),
        }
    )
    config.num_labels = data.num_labels
    model = ElmoForSequenceClassification(config)
    model.activation_cache = GivenLayers()
    trained = {name: parameter for name, parameter in model.named_parameters() if parameter.requires_grad}
    parameters = list(trained.values())
    decayed = set(Trainer.get_decay_parameter_names(None, model))  # as the Trainer: no decay on biases and norms
    groups = [
        {"params": [trained[name] for name in trained if name in decayed]},
        {"params": [trained[name] for name in trained if name not in decayed], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=settings["lr"], weight_decay=settings.get("weight_decay", 0.0))
    items, labels = data.sets["train"]
    steps_per_epoch = -(-len(items) // settings["batch"])
    total = steps_per_epoch * settings["epochs"]
    schedule = get_scheduler(
        settings["schedule"]
        if settings["warmup"] == 0 or settings["schedule"] != "constant"
        else "constant_with_warmup",
        optimizer,
        num_warmup_steps=math.ceil(settings["warmup"] * total),  # as TrainingArguments.get_warmup_steps
        num_training_steps=total,
    )
    order_generator = torch.Generator().manual_seed(seed)
    for _ in range(settings["epochs"]):
        model.train()
        order = torch.randperm(len(items), generator=order_generator).tolist()
        for begin in range(0, len(order), settings["batch"]):
            rows = order[begin : begin + settings["batch"]]
            layers, mask = pad([items[row] for row in rows])
            head_output(model, layers, mask, labels[rows]).loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
    scores = {split: accuracy(model, *data.sets[split]) for split in splits}
    return {**scores, "seconds": round(time.monotonic() - start, 1)}


def record(args: argparse.Namespace, row: dict) -> None:
    with open(args.work_dir / "results.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


def run_settings(args, stage: str, config, data: Data, settings: dict, splits=("validation",), **extra) -> None:
    for seed in args.seeds:
        scores = train_head(config, data, settings, seed, splits)
        record(args, {"stage": stage, "task": data.task, **extra, **settings, "seed": seed, **scores})


def grid_step(args, config, datasets: dict[str, Data]) -> None:
    """One change at a time around `--centre`, most informative first (results are kept as they come). Settings with
    mean pooling and no dropout train on the mean-pooled layers (`Data.mean_pooled`, the same model outputs)."""
    wanted = args.variants.split(";") if args.variants else [describe(change) for change in VARIANTS]
    for task in args.tasks:
        pooled = datasets[task].mean_pooled()
        for change in (change for change in VARIANTS if describe(change) in wanted):
            settings = {**args.centre, **change}
            data = pooled if pools_exactly(settings) else datasets[task]
            run_settings(args, "grid", config, data, settings, change=describe(change), mean_pooled=data is pooled)


def pools_exactly(settings: dict) -> bool:
    """Whether a head with `settings` gives the same outputs on `Data.mean_pooled` as on the words."""
    return settings["pooling"] == "mean" and settings["dropout"] == 0


def describe(change: dict) -> str:
    if change == OLD_DEFAULTS:
        return "old defaults"
    return ", ".join(f"{name} {value}" for name, value in change.items()) or "candidate"


def sizes_step(args, config, datasets: dict[str, Data]) -> None:
    for task in args.tasks:
        for count in [int(value) for value in args.sizes.split(",")]:
            subset = datasets[task].subset(count, seed=0)
            pooled = subset.mean_pooled() if pools_exactly(args.final) else subset
            for epochs in [int(value) for value in args.sizes_epochs.split(",")]:
                settings = {**args.final, "epochs": epochs}
                run_settings(
                    args, "sizes", config, pooled, settings, train_size=count, mean_pooled=pooled is not subset
                )


# the command's default fit (--head_fit lbfgs)


def default_head_model(config, num_labels: int) -> ElmoForSequenceClassification:
    """A new head as the command builds it (`NEW_HEAD_DEFAULTS`), reading the layers given to it."""
    config = type(config).from_dict({**config.to_dict(), **NEW_HEAD_DEFAULTS})
    config.num_labels = num_labels
    model = ElmoForSequenceClassification(config).eval()
    model.activation_cache = GivenLayers()
    return model


def lbfgs_run(config, data: Data, seed: int, on_dev: bool) -> dict:
    """`fit_head` on the mean-pooled layers (the features the model's batch norm reads: every layer's mean over the
    words, concatenated), C picked on dev (`on_dev`) or on 10% of train held out with `seed`; the head written into
    the model, whose forward on the words gives the accuracies."""
    start = time.monotonic()
    model = default_head_model(config, data.num_labels)
    features = {split: torch.from_numpy(pooled(data.sets[split][0], "mean")) for split in SPLITS}
    labels = {split: data.sets[split][1] for split in SPLITS}
    pick = (features["validation"], labels["validation"]) if on_dev else None
    result = fit_head(features["train"], labels["train"], data.num_labels, model.feature_norm.eps, pick, seed)
    write_head(model, result.head)
    scores = {split: accuracy(model, *data.sets[split]) for split in ("validation", "test")}
    return {
        "C": result.strength,
        "picked_on": "dev" if on_dev else "held-out 10% of train",
        "pick_accuracies": {f"{strength:g}": value for strength, value in result.accuracies.items()},
        "train": accuracy(model, *data.sets["train"]),
        **scores,
        "seconds": round(time.monotonic() - start, 1),
    }


def lbfgs_step(args, config, datasets: dict[str, Data]) -> None:
    for task, seed, on_dev in product(args.tasks, args.seeds, (True, False)):
        record(args, {"stage": "lbfgs", "task": task, "seed": seed, **lbfgs_run(config, datasets[task], seed, on_dev)})


def lbfgs_sizes_step(args, config, datasets: dict[str, Data]) -> None:
    """Per size and seed one seeded draw of the training set (the seed varies the draw; "all": the whole set): the
    lbfgs fit (C on dev) and the AdamW recipe of --final on the same sentences."""
    for task in args.tasks:
        counts = [int(value) for value in args.sizes.split(",")] + [len(datasets[task].sets["train"][1])]
        for count, seed in product(counts, args.seeds):
            subset = datasets[task].subset(count, seed)
            extra = {"stage": "lbfgs_sizes", "task": task, "train_size": count, "seed": seed}
            record(args, {**extra, "fit": "lbfgs", **lbfgs_run(config, subset, seed, on_dev=True)})
            scores = train_head(config, subset.mean_pooled(), args.final, seed, ("validation", "test"))
            record(args, {**extra, "fit": "adamw", **args.final, **scores})


# logistic regression on pooled layers


def pooled(items: list[torch.Tensor], kind: str) -> "numpy.ndarray":  # noqa: F821
    """Every layer mean-pooled (kind "mean") or mean- and max-pooled ("mean_max"), concatenated."""
    rows = []
    for item in items:
        parts = [item.mean(dim=1)] + ([item.amax(dim=1)] if kind == "mean_max" else [])
        rows.append(torch.cat(parts, dim=-1).reshape(-1))
    return torch.stack(rows).numpy()


def logistic_regression(data: Data, strengths: list[float]) -> list[dict]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rows = []
    for kind in ("mean", "mean_max"):
        features = {split: pooled(data.sets[split][0], kind) for split in SPLITS}
        labels = {split: data.sets[split][1].numpy() for split in SPLITS}
        best = None
        for strength in strengths:
            start = time.monotonic()
            model = make_pipeline(StandardScaler(), LogisticRegression(C=strength, max_iter=1000))
            model.fit(features["train"], labels["train"])
            dev = model.score(features["validation"], labels["validation"])
            rows.append({"features": kind, "C": strength, "validation": dev, "seconds": time.monotonic() - start})
            if best is None or dev > best[0]:
                best = (dev, model)
        rows[-len(strengths) :] = [{**row, "chosen": row["validation"] == best[0]} for row in rows[-len(strengths) :]]
        chosen = next(row for row in rows[-len(strengths) :] if row["chosen"])
        chosen["test"] = best[1].score(features["test"], labels["test"])
    return rows


def converged_step(args, datasets: dict[str, Data]) -> None:
    """Whether the bar and the lbfgs fit differ by their optimum or by scikit-learn's stopping: the objective
    (mean cross-entropy + |W|^2 / (2 C n)) each reaches at the C the baseline chose on dev."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    rows = [json.loads(line) for line in (args.work_dir / "results.jsonl").read_text().splitlines()]
    for task in args.tasks:
        data = datasets[task]
        strength = next(
            row["C"]
            for row in reversed(rows)
            if row["stage"] == "baseline" and row["task"] == task and row["features"] == "mean" and row["chosen"]
        )
        features = {split: pooled(data.sets[split][0], "mean").astype("float64") for split in SPLITS}
        labels = {split: data.sets[split][1].numpy() for split in SPLITS}
        scaler = StandardScaler().fit(features["train"])
        standardised = {split: torch.from_numpy(scaler.transform(features[split])) for split in SPLITS}
        fits = {}
        for tolerance in (1e-4, 1e-8):
            model = LogisticRegression(C=strength, tol=tolerance, max_iter=100_000)
            model.fit(standardised["train"].numpy(), labels["train"])
            weight = torch.from_numpy(model.coef_)
            fits[f"scikit-learn tol {tolerance:g}"] = torch.cat(
                [weight, torch.from_numpy(model.intercept_)[:, None]], 1
            )
        fits["fit_head"] = fit_logistic_regression(
            standardised["train"], data.sets["train"][1], data.num_labels, strength
        )
        for name, parameters in fits.items():
            scores = {
                split: float(
                    (class_logits(parameters, standardised[split]).argmax(-1).numpy() == labels[split]).mean()
                )
                for split in ("validation", "test")
            }
            objective = float(penalised_loss(parameters, standardised["train"], data.sets["train"][1], strength))
            record(
                args,
                {"stage": "converged", "task": task, "fit": name, "C": strength, "objective": objective, **scores},
            )


def baseline_step(args, datasets: dict[str, Data]) -> None:
    for task in args.tasks:
        for row in logistic_regression(datasets[task], args.strengths):
            record(args, {"stage": "baseline", "task": task, **row})


# the separable set on the fixture biLM


def separable_step(args) -> None:
    if args.fixture_model is None:
        sys.exit("separable: give --fixture_model (the fixture biLM converted with elmo-convert)")
    train, dev, test = (separable_sentences(200, seed=seed) for seed in (0, 1, 2))
    sentences = [tuple(record["sentence"]) for record in train + dev + test]
    layers = bilm_layers(args.fixture_model, sentences)
    splits = {}
    for split, records in (("train", train), ("validation", dev), ("test", test)):
        splits[("separable", split)] = (
            [tuple(record["sentence"]) for record in records],
            [int(record["label"] == "pos") for record in records],
        )
    data = Data(layers, splits, "separable")
    config = AutoConfig.from_pretrained(args.fixture_model)
    for name, settings in (("new defaults", args.final), ("old defaults", OLD_DEFAULTS)):
        run_settings(args, "separable", config, data, settings, splits=("validation", "test"), setting=name)
    for seed, on_dev in product(args.seeds, (True, False)):
        record(args, {"stage": "lbfgs", "task": "separable", "seed": seed, **lbfgs_run(config, data, seed, on_dev)})
    for row in logistic_regression(data, args.strengths):
        record(args, {"stage": "separable-baseline", "task": "separable", **row})


# fine-tuned runs, with the command


def finetune_step(args) -> None:
    for task, rate, seed in product(args.finetune_tasks.split(","), args.finetune_lr.split(","), args.seeds):
        output = args.work_dir / "finetune" / f"{task}-lr{rate}-seed{seed}"
        command = [
            str(Path(sys.executable).parent / "elmo-train-classifier"),
            "--model_name_or_path", str(args.bilm),
            "--output_dir", str(output),
            "--train_file", str(args.data_dir / task / "train.jsonl"),
            "--validation_file", str(args.data_dir / task / "validation.jsonl"),
            "--do_train", "--do_eval",
            "--freeze_elmo", "False",
            "--shuffle_train_dataset", "True",
            "--max_train_samples", str(args.finetune_train_samples),
            "--num_train_epochs", f"{args.finetune_epochs:g}",
            "--learning_rate", rate,
            "--seed", str(seed),
            "--save_strategy", "no",
            "--report_to", "none",
            "--disable_tqdm", "True",
        ]  # fmt: skip
        environment = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "OMP_WAIT_POLICY": "PASSIVE"}
        start = time.monotonic()
        log = args.work_dir / "finetune" / f"{output.name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w", encoding="utf-8") as handle:
            result = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=environment)
        if result.returncode != 0:
            sys.exit(f"[finetune] {output.name} failed: see {log}")
        dev = json.loads((output / "eval_results.json").read_text())["eval_accuracy"]
        record(
            args,
            {
                "stage": "finetune", "task": task, "lr": float(rate), "epochs": args.finetune_epochs,
                "train_size": args.finetune_train_samples, "seed": seed, "validation": dev,
                "seconds": round(time.monotonic() - start, 1),
            },
        )  # fmt: skip


# report


def summary(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def setting_of(row: dict) -> str:
    """What distinguishes a row's run within its stage."""
    if row["stage"] in ("baseline", "separable-baseline"):
        return f"{row['features']} pooled layers, C {row['C']:g}" + (" (chosen on dev)" if row.get("chosen") else "")
    if row["stage"] == "finetune":
        return f"fine-tuned, {row['train_size']} sentences, {row['epochs']:g} epochs, lr {row['lr']:g}"
    if row["stage"] == "sizes":
        return f"{row['train_size']} sentences, {row['epochs']} epochs, lr {row['lr']:g}, batch {row['batch']}"
    if row["stage"] == "separable":
        return row["setting"]
    if row["stage"] == "lbfgs":
        return f"lbfgs, C on {row['picked_on']}"
    if row["stage"] == "lbfgs_sizes":
        return f"{row['train_size']} sentences, {row['fit']}"
    if row["stage"] == "converged":
        return f"{row['fit']}, C {row['C']:g}, objective {row['objective']:.7f}"
    if row["stage"] == "final":
        return recipe_of(row)
    return row.get("change", "")


def recipe_of(row: dict) -> str:
    """The settings of a run, in short."""
    head = row["pooling"] + (", layers concatenated" if row.get("concat") else "")
    head += ", batch norm" if row.get("batch_norm") else ""
    return (
        f"{head}, dropout {row['dropout']:g}, lr {row['lr']:g}, batch {row['batch']}, {row['epochs']} epochs, "
        f"weight decay {row.get('weight_decay', 0):g}"
    )


def report_step(args) -> str:
    """One line per stage, task and setting: seeds, dev and test accuracy (mean ± standard deviation over seeds; the
    last row of each seed), mean wall time per run."""
    rows = [json.loads(line) for line in (args.work_dir / "results.jsonl").read_text().splitlines()]
    groups: dict[tuple, dict] = {}
    for row in rows:
        groups.setdefault((row["stage"], row["task"], setting_of(row)), {})[row.get("seed")] = row
    lines = [
        "| stage | task | setting | seeds | dev accuracy | test accuracy | wall time per run |",
        "|---|---|---|---:|---|---|---:|",
    ]
    for (stage, task, setting), by_seed in groups.items():
        members = list(by_seed.values())
        dev = summary([member["validation"] for member in members])
        test = summary([member["test"] for member in members]) if all("test" in m for m in members) else ""
        seconds = statistics.mean(member.get("seconds", math.nan) for member in members)
        wall = "" if math.isnan(seconds) else f"{seconds:.0f} s"  # the converged step times nothing
        lines.append(f"| {stage} | {task} | {setting} | {len(members)} | {dev} | {test} | {wall} |")
    text = "\n".join(lines)
    (args.work_dir / "report.md").write_text(text + "\n", encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    if "features" in args.steps:
        features_step(args)
    needs_data = {"baseline", "grid", "final", "sizes", "lbfgs", "lbfgs_sizes", "converged"} & set(args.steps)
    datasets = load_data(args) if needs_data else {}
    config = AutoConfig.from_pretrained(args.bilm) if needs_data else None
    if "baseline" in args.steps:
        baseline_step(args, datasets)
    if "converged" in args.steps:
        converged_step(args, datasets)
    if "grid" in args.steps:
        grid_step(args, config, datasets)
    if "final" in args.steps:
        for task in args.tasks:
            run_settings(args, "final", config, datasets[task], args.final, splits=("validation", "test"))
    if "sizes" in args.steps:
        sizes_step(args, config, datasets)
    if "lbfgs" in args.steps:
        lbfgs_step(args, config, datasets)
    if "lbfgs_sizes" in args.steps:
        lbfgs_sizes_step(args, config, datasets)
    if "separable" in args.steps:
        separable_step(args)
    if "finetune" in args.steps:
        finetune_step(args)
    if "report" in args.steps:
        print(report_step(args))


if __name__ == "__main__":
    main()
