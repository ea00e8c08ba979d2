#!/usr/bin/env bash
# ncclbind.device's Numba layer on every GPU of this machine (no Bazel needed):
#   bash tests/multigpu/device/run.sh [NRANKS]
# 1. numba_ranks.py: the device API from Numba kernels, checked element by element (PASS/FAIL lines);
# 2. oneshot_bench.py: the one-shot all-reduce, nccl vs CUDA C++ vs Numba (checked, then a table).
# Needs python3 with ncclbind installed (or PYTHONPATH), torch, numba-cuda, CuPy and nvcc. The
# headers are those of the libnccl that runs, as ncclbind.device.cuda_source.nccl_include_dir
# finds them: NCCLBIND_NCCL_INCLUDE, else the include/ beside the loaded libnccl (NCCLBIND_NCCL_PATH),
# else the nvidia-nccl wheel's, else $CUDA_HOME/include. The wrapper's compiled units are kept in
# NCCLBIND_DEVICE_CACHE (default /tmp/ncclbind-device-cache): LTO-IR where numba-cuda's nvJitLink
# reads nvcc's (seconds), else cubins (one a function, ncclbind.device.linking.link_unit: the kernels
# call nearly all, built side by side on every CPU); later runs reuse them. Exit status: 0 when both pass.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCLBIND_DEVICE_CACHE=${NCCLBIND_DEVICE_CACHE:-/tmp/ncclbind-device-cache}

# Compile the wrapper's units once, before the ranks start (they would each compile them).
python3 - <<'PY' || { echo "FAIL: ncclbind.device cannot compile the wrapper"; echo "0 passed, 2 failed"; exit 1; }
import os, subprocess, time
from concurrent.futures import ThreadPoolExecutor
from ncclbind.device import cuda_source, linking
import ncclbind
start = time.time()
cc = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                    text=True).stdout.split()[0].split(".")
cc = (int(cc[0]), int(cc[1]))
missing = cuda_source.missing_functions()
lto, why = linking.lto_available()
if lto:
    units = ["core"] + [f for f in ("ncclLsaReduceSum_F32", "ncclLsaReduceSum_I32") if f not in missing]
else:  # a kernel linked with cubins links one unit per function it calls
    units = sorted({linking.link_unit(f, lto=False) for f in cuda_source.wrapper_functions()})
build = linking.wrapper_ltoir if lto else linking.wrapper_cubin
build(None, units[0], cc)  # first alone: it checks the release's session sizes (one cached compile)
with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # each unit is an nvcc (and ptxas) of its own
    list(pool.map(lambda unit: build(None, unit, cc), units[1:]))
print(f"ncclbind.device: NCCL {ncclbind.get_version()} wrapper units "
      f"{units if len(units) < 5 else f'({len(units)}, one a function)'} for sm_{cc[0]}{cc[1]} ready as "
      f"{'LTO-IR' if lto else 'cubins (' + why + ')'} in {time.time() - start:.0f} s "
      f"(headers {cuda_source.nccl_include_dir()})", flush=True)
PY

passed=0 failed=0
for script in numba_ranks.py oneshot_bench.py; do
  echo "== $script"
  if timeout 300 python3 "tests/multigpu/device/$script" "$@"; then
    echo "PASS $script"; passed=$((passed + 1))
  else
    echo "FAIL $script"; failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
((failed == 0))
