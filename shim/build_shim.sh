#!/usr/bin/env bash
# Build the interposition library for every NCCL release (or those named) with the system C
# compiler, no Bazel: OUT/libncclbind_shim-nccl-<version>.so from the generated wrappers of every
# release (bindings/shim/src/nccl_shim.c, built with -DNB_SHIM_RELEASE_CODE=<the release's code>)
# and the hand-written shim/src/*.c. The releases are those the source has tables for.
#   bash shim/build_shim.sh [OUT_DIR] [VERSION...]      (OUT_DIR default: build/shim)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/build/shim}"
shift || true
cc="${CC:-cc}"
src="$root/bindings/shim/src/nccl_shim.c"
mkdir -p "$out"
# "version code" of each release the source has tables for (its "#elif NB_SHIM_RELEASE_CODE == C /* NCCL V */")
mapfile -t known < <(sed -nE 's@^#elif NB_SHIM_RELEASE_CODE == ([0-9]+) /\* NCCL ([0-9.]+) \*/$@\2 \1@p' "$src")
versions=("$@")
if [[ ${#versions[@]} -eq 0 ]]; then
  for row in "${known[@]}"; do versions+=("${row% *}"); done
fi
for v in "${versions[@]}"; do
  code=""
  for row in "${known[@]}"; do [[ ${row% *} == "$v" ]] && code=${row#* }; done
  [[ -n $code ]] || { echo "build_shim.sh: no wrappers for NCCL $v in $src" >&2; exit 2; }
  "$cc" -std=gnu11 -O2 -fPIC -shared -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter \
    -DNB_SHIM_RELEASE_CODE="$code" \
    -I"$root/shim/include" -I"$root/bindings/c/include" -I"$root/runtime/include" \
    -Wl,-soname,libncclbind_shim.so -o "$out/libncclbind_shim-nccl-$v.so.tmp$$" \
    "$src" "$root"/shim/src/*.c -ldl -lpthread
  mv -f "$out/libncclbind_shim-nccl-$v.so.tmp$$" "$out/libncclbind_shim-nccl-$v.so"
  echo "$out/libncclbind_shim-nccl-$v.so"
done
