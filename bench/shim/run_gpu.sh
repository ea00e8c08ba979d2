#!/usr/bin/env bash
# The shim's cost per call on a GPU (one rank): ncclGetVersion and a 2-float ncclAllReduce (out of
# place and in place) on the libnccl torch uses, without the shim and under it in each mode:
# ROUNDS rounds (7) of the four, a process each, 5 batches of N calls (20000).
#   bash bench/shim/run_gpu.sh [N] [ROUNDS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nccl=${NCCLBIND_NCCL_PATH:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))')}
cudart_dir=$(python3 -c 'import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], "lib"))' 2>/dev/null || echo "${CUDA_HOME:-/usr/local/cuda}/lib64")
export LD_LIBRARY_PATH="$cudart_dir:${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
libdir=$(dirname "$nccl")
${CC:-cc} -O2 -o "$work/bench_calls" "$root/bench/shim/bench_calls.c" -L"$libdir" -l:libnccl.so.2 -Wl,-rpath,"$libdir" -ldl
version=$(python3 -c "import ctypes,sys; v=ctypes.c_int(); ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v)); c=v.value; print(f'{c//10000}.{c//100%100}.{c%100}')" "$nccl")
bash "$root/shim/build_shim.sh" "$work/lib" >/dev/null
lib=$(NCCLBIND_SHIM_LIBDIR="$work/lib" PYTHONPATH="${NCCLBIND_SITE:-/tmp/ncclbind-site}" python3 -m ncclbind.trace library --nccl "$nccl" 2>/dev/null || echo "$work/lib/libncclbind_shim-nccl-$version.so")
echo "libnccl $version ($nccl); shim $lib"
python3 "$root/bench/shim/compare_modes.py" "$work/bench_calls" "$lib" --rounds "${2:-7}" --gpu "${1:-20000}"
