"""The shipped kernel configurations (`triton_kernels.shipped_launches`) compiled ahead of time for an A100 (sm_80)
and an H100 (sm_90) without a GPU: 'original' (4,096 cells, projection 512) in every mode and the tests' tiny shapes
in the exact mode. Each must fit the shared memory of one block (163 KiB on sm_80, 227 KiB on sm_90; `triton.compile`
itself does not refuse an oversized tile) and spill no register (`cuobjdump --dump-resource-usage`, shipped in
Triton's wheel: a spill shows as a STACK or LOCAL size above 0). Compiled in a fresh process without
`TRITON_INTERPRET` (an interpreted kernel does not compile) and a fresh `TRITON_CACHE_DIR`."""

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
from triton_testing import require_interpreted_triton

require_interpreted_triton()

SHARED_MEMORY_PER_BLOCK = {80: 163 * 1024, 90: 227 * 1024}
SHAPES = {"original": (4096, 512, 512), "tiny": (64, 16, 16)}  # cells, projection, input size

COMPILE = """
import json, pathlib, re, subprocess, sys
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from modeling_elmo.engine import triton_kernels

arch, shapes = int(sys.argv[1]), json.loads(sys.argv[2])
cuobjdump = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
weight_pointers = {"lstm_cell_kernel": "weight_hh_ptr", "row_matmul_kernel": "b_ptr"}
assert not triton_kernels.INTERPRETED
for shape, (cells, proj, input_size, exact_only) in shapes.items():
    for name, mode, tiles, constants in triton_kernels.shipped_launches(cells, proj, input_size):
        if exact_only and mode != triton_kernels.Mode():
            continue
        kernel = getattr(triton_kernels, name)
        weights = "*bf16" if mode.weight_dtype == torch.bfloat16 else "*fp32"
        signature = {
            p.name: "constexpr" if p.is_constexpr
            else (weights if p.name == weight_pointers[name] else "*fp32") if p.name.endswith("_ptr")
            else "fp32" if p.name.endswith("clip") else "i32"
            for p in kernel.params
        }
        options = triton_kernels.launch_options(tiles)
        source = ASTSource(kernel, signature, constexprs=constants)
        compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)
        cubin = pathlib.Path(f"kernel-{arch}.cubin")
        cubin.write_bytes(compiled.asm["cubin"])
        command = [str(cuobjdump), "--dump-resource-usage", str(cubin)]
        usage = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        resources = dict(re.findall(r"(REG|STACK|LOCAL):(\\d+)", usage))
        report = {"shape": shape, "kernel": name, "mode": [mode.precision, str(mode.weight_dtype)]}
        report.update(tiles=repr(tiles), shared=compiled.metadata.shared)
        print(json.dumps({**report, **{key: int(value) for key, value in resources.items()}}), flush=True)
"""


def _compile(arch: int, workdir) -> list[dict]:
    """The resource figures of every shipped configuration compiled for `arch`, from a fresh process."""
    workdir.mkdir()
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    environment["TRITON_CACHE_DIR"] = str(workdir / "cache")
    shapes = {name: (*shape, name != "original") for name, shape in SHAPES.items()}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(COMPILE), str(arch), json.dumps(shapes)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=workdir,
        env=environment,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[int, list[dict]]:
    base = tmp_path_factory.mktemp("triton-aot")
    with ThreadPoolExecutor(2) as pool:  # the two targets side by side
        reports = pool.map(lambda arch: (arch, _compile(arch, base / f"sm_{arch}")), SHARED_MEMORY_PER_BLOCK)
        return dict(reports)


@pytest.mark.integration
@pytest.mark.parametrize("arch", SHARED_MEMORY_PER_BLOCK)
def test_every_shipped_configuration_compiles_fits_and_does_not_spill(compiled, arch):
    reports = compiled[arch]
    assert len(reports) == 18 + 6  # 'original': 3 kernels x 2 widths x 3 modes; tiny: the exact mode
    for report in reports:
        assert 0 < report["shared"] <= SHARED_MEMORY_PER_BLOCK[arch], report
        assert report["STACK"] == 0 and report["LOCAL"] == 0, report  # no register spilled
        assert report["REG"] <= 255, report
