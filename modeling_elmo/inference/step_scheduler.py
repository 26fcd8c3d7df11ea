"""
Batching at the time step for the biLM ("cellular batching", Gao et al., EuroSys 2018; what Orca and vLLM do for
transformers): a sentence joins the running rows at the next time step and leaves them when its sequence
`<S> words </S>` ends, so no sentence waits for a batch to finish and no step computes rows that have ended. `elmo
serve` runs it on its model's thread (`serve/batcher.py`); it knows nothing of requests beyond a key to answer and a
request to share the rows fairly between.

    scheduler = StepScheduler(model, tokenizer, max_rows=64, max_words=4096)
    scheduler.add(key, words, request, layers="top")    # queue a sentence
    while scheduler.busy:
        for key, result in scheduler.step():            # admit, run one time step of every layer
            ...                                         # an array (see `add`), or the exception that failed it

Each `step`:

1. **Admission.** While fewer than `max_rows` sentences run and their words stay within `max_words` (a sentence
   longer than that runs once nothing else does), the next queued sentence is taken, round robin between requests
   (one sentence of each waiting request in turn, each request's in its own order). Round robin, because a request's
   latency then depends on its own size, not on the requests queued before it: a one-sentence request beside a bulk
   client's thousand waits for a row to free, not for the thousand (shortest first would starve long sentences;
   arrival order per sentence would queue it behind the bulk request). The admitted sentences' words run through the
   character CNN together (`ElmoCharacterEncoder.embed_words`: its word cache, one pass per distinct word), and the
   first layer's input-to-gate products of all their tokens run as one block.
2. **Input-to-gate blocks.** A layer above the first takes the outputs of the layer below (each direction's stack is
   its own: step `t` of a layer needs step `t` of the one below); they wait until `GATE_BLOCK_STEPS` time steps have
   passed since the layer's last block, or until a sentence's layer below has ended, and then the input-to-gate
   products of every waiting output of every sentence run as one block: products of many rows, which run at the speed
   of the arithmetic, not of reading the weights (as the forward call's blocks of time steps do).
3. **One time step of every layer.** Each layer runs one time step on every sentence whose gates for its next step
   are there (both directions: a sentence's forward and backward sequences have the same length): every running
   sentence in every layer, but for the steps a layer runs behind the one below, at most `GATE_BLOCK_STEPS`. The time
   steps are the layers' own: the CPU engine's (`LstmEngine.step_sets`, the products it chooses for that many rows) or
   a quantized layer's (`step_sets`): one recurrence, the same step products and cell as a forward call.
4. **Leaving.** Sentences whose top layer ended leave the rows, and their results are assembled.

Each sentence starts from the model's initial (zero) state and never sees another's values, so its result equals the
model's on that sentence alone within float32 rounding (the products at other row counts, the character CNN beside
other words). Memory: each running sentence holds its first layer's input-to-gate products, (2, words + 2,
4 * lstm_cell_size) float32 ('original': 128 KiB per word), bounded by `max_words` and `max_rows`.

An exception inside a step touches the sentences admitted (a failure of their admission) or all those running (a
failure of a time step): they leave the running rows and go back to the front of the queue, each to run alone, so
that a failure caused by one sentence fails that sentence only; one that fails alone comes back with the exception.
"""

from __future__ import annotations  # torch and numpy types in annotations: imported when the work starts

from collections import OrderedDict, deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..foundation.checks import check_choice, check_count

if TYPE_CHECKING:
    import numpy as np
    import torch

LAYERS = ("top", "all")
GATE_BLOCK_STEPS = 8  # the most time steps a layer above the first runs behind the layer below


@dataclass(eq=False)
class _LayerProgress:
    """One sentence in one biLM layer: the inputs waiting for their input-to-gate products, the gates ready (each
    with its input, for the skip connection), the state, the outputs kept and the steps run."""

    waiting: list[torch.Tensor] = field(default_factory=list)  # (2, width) each
    ready: deque[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=deque)  # (gates, input) per step
    state: tuple[torch.Tensor, torch.Tensor] | None = None  # hidden (2, proj_size), cell (2, cell_size)
    outputs: list[torch.Tensor] = field(default_factory=list)  # (2, width) per step, where the result needs them
    steps: int = 0


@dataclass(eq=False)
class _Sentence:
    """One queued or running sentence: its `words`, what it is asked for (`layers`), and its progress per layer."""

    key: Hashable
    request: Hashable
    words: list[str]
    layers: str
    embeddings: torch.Tensor | None = None  # (2, tokens, width): the character CNN's, each direction's step order
    progress: list[_LayerProgress] = field(default_factory=list)
    cancelled: bool = False
    alone: bool = False  # runs alone: a failure touched it beside others

    @property
    def tokens(self) -> int:
        return len(self.words) + 2  # <S> words </S>

    def restart(self) -> None:
        """Back to the queue, alone, from the start."""
        self.embeddings, self.progress, self.alone = None, [], True


class StepScheduler:
    """
    Time-step batching of one `ElmoModel` (see the module docstring). Not thread-safe: one thread calls it.

    Args:
        model: an `ElmoModel` (float32 or quantized; stateless: `config.stateful` is refused).
        tokenizer: its `ElmoTokenizer`.
        max_rows: sentences running at once.
        max_words: words of the running sentences at once; a longer sentence runs alone.
    """

    def __init__(self, model, tokenizer, max_rows: int = 64, max_words: int = 4096):
        import torch

        check_count("max_rows", max_rows, 1)
        check_count("max_words", max_words, 1)
        if model.config.stateful:
            raise ValueError("StepScheduler runs stateless models: this one carries LSTM states (config.stateful).")
        self.model, self.tokenizer = model, tokenizer
        self.max_rows, self.max_words = max_rows, max_words
        self._queued: OrderedDict[Hashable, deque[_Sentence]] = OrderedDict()  # request -> its sentences
        self._running: list[_Sentence] = []
        self._since_block = [0] * len(model.bilm.layers)  # per layer: time steps since its last input-to-gate block
        self._step_sets: dict[tuple[int, bool], list] = {}  # (layer, one row) -> its step sets, while busy
        self._engines: dict[int, object] = {}
        self._like = torch.empty(0, device=model.device)
        self._rows = 0

    @property
    def running(self) -> int:
        """Sentences admitted and not finished."""
        return len(self._running)

    @property
    def rows(self) -> int:
        """Rows of the last time step, summed over the layers."""
        return self._rows

    @property
    def queued(self) -> int:
        """Sentences waiting for admission."""
        return sum(len(sentences) for sentences in self._queued.values())

    @property
    def busy(self) -> bool:
        return bool(self._queued or self._running)

    def add(self, key: Hashable, words: list[str], request: Hashable, layers: str = "top") -> None:
        """Queue a sentence of `words` (at least one) as part of `request`; its result comes back from `step` under
        `key`: "top" (words, 2 * projection_dim), or "all" (num_hidden_layers + 1, words, 2 * projection_dim), the
        character CNN's layer first (as `inference.batches.embed_batch` gives them)."""
        check_choice("layers", layers, LAYERS)
        if not words:
            raise ValueError("StepScheduler.add: a sentence needs at least one word.")
        self._queued.setdefault(request, deque()).append(_Sentence(key, request, list(words), layers))

    def cancel(self, request: Hashable) -> None:
        """Drop `request`'s sentences: the queued ones now, the running ones at the end of the next step (no result
        comes back for them)."""
        self._queued.pop(request, None)
        for sentence in self._running:
            if sentence.request == request:
                sentence.cancelled = True

    def reset(self) -> list[Hashable]:
        """Drop every queued and running sentence; their keys."""
        dropped = [sentence.key for sentences in self._queued.values() for sentence in sentences]
        dropped += [sentence.key for sentence in self._running]
        self._queued.clear()
        self._running = []
        return dropped

    def step(self) -> list[tuple[Hashable, np.ndarray | Exception]]:
        """Admit queued sentences, run one time step of every layer, and return the sentences that finished: (key,
        array), or (key, exception) for one that failed alone."""
        import torch

        if not self.busy:
            return []
        with torch.inference_mode():
            admitted = self._admit()
            try:
                if admitted:
                    self._start(admitted)
            except Exception as error:
                return self._failed(admitted, error)
            try:
                finished = self._run_step()
            except Exception as error:
                touched, self._running = self._running, []
                return self._failed(touched, error)
        if not self.busy:
            self._step_sets.clear()  # derived again when work comes: the weights may change meanwhile
        return finished

    def _failed(self, touched: list[_Sentence], error: Exception) -> list[tuple[Hashable, Exception]]:
        """The sentences a failure touched: back to the front of the queue to run alone, or failed if they ran
        alone already."""
        failures = [(sentence.key, error) for sentence in touched if sentence.alone and not sentence.cancelled]
        for sentence in reversed([sentence for sentence in touched if not sentence.alone and not sentence.cancelled]):
            sentence.restart()
            self._queued.setdefault(sentence.request, deque()).appendleft(sentence)
            self._queued.move_to_end(sentence.request, last=False)
        return failures

    # ---- admission ------------------------------------------------------------------------------------------

    def _admit(self) -> list[_Sentence]:
        """Queued sentences taken round robin between requests within the rows and words budgets."""
        admitted: list[_Sentence] = []
        running = len(self._running)
        words = sum(len(sentence.words) for sentence in self._running)
        while self._queued and running + len(admitted) < self.max_rows:
            request, sentences = next(iter(self._queued.items()))
            sentence = sentences[0]
            if (sentence.alone or words + len(sentence.words) > self.max_words) and (running or admitted):
                break
            sentences.popleft()
            del self._queued[request]
            if sentences:
                self._queued[request] = sentences  # to the end of the turn
            admitted.append(sentence)
            words += len(sentence.words)
            if sentence.alone:
                break
        return admitted

    def _start(self, sentences: list[_Sentence]) -> None:
        """`sentences` join the rows: their tokens through the character CNN, and the first layer's input-to-gate
        products of all their tokens as one block."""
        import torch

        config = self.model.config
        for sentence, embeddings in zip(sentences, self._token_embeddings(sentences), strict=True):
            sentence.embeddings = torch.stack([embeddings, embeddings.flip(0)])  # (2, tokens, width)
            sentence.progress = [
                _LayerProgress(state=(embeddings.new_zeros(2, config.projection_dim),
                                      embeddings.new_zeros(2, config.lstm_cell_size)))
                for _ in self.model.bilm.layers
            ]  # fmt: skip
            sentence.progress[0].waiting = list(sentence.embeddings.unbind(1))
        self._gate_block(0, sentences)
        self._running += sentences

    def _token_embeddings(self, sentences: list[_Sentence]) -> list[torch.Tensor]:
        """Each sentence's `<S> words </S>` through the character CNN, (tokens, projection_dim), every word of the
        block in one `embed_words` call."""
        import torch

        encoder = self.model.char_encoder
        encoded = self.tokenizer(
            [sentence.words for sentence in sentences], is_split_into_words=True, padding=True, return_tensors="pt"
        )
        char_ids = encoded["input_ids"][encoded["attention_mask"].bool()].to(self.model.device)  # (words, chars)
        embeddings = encoder.embed_words(torch.cat([char_ids, encoder.boundary_char_ids(self.model.device)]))
        start, end = embeddings[-2:-1], embeddings[-1:]
        words = embeddings[:-2].split([len(sentence.words) for sentence in sentences])
        return [torch.cat([start, part, end]) for part in words]

    # ---- input-to-gate blocks and time steps ----------------------------------------------------------------

    def _sets(self, index: int, rows: int) -> list:
        """Layer `index`'s step sets (`lstm_engine.StepSet`) for `rows` rows: a quantized layer's own, or the CPU
        engine's for that many rows (one row or several), kept while the scheduler is busy."""
        key = (index, rows == 1)
        sets = self._step_sets.get(key)
        if sets is None:
            layer = self.model.bilm.layers[index]
            if layer.quantization is not None:
                sets = layer.step_sets()
            else:
                from ..engine.lstm_engine import LstmEngine

                engine = self._engines.setdefault(index, LstmEngine(pack_inputs=True))
                sets = engine.step_sets(layer.weights(), self._like, rows)
            self._step_sets[key] = sets
        return sets

    def _gate_block(self, index: int, sentences: list[_Sentence]) -> None:
        """The input-to-gate products of layer `index` for every waiting input of `sentences`, as one block."""
        import torch

        waiting = [sentence.progress[index].waiting for sentence in sentences]
        inputs = torch.stack([row for rows in waiting for row in rows], dim=1)  # (2, rows, width)
        gates = None
        for directions, input_to_gates, _ in self._sets(index, inputs.shape[1]):
            products = input_to_gates(inputs[directions])  # (D, rows, 4 * cell_size)
            if directions.stop - directions.start == 2:
                gates = products
                break
            if gates is None:
                gates = products.new_empty(2, *products.shape[1:])
            gates[directions] = products
        rows = zip(gates.unbind(1), inputs.unbind(1), strict=True)
        for sentence, inputs_waiting in zip(sentences, waiting, strict=True):
            progress = sentence.progress[index]
            progress.ready.extend(next(rows) for _ in inputs_waiting)
            progress.waiting = []
        self._since_block[index] = 0

    def _run_step(self) -> list[tuple[Hashable, np.ndarray]]:
        """Input-to-gate blocks where due, then one time step of every layer on every row whose gates are ready; the
        sentences that finished, (key, array)."""
        import torch

        layers = len(self.model.bilm.layers)
        top = layers - 1
        skip = self.model.bilm.use_skip_connections
        self._rows = 0
        for index in range(layers):
            if index > 0:
                waiting = [sentence for sentence in self._running if sentence.progress[index].waiting]
                below_ended = any(s.progress[index - 1].steps == s.tokens for s in waiting)
                if waiting and (below_ended or self._since_block[index] >= GATE_BLOCK_STEPS):
                    self._gate_block(index, waiting)
            self._since_block[index] += 1
            rows = [sentence for sentence in self._running if sentence.progress[index].ready]
            if not rows:
                continue
            self._rows += len(rows)
            steps = [sentence.progress[index].ready.popleft() for sentence in rows]
            gates = torch.stack([gates for gates, _ in steps], dim=1)  # (2, n, 4 * cell_size)
            inputs = torch.stack([row for _, row in steps], dim=1)  # (2, n, width)
            hidden = torch.stack([sentence.progress[index].state[0] for sentence in rows], dim=1)
            cell = torch.stack([sentence.progress[index].state[1] for sentence in rows], dim=1)
            new_hidden, new_cell = torch.empty_like(hidden), torch.empty_like(cell)
            for directions, _, time_step in self._sets(index, len(rows)):
                new_hidden[directions], new_cell[directions] = time_step(
                    gates[directions], hidden[directions], cell[directions]
                )
            outputs = new_hidden + inputs if index > 0 and skip else new_hidden
            for sentence, output, state in zip(
                rows, outputs.unbind(1), zip(new_hidden.unbind(1), new_cell.unbind(1), strict=True), strict=True
            ):
                progress = sentence.progress[index]
                progress.state = state
                progress.steps += 1
                if index == top or sentence.layers == "all":
                    progress.outputs.append(output)
                if index + 1 < layers:
                    sentence.progress[index + 1].waiting.append(output)
        ended = [s for s in self._running if s.progress[top].steps == s.tokens or s.cancelled]
        if not ended:
            return []
        self._running = [s for s in self._running if not (s.progress[top].steps == s.tokens or s.cancelled)]
        return [(sentence.key, self._result(sentence)) for sentence in ended if not sentence.cancelled]

    @staticmethod
    def _result(sentence: _Sentence) -> np.ndarray:
        """The words' vectors of the layers asked, `[forward; backward]`: (words, 2 * width) for "top",
        (layers, words, 2 * width) for "all"."""
        import torch

        kept = sentence.progress if sentence.layers == "all" else sentence.progress[-1:]
        layers = [torch.stack(progress.outputs, dim=1) for progress in kept]  # each (2, tokens, width)
        if sentence.layers == "all":
            layers.insert(0, sentence.embeddings)
        words = [torch.cat([layer[0, 1:-1], layer[1].flip(0)[1:-1]], dim=-1) for layer in layers]
        values = torch.stack(words) if sentence.layers == "all" else words[0]
        return values.float().cpu().numpy()
