#!/usr/bin/env bash
# Runs the prebuilt GPU test and benchmarks (build_gpu_binaries.sh) on a machine with a GPU.
# libnccl: NCCLBIND_NCCL_PATH, else the nvidia-nccl wheel in python3's site-packages.
# libcudart: NCCLBIND_CUDART_PATH, else a CUDA runtime wheel, else the loader's search and
# $CUDA_HOME. Without a GPU each binary prints "SKIPPED: no GPU (...)" and exits 0.
set -uo pipefail
bin=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../bindings/rust/target/gpu" && pwd)
find_in_site_packages() { # glob relative to site-packages
  python3 - "$1" <<'PY' 2>/dev/null
import glob, site, sys
dirs = site.getsitepackages() + [site.getusersitepackages()]
for d in dirs:
    for path in sorted(glob.glob(d + "/" + sys.argv[1])):
        print(path)
        sys.exit()
PY
}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export NCCLBIND_NCCL_PATH=${NCCLBIND_NCCL_PATH:-$(find_in_site_packages "nvidia/nccl/lib/libnccl.so.2")}
cudart=${NCCLBIND_CUDART_PATH:-$(find_in_site_packages "nvidia/*/lib/libcudart.so.1[0-9]")}
[[ -n $cudart ]] && export NCCLBIND_CUDART_PATH=$cudart
echo "NCCLBIND_NCCL_PATH=${NCCLBIND_NCCL_PATH:-(unset: runtime search)} NCCLBIND_CUDART_PATH=${NCCLBIND_CUDART_PATH:-(unset: loader search)}"
status=0
for program in gpu_allreduce allreduce_overhead trivial_call; do
  echo "== $program"
  "$bin/$program" || status=1
done
exit $status
