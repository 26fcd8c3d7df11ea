"""What a model card says about an original model's source (corpus, language, license, citations), as data: the
conversion commands read it without the card renderer (`model_card`), which imports torch and Jinja2."""

from dataclasses import dataclass

UNKNOWN_CORPUS = "unknown (not one of the official presets)"
ORIGINAL_LICENSE = "apache-2.0"
ELMO_CITATION = """@inproceedings{peters-etal-2018-deep,
  title = {Deep Contextualized Word Representations},
  author = {Peters, Matthew E. and Neumann, Mark and Iyyer, Mohit and Gardner, Matt and Clark, Christopher and
            Lee, Kenton and Zettlemoyer, Luke},
  booktitle = {Proceedings of NAACL-HLT 2018},
  pages = {2227--2237},
  year = {2018},
  url = {https://aclanthology.org/N18-1202}
}"""


@dataclass(frozen=True)
class SourceFacts:
    """What a card says about the original model, each fact as its source states it.

    `language`: ISO 639 code(s) for the card metadata, None when the source names none; `corpus`: the training
    corpus and its size; `license`: a Hub license id, None when the source states none (`license_text` says so);
    `citations`: BibTeX entries; `source_notes`: the source's own README, quoted on the card.
    """

    title: str
    origin: str
    corpus: str
    language: str | list[str] | None
    license: str | None
    license_text: str
    citations: tuple[str, ...] = (ELMO_CITATION,)
    datasets: tuple[str, ...] = ()
    source_notes: str | None = None


ALLENNLP_SOURCE = SourceFacts(
    title="ELMo",
    origin="the original bilm-tf / AllenNLP checkpoint",
    corpus=UNKNOWN_CORPUS,
    language="en",
    license=ORIGINAL_LICENSE,
    license_text="Apache-2.0 (AllenNLP / bilm-tf)",
)

__all__ = ["ALLENNLP_SOURCE", "ELMO_CITATION", "ORIGINAL_LICENSE", "UNKNOWN_CORPUS", "SourceFacts"]
