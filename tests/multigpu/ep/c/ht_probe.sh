#!/usr/bin/env bash
# Probes of NCCL EP's high-throughput fault on the GPU machine, each in fresh processes (a device
# fault is sticky), each line prefixed with its probe's name:
#   EP_RANKS=/tmp/ncclbind-ep-c/ep_ranks bash tests/multigpu/ep/c/ht_probe.sh [NRANKS]
# run.sh calls it when HT fails. The probes vary one thing at a time against the first failing
# case (eager budget, 8 tokens, hidden 2048, top-2 of 16 experts): the rank count (1: an LSA team
# of one, no peer), the token count (64 = one whole HT chunk, so no partial chunk), the budget
# (explicit nRanks*tokens*top_k, as NCCL EP's ep_test), NCCL's own warnings, and memcheck with the
# host API errors NCCL's start-up makes on purpose left out, so its reports are the kernel's.
set -uo pipefail
bin=${EP_RANKS:?set EP_RANKS to the ep_ranks binary}
n=${1:-0}
cuda=${CUDA_HOME:-/usr/local/cuda}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
probe() { # probe NAME LINES ENV... -- ARGS...
  local name=$1 lines=$2
  shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  echo "probe $name (${envs[*]}):"
  env NCCLBIND_EP_ALGOS=ht NCCL_DEBUG=WARN CUDA_LAUNCH_BLOCKING=1 "${envs[@]}" timeout 90 "$@" 2>&1 |
    grep -v "using timeout=" | sed "s/^/  [$name] /" | head -"$lines"
}
probe one_rank 40 NCCLBIND_EP_SIZES="8,2048,2,16" NCCL_EP_ENV_VERBOSE=1 -- "$bin" 1
probe eager 40 NCCLBIND_EP_SIZES="8,2048,2,16" NCCL_EP_ENV_VERBOSE=1 -- "$bin" "$n"
probe whole_chunk 20 NCCLBIND_EP_SIZES="64,2048,2,16" -- "$bin" "$n"
probe budget_topk 20 NCCLBIND_EP_SIZES="8,2048,2,16" NCCLBIND_EP_HT_RECV=topk -- "$bin" "$n"
probe ep_test_shape 20 NCCLBIND_EP_SIZES="128,7168,8,256" NCCLBIND_EP_HT_RECV=topk -- "$bin" "$n"
sanitizer="$cuda/bin/compute-sanitizer"
if [[ -x $sanitizer ]]; then
  echo "probe memcheck (the kernel's first reports; host API errors not reported):"
  NCCLBIND_EP_ALGOS=ht NCCLBIND_EP_SIZES="8,2048,2,16" timeout 150 "$sanitizer" --tool memcheck \
    --report-api-errors no --print-limit 6 --target-processes all "$bin" "$n" 2>&1 |
    grep -v "using timeout=" | grep -v "Host Frame" | sed "s/^/  [memcheck] /" | head -90
fi
