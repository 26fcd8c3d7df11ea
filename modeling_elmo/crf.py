"""Linear-chain conditional random field: forward algorithm, negative log-likelihood and Viterbi decoding, for the
`use_crf` head of `ElmoForTokenClassification`.

Pure PyTorch (shipped with the modeling file as remote code). Masks may have any pattern (right or left padding, or
gaps): a masked position is skipped and the chain continues from the last unmasked one.
"""

import torch
from torch import nn

_FORBIDDEN_SCORE = -1e4  # of a forbidden tag or transition: unlike -inf, keeps logsumexp and its gradient finite

# (allowed transitions [from][to], allowed start tags, allowed end tags)
Constraints = tuple[list[list[bool]], list[bool], list[bool]]


class LinearChainCrf(nn.Module):
    """
    Scores a tag path `y` over emissions `e` as `start[y_1] + sum_t e_t[y_t] + sum_t trans[y_{t-1}, y_t] + end[y_n]`.

    `constraints` (from [`bio_constraints`]) optionally forbids moves (e.g. BIO: no `O -> I-PER`): they get a score of
    -1e4 and are never decoded. They are kept as plain lists (not buffers) so that meta-device loading cannot lose
    them, and turned into tensors on the parameters' device when used.
    """

    def __init__(self, num_tags: int, constraints: Constraints | None = None):
        super().__init__()
        self.num_tags = num_tags
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))  # [from, to]
        self.start_transitions = nn.Parameter(torch.zeros(num_tags))
        self.end_transitions = nn.Parameter(torch.zeros(num_tags))
        self.constraints = constraints

    def _scores(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Transition, start and end scores with the constraints applied."""
        transitions, start, end = self.transitions, self.start_transitions, self.end_transitions
        if self.constraints is not None:
            device = transitions.device
            allowed, allowed_start, allowed_end = (
                torch.tensor(c, dtype=torch.bool, device=device) for c in self.constraints
            )
            transitions = transitions.masked_fill(~allowed, _FORBIDDEN_SCORE)
            start = start.masked_fill(~allowed_start, _FORBIDDEN_SCORE)
            end = end.masked_fill(~allowed_end, _FORBIDDEN_SCORE)
        return transitions, start, end

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """
        Forward algorithm. `emissions` (batch, seq_len, num_tags), `mask` (batch, seq_len) -> log Z (batch,).
        Rows without any unmasked position get 0.
        """
        transitions, start, end = self._scores()
        mask = mask.bool()
        alpha = start.expand(emissions.shape[0], -1)
        started = torch.zeros_like(mask[:, 0])
        for step in range(emissions.shape[1]):
            continued = torch.logsumexp(alpha.unsqueeze(2) + transitions, dim=1)
            scores = torch.where(started.unsqueeze(1), continued, start) + emissions[:, step]
            alpha = torch.where(mask[:, step].unsqueeze(1), scores, alpha)
            started = started | mask[:, step]
        return torch.where(started, torch.logsumexp(alpha + end, dim=1), torch.zeros_like(alpha[:, 0]))

    def neg_log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """
        Per-sequence negative log-likelihood (batch,). `tags` (batch, seq_len) may hold -100 at unmasked positions:
        those are marginalised (the numerator sums over every tag there), so partial labels are handled exactly.
        """
        mask = mask.bool()
        known = mask & (tags != -100)
        gold = torch.nn.functional.one_hot(tags.clamp(min=0), self.num_tags).bool()
        allowed = gold | ~known.unsqueeze(-1)
        constrained = emissions.masked_fill(~allowed, _FORBIDDEN_SCORE)
        both = self.log_partition(torch.cat([emissions, constrained]), torch.cat([mask, mask]))
        log_z, log_gold = both.chunk(2)
        return log_z - log_gold

    def viterbi_decode(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Best tag path (batch, seq_len); masked positions hold 0. Same inputs as `log_partition`."""
        transitions, start, end = self._scores()
        mask = mask.bool()
        batch_size, seq_len, num_tags = emissions.shape
        score = start.expand(batch_size, -1)
        started = torch.zeros_like(mask[:, 0])
        identity = torch.arange(num_tags, device=emissions.device).expand(batch_size, -1)
        backpointers = []
        for step in range(seq_len):
            best, previous = (score.unsqueeze(2) + transitions).max(dim=1)
            active = mask[:, step].unsqueeze(1)
            new_score = torch.where(started.unsqueeze(1), best, start) + emissions[:, step]
            score = torch.where(active, new_score, score)
            backpointers.append(torch.where(active & started.unsqueeze(1), previous, identity))
            started = started | mask[:, step]
        current = (score + end).argmax(dim=1)
        path = [current]
        for pointers in reversed(backpointers[1:]):
            current = pointers.gather(1, current.unsqueeze(1)).squeeze(1)
            path.append(current)
        tags = torch.stack(path[::-1], dim=1)
        return tags.masked_fill(~mask, 0)


def bio_constraints(labels: list[str]) -> Constraints:
    """
    Allowed moves for IOB2 tags (`B-X`, `I-X`, `O`), tag `i` being `labels[i]`: `I-X` may only follow `B-X` or `I-X`
    and cannot start a sentence. Returns (allowed transitions [from][to], allowed start, allowed end); labels that
    are not `I-` tags are unconstrained.
    """
    allowed = [[True] * len(labels) for _ in labels]
    allowed_start = [True] * len(labels)
    for to, label in enumerate(labels):
        if label.startswith("I-"):
            allowed_start[to] = False
            for source, previous in enumerate(labels):
                allowed[source][to] = previous in (f"B-{label[2:]}", f"I-{label[2:]}")
    return allowed, allowed_start, [True] * len(labels)


__all__ = ["LinearChainCrf", "bio_constraints"]
