"""`elmo-train-classifier --head_fit lbfgs`: a frozen biLM's linear head fitted as an L2-penalised logistic regression,
the way the baseline of benchmarks/RESULTS-classification.md is fitted, then written into the model.

The head's features (every biLM layer pooled, concatenated: what `ElmoForSequenceClassification` feeds its batch norm)
are computed once by the model itself; they are standardised with the training set's mean and variance, and the
linear layer is fitted by full-batch L-BFGS in float64 to the mean cross-entropy plus `|W|^2 / (2 C n)` (scikit-learn's
`LogisticRegression` objective divided by `C n`; two classes: the binary regression, one weight vector; no penalty
on the bias), for each L2 strength C of `STRENGTHS`. The C with the best accuracy on the validation split (without
one: on a seeded 10% of the training set held out, then refitted on all of it) is kept. The batch norm's running
mean and variance become the training statistics (its affine part is the identity), so the saved model computes
exactly the fitted regression and loads and predicts as any other classifier.
"""

import logging
import math
import time
from dataclasses import dataclass

import torch
from torch.nn import functional

from ..commands.memory import check_memory
from .arguments import PROG, HeadFit
from .data import SINGLE_LABEL, DataError

logger = logging.getLogger(PROG)

# C of scikit-learn's convention (the inverse of the penalty), the baseline's grid: a finer one picks on dev noise
STRENGTHS = (0.001, 0.01, 0.1, 1.0)
HELD_OUT = 0.1  # of the training set, to pick C when there is no validation split
# L-BFGS: stop when every gradient entry is below this (float64), or the objective stops changing, or after this many
# iterations
GRADIENT_TOLERANCE = 1e-7
MAX_ITERATIONS = 1000


def lbfgs_unsupported(config, problem_type: str, processes: int = 1) -> str | None:
    """Why the head of `config` cannot be fitted as a logistic regression (None: it can): the biLM must be frozen and
    the head linear on the concatenated pooled layers, batch-normalised, without dropout, classifying, in one
    process (the fit sees all the training texts at once)."""
    reasons = {
        "a regression": problem_type != SINGLE_LABEL,
        "a biLM that is fine-tuned (--freeze_elmo False)": not config.freeze_elmo,
        f"a {config.classifier_head} head (--classifier_head)": config.classifier_head != "linear",
        "a scalar mix of the layers (--classifier_concat_layers False)": not config.classifier_concat_layers,
        "no batch norm (--classifier_batch_norm False)": not config.classifier_batch_norm,
        f"dropout {config.classifier_dropout:g} (--classifier_dropout)": config.classifier_dropout != 0,
        f"{processes} processes": processes > 1,
    }
    return next((reason for reason, applies in reasons.items() if applies), None)


def choose_head_fit(requested: HeadFit | None, config, problem_type: str, processes: int = 1) -> HeadFit:
    """`--head_fit` as given, or when not given: "lbfgs" where it applies, else "trainer". A "lbfgs" that cannot
    apply is a `DataError` naming why."""
    reason = lbfgs_unsupported(config, problem_type, processes)
    if requested == "lbfgs" and reason is not None:
        raise DataError(
            "--head_fit lbfgs fits a frozen biLM's linear head on the concatenated layers, with batch norm and no "
            f"dropout, for classification, in one process; this run has {reason}. Use --head_fit trainer."
        )
    chosen = requested or ("trainer" if reason else "lbfgs")
    if requested is None:
        logger.info("head fit: %s%s", chosen, f" (lbfgs does not apply: {reason})" if reason else "")
    return chosen


def check_fit_memory(model, texts: int) -> None:
    """Refuse (`MemoryNeedError`, one line) a fit whose pooled layers of `texts` training and validation texts cannot
    be held in the memory free on the CPU: each text's `feature_norm.num_features` numbers, captured in float32 and
    copied twice in float64 (the features and their standardised copy)."""
    features = model.feature_norm.num_features
    needed = texts * features * (4 + 8 + 8)
    what = (
        f"--head_fit lbfgs holds the pooled layers of all {texts:,} training and validation texts ({features:,} "
        "numbers each); use --head_fit trainer, or fewer texts (--max_train_samples)"
    )
    check_memory(needed, torch.device("cpu"), what)


@dataclass
class LinearHead:
    """A standardisation and a linear layer in float64: `mean`, `variance` (features,), `weight` (num_labels,
    features), `bias` (num_labels,); `eps` is the batch norm's."""

    mean: torch.Tensor
    variance: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor
    eps: float

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        """(n, features) -> (n, num_labels), as the model's batch norm (evaluation) and linear layer compute them."""
        return standardise(features, self.mean, self.variance, self.eps) @ self.weight.T + self.bias


def standardise(features: torch.Tensor, mean: torch.Tensor, variance: torch.Tensor, eps: float) -> torch.Tensor:
    """(n, features) standardised as `BatchNorm1d` does in evaluation."""
    return (features - mean) / torch.sqrt(variance + eps)


def class_logits(parameters: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
    """`parameters` (rows, features + 1), the weights and a last column of biases, on `features` (n, features) ->
    (n, num_labels). One row (two classes) is the binary regression's score s, as the logits (-s/2, s/2): their
    cross-entropy is the logistic loss of s."""
    scores = features @ parameters[:, :-1].T + parameters[:, -1]
    return torch.cat([-scores / 2, scores / 2], dim=-1) if scores.shape[1] == 1 else scores


def penalised_loss(parameters: torch.Tensor, features: torch.Tensor, labels: torch.Tensor, strength: float):
    """The mean cross-entropy plus |weights|^2 / (2 C n) (no penalty on the biases): scikit-learn's
    `LogisticRegression(C=strength)` objective divided by `C n`."""
    penalty = parameters[:, :-1].square().sum() / (2 * strength * len(labels))
    return functional.cross_entropy(class_logits(parameters, features), labels) + penalty


def fit_logistic_regression(
    features: torch.Tensor, labels: torch.Tensor, num_labels: int, strength: float, start: torch.Tensor | None = None
) -> torch.Tensor:
    """Minimise `penalised_loss` by L-BFGS over standardised float64 `features` (n, d) and `labels` (n,), from
    `start` (else zeros). Returns the parameters (rows, d + 1): one row for two classes, else `num_labels`."""
    rows = 1 if num_labels == 2 else num_labels
    parameters = features.new_zeros(rows, features.shape[1] + 1) if start is None else start.clone()
    parameters.requires_grad_(True)
    optimizer = torch.optim.LBFGS(
        [parameters],
        max_iter=MAX_ITERATIONS,
        tolerance_grad=GRADIENT_TOLERANCE,
        tolerance_change=1e-12,
        history_size=20,
        line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = penalised_loss(parameters, features, labels, strength)
        loss.backward()
        return loss

    optimizer.step(closure)
    return parameters.detach()


def _as_head(parameters: torch.Tensor, mean: torch.Tensor, variance: torch.Tensor, eps: float) -> LinearHead:
    """The fitted parameters as the model's linear layer: one row (two classes) becomes the rows -w/2 and w/2."""
    weight, bias = parameters[:, :-1], parameters[:, -1]
    if len(parameters) == 1:
        weight, bias = torch.cat([-weight / 2, weight / 2]), torch.cat([-bias / 2, bias / 2])
    return LinearHead(mean, variance, weight, bias, eps)


def _fits(features, labels, num_labels, eps, strengths) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """The training statistics and the parameters for each strength (warm-started from the previous, stronger
    penalty: the path is convex, each fit ends at its own minimum)."""
    mean, variance = features.mean(dim=0), features.var(dim=0, unbiased=False)
    standardised = standardise(features, mean, variance, eps)
    fitted, start = [], None
    for strength in strengths:
        start = fit_logistic_regression(standardised, labels, num_labels, strength, start)
        fitted.append(start)
    return mean, variance, fitted


@dataclass
class HeadFitResult:
    """The chosen head, its strength, the strengths tried with their accuracies, and where C was picked."""

    head: LinearHead
    strength: float
    accuracies: dict[float, float]
    picked_on: str


def fit_head(
    features: torch.Tensor,
    labels: torch.Tensor,
    num_labels: int,
    eps: float,
    pick: tuple[torch.Tensor, torch.Tensor] | None = None,
    seed: int = 0,
    strengths: tuple[float, ...] = STRENGTHS,
) -> HeadFitResult:
    """The logistic regression on `features` (n, d) with `labels` (n,), C of `strengths` picked by accuracy on `pick`
    (features, labels) or, without it, on a seeded `HELD_OUT` part of the training rows (the head then refitted on
    all of them). Ties go to the stronger penalty (the smaller C)."""
    features = features.double()
    holds_out = pick is None
    if holds_out:
        order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
        held_out, kept = order[: math.ceil(HELD_OUT * len(labels))], order[math.ceil(HELD_OUT * len(labels)) :]
        fit_on, pick = (features[kept], labels[kept]), (features[held_out], labels[held_out])
        picked_on = f"{len(held_out)} training texts held out (seed {seed})"
    else:
        fit_on, pick, picked_on = (features, labels), (pick[0].double(), pick[1]), "the validation split"
    mean, variance, fitted = _fits(*fit_on, num_labels, eps, strengths)
    accuracies = {
        strength: accuracy(_as_head(parameters, mean, variance, eps), *pick)
        for strength, parameters in zip(strengths, fitted, strict=True)
    }
    best = max(strengths, key=lambda strength: (accuracies[strength], -strength))
    if holds_out:
        mean, variance, (parameters,) = _fits(features, labels, num_labels, eps, (best,))
    else:
        parameters = fitted[strengths.index(best)]
    return HeadFitResult(_as_head(parameters, mean, variance, eps), best, accuracies, picked_on)


def accuracy(head: LinearHead, features: torch.Tensor, labels: torch.Tensor) -> float:
    """The share of `labels` (n,) that `head`'s logits on `features` (n, d) rank first."""
    return float((head.logits(features.double()).argmax(-1) == labels).double().mean())


@torch.no_grad()
def pooled_features(model, batches) -> tuple[torch.Tensor, torch.Tensor]:
    """The features `model` (an `ElmoForSequenceClassification` with batch norm) standardises, (n, features), and
    the labels (n,), of every batch of `batches` (dicts of model inputs with `labels`), read at the batch norm's
    input while the model runs in evaluation mode."""
    captured: list[torch.Tensor] = []
    hook = model.feature_norm.register_forward_pre_hook(lambda module, inputs: captured.append(inputs[0].cpu()))
    labels = []
    model.eval()
    try:
        for batch in batches:
            labels.append(batch.pop("labels").cpu())
            model(**{name: value.to(model.device) for name, value in batch.items()})
    finally:
        hook.remove()
    return torch.cat(captured), torch.cat(labels)


@torch.no_grad()
def write_head(model, head: LinearHead) -> None:
    """Set `model`'s batch norm (running statistics) and linear layer to `head`."""
    model.feature_norm.running_mean.copy_(head.mean)
    model.feature_norm.running_var.copy_(head.variance)
    model.classifier.weight.copy_(head.weight)
    model.classifier.bias.copy_(head.bias)


def fit_linear_head(trainer, train_dataset, validation_dataset=None) -> tuple[dict, dict]:
    """Fit `trainer.model`'s head on `train_dataset` (C picked on `validation_dataset`, else on part of the training
    set held out with the Trainer's seed) and write it into the model. Returns the training metrics (as
    `train_results.json` holds them) and what the model card shows of the fit."""
    start = time.monotonic()
    model = trainer.model
    features, labels = pooled_features(model, trainer.get_eval_dataloader(train_dataset))
    pick = None
    if validation_dataset is not None:
        pick = pooled_features(model, trainer.get_eval_dataloader(validation_dataset))
    result = fit_head(features, labels, model.config.num_labels, model.feature_norm.eps, pick, seed=trainer.args.seed)
    write_head(model, result.head)
    tried = ", ".join(f"C={strength:g}: {score:.4f}" for strength, score in result.accuracies.items())
    logger.info(
        "head fit: L-BFGS logistic regression on %d pooled features of %d training texts; accuracy on %s for each "
        "L2 strength: %s; chosen C=%g. The Trainer's optimisation flags (learning rate, epochs, batch size, "
        "schedule, weight decay) are not used.",
        features.shape[1],
        len(labels),
        result.picked_on,
        tried,
        result.strength,
    )
    metrics = {
        "head_fit": "lbfgs",
        "l2_strength_C": result.strength,
        "C_picked_on": result.picked_on,
        **{f"pick_accuracy_C={strength:g}": score for strength, score in result.accuracies.items()},
        "train_accuracy": accuracy(result.head, features, labels),
        "train_samples": len(labels),
        "train_runtime": round(time.monotonic() - start, 4),
    }
    card = {
        "head fit": "L-BFGS logistic regression (L2 on the weights) on the standardised pooled layers",
        "L2 strength C": f"{result.strength:g}, chosen by accuracy on {result.picked_on} ({tried})",
        "training texts": len(labels),
    }
    return metrics, card


__all__ = [
    "STRENGTHS",
    "HeadFitResult",
    "LinearHead",
    "accuracy",
    "check_fit_memory",
    "class_logits",
    "choose_head_fit",
    "fit_head",
    "fit_linear_head",
    "fit_logistic_regression",
    "lbfgs_unsupported",
    "penalised_loss",
    "pooled_features",
    "write_head",
]
