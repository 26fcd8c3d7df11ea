"""Run by test_hub.py as `python -I -S load_without_package.py SITE_PACKAGES REQUEST_JSON`: an interpreter that sees
site-packages but not this project (no editable-install hook, no repo on sys.path), as a user without the package.

Loads the repo `request["repo_id"]` by id with `trust_remote_code=True` (offline from the HF cache, or from
`HF_ENDPOINT`), runs `request["sentences"]` and saves the results to `request["output"]` for the test to compare.
"""

import importlib.util
import json
import sys

sys.path.append(sys.argv[1])
request = json.loads(open(sys.argv[2], encoding="utf-8").read())
if importlib.util.find_spec("modeling_elmo") is not None:
    raise SystemExit("modeling_elmo is importable: this interpreter is not clean")

import torch  # noqa: E402
from huggingface_hub import snapshot_download  # noqa: E402
from transformers import AutoModel, AutoModelForTokenClassification, AutoTokenizer  # noqa: E402

repo_id = request["repo_id"]
tokenizer = AutoTokenizer.from_pretrained(repo_id, trust_remote_code=True)
model = AutoModel.from_pretrained(repo_id, trust_remote_code=True)
tagger = AutoModelForTokenClassification.from_pretrained(repo_id, trust_remote_code=True, num_labels=3)
batch = tokenizer(request["sentences"], is_split_into_words=True, padding=True, return_tensors="pt")
with torch.no_grad():
    hidden_states = model(**batch, output_hidden_states=True).hidden_states
    logits = tagger(**batch).logits
torch.save(
    {
        "hidden_states": [layer.clone() for layer in hidden_states],
        "attention_mask": batch["attention_mask"],
        "logits_shape": list(logits.shape),
        "classes": [type(obj).__module__ + "." + type(obj).__name__ for obj in (tokenizer, model, tagger)],
        "modeling_elmo_in_sys_modules": "modeling_elmo" in sys.modules,
        "snapshot": snapshot_download(repo_id),
    },
    request["output"],
)
