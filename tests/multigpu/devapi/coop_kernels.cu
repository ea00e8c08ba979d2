// Kernels of tests/multigpu/devapi/cuda_cpp_kernel.py, compiled from Python by
// ncclbind.device.cuda_source.compile_module against the loaded libnccl's headers, after the
// release's generated C-ABI wrapper (bindings/device_wrapper/nccl_device_wrapper-<set>.cu).
//
// exchange_<kind>: NCCL's C++ device API with one cooperative-group kind per kernel (thread,
//   warp, lanes, warp span with distinct ids, CTA): each group opens an LSA barrier session on
//   its own barrier index, syncs, stores a pattern naming this rank into its part of its slot of
//   every LSA peer's window through ncclGetLsaPointer, syncs (acquire/release) and checks its
//   part of every slot of its own window. Every release ncclbind binds.
// exchange_c_<kind>: the exchange through the C ABI (ncclCoopAnyInit*, ncclCoop*, every
//   ncclLsaBarrierSession* function, ncclGetPeerPointerTeam): what a kernel written in C calls.
//   Compiled where the release's wrapper has those functions (NCCLBIND_HAVE_C_ABI_BARRIER; on
//   NCCL 2.28.9 over the wrapper's own ncclCoopAny).
// reduce_<kind>: the same groups through the C ABI (ncclCoopAnyInit*, ncclLsaBarrierSession*,
//   ncclLsaReduceSum_F32): each group sums its chunk of every peer's source window into dst.
//   Compiled only where the release's wrapper has those functions (NCCLBIND_HAVE_C_ABI_REDUCE).
// Both macros are set by the test from missing_functions, which the IR decides.
#include <nccl_device.h>

#include <cstddef>
#include <cstdint>

namespace {

enum Kind { kThread, kWarp, kLanes, kWarpSpan, kCta };

// Every kernel's groups: how many, and which one this thread is in; a group's barrier index is
// its number (the test asks for as many LSA barriers as the most groups of a launch).

__device__ int group_count(Kind kind) {
  switch (kind) {
    case kThread: return blockDim.x;          // launched with kMaxGroups threads
    case kWarp: return blockDim.x / 32;       // 4 warps
    case kLanes: return 2;                    // one warp: lanes 0-15 and 16-31
    case kWarpSpan: return blockDim.x / 64;   // spans of 2 warps, ids 0..
    case kCta: return gridDim.x;              // one group per block
  }
  return 0;
}

__device__ int group_of(Kind kind) {
  switch (kind) {
    case kThread: return threadIdx.x;
    case kWarp: return threadIdx.x / 32;
    case kLanes: return (threadIdx.x % 32) / 16;
    case kWarpSpan: return threadIdx.x / 64;
    case kCta: return blockIdx.x;
  }
  return 0;
}

__host__ __device__ int payload(int writer, size_t i, int round) {
  return (round << 28) | ((writer + 1) << 16) | int(i & 0xffff);
}

struct Mismatch {
  int count;
  int peer, index, got;
};

template <typename Coop>
__device__ void exchange(Coop coop, const ncclDevComm &comm, ncclWindow_t window, size_t slot_ints, int group,
                         int groups, int round, Mismatch *mismatch) {
  ncclLsaBarrierSession<Coop> barrier(coop, comm, ncclTeamTagLsa(), group);
  const ncclTeam lsa = ncclTeamLsa(comm);
  const size_t part = slot_ints / groups, begin = part * group, end = begin + part;
  barrier.sync(coop, cuda::memory_order_relaxed);
  for (int peer = 0; peer < lsa.nRanks; ++peer) {
    int *slot = static_cast<int *>(ncclGetLsaPointer(window, size_t(lsa.rank) * slot_ints * sizeof(int), peer));
    for (size_t i = begin + coop.thread_rank(); i < end; i += coop.size()) slot[i] = payload(comm.rank, i, round);
  }
  barrier.sync(coop, cuda::memory_order_acq_rel);
  const int *mine = static_cast<const int *>(ncclGetLocalPointer(window, 0));
  for (int peer = 0; peer < lsa.nRanks; ++peer) {
    const int writer = ncclTeamRankToWorld(comm, lsa, peer);
    for (size_t i = begin + coop.thread_rank(); i < end; i += coop.size()) {
      int got = mine[size_t(peer) * slot_ints + i];
      if (got != payload(writer, i, round) && atomicAdd(&mismatch->count, 1) == 0) {
        mismatch->peer = peer;
        mismatch->index = int(i);
        mismatch->got = got;
      }
    }
  }
}

}  // namespace

#define EXCHANGE_ARGS \
  const ncclDevComm *comm, ncclWindow_t window, size_t slot_ints, int round, Mismatch *mismatch
#define EXCHANGE_PASS *comm, window, slot_ints, group_of(KIND), group_count(KIND), round, mismatch

extern "C" __global__ void exchange_thread(EXCHANGE_ARGS) {
  constexpr Kind KIND = kThread;
  exchange(ncclCoopThread(), EXCHANGE_PASS);
}
extern "C" __global__ void exchange_warp(EXCHANGE_ARGS) {
  constexpr Kind KIND = kWarp;
  exchange(ncclCoopWarp(), EXCHANGE_PASS);
}
extern "C" __global__ void exchange_lanes(EXCHANGE_ARGS) {
  constexpr Kind KIND = kLanes;
  exchange(ncclCoopLanes(group_of(KIND) == 0 ? 0x0000ffffu : 0xffff0000u), EXCHANGE_PASS);
}
extern "C" __global__ void exchange_warp_span(EXCHANGE_ARGS) {
  constexpr Kind KIND = kWarpSpan;
  exchange(ncclCoopWarpSpan(2 * group_of(KIND), 2, group_of(KIND)), EXCHANGE_PASS);
}
extern "C" __global__ void exchange_cta(EXCHANGE_ARGS) {
  constexpr Kind KIND = kCta;
  exchange(ncclCoopCta(), EXCHANGE_PASS);
}

#if defined(NCCLBIND_HAVE_C_ABI_BARRIER) || defined(NCCLBIND_HAVE_C_ABI_REDUCE)
namespace {

// The C ABI only: what a kernel written in C (or generated by another language) would call.
__device__ void init_coop(Kind kind, ncclCoopAny *coop) {
  const int group = group_of(kind);
  switch (kind) {
    case kThread: ncclCoopAnyInitThread(coop); break;
    case kWarp: ncclCoopAnyInitWarp(coop); break;
    case kLanes: ncclCoopAnyInitLanes(coop, group == 0 ? 0x0000ffffu : 0xffff0000u); break;
    case kWarpSpan: ncclCoopAnyInitWarpSpan(coop, 2 * group, 2, group); break;
    case kCta: ncclCoopAnyInitCta(coop); break;
  }
}

}  // namespace
#endif

#ifdef NCCLBIND_HAVE_C_ABI_BARRIER
namespace {

// coop_info[group]: {size, num_threads} as thread_rank 0 of the group saw them.
__device__ void exchange_c(Kind kind, const ncclDevComm *comm, ncclWindow_t window, size_t slot_ints, int round,
                           Mismatch *mismatch, int *coop_info) {
  ncclCoopAny coop;
  init_coop(kind, &coop);
  const int group = group_of(kind), groups = group_count(kind);
  if (ncclCoopThreadRank(&coop) == 0) {
    coop_info[2 * group] = ncclCoopSize(&coop);
    coop_info[2 * group + 1] = ncclCoopNumThreads(&coop);
  }
  const ncclTeam lsa = ncclTeamLsa(*comm);
  const size_t part = slot_ints / groups, begin = part * group, end = begin + part;
  const int rank = ncclCoopThreadRank(&coop), size = ncclCoopSize(&coop);
  // Opaque storage, as a C caller has it (no larger than ncclLsaBarrierSession_C_size() says).
  alignas(ncclLsaBarrierSession_C) unsigned char storage[sizeof(ncclLsaBarrierSession_C)];
  if (ncclLsaBarrierSession_C_size() > sizeof(storage) && atomicAdd(&mismatch->count, 1) == 0) mismatch->peer = -2;
  ncclLsaBarrierSession_C *session = reinterpret_cast<ncclLsaBarrierSession_C *>(storage);
  ncclLsaBarrierSessionInit(session, coop, *comm, lsa, ncclDevComm_LsaBarrier(comm), group, false, ncclMultimemHandle{});
  ncclLsaBarrierSessionSync(session, coop, cuda::memory_order_relaxed);
  for (int peer = 0; peer < lsa.nRanks; ++peer) {
    int *slot = static_cast<int *>(ncclGetPeerPointerTeam(window, size_t(lsa.rank) * slot_ints * sizeof(int), lsa, peer));
    for (size_t i = begin + rank; i < end; i += size) slot[i] = payload(comm->rank, i, round);
  }
  ncclLsaBarrierSessionArrive(session, coop, cuda::memory_order_release);
  ncclLsaBarrierSessionWait(session, coop, cuda::memory_order_acquire);
  const int *mine = static_cast<const int *>(ncclGetPeerPointerTeam(window, 0, lsa, lsa.rank));
  for (int peer = 0; peer < lsa.nRanks; ++peer) {
    const int writer = ncclTeamRankToWorld(*comm, lsa, peer);
    for (size_t i = begin + rank; i < end; i += size) {
      int got = mine[size_t(peer) * slot_ints + i];
      if (got != payload(writer, i, round) && atomicAdd(&mismatch->count, 1) == 0) {
        mismatch->peer = peer;
        mismatch->index = int(i);
        mismatch->got = got;
      }
    }
  }
  // No peer writes the next round before every peer has read this one.
  ncclLsaBarrierSessionSync(session, coop, cuda::memory_order_acq_rel);
  ncclLsaBarrierSessionDestroy(session);
  ncclCoopSync(&coop);
}

}  // namespace

#define EXCHANGE_C_ARGS EXCHANGE_ARGS, int *coop_info
#define EXCHANGE_C_PASS comm, window, slot_ints, round, mismatch, coop_info
extern "C" __global__ void exchange_c_thread(EXCHANGE_C_ARGS) { exchange_c(kThread, EXCHANGE_C_PASS); }
extern "C" __global__ void exchange_c_warp(EXCHANGE_C_ARGS) { exchange_c(kWarp, EXCHANGE_C_PASS); }
extern "C" __global__ void exchange_c_lanes(EXCHANGE_C_ARGS) { exchange_c(kLanes, EXCHANGE_C_PASS); }
extern "C" __global__ void exchange_c_warp_span(EXCHANGE_C_ARGS) { exchange_c(kWarpSpan, EXCHANGE_C_PASS); }
extern "C" __global__ void exchange_c_cta(EXCHANGE_C_ARGS) { exchange_c(kCta, EXCHANGE_C_PASS); }
#endif

#ifdef NCCLBIND_HAVE_C_ABI_REDUCE
namespace {

__device__ void reduce(Kind kind, const ncclDevComm *comm, ncclWindow_t src, float *dst, size_t count,
                       int *coop_sizes) {
  ncclCoopAny coop;
  init_coop(kind, &coop);
  const int group = group_of(kind), groups = group_count(kind);
  if (ncclCoopThreadRank(&coop) == 0) coop_sizes[group] = ncclCoopSize(&coop);
  const size_t chunk = (count + groups - 1) / groups;
  const size_t begin = chunk * group < count ? chunk * group : count;
  const size_t n = begin + chunk < count ? chunk : count - begin;
  // Opaque storage, as a C caller has it (sized by the C-ABI type; ncclLsaBarrierSession_C_size()).
  alignas(ncclLsaBarrierSession_C) unsigned char storage[sizeof(ncclLsaBarrierSession_C)];
  ncclLsaBarrierSession_C *session = reinterpret_cast<ncclLsaBarrierSession_C *>(storage);
  ncclLsaBarrierSessionInit(session, coop, *comm, ncclTeamLsa(*comm), ncclDevComm_LsaBarrier(comm), group, false,
                            ncclMultimemHandle{});
  // Every peer's source is written (before this kernel) and none is read yet.
  ncclLsaBarrierSessionSync(session, coop, cuda::memory_order_relaxed);
  ncclLsaReduceSum_F32(coop, src, begin * sizeof(float), dst + begin, n, ncclTeamLsa(*comm));
  // No peer changes its source before every peer has read it.
  ncclLsaBarrierSessionSync(session, coop, cuda::memory_order_acq_rel);
  ncclLsaBarrierSessionDestroy(session);
  ncclCoopSync(&coop);
}

}  // namespace

#define REDUCE_ARGS const ncclDevComm *comm, ncclWindow_t src, float *dst, size_t count, int *coop_sizes
extern "C" __global__ void reduce_thread(REDUCE_ARGS) { reduce(kThread, comm, src, dst, count, coop_sizes); }
extern "C" __global__ void reduce_warp(REDUCE_ARGS) { reduce(kWarp, comm, src, dst, count, coop_sizes); }
extern "C" __global__ void reduce_lanes(REDUCE_ARGS) { reduce(kLanes, comm, src, dst, count, coop_sizes); }
extern "C" __global__ void reduce_warp_span(REDUCE_ARGS) { reduce(kWarpSpan, comm, src, dst, count, coop_sizes); }
extern "C" __global__ void reduce_cta(REDUCE_ARGS) { reduce(kCta, comm, src, dst, count, coop_sizes); }
#endif
