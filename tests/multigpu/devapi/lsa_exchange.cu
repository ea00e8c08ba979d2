// NCCL's device API over the ncclbind C binding: each rank (one process per GPU, started
// by this program; the unique id shared through a file) creates its communicator with the
// nb_* wrappers, allocates a symmetric window (nb_ncclMemAlloc, nb_ncclCommWindowRegister
// with COLL_SYMMETRIC) and a device communicator with one LSA barrier per block
// (nb_ncclDevCommCreate), then launches a kernel that takes that device communicator as
// NCCL's own ncclDevComm. The kernel: LSA barrier; store a pattern naming this rank into its
// slot of every LSA peer's window through ncclGetLsaPointer; barrier (release, acquire); check
// every slot of its own window. The host checks the window again, and that the LSA team spans
// every rank. Two rounds, so barrier state carries over between kernels. No multimem anywhere.
//
// Any release ncclbind binds: the C binding's mirrors of ncclDevComm and
// ncclDevCommRequirements are the ones of the release whose headers are included
// (bindings/device_wrapper/ncclbind_device_layouts.h, generated from the IR), checked against NCCL's
// own types below. NCCL's device API is header-only for nvcc in every release (nccl_device.h
// includes the implementations; 2.30's libnccl_device.ltoir/.bc serve LLVM-IR users such as
// Numba), so this builds with plain nvcc, no -rdc and no device library; the headers must be
// the loaded libnccl's version, which the program checks. Build and run on the GPU machine with
// tests/multigpu/devapi/build_and_run.sh. Without a GPU it prints "SKIPPED: ..." and exits 0.
#include <ncclbind/nccl.h>

#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>
#include <ncclbind_device_layouts.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kBlocks = 4;        // one LSA barrier each
constexpr int kThreads = 256;
constexpr int kPerThread = 4;     // ints each thread writes into each peer's slot
constexpr size_t kSlotInts = size_t(kBlocks) * kThreads * kPerThread;
constexpr size_t kSlotBytes = kSlotInts * sizeof(int);
constexpr int kRounds = 2;
constexpr int kKernelSeconds = 60;  // a barrier that never completes fails the rank

// The mirror the binding fills must be NCCL's own type, byte for byte: the kernel gets the
// bytes. (bindings/c/layout_tests checks every field; these are the ones used here.)
using DevCommMirror = ncclbind_layout_ncclDevComm_t;
using RequirementsMirror = ncclbind_layout_ncclDevCommRequirements_t;
static_assert(sizeof(DevCommMirror) == sizeof(ncclDevComm), "ncclDevComm size");
static_assert(offsetof(DevCommMirror, rank) == offsetof(ncclDevComm, rank), "rank");
static_assert(offsetof(DevCommMirror, nRanks) == offsetof(ncclDevComm, nRanks), "nRanks");
static_assert(offsetof(DevCommMirror, lsaRank) == offsetof(ncclDevComm, lsaRank), "lsaRank");
static_assert(offsetof(DevCommMirror, lsaSize) == offsetof(ncclDevComm, lsaSize), "lsaSize");
static_assert(offsetof(DevCommMirror, resourceWindow_inlined) == offsetof(ncclDevComm, resourceWindow_inlined),
              "resourceWindow_inlined");
static_assert(offsetof(DevCommMirror, lsaBarrier) == offsetof(ncclDevComm, lsaBarrier), "lsaBarrier");
static_assert(sizeof(RequirementsMirror) == sizeof(ncclDevCommRequirements), "ncclDevCommRequirements size");
static_assert(offsetof(RequirementsMirror, lsaBarrierCount) == offsetof(ncclDevCommRequirements, lsaBarrierCount),
              "lsaBarrierCount");

int g_rank = 0;

#define CUDA_OK(call)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "rank %d: %s failed: %s\n", g_rank, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

#define NB_OK(call)                                                                                        \
  do {                                                                                                     \
    nb_ncclResult_t r_ = (call);                                                                           \
    if (r_ != nb_ncclSuccess) {                                                                            \
      std::fprintf(stderr, "rank %d: %s failed: %s (%s) %s %s\n", g_rank, #call, ncclbind_result_name(r_), \
                   ncclbind_result_description(r_), ncclbind_last_error(), ncclbind_nccl_last_error());    \
      std::exit(3);                                                                                        \
    }                                                                                                      \
  } while (0)

// What world rank `writer` stores at index i of its slot in round `round`: never 0 (the
// window starts zeroed), different for every writer, index and round.
__host__ __device__ int payload(int writer, size_t i, int round) {
  return (round << 28) | ((writer + 1) << 16) | int(i);
}
static_assert(kSlotInts <= 0x10000, "the index must fit payload's low 16 bits");

struct Mismatch {
  int count;
  int peer, index, got;  // the first one
};

__global__ void lsa_exchange(ncclDevComm comm, ncclWindow_t window, int round, Mismatch *mismatch) {
  ncclLsaBarrierSession<ncclCoopCta> barrier(ncclCoopCta(), comm, ncclTeamTagLsa(), blockIdx.x);
  const ncclTeam lsa = ncclTeamLsa(comm);
  const size_t begin = size_t(blockIdx.x) * blockDim.x * kPerThread;
  const size_t end = begin + size_t(blockDim.x) * kPerThread;

  // Every peer has reached this kernel, so its window is ready and last round's reads are done.
  barrier.sync(ncclCoopCta(), cuda::memory_order_relaxed);
  for (int peer = 0; peer < lsa.nRanks; ++peer) {
    int *slot = static_cast<int *>(ncclGetLsaPointer(window, size_t(lsa.rank) * kSlotBytes, peer));
    for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) slot[i] = payload(comm.rank, i, round);
  }
  // Release this block's stores to the peers; acquire theirs into this window.
  barrier.sync(ncclCoopCta(), cuda::memory_order_acq_rel);

  const int *mine = static_cast<const int *>(ncclGetLocalPointer(window, 0));
  for (int peer = 0; peer < lsa.nRanks; ++peer) {
    const int writer = ncclTeamRankToWorld(comm, lsa, peer);
    for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      int got = mine[size_t(peer) * kSlotInts + i];
      if (got != payload(writer, i, round) && atomicAdd(&mismatch->count, 1) == 0) {
        mismatch->peer = peer;
        mismatch->index = int(i);
        mismatch->got = got;
      }
    }
  }
}

int g_failures = 0, g_checks = 0;

void check(bool ok, const std::string &what) {
  ++g_checks;
  if (!ok) {
    ++g_failures;
    std::fprintf(stderr, "rank %d: FAIL %s\n", g_rank, what.c_str());
  }
}

nb_ncclUniqueId exchange_id(const char *id_file) {
  nb_ncclUniqueId id;
  if (g_rank == 0) {
    NB_OK(nb_ncclGetUniqueId(&id));
    std::string partial = std::string(id_file) + ".partial";
    FILE *f = std::fopen(partial.c_str(), "wb");
    if (!f || std::fwrite(&id, sizeof id, 1, f) != 1 || std::fclose(f) != 0 ||
        std::rename(partial.c_str(), id_file) != 0) {
      std::fprintf(stderr, "rank 0: cannot write %s\n", id_file);
      std::exit(2);
    }
    return id;
  }
  for (int tries = 0; tries < 6000; ++tries) {
    FILE *f = std::fopen(id_file, "rb");
    bool got = f && std::fread(&id, sizeof id, 1, f) == 1;
    if (f) std::fclose(f);
    if (got) return id;
    usleep(10000);
  }
  std::fprintf(stderr, "rank %d: no unique id in %s after 60 s\n", g_rank, id_file);
  std::exit(2);
}

// Waits for the stream without blocking in CUDA, so that a kernel stuck at a barrier fails.
void wait_for(cudaStream_t stream, const char *what) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      std::fprintf(stderr, "rank %d: %s: %s\n", g_rank, what, cudaGetErrorString(e));
      std::exit(2);
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(kKernelSeconds)) {
      std::fprintf(stderr, "rank %d: FAIL %s still runs after %d s (a barrier a peer never reached?)\n", g_rank,
                   what, kKernelSeconds);
      _exit(4);  // exit() would wait for the kernel
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

int run_rank(int nranks, const char *id_file) {
  CUDA_OK(cudaSetDevice(g_rank));
  nb_ncclUniqueId id = exchange_id(id_file);
  nb_ncclComm_t comm;
  NB_OK(nb_ncclCommInitRank(&comm, nranks, id, g_rank));
  int version = 0;
  NB_OK(nb_ncclGetVersion(&version));
  if (version != NCCL_VERSION_CODE) {
    std::fprintf(stderr,
                 "rank %d: libnccl is %d but the kernel was compiled against NCCL %d's device headers; "
                 "build with the headers of the library that runs (build_and_run.sh takes both from one wheel)\n",
                 g_rank, version, NCCL_VERSION_CODE);
    return 2;
  }
  nb_ncclTeam_t lsa = nb_ncclTeamLsa(comm);
  // One host with NVLink between every pair: the LSA team is every rank (so > 1 on 2 GPUs).
  check(lsa.nRanks == nranks && lsa.rank == g_rank,
        "LSA team: rank " + std::to_string(lsa.rank) + " of " + std::to_string(lsa.nRanks) + ", expected " +
            std::to_string(g_rank) + " of " + std::to_string(nranks));

  // Every rank registers the same size (symmetric): one slot per LSA peer.
  const size_t bytes = size_t(lsa.nRanks) * kSlotBytes;
  void *buffer = nullptr;
  NB_OK(nb_ncclMemAlloc(&buffer, bytes));
  CUDA_OK(cudaMemset(buffer, 0, bytes));
  CUDA_OK(cudaDeviceSynchronize());
  nb_ncclWindow_t window = nullptr;
  NB_OK(nb_ncclCommWindowRegister(comm, buffer, bytes, &window, NB_NCCL_WIN_COLL_SYMMETRIC));

  // NCCL's own initializer where the release has one (2.29 and later stamp size, magic and
  // version), else zeroed (2.28); then what this kernel needs; then the mirror's bytes.
#ifdef NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER
  ncclDevCommRequirements wanted = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
#else
  ncclDevCommRequirements wanted;
  std::memset(&wanted, 0, sizeof wanted);
#endif
  wanted.lsaBarrierCount = kBlocks;
  RequirementsMirror requirements;
  std::memcpy(&requirements, &wanted, sizeof requirements);
  DevCommMirror mirror;
  std::memset(&mirror, 0, sizeof mirror);
  NB_OK(nb_ncclDevCommCreate(comm, reinterpret_cast<const nb_ncclDevCommRequirements_t *>(&requirements),
                             reinterpret_cast<nb_ncclDevComm_t *>(&mirror)));
  check(mirror.rank == g_rank && mirror.nRanks == nranks && mirror.lsaSize == lsa.nRanks &&
            mirror.lsaRank == lsa.rank && mirror.lsaBarrier.nBarriers >= kBlocks,
        "DevComm fields: rank " + std::to_string(mirror.rank) + " of " + std::to_string(mirror.nRanks) + ", LSA " +
            std::to_string(mirror.lsaRank) + " of " + std::to_string(mirror.lsaSize) + ", " +
            std::to_string(mirror.lsaBarrier.nBarriers) + " LSA barriers");
  ncclDevComm dev_comm;
  std::memcpy(&dev_comm, &mirror, sizeof dev_comm);

  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Mismatch *mismatch = nullptr;
  CUDA_OK(cudaMalloc(&mismatch, sizeof *mismatch));
  std::vector<int> host(bytes / sizeof(int));
  for (int round = 0; round < kRounds; ++round) {
    CUDA_OK(cudaMemsetAsync(mismatch, 0, sizeof *mismatch, stream));
    lsa_exchange<<<kBlocks, kThreads, 0, stream>>>(dev_comm, reinterpret_cast<ncclWindow_t>(window), round,
                                                   mismatch);
    CUDA_OK(cudaGetLastError());
    wait_for(stream, "the exchange kernel");
    Mismatch found;
    CUDA_OK(cudaMemcpy(&found, mismatch, sizeof found, cudaMemcpyDeviceToHost));
    check(found.count == 0, "round " + std::to_string(round) + ", kernel: " + std::to_string(found.count) +
                                " wrong; first: peer " + std::to_string(found.peer) + " [" +
                                std::to_string(found.index) + "] = " + std::to_string(found.got));

    CUDA_OK(cudaMemcpy(host.data(), buffer, bytes, cudaMemcpyDeviceToHost));
    size_t wrong = 0;
    for (int peer = 0; peer < lsa.nRanks; ++peer) {
      int writer = g_rank + (peer - lsa.rank) * lsa.stride;
      for (size_t i = 0; i < kSlotInts; ++i) wrong += host[peer * kSlotInts + i] != payload(writer, i, round);
    }
    check(wrong == 0, "round " + std::to_string(round) + ", host: " + std::to_string(wrong) + " of " +
                          std::to_string(host.size()) + " ints wrong");
  }
  if (g_rank == 0)
    std::printf("NCCL %s layouts; LSA team of %d ranks; %d rounds of %zu ints from every peer, checked on the GPU "
                "and the host\n", NCCLBIND_LAYOUT_VERSION, lsa.nRanks, kRounds, kSlotInts);

  NB_OK(nb_ncclDevCommDestroy(comm, reinterpret_cast<const nb_ncclDevComm_t *>(&mirror)));
  NB_OK(nb_ncclCommWindowDeregister(comm, window));
  NB_OK(nb_ncclMemFree(buffer));
  CUDA_OK(cudaFree(mismatch));
  CUDA_OK(cudaStreamDestroy(stream));
  NB_OK(nb_ncclCommFinalize(comm));
  NB_OK(nb_ncclCommDestroy(comm));
  std::printf("rank %d/%d (libnccl %d): %d checks, %d failed\n", g_rank, nranks, version, g_checks, g_failures);
  return g_failures ? 1 : 0;
}

// The number of GPUs, or -1 and why not. Asked in a child process: this one forks the ranks
// next, and CUDA initialised before a fork is unusable in the children.
int count_gpus(std::string *why) {
  int fds[2];
  if (pipe(fds) != 0) {
    *why = "pipe failed";
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    std::string answer = e == cudaSuccess ? std::to_string(n) : std::string("-1 ") + cudaGetErrorString(e);
    ssize_t written = write(fds[1], answer.data(), answer.size());
    _exit(written == ssize_t(answer.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string answer;
  char chunk[256];
  for (ssize_t got; (got = read(fds[0], chunk, sizeof chunk)) > 0;) answer.append(chunk, size_t(got));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  int n = answer.empty() ? -1 : std::atoi(answer.c_str());
  if (n <= 0) *why = n == 0 ? "cudaGetDeviceCount found no device" : answer.empty() ? "the probe died" : answer.substr(3);
  return n;
}

}  // namespace

int main(int argc, char **argv) {
  int nranks = argc > 1 ? std::atoi(argv[1]) : 0;
  std::string why;
  int devices = count_gpus(&why);
  if (devices <= 0) {
    std::printf("SKIPPED: no GPU (%s)\n", why.c_str());
    return 0;
  }
  if (nranks <= 0) nranks = devices;
  if (nranks > devices) {
    std::printf("SKIPPED: %d ranks asked, %d GPUs present\n", nranks, devices);
    return 0;
  }
  char id_file[] = "/tmp/ncclbind-devapi-id-XXXXXX";
  int fd = mkstemp(id_file);
  if (fd < 0) {
    std::perror("mkstemp");
    return 2;
  }
  close(fd);
  unlink(id_file);
  std::vector<pid_t> ranks;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      g_rank = r;
      alarm(300);  // a hang fails the run instead of holding the machine
      std::exit(run_rank(nranks, id_file));
    }
    ranks.push_back(pid);
  }
  int failed = 0;
  for (int r = 0; r < nranks; ++r) {
    int status = 0;
    waitpid(ranks[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
      if (WIFSIGNALED(status))
        std::printf("rank %d: ended by signal %d\n", r, WTERMSIG(status));
      else
        std::printf("rank %d: exited with status %d\n", r, WEXITSTATUS(status));
    }
  }
  unlink(id_file);
  std::printf("%d ranks: %d passed, %d failed\n", nranks, nranks - failed, failed);
  return failed ? 1 : 0;
}
