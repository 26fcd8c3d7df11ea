"""`pipeline("token-classification")` for ELMo: word-level predictions on raw text with exact character offsets.

The stock pipeline assumes 2-D sub-word ids and a fast tokenizer for offsets and the `first`/`max`/`average`
strategies. ELMo's tokenizer gives one 3-D row of character ids per word and per-word offsets into the raw string,
so every token is a whole word: the word-aggregation strategies are trivially well-defined (one token per word).
`ElmoTokenClassificationPipeline` is registered for the task; for any other tokenizer it behaves exactly like the
stock pipeline.
"""

from transformers import AutoModelForTokenClassification, TokenClassificationPipeline
from transformers.pipelines import PIPELINE_REGISTRY, SUPPORTED_TASKS
from transformers.pipelines.token_classification import AggregationStrategy
from transformers.utils import logging

from .tokenization_elmo import ElmoTokenizer

_WORD_STRATEGIES = {AggregationStrategy.FIRST, AggregationStrategy.MAX, AggregationStrategy.AVERAGE}


class ElmoTokenClassificationPipeline(TokenClassificationPipeline):
    """Token classification with [`ElmoTokenizer`] (any other tokenizer: the stock behaviour)."""

    @property
    def _is_elmo(self) -> bool:
        return isinstance(self.tokenizer, ElmoTokenizer)

    def _sanitize_parameters(self, ignore_labels=None, aggregation_strategy=None, **kwargs):
        if not self._is_elmo:
            return super()._sanitize_parameters(ignore_labels, aggregation_strategy, **kwargs)
        if isinstance(aggregation_strategy, str):
            aggregation_strategy = AggregationStrategy[aggregation_strategy.upper()]
        # the stock check rejects word strategies for slow tokenizers; for whole-word tokens they are exact
        word_strategy = aggregation_strategy if aggregation_strategy in _WORD_STRATEGIES else None
        preprocess, forward, postprocess = super()._sanitize_parameters(
            ignore_labels, None if word_strategy else aggregation_strategy, **kwargs
        )
        if word_strategy:
            postprocess["aggregation_strategy"] = word_strategy
        return preprocess, forward, postprocess

    def preprocess(self, sentence, offset_mapping=None, **preprocess_params):
        if not self._is_elmo:
            yield from super().preprocess(sentence, offset_mapping=offset_mapping, **preprocess_params)
            return
        if preprocess_params.get("tokenizer_params"):
            raise ValueError("ElmoTokenClassificationPipeline does not support `stride` (ELMo has no length limit).")
        if preprocess_params["is_split_into_words"]:
            if not isinstance(sentence, list):
                raise ValueError("When `is_split_into_words=True`, `sentence` must be a list of words.")
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
        sentence,
        input_ids,
        scores,
        offset_mapping,
        special_tokens_mask,
        aggregation_strategy,
        word_ids=None,
        word_to_chars_map=None,
    ) -> list[dict]:
        """One pre-entity per word: its text is the slice of the input at the word's offsets."""
        if not self._is_elmo:
            return super().gather_pre_entities(
                sentence,
                input_ids,
                scores,
                offset_mapping,
                special_tokens_mask,
                aggregation_strategy,
                word_ids=word_ids,
                word_to_chars_map=word_to_chars_map,
            )
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

    def postprocess(self, all_outputs, aggregation_strategy=AggregationStrategy.NONE, ignore_labels=None):
        entities = super().postprocess(all_outputs, aggregation_strategy, ignore_labels)
        if self._is_elmo:  # group words come from the input text, not from joining tokens
            sentence = all_outputs[0]["sentence"]
            for entity in entities:
                entity["word"] = sentence[entity["start"] : entity["end"]]
        return entities


def register_pipeline() -> None:
    """Serve the `token-classification` (and `ner`) task with this class, keeping the task's default model."""
    stock = SUPPORTED_TASKS["token-classification"]
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()  # silence "already registered. Overwriting": replacing it is the point
    try:
        PIPELINE_REGISTRY.register_pipeline(
            "token-classification",
            pipeline_class=ElmoTokenClassificationPipeline,
            pt_model=AutoModelForTokenClassification,
            default=stock.get("default"),
            type=stock.get("type", "text"),
        )
    finally:
        logging.set_verbosity(verbosity)


__all__ = ["ElmoTokenClassificationPipeline", "register_pipeline"]
