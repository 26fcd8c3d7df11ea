"""Sampled softmax as TensorFlow 1.x's `tf.nn.sampled_softmax_loss` (the loss bilm-tf trains with), for the
language-model loss of `ElmoForPreTraining`.

Pure PyTorch (shipped with the modeling file as remote code). TensorFlow's defaults are reproduced: the negatives are
drawn by `log_uniform_candidate_sampler(unique=True, range_max=num_classes)` ([`LogUniformSampler`]), the logits are
corrected by the log expected counts (`subtract_log_q=True`) and accidental hits are removed
(`remove_accidental_hits=True`). References: `tensorflow/python/ops/nn_impl.py` (`_compute_sampled_logits`),
`tensorflow/core/kernels/range_sampler.cc` (`LogUniformSampler`, `ExpectedCountHelper`) and
`tensorflow/core/kernels/candidate_sampler_ops.cc` (`ComputeAccidentalHitsOp`).
"""

import math

import torch

# `ComputeAccidentalHitsOp` gives each accidental hit the weight -FLT_MAX, which `_compute_sampled_logits` adds to its
# sampled logit: the class then has probability 0 in the softmax.
ACCIDENTAL_HIT_LOGIT = -torch.finfo(torch.float32).max

_MAX_CHUNK = 1 << 22


def _check_integer(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"`{name}` must be an int, got {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {value}.")
    return value


def _check_tensor(name: str, tensor: object, ndim: int | None, floating: bool) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor, got {type(tensor).__name__}.")
    if floating != tensor.is_floating_point() or tensor.dtype == torch.bool or tensor.is_complex():
        kind = "a floating point" if floating else "an integer"
        raise TypeError(f"`{name}` must have {kind} dtype, got {tensor.dtype}.")
    if ndim is not None and tensor.dim() != ndim:
        raise ValueError(f"`{name}` must have {ndim} dimension(s), got shape {tuple(tensor.shape)}.")
    return tensor


class LogUniformSampler:
    """
    TensorFlow's `log_uniform_candidate_sampler(unique=True)` over the ids `[0, range_max)` of a vocabulary sorted by
    decreasing frequency: id `k` is drawn with probability `P(k) = (log(k + 2) - log(k + 1)) / log(range_max + 1)`,
    and draws are repeated until `num_sampled` distinct ids are found.
    """

    def __init__(self, range_max: int):
        self.range_max = _check_integer("range_max", range_max, 1)
        self.log_range = math.log1p(range_max)

    def probabilities(self, ids: torch.Tensor) -> torch.Tensor:
        """`P(k)` of integer `ids` (any shape), float32 as TensorFlow's `Probability` (computed in float64)."""
        ids = _check_tensor("ids", ids, None, floating=False).to(torch.float64)
        return (torch.log((ids + 2.0) / (ids + 1.0)) / self.log_range).to(torch.float32)

    def _draw(self, num_draws: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
        """`num_draws` independent ids by inverse CDF, as TensorFlow's `LogUniformSampler::Sample`."""
        uniform = torch.rand(num_draws, dtype=torch.float64, generator=generator, device=device)
        # The modulo is TensorFlow's guard against round-off (the value is never range_max in practice).
        return (torch.exp(uniform * self.log_range).long() - 1) % self.range_max

    def sample(
        self, num_sampled: int, generator: torch.Generator | None = None, device: torch.device | str | None = None
    ) -> tuple[torch.Tensor, int]:
        """
        Draws until `num_sampled` distinct ids are found. Returns those ids (`num_sampled`,) long, in the order of
        their first draw, and `num_tries`, the total number of draws. The draws are made on `device` (default: the
        generator's device, else the CPU) in vectorised chunks.
        """
        _check_integer("num_sampled", num_sampled, 1)
        if num_sampled > self.range_max:
            raise ValueError(f"`num_sampled` ({num_sampled}) must be <= range_max ({self.range_max}).")
        if device is None:
            device = generator.device if generator is not None else torch.device("cpu")
        device = torch.device(device)
        seen = torch.zeros(self.range_max, dtype=torch.bool, device=device)
        picked: list[torch.Tensor] = []
        num_picked = num_tries = 0
        chunk = max(1024, 2 * num_sampled)
        while num_picked < num_sampled:
            draws = self._draw(chunk, generator, device)
            values, inverse = torch.unique(draws, return_inverse=True)
            positions = torch.arange(chunk, device=device)
            first = torch.full_like(values, chunk).scatter_reduce_(0, inverse, positions, reduce="amin")
            first = torch.sort(first[~seen[values]]).values[: num_sampled - num_picked]
            new_ids = draws[first]
            seen[new_ids] = True
            picked.append(new_ids)
            num_picked += len(new_ids)
            num_tries += int(first[-1]) + 1 if num_picked == num_sampled else chunk
            chunk = min(2 * chunk, _MAX_CHUNK)
        return torch.cat(picked), num_tries

    def expected_count(self, ids: torch.Tensor, num_tries: int, num_sampled: int | None = None) -> torch.Tensor:
        """
        TensorFlow's `ExpectedCountHelper`: the probability `1 - (1 - P(k))^num_tries` that `ids` (any shape) are in
        a sample of `num_tries` draws, float32 (computed in float64 from float32 `P(k)`). When `num_sampled` is given
        and equals `num_tries` (no draw was repeated), TensorFlow returns `P(k) * num_sampled` instead, and so does
        this method.
        """
        _check_integer("num_tries", num_tries, 1)
        probabilities = self.probabilities(ids).to(torch.float64)
        if num_sampled is not None and _check_integer("num_sampled", num_sampled, 1) == num_tries:
            return (probabilities * num_sampled).to(torch.float32)
        return (-torch.expm1(num_tries * torch.log1p(-probabilities))).to(torch.float32)


def sampled_softmax_loss(
    weight: torch.Tensor,
    bias: torch.Tensor,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    sampled: torch.Tensor,
    true_expected_count: torch.Tensor,
    sampled_expected_count: torch.Tensor,
) -> torch.Tensor:
    """
    Per-example sampled softmax cross-entropy (`tf.nn.sampled_softmax_loss` with `num_true=1`).

    `weight` (V, D) and `bias` (V,) are the softmax parameters, `inputs` (N, D) the hidden states and `labels` (N,)
    their target ids; `sampled` (S,) are the distinct negative ids shared by the batch, with their expected counts
    `true_expected_count` (N,) and `sampled_expected_count` (S,) from [`LogUniformSampler`]. Logits are
    `<x, W[id]> + b[id] - log(expected_count(id))`; a sampled id equal to the row's label (accidental hit) gets the
    logit -FLT_MAX, i.e. probability 0; the true class is the target. Returns the losses (N,), differentiable with
    respect to `weight`, `bias` and `inputs`. Ids must be in `[0, V)` (not checked, to avoid a device sync). Memory
    is O(N * S): one (N, D) x (D, S) matrix product.
    """
    _check_tensor("weight", weight, 2, floating=True)
    for name, tensor, ndim in (("bias", bias, 1), ("inputs", inputs, 2)):
        if _check_tensor(name, tensor, ndim, floating=True).dtype != weight.dtype:
            raise TypeError(f"`{name}` must have the dtype of `weight` ({weight.dtype}), got {tensor.dtype}.")
    _check_tensor("labels", labels, 1, floating=False)
    _check_tensor("sampled", sampled, 1, floating=False)
    _check_tensor("true_expected_count", true_expected_count, 1, floating=True)
    _check_tensor("sampled_expected_count", sampled_expected_count, 1, floating=True)
    num_classes, dim = weight.shape
    expected_shapes = {
        "bias": (bias, (num_classes,)),
        "inputs": (inputs, (inputs.shape[0], dim)),
        "labels": (labels, (inputs.shape[0],)),
        "true_expected_count": (true_expected_count, (inputs.shape[0],)),
        "sampled_expected_count": (sampled_expected_count, (sampled.shape[0],)),
    }
    for name, (tensor, shape) in expected_shapes.items():
        if tuple(tensor.shape) != shape:
            raise ValueError(f"`{name}` must have shape {shape}, got {tuple(tensor.shape)}.")

    true_logits = (inputs * weight[labels]).sum(-1) + bias[labels] - torch.log(true_expected_count.to(weight.dtype))
    sampled_bias = bias[sampled] - torch.log(sampled_expected_count.to(weight.dtype))
    sampled_logits = torch.addmm(sampled_bias, inputs, weight[sampled].t())  # (N, S)
    # TensorFlow adds -FLT_MAX to a hit's logit; in float32 that sum is -FLT_MAX itself, in float64 its probability is
    # 0 as well. Low precision dtypes use their own lowest value.
    hit_logit = max(ACCIDENTAL_HIT_LOGIT, torch.finfo(weight.dtype).min)
    sampled_logits = sampled_logits.masked_fill(labels.unsqueeze(1) == sampled.unsqueeze(0), hit_logit)
    # softmax cross-entropy with the true class in column 0, without concatenating the (N, 1 + S) logits
    return torch.logaddexp(true_logits, torch.logsumexp(sampled_logits, dim=1)) - true_logits
