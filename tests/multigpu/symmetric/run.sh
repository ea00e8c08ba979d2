#!/usr/bin/env bash
# ncclbind.symmetric on the GPU machine, unattended (about 1-2 minutes on 2 H200s):
#   1. tests/python/test_symmetric_torch.py: MockAllocator/SymmTensor with torch on the CPU,
#      and its gpu-marked one-rank tests (NcclSymPool, SymmTensors, torch_pool)
#   2. sym_ranks.py: every GPU, real collectives on the pool, SymmTensors, mxfp8 and torch_pool
#   3. sym_bench.py: all-reduce latency table, symmetric vs plain vs torch.distributed (2 GPUs)
# Run from the repository root after `pip install --target "$SITE" .`:
#   PYTHONPATH=/tmp/ncclbind-site bash tests/multigpu/symmetric/run.sh
# Prints PASS/FAIL lines and one summary line; exits non-zero when a step failed.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
failed=()
step() {
  local name=$1 limit=$2
  shift 2
  echo "=== $name: $*"
  if timeout "$limit" "$@"; then echo "=== $name: PASS"; else echo "=== $name: FAIL (exit $?)"; failed+=("$name"); fi
}
step pytest 200 python3 -m pytest tests/python/test_symmetric_torch.py -v -rs -p no:cacheprovider
step ranks 300 python3 tests/multigpu/symmetric/sym_ranks.py
step bench 300 python3 tests/multigpu/symmetric/sym_bench.py 2
if [ ${#failed[@]} -eq 0 ]; then
  echo "symmetric: 3 steps passed, 0 failed"
else
  echo "symmetric: $((3 - ${#failed[@]})) steps passed, ${#failed[@]} failed: ${failed[*]}"
  exit 1
fi
