#!/usr/bin/env bash
# Build and run the C multi-GPU test on a GPU machine (no Bazel there):
#   bash tests/multigpu/run_c.sh [NRANKS] [--bench]
# NRANKS defaults to every GPU. Needs g++, gcc and the CUDA toolkit (CUDA_HOME).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cuda=${CUDA_HOME:-/usr/local/cuda}
out=${BUILD_DIR:-/tmp/ncclbind-c}
mkdir -p "$out"
# The NCCL that Python users have there: the nvidia-nccl-cu13 wheel's.
if [[ -z "${NCCLBIND_NCCL_PATH:-}" ]]; then
  wheel_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null || true)
  [[ -f "$wheel_lib" ]] && export NCCLBIND_NCCL_PATH=$wheel_lib
fi
echo "libnccl: ${NCCLBIND_NCCL_PATH:-unset, the runtime searches}"
for src in runtime/src/*.c bindings/c/src/nccl.c; do
  gcc -O2 -std=c11 -Iruntime/include -Ibindings/c/include -c "$src" -o "$out/$(basename "$src" .c).o"
done
g++ -O2 -std=c++17 -Iruntime/include -Ibindings/c/include -I"$cuda/include" tests/multigpu/c/ranks.cc \
  "$out"/*.o -L"$cuda/lib64" -Wl,-rpath,"$cuda/lib64" -lcudart -ldl -lpthread -o "$out/ranks"
exec "$out/ranks" "$@"
