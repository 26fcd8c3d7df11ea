"""The NER job of `bench_inference.py` (`--ner-tagger`): an `elmo-train-ner` folder's NER F1 in float32 and with each
quantization method, by quantized_ner_f1.py in a process of its own."""

import subprocess
import sys

from .common import BENCHMARKS


def run_ner(args, methods: list[str]) -> None:
    """The NER F1 table of `--ner-tagger` (quantized_ner_f1.py in a process of its own)."""
    command = [sys.executable, str(BENCHMARKS / "quantized_ner_f1.py"), "--tagger", str(args.ner_tagger)]
    command += ["--data_dir", str(args.conll.parent), "--threads", str(args.threads), "--methods", ",".join(methods)]
    result = subprocess.run(command, capture_output=True, text=True)
    table = [line for line in result.stdout.splitlines() if line.startswith(("|", "NER F1"))]
    if not table:
        print(f"\nFAILED NER F1 of {args.ner_tagger}:\n{result.stderr[-2000:]}", flush=True)
        return
    print("\n" + "\n".join(table) + ("" if result.returncode == 0 else "\n(a method is beyond the tolerance)"))
