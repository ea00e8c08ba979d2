#!/usr/bin/env bash
# Runs the prebuilt multigpu_ranks (build.sh) on the GPU machine:
#   bash tests/multigpu/rust/run.sh [NRANKS] [--bench]
# NRANKS defaults to every GPU. libnccl: NCCLBIND_NCCL_PATH, else the nvidia-nccl wheel in
# python3's site-packages; libcudart: NCCLBIND_CUDART_PATH, else a CUDA runtime wheel, else
# the loader's search and $CUDA_HOME. Without a GPU it prints "SKIPPED: ..." and exits 0.
set -euo pipefail
bin=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/bindings/rust/target/gpu/multigpu_ranks
if [[ ! -x $bin ]]; then
  echo "no $bin: build it with tests/multigpu/rust/build.sh where Rust is installed" >&2
  exit 2
fi
find_in_site_packages() { # glob relative to site-packages; prints the first match
  python3 - "$1" <<'PY' 2>/dev/null || true
import glob, site, sys
for d in site.getsitepackages() + [site.getusersitepackages()]:
    for path in sorted(glob.glob(d + "/" + sys.argv[1])):
        print(path)
        sys.exit()
PY
}
# Never multicast objects on that machine (every process inherits these).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl=${NCCLBIND_NCCL_PATH:-$(find_in_site_packages "nvidia/nccl/lib/libnccl.so.2")}
[[ -n $nccl ]] && export NCCLBIND_NCCL_PATH=$nccl
cudart=${NCCLBIND_CUDART_PATH:-$(find_in_site_packages "nvidia/*/lib/libcudart.so.1[0-9]")}
[[ -n $cudart ]] && export NCCLBIND_CUDART_PATH=$cudart
echo "NCCLBIND_NCCL_PATH=${NCCLBIND_NCCL_PATH:-(unset: runtime search)} NCCLBIND_CUDART_PATH=${NCCLBIND_CUDART_PATH:-(unset: loader search)}"
exec "$bin" "$@"
