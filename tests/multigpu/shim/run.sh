#!/usr/bin/env bash
# The shim on a GPU machine (no Bazel there), every program under python -m ncclbind.trace run:
#   1. torch.distributed: DDP steps on a tiny model and collectives of known sizes; the trace's
#      calls and counts must match what each rank printed it issued (GPU time on)
#   2. the repo's multi-rank C test (tests/multigpu/run_c.sh), through ncclbind's runtime
#   3. a divergent program (the last rank makes a broadcast nobody joins; stopped by --timeout):
#      summarize must name collective #4
#   4. a checkpoint in the middle of a loop of all-reduces: prepare, free, restore, same handle
#   5. the benchmark (bench/shim/run_gpu.sh) when BENCH=1
# Usage: bash tests/multigpu/shim/run.sh [NRANKS]   (default: every GPU)
# Needs the package installed from this checkout (gpu_session.sh pip: /tmp/ncclbind-site), torch,
# a C compiler. Prints PASS/FAIL lines and a summary; exits 1 on a failure.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
site=${NCCLBIND_SITE:-/tmp/ncclbind-site}
export PYTHONPATH="$site:$here${PYTHONPATH:+:$PYTHONPATH}"
# Traces stay in a work folder of their own (dozens of files); $OUT, where a GPU session collects
# its step logs, gets the logs, summaries and timelines only.
work=${SHIM_WORK:-/tmp/ncclbind-shim}
rm -rf "$work" && mkdir -p "$work"
keep_results() {
  [[ -n "${OUT:-}" ]] || return 0
  mkdir -p "$OUT/shim"
  cp "$work"/*.log "$work"/*.summary "$OUT/shim/" 2>/dev/null
  for d in "$work"/*/; do [[ -f "$d/timeline.png" ]] && cp "$d/timeline.png" "$OUT/shim/$(basename "$d")-timeline.png"; done
  return 0
}
trap keep_results EXIT
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
pass() { echo "PASS $*"; }

if ! python3 -c "import ncclbind.trace, ncclbind.shim" 2>"$work/import.log"; then
  fail "import ncclbind.trace from $site (install this checkout first: gpu_session.sh pip): $(tail -1 "$work/import.log")"
  echo "summary: $failed failed"
  exit 1
fi
ngpu=$(python3 -c "import torch; print(torch.cuda.device_count())")
n=${1:-$ngpu}
echo "GPUs: $ngpu, ranks: $n, work: $work"
if [[ "$ngpu" -lt 1 ]]; then
  echo "SKIP no GPU"
  exit 0
fi

bash shim/build_shim.sh "$work/lib" >"$work/build.log" 2>&1 && pass "shim built for every release ($(ls "$work/lib" | wc -l) variants)" \
  || { fail "shim/build_shim.sh (see $work/build.log)"; tail "$work/build.log"; echo "summary: $failed failed"; exit 1; }
export NCCLBIND_SHIM_LIBDIR="$work/lib"

# The libnccl the programs call: the one torch loads (they all import torch), whichever that is.
torch_nccl=$(python3 -c "import torch; print(next((l.split()[-1] for l in open('/proc/self/maps') if 'libnccl.so' in l), ''))")
echo "torch loads: ${torch_nccl:-no libnccl at import (the launcher finds one)}"
nccl_arg=()
[[ -n "$torch_nccl" ]] && nccl_arg=(--nccl "$torch_nccl")
trace() { timeout "${LIMIT:-240}" python3 -m ncclbind.trace run "${nccl_arg[@]}" "$@"; }
echo "shim: $(python3 -m ncclbind.trace library "${nccl_arg[@]}" 2>&1)"

# 1. torch DDP and collectives
SECONDS=0
t0=$SECONDS
if trace --out "$work/torch" --gpu-time -- python3 "$here/torch_program.py" "$n" "$work" >"$work/torch.log" 2>&1; then
  pass "torch program under the shim ($((SECONDS - t0)) s)"
else
  fail "torch program under the shim (exit $?):"; tail -20 "$work/torch.log"
fi
grep -E "data (ok|WRONG)" "$work/torch.log"
python3 "$here/compare.py" issued "$work/torch.log" "$work/torch" || failed=$((failed + 1))
python3 -m ncclbind.trace summarize "$work/torch" --fail-on-divergence >"$work/torch.summary" 2>&1 \
  && pass "torch trace: no divergence" || { fail "torch trace summary"; }
cat "$work/torch.summary"
grep -q "ncclAllReduce" "$work/torch.summary" && grep -E "ncclAllReduce +[0-9]+ .* [0-9.]+ +[0-9.]+$" -q "$work/torch.summary" \
  && pass "GPU time and busbw in the table" || fail "no GPU time/busbw for ncclAllReduce in the summary"

# 2. the repo's multi-rank C test through ncclbind's runtime
t0=$SECONDS
if LIMIT=480 trace --out "$work/c" -- bash tests/multigpu/run_c.sh "$n" >"$work/c.log" 2>&1; then
  pass "run_c.sh $n under the shim ($((SECONDS - t0)) s)"
else
  fail "run_c.sh $n under the shim (exit $?)"; tail -20 "$work/c.log"
fi
python3 "$here/compare.py" consistent "$work/c" || failed=$((failed + 1))
python3 -m ncclbind.trace summarize "$work/c" >"$work/c.summary" 2>&1; head -40 "$work/c.summary"

# 3. a divergent job, stopped by the launcher
if [[ "$n" -ge 2 ]]; then
  t0=$SECONDS
  trace --out "$work/divergent" --timeout 30 -- python3 "$here/divergent_program.py" "$n" "$work" >"$work/divergent.log" 2>&1
  rc=$?
  echo "divergent job: exit $rc after $((SECONDS - t0)) s (124: stopped by --timeout)"
  python3 -m ncclbind.trace summarize "$work/divergent" --fail-on-divergence >"$work/divergent.summary" 2>&1
  src=$?
  cat "$work/divergent.summary"
  if [[ $src -eq 3 ]] && grep -q "collective #4" "$work/divergent.summary" && grep -q "ncclBroadcast" "$work/divergent.summary"; then
    pass "summarize names the first divergent call (collective #4, the broadcast)"
  else
    fail "summarize did not name the divergence (exit $src)"
  fi
else
  echo "SKIP divergence: needs 2 ranks"
fi

# 4. checkpoint in the middle of a loop
t0=$SECONDS
if trace --out "$work/checkpoint" --checkpoint -- python3 "$here/checkpoint_program.py" "$n" "$work" >"$work/checkpoint.log" 2>&1 \
   && [[ $(grep -c "checkpoint ok" "$work/checkpoint.log") -eq $n ]]; then
  pass "checkpoint prepare/restore mid-loop on $n rank(s), data right on the same handles ($((SECONDS - t0)) s)"
else
  fail "checkpoint program"; tail -20 "$work/checkpoint.log"
fi
python3 "$here/compare.py" issued "$work/checkpoint.log" "$work/checkpoint" || failed=$((failed + 1))

if [[ "${BENCH:-0}" == 1 ]]; then
  bash bench/shim/run_gpu.sh || fail "bench/shim/run_gpu.sh"
fi
echo "summary: $failed failed ($SECONDS s); traces and logs in $work"
[[ $failed -eq 0 ]]
