#!/usr/bin/env bash
# Runs the prebuilt ep_ranks (build.sh, here) on the GPU machine:
#   bash tests/multigpu/ep/rust/run.sh [NRANKS] [--bench]
# NRANKS defaults to every GPU. Needs NCCL 2.32.3 and NCCL EP 0.2.0 (NCCLBIND_NCCL_PATH,
# NCCLBIND_NCCL_EP_PATH) and a libcudart (NCCLBIND_CUDART_PATH, else a CUDA runtime wheel, else
# the loader's search and $CUDA_HOME). Without a GPU it prints "SKIPPED: ..." and exits 0.
set -euo pipefail
bin=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)/bindings/rust/target/gpu/ep_ranks
if [[ ! -x $bin ]]; then
  echo "no $bin: build it with tests/multigpu/ep/rust/build.sh where Rust is installed" >&2
  exit 2
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [[ -z ${NCCLBIND_CUDART_PATH:-} ]]; then
  cudart=$(python3 -c 'import glob, site, sys
for d in site.getsitepackages() + [site.getusersitepackages()]:
    for p in sorted(glob.glob(d + "/nvidia/*/lib/libcudart.so.1[0-9]")):
        print(p); sys.exit()' 2>/dev/null || true)
  [[ -n $cudart ]] && export NCCLBIND_CUDART_PATH=$cudart
fi
echo "libnccl: ${NCCLBIND_NCCL_PATH:-unset}; libnccl_ep: ${NCCLBIND_NCCL_EP_PATH:-unset}; libcudart: ${NCCLBIND_CUDART_PATH:-loader search}"
set +e
ht_rc=0
if [[ " $* " == *" --bench "* || -n "${NCCLBIND_EP_ALGOS:-}" ]]; then
  "$bin" "$@"
  rc=$?
else
  # LL and HT each in its own process, as tests/multigpu/ep/c/run.sh: every HT fault so far came
  # after LL groups on the same communicator; NCCL EP's own tests make HT on a fresh one.
  echo "LL (NCCLBIND_EP_ALGOS=ll):"
  NCCLBIND_EP_ALGOS=ll "$bin" "$@"
  rc=$?
  echo "HT alone, a fresh process and communicator (NCCLBIND_EP_ALGOS=ht):"
  NCCLBIND_EP_ALGOS=ht timeout 120 "$bin" "$@"
  ht_rc=$?
  [[ $ht_rc != 0 && $rc == 0 ]] && rc=$ht_rc
fi
set -e
if [[ $ht_rc != 0 && -z "${NCCLBIND_EP_HT_RECV:-}" ]]; then
  # HT's receive budget, each way in its own processes (a device fault is sticky), at the smallest
  # size, with NCCL EP's kernel configuration printed (ht_recv_mode in ep_ranks.rs).
  for mode in eager rank topk; do
    echo "HT budget $mode (NCCLBIND_EP_HT_RECV=$mode, NCCL_EP_ENV_VERBOSE=1):"
    NCCLBIND_EP_HT_RECV=$mode NCCLBIND_EP_ALGOS=ht NCCLBIND_EP_SIZES="8,2048,2,16" NCCL_EP_ENV_VERBOSE=1 \
      CUDA_LAUNCH_BLOCKING=1 timeout 60 "$bin" "${1:-}" 2>&1 | sed "s/^/  [$mode] /" | grep -v "using timeout=" | head -60 || true
  done
fi
exit $rc
