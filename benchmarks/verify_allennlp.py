"""
Cross-check `modeling_elmo.allennlp` against AllenNLP itself (never a test, never a dependency): the same scenarios
run once on AllenNLP 2.10.1 (in the venv of ../shared/peers, through its `allennlp_shim`) and once on this project,
in separate processes, and every output is compared.

    python benchmarks/verify_allennlp.py --peer-python "$PEER_DIR/venv/bin/python" \
        --allennlp-09-elmo /path/to/allennlp-v0.9.0/allennlp/commands/elmo.py

Scenarios, on the fixture biLM and on a random biLM with 3 LSTM layers and tight clips (so the clipping paths fire):
stateful sequences of batches of different sizes (growing, shrinking, an empty sentence), `reset_states()` with and
without a row mask, `Elmo` with every option (several mixes, layer norm, kept boundaries, fixed mix parameters,
training mode, gradients into the mixes, `vocab_to_cache` with `word_inputs` and the fallback, inputs with 4
dimensions, `word_inputs` without a cache), `ElmoTokenEmbedder` with a projection, `_ElmoCharacterEncoder`,
`batch_to_ids` on awkward tokens; and AllenNLP 0.9's `ElmoEmbedder` (its own source file, `allennlp/commands/elmo.py`
at tag v0.9.0, run on AllenNLP 2.10.1's `_ElmoBiLm`) against ours: `embed_sentences` and `embed_file` in every
format, compared dataset by dataset (names, shapes, dtypes, values, `sentence_to_index`). Exit status 1 when anything
differs by more than --tolerance (1e-5).
"""

import argparse
import importlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import h5py
import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
FIXTURE = SHARED / "fixtures" / "elmo"
EXTRA_SENTENCES = [
    [],
    ["Ünïcödé", "naïve", "日本語", "x" * 70],
    ["<S>", "</S>", "", "a"],
    ["A"],
]


# ---- the two APIs -----------------------------------------------------------------------------------------------


def allennlp_api(elmo_09_source: str | None) -> types.SimpleNamespace:
    """AllenNLP 2.10.1's classes (and 0.9's ElmoEmbedder, executed from its source) in the peer venv."""
    sys.path.insert(0, str(SHARED / "peers"))
    from allennlp_shim import _stub_package, load_elmo

    elmo, nn_util = load_elmo()
    modules = Path(sys.modules["allennlp.modules"].__path__[0])
    _stub_package("allennlp.modules.token_embedders", str(modules / "token_embedders"))
    embedding = importlib.import_module("allennlp.modules.token_embedders.embedding")
    sys.modules["allennlp.modules.token_embedders"].Embedding = embedding.Embedding
    token_embedder = importlib.import_module("allennlp.modules.token_embedders.elmo_token_embedder")
    api = types.SimpleNamespace(
        Elmo=elmo.Elmo,
        _ElmoBiLm=elmo._ElmoBiLm,
        _ElmoCharacterEncoder=elmo._ElmoCharacterEncoder,
        batch_to_ids=elmo.batch_to_ids,
        remove_sentence_boundaries=nn_util.remove_sentence_boundaries,
        ElmoTokenEmbedder=token_embedder.ElmoTokenEmbedder,
        ElmoEmbedder=None,
    )
    if elmo_09_source:
        source = Path(elmo_09_source).read_text()
        source = source.replace("lazy_groups_of, prepare_global_logging", "lazy_groups_of")
        source = source.replace("from allennlp.commands.subcommand import Subcommand", "Subcommand = object")
        namespace = {"__name__": "allennlp_09_elmo"}
        exec(compile(source, elmo_09_source, "exec"), namespace)
        api.ElmoEmbedder = namespace["ElmoEmbedder"]
    return api


def our_api() -> types.SimpleNamespace:
    sys.path.insert(0, str(ROOT))
    from modeling_elmo import allennlp

    return types.SimpleNamespace(**{name: getattr(allennlp, name) for name in allennlp.__all__})


# ---- the scenarios (the same code on either API) ------------------------------------------------------------------


def fixture_sentences() -> list[list[str]]:
    rows = json.loads((FIXTURE / "sentences.json").read_text())
    return [sentence.split() for row in rows for sentence in row]


def batches_of(sentences: list[list[str]], sizes: list[int]) -> list[list[list[str]]]:
    batches, start = [], 0
    for size in sizes:
        batches.append([sentences[(start + k) % len(sentences)] for k in range(size)])
        start += size
    return batches


def bilm_outputs(bilm, api, batches, prefix: str, out: dict) -> None:
    for index, batch in enumerate(batches):
        with torch.no_grad():
            result = bilm(api.batch_to_ids(batch))
        out[f"{prefix}/{index}/mask"] = result["mask"].numpy()
        for layer, activations in enumerate(result["activations"]):
            out[f"{prefix}/{index}/layer{layer}"] = activations.numpy()


def elmo_outputs(elmo, api, batches, prefix: str, out: dict, word_ids=None, grads: bool = False) -> None:
    for index, batch in enumerate(batches):
        ids = api.batch_to_ids(batch)
        words = None if word_ids is None else word_ids(batch)
        result = elmo(ids, words)
        out[f"{prefix}/{index}/mask"] = result["mask"].numpy()
        for k, representation in enumerate(result["elmo_representations"]):
            out[f"{prefix}/{index}/rep{k}"] = representation.detach().numpy()
        if grads:
            sum(r.sum() for r in result["elmo_representations"]).backward()
    if grads:
        for name, parameter in elmo.named_parameters():
            if "scalar_mix" in name:
                out[f"{prefix}/grad/{name}"] = parameter.grad.numpy().copy()


def run_scenarios(api, options: str, weights: str, tag: str) -> dict:
    files = (options, weights)
    sentences = fixture_sentences() + EXTRA_SENTENCES
    stateful_sizes = [3, 1, 5, 2, 7, 4, 1, 3, 6]
    out: dict = {}

    out[f"{tag}/batch_to_ids"] = api.batch_to_ids(EXTRA_SENTENCES[1:]).numpy()
    bilm = api._ElmoBiLm(*files).eval()
    bilm_outputs(bilm, api, batches_of(sentences, stateful_sizes), f"{tag}/bilm-stateful", out)
    bilm._elmo_lstm.reset_states()
    bilm_outputs(bilm, api, batches_of(sentences[5:], [4, 2]), f"{tag}/bilm-after-reset", out)
    bilm._elmo_lstm.reset_states(torch.tensor([True, False, True, False]))
    bilm_outputs(bilm, api, batches_of(sentences[9:], [7, 3]), f"{tag}/bilm-after-row-reset", out)
    with_empty = [[sentences[0], [], sentences[1]], [[], sentences[5]], [sentences[2], sentences[3], [], sentences[4]]]
    bilm_outputs(api._ElmoBiLm(*files).eval(), api, with_empty, f"{tag}/bilm-empty-rows", out)

    encoder = api._ElmoCharacterEncoder(*files)
    with torch.no_grad():
        encoded = encoder(api.batch_to_ids(sentences[30:34] + sentences[:2]))
    out[f"{tag}/char-encoder/token_embedding"] = encoded["token_embedding"].numpy()
    out[f"{tag}/char-encoder/mask"] = encoded["mask"].numpy()

    num_layers = bilm.num_layers
    sequence = batches_of(sentences, [3, 5, 2])
    variants = {
        "two-mixes": dict(num_output_representations=2),
        "layer-norm": dict(num_output_representations=1, do_layer_norm=True),
        "boundaries": dict(num_output_representations=2, keep_sentence_boundaries=True),
        "layer-norm-boundaries": dict(num_output_representations=1, do_layer_norm=True, keep_sentence_boundaries=True),
        "fixed-mix": dict(num_output_representations=1, scalar_mix_parameters=[0.5 * k for k in range(num_layers)]),
    }
    for name, kwargs in variants.items():
        with torch.no_grad():
            elmo_outputs(api.Elmo(*files, **kwargs).eval(), api, sequence, f"{tag}/elmo-{name}", out)
    training = api.Elmo(*files, 2, dropout=0.0, requires_grad=False).train()
    elmo_outputs(training, api, sequence, f"{tag}/elmo-train-grads", out, grads=True)
    fine_tuned = api.Elmo(*files, 1, dropout=0.0, requires_grad=True, do_layer_norm=True).train()
    elmo_outputs(fine_tuned, api, sequence, f"{tag}/elmo-requires-grad", out, grads=True)

    vocab = ["@@PADDING@@", "@@UNKNOWN@@", *sorted({word for s in sentences[:12] for word in s})]

    def word_ids(batch):
        width = max(len(s) for s in batch)
        return torch.tensor(
            [[vocab.index(w) if w in vocab else 10_000 for w in s] + [0] * (width - len(s)) for s in batch]
        )

    cached = batches_of(sentences, [4, 2, 3]) + [sentences[20:23]]  # the last batch has unknown words: fallback
    with torch.no_grad():
        elmo_outputs(api.Elmo(*files, 1, vocab_to_cache=vocab).eval(), api, cached, f"{tag}/elmo-cache", out, word_ids)
        elmo_outputs(api.Elmo(*files, 1).eval(), api, sequence, f"{tag}/elmo-words-no-cache", out, word_ids)
        four_d = api.Elmo(*files, 1).eval()
        groups = ([s[:6] for s in sentences[:2]], [sentences[10][:6], sentences[11][:3]])  # 6 timesteps each
        ids = torch.stack([api.batch_to_ids(batch) for batch in groups], 1)
        result = four_d(ids)
        out[f"{tag}/elmo-4d/rep0"] = result["elmo_representations"][0].numpy()
        out[f"{tag}/elmo-4d/mask"] = result["mask"].numpy()

        embedder = api.ElmoTokenEmbedder(*files, projection_dim=7).eval()
        weight = embedder._projection.weight
        weight.copy_(torch.linspace(-1, 1, weight.numel()).view_as(weight))
        embedder._projection.bias.copy_(torch.linspace(-0.5, 0.5, 7))
        for index, batch in enumerate(sequence):
            out[f"{tag}/token-embedder/{index}"] = embedder(api.batch_to_ids(batch)).numpy()
    return out


def run_embedder(api, options: str, weights: str, folder: Path, tag: str) -> dict:
    """0.9's ElmoEmbedder: embed_sentences (an empty sentence included) and embed_file in every format."""
    out: dict = {}
    sentences = fixture_sentences()
    embedder = api.ElmoEmbedder(options, weights)
    for index, array in enumerate(embedder.embed_sentences([*sentences[:5], [], *sentences[5:9]], batch_size=4)):
        out[f"{tag}/embed_sentences/{index}"] = array
    out[f"{tag}/embed_sentence"] = embedder.embed_sentence(sentences[10])
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(" ".join(s) for s in [*sentences[:20], sentences[3]]) + "\n", encoding="utf-8")
    settings = {
        "all": dict(output_format="all"),
        "top": dict(output_format="top", batch_size=3),
        "average": dict(output_format="average", batch_size=5),
        "forget": dict(output_format="all", forget_sentences=True),
    }
    for name, kwargs in settings.items():
        target = folder / f"{tag}-{name}.hdf5"
        with open(corpus, encoding="utf-8") as handle:
            api.ElmoEmbedder(options, weights).embed_file(handle, str(target), **kwargs)
        out[f"{tag}/embed_file/{name}"] = str(target)
    keyed = folder / "keyed.txt"
    keyed.write_text("\n".join(" ".join(s) for s in sentences[:7]) + "\n", encoding="utf-8")
    target = folder / f"{tag}-sentence-keys.hdf5"
    with open(keyed, encoding="utf-8") as handle:
        api.ElmoEmbedder(options, weights).embed_file(handle, str(target), use_sentence_keys=True)
    out[f"{tag}/embed_file/sentence-keys"] = str(target)
    return out


# ---- comparison ---------------------------------------------------------------------------------------------------


def hdf5_contents(path: str) -> dict:
    contents = {}
    with h5py.File(path, "r") as handle:

        def visit(name, item):
            if isinstance(item, h5py.Dataset):
                contents[name] = (item.dtype.str if item.dtype.kind != "O" else "str", item[()])

        handle.visititems(visit)
    return contents


def compare(ours: dict, theirs: dict, tolerance: float) -> tuple[list[tuple[str, str]], dict[str, float]]:
    """Every output of both sides: (problems, largest difference per kind of output, the scenario's name without
    its model and batch); gradients relative to their largest value."""
    problems, worst = [], {}
    for name in sorted(set(ours) | set(theirs)):
        if name not in ours or name not in theirs:
            problems.append((name, "only in " + ("ours" if name in ours else "AllenNLP")))
            continue
        a, b = ours[name], theirs[name]
        if isinstance(a, str):  # an HDF5 file
            fa, fb = hdf5_contents(a), hdf5_contents(b)
            if sorted(fa) != sorted(fb):
                problems.append((name, f"datasets differ: {sorted(set(fa) ^ set(fb))[:5]}"))
                continue
            for key in fa:
                (dtype_a, va), (dtype_b, vb) = fa[key], fb[key]
                if dtype_a != dtype_b:
                    problems.append((f"{name}:{key}", f"dtype {dtype_a} vs {dtype_b}"))
                elif dtype_a == "str":
                    if [json.loads(x) for x in va] != [json.loads(x) for x in vb]:
                        problems.append((f"{name}:{key}", "sentence_to_index differs"))
                else:
                    difference = _difference(f"{name}:{key}", va, vb, tolerance, problems)
                    worst[_kind(name)] = max(worst.get(_kind(name), 0.0), difference)
            continue
        difference = _difference(name, np.asarray(a), np.asarray(b), tolerance, problems)
        worst[_kind(name)] = max(worst.get(_kind(name), 0.0), difference)
    return problems, worst


def _kind(name: str) -> str:
    """`model/scenario/...` -> `scenario` (with `/grad` for gradients, the format for embed_file)."""
    parts = name.split("/")
    if len(parts) > 2 and parts[2] == "grad" or parts[1] == "embed_file":
        return f"{parts[1]}/{parts[2]}"
    return parts[1]


def _difference(name: str, a: np.ndarray, b: np.ndarray, tolerance: float, problems: list) -> float:
    if a.shape != b.shape:
        problems.append((name, f"shape {a.shape} vs {b.shape}"))
        return 0.0
    if a.dtype == bool or b.dtype == bool or a.dtype.kind in "iu":
        if not np.array_equal(a.astype(np.int64), b.astype(np.int64)):
            problems.append((name, "values differ"))
        return 0.0
    if a.size == 0:
        return 0.0
    difference = float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64))))
    if "/grad/" in name:  # a gradient sums over every output element: compare relative to its size
        difference /= max(1.0, float(np.abs(b).max()))
    if not np.isfinite(a).all() or not np.isfinite(b).all() or difference > tolerance:
        problems.append((name, f"max abs difference {difference:.3g}"))
    return difference


# ---- driver -------------------------------------------------------------------------------------------------------


def side(args: argparse.Namespace) -> None:
    """One side's outputs, pickled to --work/{side}.pickle."""
    torch.manual_seed(0)
    torch.set_num_threads(2)
    api = allennlp_api(args.allennlp_09_elmo) if args.side == "allennlp" else our_api()
    work = Path(args.work)
    results = {}
    for tag, options, weights in json.loads(args.models):
        results.update(run_scenarios(api, options, weights, tag))
        if api.ElmoEmbedder is not None:
            folder = work / args.side
            folder.mkdir(exist_ok=True)
            results.update(run_embedder(api, options, weights, folder, tag))
    (work / f"{args.side}.pickle").write_bytes(pickle.dumps(results))


def make_random_model(peer_python: str, folder: Path) -> tuple[str, str]:
    subprocess.run(
        [peer_python, str(SHARED / "peers" / "make_random_elmo.py"), "--preset", "fixture", "--n-layers", "3",
         "--cell-clip", "0.5", "--proj-clip", "0.25", "--seed", "1", "--out-dir", str(folder)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return str(folder / "options.json"), str(folder / "lm_weights.hdf5")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer-python", help="python of the AllenNLP 2.10.1 venv (../shared/peers)")
    parser.add_argument("--allennlp-09-elmo", help="allennlp/commands/elmo.py of AllenNLP v0.9.0 (for ElmoEmbedder)")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--side", choices=["ours", "allennlp"], help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--models", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        side(args)
        return 0
    if not args.peer_python:
        parser.error("--peer-python is required")
    with tempfile.TemporaryDirectory() as work:
        models = [
            ("fixture", str(FIXTURE / "options.json"), str(FIXTURE / "lm_weights.hdf5")),
            ("random-3-layers-tight-clips", *make_random_model(args.peer_python, Path(work) / "random")),
        ]
        for name, python in (("allennlp", args.peer_python), ("ours", sys.executable)):
            command = [python, __file__, "--side", name, "--work", work, "--models", json.dumps(models)]
            if args.allennlp_09_elmo:
                command += ["--allennlp-09-elmo", args.allennlp_09_elmo]
            subprocess.run(command, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        ours, theirs = (pickle.loads((Path(work) / f"{name}.pickle").read_bytes()) for name in ("ours", "allennlp"))
        problems, worst = compare(ours, theirs, args.tolerance)
        print(f"{len(ours)} outputs compared (tolerance {args.tolerance:g}); largest difference by scenario:")
        for kind, difference in sorted(worst.items()):
            print(f"  {kind}: {difference:.3g}")
        for name, problem in problems:
            print(f"DIFFERS {name}: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
