"""The official English ELMo models released by AllenNLP, by name (`elmo-convert --preset NAME`), and the languages
of the published multilingual ELMo models (ISO 639 codes for model cards)."""

import re
from dataclasses import dataclass, replace

from ..hub.source_facts import ALLENNLP_SOURCE, ELMO_CITATION, SourceFacts

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

    @property
    def facts(self) -> SourceFacts:
        """What this preset's model card states about its source."""
        return replace(ALLENNLP_SOURCE, title=f"ELMo ({self.name})", corpus=self.corpus, datasets=self.datasets)


NLPL_CITATION = """@inproceedings{fares-etal-2017-word,
  title = {Word vectors, reuse, and replicability: Towards a community repository of large-text resources},
  author = {Fares, Murhaf and Kutuzov, Andrey and Oepen, Stephan and Velldal, Erik},
  booktitle = {Proceedings of the 21st Nordic Conference on Computational Linguistics},
  pages = {271--276},
  year = {2017},
  url = {https://aclanthology.org/W17-0237}
}"""
EFML_CITATION = """@inproceedings{che-etal-2018-towards,
  title = {Towards Better {UD} Parsing: Deep Contextualized Word Embeddings, Ensemble, and Treebank Concatenation},
  author = {Che, Wanxiang and Liu, Yijia and Wang, Yuxuan and Zheng, Bo and Liu, Ting},
  booktitle = {Proceedings of the {CoNLL} 2018 Shared Task: Multilingual Parsing from Raw Text to
               Universal Dependencies},
  pages = {55--64},
  year = {2018},
  url = {https://aclanthology.org/K18-2005}
}"""
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


@dataclass(frozen=True)
class Language:
    """A language of a published ELMo model: its English name, ISO 639-1 code (None when it has none), ISO 639-3
    code, and the NLPL repository id of its ELMoForManyLangs model (None for the simplified-Chinese one, which
    ELMoForManyLangs publishes elsewhere)."""

    name: str
    iso639_1: str | None
    iso639_3: str
    efml_nlpl_id: int | None

    @property
    def code(self) -> str:
        """The code for a model card's `language:` metadata: ISO 639-1 where the language has one, else 639-3."""
        return self.iso639_1 or self.iso639_3


# The 44 languages of ELMoForManyLangs (the table of its README, which links each model as
# http://vectors.nlpl.eu/repository/11/<id>.zip) and its simplified-Chinese model. Codes from the ISO 639-2
# registration authority's list (https://www.loc.gov/standards/iso639-2/php/code_list.php) and the ISO 639-3 code
# tables (https://iso639-3.sil.org/code_tables/639/data).
EFML_LANGUAGES = (
    Language("Arabic", "ar", "ara", 136),
    Language("Bulgarian", "bg", "bul", 137),
    Language("Catalan", "ca", "cat", 138),
    Language("Czech", "cs", "ces", 139),
    Language("Old Church Slavonic", "cu", "chu", 140),
    Language("Danish", "da", "dan", 141),
    Language("German", "de", "deu", 142),
    Language("Greek", "el", "ell", 143),
    Language("English", "en", "eng", 144),
    Language("Spanish", "es", "spa", 145),
    Language("Estonian", "et", "est", 146),
    Language("Basque", "eu", "eus", 147),
    Language("Persian", "fa", "fas", 148),
    Language("Finnish", "fi", "fin", 149),
    Language("French", "fr", "fra", 150),
    Language("Irish", "ga", "gle", 151),
    Language("Galician", "gl", "glg", 152),
    Language("Ancient Greek", None, "grc", 153),
    Language("Hebrew", "he", "heb", 154),
    Language("Hindi", "hi", "hin", 155),
    Language("Croatian", "hr", "hrv", 156),
    Language("Hungarian", "hu", "hun", 157),
    Language("Indonesian", "id", "ind", 158),
    Language("Italian", "it", "ita", 159),
    Language("Japanese", "ja", "jpn", 160),
    Language("Korean", "ko", "kor", 161),
    Language("Latin", "la", "lat", 162),
    Language("Latvian", "lv", "lav", 163),
    Language("Dutch", "nl", "nld", 164),
    Language("Norwegian Bokmål", "nb", "nob", 165),
    Language("Norwegian Nynorsk", "nn", "nno", 166),
    Language("Polish", "pl", "pol", 167),
    Language("Portuguese", "pt", "por", 168),
    Language("Romanian", "ro", "ron", 169),
    Language("Russian", "ru", "rus", 170),
    Language("Slovak", "sk", "slk", 171),
    Language("Slovene", "sl", "slv", 172),
    Language("Swedish", "sv", "swe", 173),
    Language("Turkish", "tr", "tur", 174),
    Language("Uyghur", "ug", "uig", 175),
    Language("Ukrainian", "uk", "ukr", 176),
    Language("Urdu", "ur", "urd", 177),
    Language("Vietnamese", "vi", "vie", 178),
    Language("Chinese (traditional)", "zh", "zho", 179),
    Language("Chinese (simplified)", "zh", "zho", None),
)
# Names the released models go by besides their codes: ELMoForManyLangs' README calls its Chinese folders zht/zhs.
_EFML_ALIASES = {"zht": EFML_LANGUAGES[-2], "zhs": EFML_LANGUAGES[-1]}
_ISO_CODE = re.compile(r"^[a-z]{2,3}$")


def efml_language(name: str) -> Language | None:
    """The ELMoForManyLangs language a model's file or folder name stands for, or None: the name up to its first
    dot (`136.zip`, `ar.model`, `zhs.model`), matched against the NLPL ids, ISO 639-1 and 639-3 codes, zht/zhs and
    the English names (case-insensitive)."""
    stem = name.split(".", 1)[0].strip().casefold()
    if stem in _EFML_ALIASES:
        return _EFML_ALIASES[stem]
    for language in EFML_LANGUAGES[:-1]:  # a code or name of Chinese means the traditional-Chinese release
        keys = {language.iso639_1, language.iso639_3, language.name.casefold(), str(language.efml_nlpl_id)}
        if stem in keys:
            return language
    return None


def card_language_code(code: str) -> str:
    """An ISO 639 code as a model card's `language:` gives it: a 639-3 code of a language with a 639-1 code becomes
    that code (`nob` -> `nb`); other codes are kept (lowercased). Raises ValueError for anything else."""
    code = code.strip().lower()
    if not _ISO_CODE.match(code):
        raise ValueError(f"{code!r} is not an ISO 639 language code (2 or 3 letters)")
    known = next((language for language in EFML_LANGUAGES if code == language.iso639_3), None)
    return known.code if known else code


# What ELMoForManyLangs' README states about its models' training data and what its repository's LICENSE says.
EFML_CORPUS = (
    "about 20 million words sampled from the raw text of the CoNLL 2018 shared task (Wikipedia dump and Common "
    "Crawl) for the language, as ELMoForManyLangs' README states"
)
EFML_SIMPLIFIED_CHINESE_CORPUS = (
    "the Xinhua portion of Chinese Gigaword fifth edition (LDC2011T13), as ELMoForManyLangs' README states"
)


def efml_source_facts(language: Language | None) -> SourceFacts:
    """What the card of a converted ELMoForManyLangs model states; `language` None: not known (left out)."""
    simplified = language is not None and language.efml_nlpl_id is None
    return SourceFacts(
        title=f"ELMo for {language.name} (ELMoForManyLangs)" if language else "ELMo (ELMoForManyLangs)",
        origin="an ELMoForManyLangs (HIT-SCIR) model",
        corpus=EFML_SIMPLIFIED_CHINESE_CORPUS if simplified else EFML_CORPUS,
        language=language.code if language else None,
        license="mit",
        license_text="MIT (the license of the ELMoForManyLangs repository, which releases the models)",
        citations=(ELMO_CITATION, EFML_CITATION, NLPL_CITATION),
    )
