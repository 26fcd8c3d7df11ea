"""Run by test_hub.py and test_pipeline_remote_code.py as `python -I -S load_without_package.py SITE_PACKAGES
REQUEST_JSON`: an interpreter that sees site-packages but not this project (no editable-install hook, no repo on
sys.path, an installed wheel hidden: tests/without_package.py), as a user without the package.

Loads `request["repo_id"]` (a repo id, offline from the HF cache or from `HF_ENDPOINT`, or a folder) with
`trust_remote_code=True` and saves to `request["output"]`, for the test to compare:
- with `request["sentences"]` (pre-split words): the tokenizer, base model and tagger classes and their outputs;
- with `request["pipelines"]` (a list of `{"task", "kwargs", "inputs"}`): for each, the class of
  `pipeline(task, model=repo_id, trust_remote_code=True, **kwargs)` and its outputs on `inputs`, as plain Python,
  or the traceback that stopped it.
"""

import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # -I leaves this script's folder off sys.path
from without_package import use_site_packages_without_package  # noqa: E402

use_site_packages_without_package(sys.argv[1])
request = json.loads(open(sys.argv[2], encoding="utf-8").read())

import torch  # noqa: E402
from huggingface_hub import snapshot_download  # noqa: E402
from transformers import AutoModel, AutoModelForTokenClassification, AutoTokenizer, pipeline  # noqa: E402


def class_name(obj: object) -> str:
    return type(obj).__module__ + "." + type(obj).__name__


repo_id = request["repo_id"]
results = {}
if "sentences" in request:
    tokenizer = AutoTokenizer.from_pretrained(repo_id, trust_remote_code=True)
    model = AutoModel.from_pretrained(repo_id, trust_remote_code=True)
    tagger = AutoModelForTokenClassification.from_pretrained(repo_id, trust_remote_code=True, num_labels=3)
    batch = tokenizer(request["sentences"], is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden_states = model(**batch, output_hidden_states=True).hidden_states
        logits = tagger(**batch).logits
    results |= {
        "hidden_states": [layer.clone() for layer in hidden_states],
        "attention_mask": batch["attention_mask"],
        "logits_shape": list(logits.shape),
        "classes": [class_name(obj) for obj in (tokenizer, model, tagger)],
        "snapshot": snapshot_download(repo_id),
    }
results["pipelines"] = []
for run in request.get("pipelines", []):
    try:
        runner = pipeline(run["task"], model=repo_id, trust_remote_code=True, **run.get("kwargs", {}))
        outputs = runner(run["inputs"])
    except Exception:  # reported per run: one failing task does not hide the others
        results["pipelines"].append({"error": traceback.format_exc()})
        continue
    results["pipelines"].append(
        {
            "class": class_name(runner),
            "model_class": class_name(runner.model),
            "outputs": json.loads(json.dumps(outputs, default=float)),  # numpy scores as floats
        }
    )
results["modeling_elmo_in_sys_modules"] = "modeling_elmo" in sys.modules
torch.save(results, request["output"])
