"""
The fixture biLM against the original TensorFlow outputs (../shared/fixtures/elmo) on a device, for a GPU session:
`ElmoModel` (stateful, the fixture's 10 batches of 3 sentences) through each of `--implementations`, and AllenNLP's
stateful test case through `modeling_elmo.allennlp._ElmoBiLm` (the model's default implementation on that device).
One line per check with its max abs error on the top layer; exit status 1 when one is over 2e-6 or did not run.

    python benchmarks/verify_cuda_fixture.py --fixture-dir shared/fixtures/elmo [--device cuda]
        [--implementations eager,triton]
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import h5py
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modeling_elmo import ElmoModel  # noqa: E402
from modeling_elmo.allennlp.bilm import _ElmoBiLm  # noqa: E402
from modeling_elmo.character_ids import word_to_char_ids  # noqa: E402
from modeling_elmo.conversion.convert import convert_checkpoint  # noqa: E402
from modeling_elmo.tokenization_elmo import char_ids_tensor  # noqa: E402

TOLERANCE = 2e-6


def fixture_batches(folder: Path) -> list[tuple[list[list[str]], list[np.ndarray]]]:
    """The 10 batches (sentence i of each of the 3 lists) and the original's top layer (n_words, 32) per sentence."""
    groups = [
        [sentence.split() for sentence in group] for group in json.loads((folder / "sentences.json").read_text())
    ]
    expected = []
    for k in range(3):
        with h5py.File(folder / f"lm_embeddings_{k}.hdf5", "r") as handle:
            expected.append([np.concatenate(list(handle[str(i)][...]), axis=-1) for i in range(10)])
    return [([groups[k][i] for k in range(3)], [expected[k][i] for k in range(3)]) for i in range(10)]


def char_ids(sentences: list[list[str]]) -> torch.Tensor:
    return char_ids_tensor(sentences, 50, word_to_char_ids)


def max_error(top_layer_of, batches, device: torch.device) -> float:
    """Max abs error of `top_layer_of(ids)` (batch, words, 32) against the original over the batches, in order."""
    errors = []
    with torch.inference_mode():
        for sentences, expected in batches:
            top = top_layer_of(char_ids(sentences).to(device)).float().cpu().numpy()
            errors += [np.abs(top[row, : len(words)] - words).max() for row, words in enumerate(expected)]
    return float(max(errors))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fixture-dir", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--implementations", default="eager,triton")
    args = parser.parse_args()
    if not (args.fixture_dir / "lm_weights.hdf5").exists():
        parser.error(f"--fixture-dir: {args.fixture_dir} holds no lm_weights.hdf5")
    device = torch.device(args.device)
    batches = fixture_batches(args.fixture_dir)
    options, weights = args.fixture_dir / "options.json", args.fixture_dir / "lm_weights.hdf5"
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        convert_checkpoint(str(options), str(weights), Path(work) / "hf")
        for name in [name.strip() for name in args.implementations.split(",") if name.strip()]:
            model = ElmoModel.from_pretrained(Path(work) / "hf", stateful=True).to(device).eval()
            try:
                model.set_implementation(name)
                error = max_error(lambda ids, model=model: model(ids).last_hidden_state, batches, device)
            except Exception as exception:  # reported as a failed check
                print(f"FAIL ElmoModel {name!r} on {device}: {type(exception).__name__}: {exception}")
                failures += 1
                continue
            failures += error > TOLERANCE
            print(f"{'ok  ' if error <= TOLERANCE else 'FAIL'} ElmoModel {name!r} on {device}, stateful: {error:.2e}")
    bilm = _ElmoBiLm(options, weights).to(device)
    error = max_error(lambda ids: bilm(ids)["activations"][-1][:, 1:-1], batches, device)
    failures += error > TOLERANCE
    verdict = "ok  " if error <= TOLERANCE else "FAIL"
    print(f"{verdict} modeling_elmo.allennlp._ElmoBiLm on {device}, stateful: {error:.2e}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
