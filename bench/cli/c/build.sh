#!/usr/bin/env bash
# Builds the C worker of ncclbind.bench (one rank of the "c" backend) with gcc: the generated
# binding and the runtime compiled in, libcudart and libcuda loaded at run time (dlopen), so no
# CUDA headers are needed. Prints the binary's path on its last line.
#   bash bench/cli/c/build.sh [OUT_DIR]     # default ${BUILD_DIR:-/tmp/ncclbind-bench}
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
out=${1:-${BUILD_DIR:-/tmp/ncclbind-bench}}
mkdir -p "$out"
${CC:-gcc} -std=c11 -O2 -fopenmp -Wall -Wextra -I"$repo/runtime/include" -I"$repo/bindings/c/include" \
  "$repo/bench/cli/c/bench_worker.c" "$repo/bindings/c/src/nccl.c" "$repo"/runtime/src/*.c \
  -ldl -lpthread -lm -fopenmp -o "$out/ncclbind_bench_worker_c"
echo "$out/ncclbind_bench_worker_c"
