// The one-shot small-message all-reduce of tests/multigpu/device/oneshot_bench.py in CUDA C++,
// against NCCL's C++ device API (NCCL 2.30 or newer: ncclLsaReduceSum over a window), the
// reference the Numba kernel is measured against. Each block reduces one chunk between two LSA
// barriers (barrier index = block); `iterations` repeats that inside the kernel, to time the
// device work without the launch. Compiled by ncclbind.device.cuda_source.compile_module.
#include <nccl_device.h>

extern "C" __global__ void oneshot_all_reduce_cxx(const ncclDevComm* commp, ncclWindow_t window, float* dst,
                                                  size_t count, int iterations) {
  const ncclDevComm& comm = *commp;
  ncclTeam team = ncclTeamLsa(comm);
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, team, comm.lsaBarrier, blockIdx.x);
  size_t per = (count + gridDim.x - 1) / gridDim.x;
  size_t first = per * blockIdx.x;
  size_t n = first < count ? (count - first < per ? count - first : per) : 0;
  for (int i = 0; i < iterations; i++) {
    bar.sync(ncclCoopCta(), cuda::memory_order_relaxed);
    ncclLsaReduceSum(ncclCoopCta(), window, first * sizeof(float), dst + first, n, team);
    bar.sync(ncclCoopCta(), cuda::memory_order_release);
  }
}
