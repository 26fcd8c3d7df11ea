"""The accuracy job of `bench_inference.py`: the paths' and each quantization method's differences from float32 and
from the float64 reference, per layer, in a worker process (`worker_accuracy`), and their table."""

import argparse

from .common import load_corpus, load_model, quantized_methods


def worker_accuracy(args: argparse.Namespace) -> dict:
    """
    On `--sentences` sentences in one batch: max abs differences of all layers between the fast and the reference path
    in float32, of both against the reference path computed in float64 (the exact values up to float64 rounding), of
    bfloat16 (fast path) against float32; per quantization method, per layer (0: the character CNN, then each biLM
    layer), the max and the mean abs error against float32 over the real words' values, and its max against the
    float64 reference.
    """
    import torch

    tokenizer, model = load_model(args.model_dir, args.threads)
    sentences = load_corpus(args.conll)[: args.sentences]
    encoded = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    words = encoded["attention_mask"].bool()  # (batch, words): the real words

    def layers_of(found_model) -> list:
        with torch.inference_mode():
            return [layer[words] for layer in found_model(**encoded, output_hidden_states=True).hidden_states]

    def layers(reference: bool, dtype: torch.dtype) -> list:
        model.to(dtype)
        model.set_implementation("reference" if reference else None)
        return layers_of(model)

    fast, reference = layers(False, torch.float32), layers(True, torch.float32)
    quantized = {
        method: layers_of(load_model(args.model_dir, args.threads, quantization=method)[1])
        for method in quantized_methods(args.path)
    }
    exact, low = layers(True, torch.float64), layers(False, torch.bfloat16)

    def errors(left, right) -> list[torch.Tensor]:
        return [(a.double() - b.double()).abs() for a, b in zip(left, right, strict=True)]

    def difference(left, right) -> float:
        # torch's max propagates NaN (the builtin `max` of floats would hide it)
        return float(torch.stack([error.max() for error in errors(left, right)]).max())

    return {
        "fast_vs_reference": difference(fast, reference),
        "fast_vs_float64_reference": difference(fast, exact),
        "reference_vs_float64_reference": difference(reference, exact),
        "bf16_vs_fp32": difference(low, fast),
        "quantized_vs_fp32": {
            method: [[float(error.max()), float(error.mean())] for error in errors(found, fast)]
            for method, found in quantized.items()
        },
        "quantized_vs_float64_reference": {method: difference(found, exact) for method, found in quantized.items()},
        "max_abs_value": float(torch.stack([layer.abs().max() for layer in fast]).max()),
        "words": int(words.sum()),
    }


def print_accuracy(accuracies: dict[str, dict]) -> None:
    print("\nAccuracy against float32 (CoNLL dev sentences in one batch; per layer: 0 = character CNN, then each "
          "biLM layer; max abs / mean abs over the real words' values):")  # fmt: skip
    print("| model | method | layer | max abs | mean abs | max abs vs float64 reference | words |")
    print("|---|---|---|---|---|---|---|")
    for name, found in accuracies.items():
        for method, layers in found["quantized_vs_fp32"].items():
            for index, (largest, mean) in enumerate(layers):
                exact = f"{found['quantized_vs_float64_reference'][method]:.2e}" if index == 0 else ""
                print(f"| {name} | {method} | {index} | {largest:.2e} | {mean:.2e} | {exact} | {found['words']} |")
        print(f"| {name} | (fast vs reference, float32) | all | {found['fast_vs_reference']:.2e} | | "
              f"{found['fast_vs_float64_reference']:.2e} | {found['words']} |")  # fmt: skip
        print(f"| {name} | (whole model in bfloat16) | all | {found['bf16_vs_fp32']:.2e} | | | {found['words']} |")
