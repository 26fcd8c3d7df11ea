#!/usr/bin/env bash
# The one script of a GPU session for issue 37 (device tool: 15 minutes of device time, one chip). Run once; rerun
# only if it broke. It needs, beside the working tree (neither is committed; both travel as untracked files):
#   shared/fixtures/elmo/                     mkdir -p shared/fixtures && cp -r ../shared/fixtures/elmo shared/fixtures/
#   wheels/allennlp-2.10.1-py3-none-any.whl   pip download --no-deps allennlp==2.10.1 -d wheels
# The device image has torch, Triton, transformers and h5py; the scripts import modeling_elmo from the working tree.
# Device call: run(command="bash benchmarks/gpu_session.sh", timeout_s=600). Everything lands in $OUT:
#   gpu.txt (the GPU and versions), verify.txt (fixture checks), bench_gpu.json / bench_gpu.md / bench.txt.
# Steps: 1. the fixture against the TensorFlow reference within 2e-6 through "triton" and "eager" (stateful, the
# fixture's 10 batches), and AllenNLP's stateful fixture case through modeling_elmo.allennlp on CUDA (~1 min);
# 2. benchmarks/bench_gpu.py on 'original' (random weights), AllenNLP 2.10.1's _ElmoBiLm beside it (< 7 min).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-output-gpu}"
mkdir -p "$OUT"
unset TRITON_INTERPRET
export HF_HUB_OFFLINE=1
status=0
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  python -c "import torch, transformers; print('torch', torch.__version__, 'CUDA', torch.version.cuda,
             'transformers', transformers.__version__)"
  python -c "import triton; print('triton', triton.__version__)" || echo "triton: not importable"
} > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
timeout 150 python benchmarks/verify_cuda_fixture.py --fixture-dir shared/fixtures/elmo \
  --implementations eager,triton 2>&1 | grep -v "^Loading weights\|^Writing model" | tee "$OUT/verify.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
timeout 420 python benchmarks/bench_gpu.py --out-dir "$OUT" --budget 360 \
  --allennlp wheels/allennlp-2.10.1-py3-none-any.whl 2>&1 | grep -v "^Loading weights\|^Writing model" \
  | tee "$OUT/bench.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit "$status"
