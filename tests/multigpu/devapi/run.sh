#!/usr/bin/env bash
# The device-API GPU checks, unattended: the C++ program over the C binding
# (build_and_run.sh), then CUDA C++ kernels compiled from Python through
# ncclbind.device.cuda_source (cuda_cpp_kernel.py: every coop kind, the C-ABI wrapper's
# LsaReduceSum where the release has it, the one-shot all-reduce, capability checks).
#   bash tests/multigpu/devapi/run.sh [NRANKS]
# Against another NCCL than the default one, point both at one unpacked release:
#   NCCLBIND_NCCL_INCLUDE=<release>/include NCCLBIND_NCCL_PATH=<release>/lib/libnccl.so.2 \
#   LD_LIBRARY_PATH=<release>/lib bash tests/multigpu/devapi/run.sh
# Needs: nvcc, gcc, python3 with CuPy, numpy and ncclbind importable (PYTHONPATH). Prints one
# summary line per part and "devapi: N passed, N failed, N skipped"; exits non-zero on a failure.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
passed=0 failed=0 skipped=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
part() {
  local name=$1; shift
  echo "=== $name"
  timeout 280 "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  if [[ $status -ne 0 ]]; then
    echo "FAIL $name (exit $status)"; failed=$((failed + 1))
  elif grep -q '^SKIPPED' "$log"; then
    echo "SKIP $name"; skipped=$((skipped + 1))
  else
    echo "PASS $name"; passed=$((passed + 1))
  fi
}
part "lsa_exchange.cu (C++ over the C binding)" bash tests/multigpu/devapi/build_and_run.sh "$@"
part "cuda_cpp_kernel.py (CUDA C++ from Python)" python3 tests/multigpu/devapi/cuda_cpp_kernel.py "$@"
echo "devapi: $passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
