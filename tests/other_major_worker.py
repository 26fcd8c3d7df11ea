"""Run by test_transformers_majors.py, under this Python or the other Transformers major's, as

    python WORKER REQUEST_JSON                    (with the package, as installed there)
    python -I -S WORKER REQUEST_JSON SITE_PACKAGES  (without it: site-packages only, the package hidden)

Request: `folder` (the model folder), `sentences` (pre-split words), `output` (a torch.save file), optionally `save`:
`{"source": converted biLM folder, "labels": [...], "seed": int}` to first build a tagger from `source` with a new head
and save it with its tokenizer into `folder` (with the package only). Then loads `folder` through the Auto classes
(`trust_remote_code=True` without the package) and writes: every layer of the base model, the tagger's logits, the
entities of `pipeline("token-classification")`, the classes' modules and the Transformers version.
"""

import json
import sys
from pathlib import Path

if len(sys.argv) > 2:
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # -I leaves this script's folder off sys.path
    from without_package import use_site_packages_without_package

    use_site_packages_without_package(sys.argv[2])
request = json.loads(open(sys.argv[1], encoding="utf-8").read())
with_package = len(sys.argv) == 2

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModel, AutoModelForTokenClassification, AutoTokenizer, pipeline  # noqa: E402

if with_package:
    import modeling_elmo

if "save" in request:
    build = request["save"]
    labels = build["labels"]
    torch.manual_seed(build["seed"])
    tagger = modeling_elmo.ElmoForTokenClassification.from_pretrained(
        build["source"], id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)}
    )
    tagger.save_pretrained(request["folder"])
    modeling_elmo.ElmoTokenizer.from_pretrained(build["source"]).save_pretrained(request["folder"])

folder, remote = request["folder"], not with_package
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=remote)
model = AutoModel.from_pretrained(folder, trust_remote_code=remote).eval()
tagger = AutoModelForTokenClassification.from_pretrained(folder, trust_remote_code=remote).eval()
batch = tokenizer(request["sentences"], is_split_into_words=True, padding=True, return_tensors="pt")
with torch.no_grad():
    hidden_states = [layer.clone() for layer in model(**batch, output_hidden_states=True).hidden_states]
    logits = tagger(**batch).logits
tag = pipeline("token-classification", model=folder, trust_remote_code=True)
entities = [
    [(e["entity"], e["start"], e["end"], e["word"]) for e in tag(" ".join(words))] for words in request["sentences"]
]
torch.save(
    {
        "transformers_version": transformers.__version__,
        "classes": [type(obj).__module__ for obj in (tokenizer, model, tagger, tag)],
        "attention_mask": batch["attention_mask"],
        "hidden_states": hidden_states,
        "logits": logits,
        "entities": entities,
        "modeling_elmo_in_sys_modules": "modeling_elmo" in sys.modules,
    },
    request["output"],
)
