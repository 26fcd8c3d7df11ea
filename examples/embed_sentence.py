"""Embed one sentence with a converted ELMo folder and print the shape and norms of every layer.

python examples/embed_sentence.py MODEL_DIR "The bank closed its doors ."
"""

import argparse

import torch
from transformers import AutoModel, AutoTokenizer

import modeling_elmo  # noqa: F401  (registers the ELMo Auto classes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="folder written by elmo-convert, or a Hub repo id")
    parser.add_argument("text", help="a sentence (raw text; split into words by the tokenizer)")
    args = parser.parse_args()

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModel.from_pretrained(args.model)
    batch = tokenizer(args.text, return_tensors="pt")
    with torch.inference_mode():
        output = model(**batch, output_hidden_states=True)
    words = [
        args.text[start:end] for start, end in tokenizer(args.text, return_offsets_mapping=True)["offset_mapping"]
    ]
    print(f"words: {words}")
    for index, layer in enumerate(output.hidden_states):
        norms = ", ".join(f"{value:.2f}" for value in layer[0].norm(dim=-1).tolist())
        print(f"layer {index}: shape {tuple(layer.shape)}, per-word norms [{norms}]")


if __name__ == "__main__":
    main()
