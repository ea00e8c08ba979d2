// One-shot all-reduce over a symmetric window with NCCL's device API (for the device-API
// benchmark; launched from Python by tests/multigpu/devapi/oneshot.py): every block takes a
// chunk, opens an LSA barrier session on its own barrier index, syncs (every peer's input is
// in its window), sums its chunk of every LSA peer's window into `out`, and syncs again (no
// peer overwrites its input before all have read it). One kernel, no host round trip.
//
// The sum is NCCL's ncclLsaReduceSum where the release's C++ device API has it
// (NCCLBIND_HAVE_LSA_REDUCE_SUM, set by the launcher from the IR's table); otherwise the same
// loop written out over ncclGetLsaPointer (NCCL 2.28).
#include <nccl_device.h>

#include <cstddef>

namespace {

template <typename T>
__device__ void oneshot_all_reduce(const ncclDevComm &comm, ncclWindow_t window, size_t offset, T *out,
                                   size_t count) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> barrier(cta, comm, ncclTeamTagLsa(), blockIdx.x);
  const size_t chunk = (count + gridDim.x - 1) / gridDim.x;
  const size_t begin = chunk * blockIdx.x < count ? chunk * blockIdx.x : count;
  const size_t n = begin + chunk < count ? chunk : count - begin;
  barrier.sync(cta, cuda::memory_order_relaxed);
#ifdef NCCLBIND_HAVE_LSA_REDUCE_SUM
  ncclLsaReduceSum(cta, window, offset + begin * sizeof(T), out + begin, n, ncclTeamLsa(comm));
#else
  const ncclTeam lsa = ncclTeamLsa(comm);
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
    T sum = T(0);
    for (int peer = 0; peer < lsa.nRanks; ++peer)
      sum += static_cast<const T *>(ncclGetLsaPointer(window, offset, peer))[begin + i];
    out[begin + i] = sum;
  }
#endif
  barrier.sync(cta, cuda::memory_order_acq_rel);
}

}  // namespace

extern "C" __global__ void oneshot_all_reduce_f32(const ncclDevComm *comm, ncclWindow_t window, size_t offset,
                                                  float *out, size_t count) {
  oneshot_all_reduce(*comm, window, offset, out, count);
}
