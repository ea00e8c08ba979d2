"""The device-side layout test of one header set: the records NCCL declares only
under __CUDACC__ exist only for nvcc, so the generated test is compiled with
$CUDA_HOME/bin/nvcc (host code; no GPU needed) and run.

    device_layout_test.py HEADER_SETS_JSON SET_NAME LAYOUT_TEST.cu
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> int:
    inputs_json, set_name, source = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    inputs = json.loads(inputs_json.read_text())
    hs = next(h for h in inputs["header_sets"] if h["name"] == set_name)
    nvcc = Path(os.environ.get("CUDA_HOME", inputs["cuda_home"])) / "bin" / "nvcc"
    includes = [inputs_json.parent / d for d in hs["include_dirs"]] + [Path("bindings/c/include"),
                                                                      Path("runtime/include")]
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "device_layout"
        build = subprocess.run([str(nvcc), "-std=c++17", *[f"-I{d.absolute()}" for d in includes], str(source),
                                "-o", str(exe)], capture_output=True, text=True)
        if build.returncode != 0:
            print(build.stdout + build.stderr)
            print(f"FAIL: nvcc could not build {source}")
            return 1
        run = subprocess.run([str(exe)], capture_output=True, text=True)
        print(run.stdout + run.stderr, end="")
        return run.returncode


if __name__ == "__main__":
    sys.exit(main())
