"""The official English ELMo models released by AllenNLP, by name (`elmo-convert --preset NAME`)."""

from dataclasses import dataclass

ALLENNLP_ELMO_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"


@dataclass(frozen=True)
class Preset:
    """One of the official English ELMo models released by AllenNLP."""

    name: str
    stem: str
    corpus: str
    datasets: tuple[str, ...] = ()  # Hub dataset ids of the training corpus, for the model card metadata

    def source_urls(self, base_url: str = ALLENNLP_ELMO_URL) -> tuple[str, str]:
        """(options URL, weights URL) under `base_url`, laid out as on AllenNLP's server."""
        prefix = f"{base_url.rstrip('/')}/{self.stem}/elmo_{self.stem}"
        return f"{prefix}_options.json", f"{prefix}_weights.hdf5"

    @property
    def options_url(self) -> str:
        return self.source_urls()[0]

    @property
    def weights_url(self) -> str:
        return self.source_urls()[1]


ONE_BILLION_WORD = "1 Billion Word Language Model Benchmark (~800M tokens of news text)"
PRESETS = {
    preset.name: preset
    for preset in (
        Preset("small", "2x1024_128_2048cnn_1xhighway", ONE_BILLION_WORD, ("lm1b",)),
        Preset("medium", "2x2048_256_2048cnn_1xhighway", ONE_BILLION_WORD, ("lm1b",)),
        Preset("original", "2x4096_512_2048cnn_2xhighway", ONE_BILLION_WORD, ("lm1b",)),
        Preset(
            "original-5.5b",
            "2x4096_512_2048cnn_2xhighway_5.5B",
            "5.5B tokens: Wikipedia (1.9B) and WMT 2008-2012 monolingual news crawl (3.6B)",
            ("wikipedia",),
        ),
    )
}
