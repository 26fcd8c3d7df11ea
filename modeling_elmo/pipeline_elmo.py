"""`pipeline("token-classification")` and `pipeline("feature-extraction")` for ELMo: word-level predictions on raw
text with exact character offsets, and one vector per word.

The stock pipeline reads one id per token and needs a fast tokenizer for offsets and for the `first`/`max`/`average`
strategies. ELMo's tokenizer gives one row of character ids per word and per-word offsets into the raw string, so
every token is a whole word and the word strategies are exact (one token per word).

The stock feature-extraction pipeline returns every position of the model's output: batched (`batch_size` > 1),
a short text gets a vector for each padding position of the longest one, and `[]` fails. ELMo's keeps the positions
of the text's words only, whatever the batch, and gives `[]` for `[]`.

How `pipeline()` finds these classes: this file ships with the model code (remote code, like the model), and every
ELMo config declares them in `custom_pipelines` (`configuration_elmo.CUSTOM_PIPELINES`: token classification, its
alias `ner`, and feature extraction). The calls that work in every environment are therefore

    pipeline("token-classification", model=REPO_OR_DIR, trust_remote_code=True)
    pipeline("feature-extraction", model=REPO_OR_DIR, trust_remote_code=True)

The trade-off: Transformers runs a pipeline that a config declares only with `trust_remote_code=True`, even where
this package is installed. Without the flag, `pipeline()` stops with its own "Loading this pipeline requires you to
execute the code in the pipeline file in that repo ... set the option `trust_remote_code=True`". With the flag and
the package installed, the pipeline and tokenizer come from the folder's copy of the code and the config and model
from the package (Transformers prefers registered classes for those two); for a folder written by this package
version the code is the same. To run the installed code only, pass `pipeline_class=ElmoTokenClassificationPipeline`
(or `ElmoFeatureExtractionPipeline`) instead of the flag. The alternative, registering the classes in
`PIPELINE_REGISTRY` on `import modeling_elmo`, would keep the plain call working for package users, but it replaces
the task's class for every model in the process and does nothing where the package is missing; it is not done, and
importing the package changes no pipeline. Also:
- `pipeline(model=...)` without a task cannot choose between the declared names and asks for one.
- a model passed as an object, not a path or repo id, gives `pipeline()` no config to read: pass `pipeline_class`.
- folders saved before a declaration existed run through `pipeline_class`, or after a load and save with the package.
"""

from typing import Any

import numpy as np
import torch
from transformers import FeatureExtractionPipeline, TokenClassificationPipeline
from transformers.pipelines.token_classification import AggregationStrategy

_WORD_STRATEGIES = {AggregationStrategy.FIRST, AggregationStrategy.MAX, AggregationStrategy.AVERAGE}


def _check_inputs(pipeline: Any, inputs: Any) -> None:
    """Refuse, by name, an input that is neither text nor a collection of texts."""
    if isinstance(inputs, (bytes, bytearray, dict)) or not (isinstance(inputs, str) or hasattr(inputs, "__iter__")):
        raise ValueError(
            f"{type(pipeline).__name__} takes a string, a list of strings, a dataset or a generator, got "
            f"{type(inputs).__name__}."
        )


class ElmoTokenClassificationPipeline(TokenClassificationPipeline):
    """Token classification with `ElmoTokenizer`: one entity per word, offsets into the raw text."""

    def _sanitize_parameters(
        self,
        ignore_labels: list[str] | None = None,
        aggregation_strategy: AggregationStrategy | str | None = None,
        stride: int | None = None,
        is_split_into_words: bool = False,
        delimiter: str | None = None,
        **kwargs: Any,
    ) -> tuple[dict, dict, dict]:
        if stride is not None:
            raise ValueError("ElmoTokenClassificationPipeline does not support `stride` (ELMo has no length limit).")
        if isinstance(aggregation_strategy, str):
            if aggregation_strategy.upper() not in AggregationStrategy.__members__:
                choices = ", ".join(repr(strategy.value) for strategy in AggregationStrategy)
                raise ValueError(f"aggregation_strategy must be one of {choices}, got {aggregation_strategy!r}.")
            aggregation_strategy = AggregationStrategy[aggregation_strategy.upper()]
        # the stock check rejects word strategies for slow tokenizers; for whole-word tokens they are exact
        word_strategy = aggregation_strategy if aggregation_strategy in _WORD_STRATEGIES else None
        preprocess, forward, postprocess = super()._sanitize_parameters(
            ignore_labels=ignore_labels, aggregation_strategy=None if word_strategy else aggregation_strategy, **kwargs
        )
        if word_strategy:
            postprocess["aggregation_strategy"] = word_strategy
        # pre-split words are read here, not by the stock pipeline (Transformers 4.x's takes none)
        preprocess.update(is_split_into_words=is_split_into_words, delimiter=" " if delimiter is None else delimiter)
        return preprocess, forward, postprocess

    def __call__(self, inputs: Any, **kwargs: Any) -> list:
        """As [`TokenClassificationPipeline.__call__`]; an input that is neither text nor a collection of texts is
        refused by name (the stock message is "At least one input is required")."""
        _check_inputs(self, inputs)
        if kwargs.get("is_split_into_words") and isinstance(inputs, (list, tuple)):
            if not all(isinstance(words, list) for words in inputs):  # one pre-split sentence: a batch of one
                inputs = [list(inputs)]
        return super().__call__(inputs, **kwargs)

    def preprocess(self, sentence: str | list[str], **preprocess_params: Any):
        """One model input per sentence: raw text (split by the tokenizer) or a list of words."""
        if preprocess_params["is_split_into_words"]:
            if not isinstance(sentence, list):
                raise ValueError("When `is_split_into_words=True`, `sentence` must be a list of words.")
            for index, word in enumerate(sentence):  # a blank word would be an entity of no text
                if not isinstance(word, str) or not word.strip():
                    raise ValueError(
                        f"When `is_split_into_words=True`, every word must be a string with a non-space character; "
                        f"word {index} is {word!r}."
                    )
            delimiter = preprocess_params["delimiter"]
            offsets, position = [], 0
            for word in sentence:
                offsets.append((position, position + len(word)))
                position += len(word) + len(delimiter)
            inputs = self.tokenizer(
                [sentence], is_split_into_words=True, return_special_tokens_mask=True, return_tensors="pt"
            )
            inputs["offset_mapping"] = [offsets]
            sentence = delimiter.join(sentence)
        else:
            if not isinstance(sentence, str):
                raise ValueError("When `is_split_into_words=False`, `sentence` must be an untokenized string.")
            inputs = self.tokenizer(
                [sentence], return_offsets_mapping=True, return_special_tokens_mask=True, return_tensors="pt"
            )
        yield {**inputs, "sentence": sentence, "is_last": True}

    def gather_pre_entities(
        self,
        sentence: str,
        input_ids: Any,
        scores: np.ndarray,
        offset_mapping: Any,
        special_tokens_mask: np.ndarray,
        aggregation_strategy: AggregationStrategy,
        word_ids: list[int | None] | None = None,
        word_to_chars_map: list[tuple[int, int]] | None = None,
    ) -> list[dict]:
        """One pre-entity per word: its text is the slice of the input at the word's offsets."""
        pre_entities = []
        for index, word_scores in enumerate(scores):
            if special_tokens_mask[index]:
                continue
            start, end = (int(value) for value in offset_mapping[index])
            pre_entities.append(
                {
                    "word": sentence[start:end],
                    "scores": word_scores,
                    "start": start,
                    "end": end,
                    "index": index,
                    "is_subword": False,
                }
            )
        return pre_entities

    def postprocess(
        self,
        all_outputs: list[dict],
        aggregation_strategy: AggregationStrategy = AggregationStrategy.NONE,
        ignore_labels: list[str] | None = None,
    ) -> list[dict]:
        entities = super().postprocess(all_outputs, aggregation_strategy, ignore_labels)
        sentence = all_outputs[0]["sentence"]
        for entity in entities:  # group words come from the input text, not from joining tokens
            entity["word"] = sentence[entity["start"] : entity["end"]]
        return entities


class ElmoFeatureExtractionPipeline(FeatureExtractionPipeline):
    """Feature extraction with `ElmoModel`: the top layer, one vector per word of each text (`[1, words, hidden]`,
    `[[]]` for a text without words), batched or not; `[]` gives `[]`."""

    def __call__(self, inputs: Any, **kwargs: Any) -> Any:
        """As [`FeatureExtractionPipeline.__call__`], for one text or a collection of texts; `[]` gives `[]`."""
        _check_inputs(self, inputs)
        if isinstance(inputs, (list, tuple)) and not inputs:
            return []
        return super().__call__(inputs, **kwargs)

    def preprocess(self, inputs: str, **tokenize_kwargs: Any) -> dict[str, torch.Tensor]:
        if not isinstance(inputs, str):
            raise ValueError(f"{type(self).__name__} takes texts as strings, got {type(inputs).__name__}.")
        return super().preprocess(inputs, **tokenize_kwargs)

    def _forward(self, model_inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The top layer `[batch, positions, hidden]` and the mask of the positions that hold words."""
        hidden = self.model(**model_inputs)[0]
        return {"last_hidden_state": hidden, "attention_mask": model_inputs["attention_mask"]}

    def postprocess(self, model_outputs: dict[str, torch.Tensor], return_tensors: bool = False) -> Any:
        """The vectors of the text's words `[1, words, hidden]`: a batch's padding positions are dropped."""
        words = model_outputs["attention_mask"][0].bool()
        vectors = model_outputs["last_hidden_state"][:, words]
        return vectors if return_tensors else vectors.tolist()


__all__ = ["ElmoFeatureExtractionPipeline", "ElmoTokenClassificationPipeline"]
