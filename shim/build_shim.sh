#!/usr/bin/env bash
# Build the interposition library for every NCCL release (or those named) with the system C
# compiler, no Bazel: OUT/libncclbind_shim-nccl-<version>.so from the generated wrappers
# (bindings/shim/src/nccl-<version>.c) and the hand-written shim/src/*.c.
#   bash shim/build_shim.sh [OUT_DIR] [VERSION...]      (OUT_DIR default: build/shim)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/build/shim}"
shift || true
cc="${CC:-cc}"
mkdir -p "$out"
versions=("$@")
if [[ ${#versions[@]} -eq 0 ]]; then
  for f in "$root"/bindings/shim/src/nccl-*.c; do
    v="${f##*/nccl-}"
    versions+=("${v%.c}")
  done
fi
for v in "${versions[@]}"; do
  src="$root/bindings/shim/src/nccl-$v.c"
  [[ -f "$src" ]] || { echo "build_shim.sh: no wrappers for NCCL $v ($src)" >&2; exit 2; }
  "$cc" -std=gnu11 -O2 -fPIC -shared -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter \
    -I"$root/shim/include" -I"$root/bindings/c/include" -I"$root/runtime/include" \
    -Wl,-soname,libncclbind_shim.so -o "$out/libncclbind_shim-nccl-$v.so.tmp$$" \
    "$src" "$root"/shim/src/*.c -ldl -lpthread
  mv -f "$out/libncclbind_shim-nccl-$v.so.tmp$$" "$out/libncclbind_shim-nccl-$v.so"
  echo "$out/libncclbind_shim-nccl-$v.so"
done
