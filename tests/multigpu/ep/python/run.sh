#!/usr/bin/env bash
# ncclbind.ep on a GPU machine (no Bazel there):
#   bash tests/multigpu/ep/python/run.sh [NRANKS]            # ep_ranks.py: PASS/FAIL lines, a summary
#   bash tests/multigpu/ep/python/run.sh [NRANKS] --bench    # ep_bench.py: BENCH lines (bench_table.py)
# NRANKS defaults to every GPU. The package from the checkout, installed as the GPU session does
# (PYTHONPATH=/tmp/ncclbind-site after pip install --target), else this checkout's in-place build.
# Needs torch with CUDA and NCCL 2.32.3 + NCCL EP 0.2.0 from the pinned wheels:
#   NCCLBIND_NCCL_PATH=.../libnccl.so.2 NCCLBIND_NCCL_EP_PATH=.../libnccl_ep.so (LD_LIBRARY_PATH too)
# Exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="${PYTHONPATH:-/tmp/ncclbind-site}"
echo "libnccl: ${NCCLBIND_NCCL_PATH:-unset, the runtime searches}; libnccl_ep: ${NCCLBIND_NCCL_EP_PATH:-unset}"
# The installed package must be this checkout's: `pip install --target DIR` keeps an ncclbind
# already in DIR (it only warns "Target directory ... already exists. Specify --upgrade"), and the
# second GPU run tested such a stale copy (its NcclBuffer had no .shape). Every .py must match.
site=${PYTHONPATH%%:*}
if [[ -d $site/ncclbind ]]; then
  stale=$(cd bindings/python && find ncclbind -name '*.py' -not -path '*/__pycache__/*' | while read -r f; do
    cmp -s "$f" "$site/$f" || echo "$f"; done | head -5)
  if [[ -n $stale ]]; then
    echo "FAIL stale install: $site/ncclbind differs from this checkout (e.g. $(echo $stale | tr '\n' ' '));" \
      "reinstall with pip install --upgrade --target $site ."
    exit 1
  fi
fi
args=()
bench=0
for a in "$@"; do
  if [[ $a == --bench ]]; then bench=1; else args+=("$a"); fi
done
if [[ $bench == 1 ]]; then
  exec timeout 280 python3 tests/multigpu/ep/python/ep_bench.py "${args[@]}"
fi
if [[ -n ${NCCLBIND_EP_ALGOS:-} ]]; then
  exec timeout 290 python3 tests/multigpu/ep/python/ep_ranks.py "${args[@]}"
fi
# LL and HT each in its own processes (ep_ranks.py's ALGOS): every HT fault so far came after LL
# groups were made and destroyed on the same communicator; NCCL EP's own tests make HT groups on
# a fresh one. HT's first fault is sticky, so it runs with synchronous launches: the failing case
# names the ncclbind.ep call whose kernel faulted.
# LL's first run on a machine compiles NCCL EP's LL kernels (its run-time JIT): on one H200 it
# passed all 48 cases and was still running at 150 s; warm, the same run takes 13 s.
echo "LL (NCCLBIND_EP_ALGOS=ll):"
NCCLBIND_EP_ALGOS=ll timeout 260 python3 tests/multigpu/ep/python/ep_ranks.py "${args[@]}"
ll_rc=$?
echo "HT alone, fresh processes and communicator (NCCLBIND_EP_ALGOS=ht, CUDA_LAUNCH_BLOCKING=1):"
NCCLBIND_EP_ALGOS=ht CUDA_LAUNCH_BLOCKING=1 timeout 120 python3 tests/multigpu/ep/python/ep_ranks.py "${args[@]}"
ht_rc=$?
echo "ep_ranks.py: LL exit $ll_rc, HT exit $ht_rc"
[[ $ll_rc == 0 && $ht_rc == 0 ]]
