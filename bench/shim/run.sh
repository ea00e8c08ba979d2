#!/usr/bin/env bash
# The shim's cost per call on this machine, over the stand-in libnccl (no GPU needed): ROUNDS
# rounds (7) of no shim, off, counts and full, a process each, 5 batches of N calls (100000).
#   bash bench/shim/run.sh [N] [ROUNDS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc=${CC:-cc}
if [[ -n "${NCCLBIND_FAKE_NCCL:-}" ]]; then  # a stand-in built already (Bazel's)
  cp "$NCCLBIND_FAKE_NCCL" "$work/libnccl.so.2"
else
  "$cc" -O2 -shared -fPIC -fvisibility=hidden -o "$work/libnccl.so.2" "$root/tests/python/fake_nccl.c"
fi
"$cc" -O2 -o "$work/bench_calls" "$root/bench/shim/bench_calls.c" -L"$work" -l:libnccl.so.2 -Wl,-rpath,"$work" -ldl
bash "$root/shim/build_shim.sh" "$work/lib" 2.28.9 >/dev/null
python3 "$root/bench/shim/compare_modes.py" "$work/bench_calls" "$work/lib/libncclbind_shim-nccl-2.28.9.so" \
  --rounds "${2:-7}" "${1:-100000}"
