"""
Batching at the time step for the biLM ("cellular batching", Gao et al., EuroSys 2018; what Orca and vLLM do for
transformers): a sentence joins the running rows at the next time step of the first layer and leaves each layer when
its sequence `<S> words </S>` ends there, so no sentence waits for a batch to finish and no step computes rows that
have ended. `elmo serve` runs it on its model's thread (`serve/batcher.py`); it knows nothing of requests beyond a key
to answer and a request to share the rows fairly between.

    scheduler = StepScheduler(model, tokenizer, max_rows=64, max_words=4096)
    scheduler.add(key, words, request, layers="top")    # queue a sentence
    while scheduler.busy:
        for key, result in scheduler.step():            # admit, run one time step of every layer
            ...                                         # an array (see `step`), or the exception that failed it

Each `step`:

1. **Admission.** While fewer than `max_rows` sentences run and their words stay within `max_words` (a sentence
   longer than that runs once nothing else does), the next queued sentence is taken, round robin between requests
   (one sentence of each waiting request in turn, each request's in its own order). Round robin, because a request's
   latency then depends on its own size, not on the requests queued before it: a one-sentence request beside a bulk
   client's thousand waits for two rows to free, not for the thousand (shortest first would starve long sentences;
   arrival order per sentence would queue it behind the bulk request). The admitted sentences' words run through the
   character CNN together (`ElmoCharacterEncoder.embed_words`: its word cache, one pass per distinct word), and their
   first layer's input-to-gate products run as one block.
2. **One time step of every layer.** Each layer's running sentences are one set of rows (both directions: a
   sentence's forward and backward sequences have the same length, so they start and end together); each row's gates
   at its own time step are gathered, and the layer's own time step runs on them: the CPU engine's
   (`LstmEngine.step_sets`, the products it chooses for that many rows) or a quantized layer's (`step_sets`). One
   recurrence: the same step products and cell as a forward call.
3. **Leaving.** Sentences whose sequence ended leave their layer; their outputs (with the skip connection above the
   first layer) are the next layer's inputs, whose input-to-gate products run as one block for all that leave
   together; after the top layer the sentence's result is assembled.

Each sentence starts from the model's initial (zero) state and never sees another's values, so its result equals the
model's on that sentence alone within float32 rounding (the products at other row counts, the character CNN beside
other words). Memory: each running sentence holds its layer's input-to-gate
products, (2, words + 2, 4 * lstm_cell_size) float32 ('original': 128 KiB per word), bounded by `max_words` and
`max_rows`.

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


@dataclass(eq=False)
class _Sentence:
    """One queued or running sentence: its `words`, what it is asked for (`layers`), and its progress."""

    key: Hashable
    request: Hashable
    words: list[str]
    layers: str
    inputs: torch.Tensor | None = None  # (2, tokens, width): the current layer's inputs, each direction's step order
    gates: torch.Tensor | None = None  # (2, tokens, 4 * cell_size): their input-to-gate products
    step: int = 0  # the current layer's next time step
    outputs: list[torch.Tensor] = field(default_factory=list)  # the current layer's (2, proj_size) per step done
    kept: list[torch.Tensor] = field(default_factory=list)  # the layers done, (2, tokens, width), the CNN's first
    cancelled: bool = False
    alone: bool = False  # runs alone: a failure touched it beside others

    def restart(self) -> None:
        """Back to the queue, alone, from the start."""
        self.inputs = self.gates = None
        self.step, self.outputs, self.kept, self.alone = 0, [], [], True

    @property
    def tokens(self) -> int:
        return len(self.words) + 2  # <S> words </S>


class _LayerRows:
    """The sentences running one biLM layer, in row order, and their state: hidden (2, rows, proj_size) and cell
    (2, rows, cell_size)."""

    def __init__(self) -> None:
        self.sentences: list[_Sentence] = []
        self.hidden: torch.Tensor | None = None
        self.cell: torch.Tensor | None = None


class StepScheduler:
    """
    Time-step batching of one `ElmoModel` (see the module docstring). Not thread-safe: one thread calls it.

    Args:
        model: an `ElmoModel` (float32 or quantized; stateless: `config.stateful` is refused).
        tokenizer: its `ElmoTokenizer`.
        max_rows: sentences running at once (in any layer).
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
        self._layers = [_LayerRows() for _ in model.bilm.layers]
        self._step_sets: dict[tuple[int, bool], list] = {}  # (layer, one row) -> its step sets, while busy
        self._engines: dict[int, object] = {}
        self._like = torch.empty(0, device=model.device)
        self._rows = 0

    @property
    def running(self) -> int:
        """Sentences admitted and not finished."""
        return sum(len(rows.sentences) for rows in self._layers)

    @property
    def queued(self) -> int:
        """Sentences waiting for admission."""
        return sum(len(sentences) for sentences in self._queued.values())

    @property
    def busy(self) -> bool:
        return bool(self._queued) or self.running > 0

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
        for rows in self._layers:
            for sentence in rows.sentences:
                if sentence.request == request:
                    sentence.cancelled = True

    def reset(self) -> list[Hashable]:
        """Drop every queued and running sentence; their keys."""
        dropped = [sentence.key for sentences in self._queued.values() for sentence in sentences]
        dropped += [sentence.key for rows in self._layers for sentence in rows.sentences]
        self._queued.clear()
        self._layers = [_LayerRows() for _ in self._layers]
        return dropped

    @property
    def rows(self) -> int:
        """Rows in the last time step's products (every layer's)."""
        return self._rows

    def step(self) -> list[tuple[Hashable, np.ndarray | Exception]]:
        """Admit queued sentences, run one time step of every layer, and return the sentences that finished: (key,
        array), or (key, exception) for one that failed alone."""
        import torch

        if not self.busy:
            return []
        finished: list[tuple[Hashable, np.ndarray | Exception]] = []
        with torch.inference_mode():
            admitted = self._admit()
            try:
                if admitted:
                    self._start_layer(0, admitted)
            except Exception as error:
                return self._failed(admitted, error)
            self._rows = self.running
            try:
                # from the top layer down, so that a sentence leaving a layer takes its next step in the next call
                for index in reversed(range(len(self._layers))):
                    finished += self._run_step(index)
            except Exception as error:
                touched = [sentence for rows in self._layers for sentence in rows.sentences]
                self._layers = [_LayerRows() for _ in self._layers]
                return finished + self._failed(touched, error)
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
        running = self.running
        words = sum(len(sentence.words) for rows in self._layers for sentence in rows.sentences)
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

    def _start_layer(self, index: int, sentences: list[_Sentence]) -> None:
        """`sentences` join layer `index`: the first layer's inputs from the character CNN, then their input-to-gate
        products as one block, and zero initial states."""
        import torch

        if index == 0:
            for sentence, embeddings in zip(sentences, self._token_embeddings(sentences), strict=True):
                sentence.inputs = torch.stack([embeddings, embeddings.flip(0)])  # (2, tokens, width)
        block = torch.cat([sentence.inputs for sentence in sentences], dim=1)  # (2, all tokens, width)
        gates = None
        for directions, input_to_gates, _ in self._sets(index, rows=block.shape[1]):  # a product of every token
            products = input_to_gates(block[directions])  # (D, all tokens, 4 * cell_size)
            if gates is None:
                gates = products.new_empty(2, *products.shape[1:])
            gates[directions] = products
        for sentence, part in zip(sentences, gates.split([s.tokens for s in sentences], dim=1), strict=True):
            sentence.gates, sentence.step, sentence.outputs = part, 0, []
        rows = self._layers[index]
        hidden = block.new_zeros(2, len(sentences), self.model.config.projection_dim)
        cell = block.new_zeros(2, len(sentences), self.model.config.lstm_cell_size)
        rows.hidden = hidden if rows.hidden is None else torch.cat([rows.hidden, hidden], dim=1)
        rows.cell = cell if rows.cell is None else torch.cat([rows.cell, cell], dim=1)
        rows.sentences += sentences

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

    # ---- time steps -----------------------------------------------------------------------------------------

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

                engine = self._engines.setdefault(index, LstmEngine())
                sets = engine.step_sets(layer.weights(), self._like, rows)
            self._step_sets[key] = sets
        return sets

    def _run_step(self, index: int) -> list[tuple[Hashable, np.ndarray]]:
        """One time step of layer `index`'s rows; the sentences that leave it go on to the next layer, or come back
        finished (key, array) from the top one."""
        import torch

        rows = self._layers[index]
        if not rows.sentences:
            return []
        count = len(rows.sentences)
        gates = torch.stack([sentence.gates[:, sentence.step] for sentence in rows.sentences], dim=1)
        hidden = gates.new_empty(2, count, rows.hidden.shape[-1])
        cell = torch.empty_like(rows.cell)
        for directions, _, time_step in self._sets(index, count):
            hidden[directions], cell[directions] = time_step(gates[directions], rows.hidden[directions],
                                                             rows.cell[directions])  # fmt: skip
        rows.hidden, rows.cell = hidden, cell
        leaving = []
        for sentence, output in zip(rows.sentences, hidden.unbind(1), strict=True):
            sentence.outputs.append(output)
            sentence.step += 1
            if sentence.step == sentence.tokens or sentence.cancelled:
                leaving.append(sentence)
        if not leaving:
            return []
        staying = [position for position, sentence in enumerate(rows.sentences) if sentence not in leaving]
        keep = torch.tensor(staying, dtype=torch.long, device=hidden.device)
        rows.sentences = [rows.sentences[position] for position in staying]
        rows.hidden, rows.cell = hidden.index_select(1, keep), cell.index_select(1, keep)
        done = [sentence for sentence in leaving if not sentence.cancelled]
        for sentence in done:
            outputs = torch.stack(sentence.outputs, dim=1)  # (2, tokens, proj_size)
            if index > 0 and self.model.bilm.use_skip_connections:
                outputs = outputs + sentence.inputs
            sentence.kept.append(sentence.inputs)
            sentence.inputs, sentence.gates, sentence.outputs = outputs, None, []
        if index + 1 < len(self._layers):
            if done:
                self._start_layer(index + 1, done)
            return []
        return [(sentence.key, self._result(sentence)) for sentence in done]

    @staticmethod
    def _result(sentence: _Sentence) -> np.ndarray:
        """The words' vectors of the layers asked, `[forward; backward]`: (words, 2 * width) for "top",
        (layers, words, 2 * width) for "all"."""
        import torch

        layers = [*sentence.kept, sentence.inputs] if sentence.layers == "all" else [sentence.inputs]
        words = [torch.cat([layer[0, 1:-1], layer[1].flip(0)[1:-1]], dim=-1) for layer in layers]
        values = torch.stack(words) if sentence.layers == "all" else words[0]
        return values.float().cpu().numpy()
