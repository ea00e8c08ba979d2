#!/usr/bin/env bash
# Runs every program of this folder on N ranks (default: every GPU) with `import ncclbind as nccl`
# resolved from PYTHONPATH. MPI programs go through mpirun when the machine has one.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# run.sh N [ep]: with "ep", only the NCCL EP program (NCCL 2.32.3 and libnccl_ep exported first:
# eval "$(bash tests/multigpu/nccl_wheels.sh assemble)")
n=${1:-$(python3 -c "import cupy; print(cupy.cuda.runtime.getDeviceCount())")}
programs=${PROGRAMS:-"mpi_collectives.py buffers_and_windows.py"}  # PROGRAMS: a subset (windows need NCCL 2.27)
[ "${2:-}" = ep ] && programs=ep_dispatch_combine.py
exports=()  # mpirun passes on only what it is told to (each that is set)
for v in PYTHONPATH LD_LIBRARY_PATH NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS \
         NCCLBIND_NCCL_PATH NCCLBIND_NCCL_EP_PATH NCCL_HOME; do
  [ -n "${!v:-}" ] && exports+=(-x "$v")
done
status=0
for program in $programs; do
  if command -v mpirun >/dev/null; then
    mpirun --allow-run-as-root --oversubscribe -np "$n" "${exports[@]}" python3 "$program" || status=1
  else
    echo "(no mpirun: $program as one rank)"
    python3 "$program" || status=1
  fi
done
[ "${2:-}" = ep ] || python3 init_all_group.py || status=1
exit $status
