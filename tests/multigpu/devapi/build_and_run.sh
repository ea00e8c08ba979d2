#!/usr/bin/env bash
# Builds the device-API test with nvcc and runs it, on a GPU machine (no Bazel there):
#   bash tests/multigpu/devapi/build_and_run.sh [NRANKS]
# NRANKS defaults to every GPU. Needs gcc and the CUDA toolkit (CUDA_HOME, default
# /usr/local/cuda). NCCL's device API is header-only for nvcc in every release: plain nvcc, no
# -rdc, no device library (2.30+'s libnccl_device.ltoir is for LLVM-IR users). Any release
# ncclbind binds: bindings/device_wrapper/ncclbind_device_layouts.h picks the C binding's mirrors for
# the headers' NCCL_VERSION_CODE. The headers must be the running libnccl's version: the library
# is the one ncclbind loads (NCCLBIND_NCCL_PATH, else its search) and the headers are
# ncclbind.device.cuda_source.nccl_include_dir()'s for it (NCCLBIND_NCCL_INCLUDE overrides);
# needs python3 with ncclbind importable. NCCLBIND_CUDA_ARCH overrides the GPU's sm_XY.
# The headers are NVIDIA's: they are read where they are installed, never copied here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
# Never multicast objects on that machine (every rank inherits these).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cuda=${CUDA_HOME:-/usr/local/cuda}
out=${BUILD_DIR:-/tmp/ncclbind-devapi}

# One answer for the library and its headers: ncclbind's (cuda_source.nccl_include_dir:
# NCCLBIND_NCCL_INCLUDE, else the include/ beside the loaded libnccl, else the nvidia-nccl wheel's,
# else $CUDA_HOME/include, else /usr/include; always the loaded library's version).
found=$(python3 -c '
import ncclbind
from ncclbind.device import cuda_source
print(ncclbind.library_info("nccl").path)
print(cuda_source.nccl_include_dir())') || {
  echo "ncclbind finds no libnccl or no device headers of its version (see above);" \
    "set NCCLBIND_NCCL_PATH and NCCLBIND_NCCL_INCLUDE" >&2
  exit 1
}
export NCCLBIND_NCCL_PATH=${NCCLBIND_NCCL_PATH:-$(sed -n 1p <<<"$found")}
include=$(sed -n 2p <<<"$found")
arch=${NCCLBIND_CUDA_ARCH:-}
if [[ -z $arch ]]; then
  capability=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .' || true)
  arch=sm_${capability:-90}
fi
version=$(sed -n 's/^#define NCCL_VERSION_CODE \([0-9]*\).*/\1/p' "$include/nccl.h")
echo "nvcc -arch=$arch; NCCL headers $version from $include;" \
  "libnccl: ${NCCLBIND_NCCL_PATH:-unset, the runtime searches}"

mkdir -p "$out"
rm -f "$out"/*.o
for src in runtime/src/*.c bindings/c/src/nccl.c; do
  gcc -O2 -std=c11 -Iruntime/include -Ibindings/c/include -c "$src" -o "$out/$(basename "$src" .c).o"
done
"$cuda/bin/nvcc" -std=c++17 -O2 -arch="$arch" -Xcompiler -Wall \
  -Iruntime/include -Ibindings/c/include -Ibindings/device_wrapper -I"$include" \
  tests/multigpu/devapi/lsa_exchange.cu "$out"/*.o -ldl -lpthread -o "$out/lsa_exchange"
exec "$out/lsa_exchange" "$@"
