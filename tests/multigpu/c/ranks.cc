// Multi-GPU run of the generated C binding: one process per GPU (this program
// forks them), the unique id shared through a file as users do. Every
// collective and a send/recv ring over several sizes and every data type,
// checked element by element; grouped collectives with point-to-point; split,
// shrink; buffer and window registration; DevComm creation; abort while a peer
// waits. With --bench, bus bandwidth by size and small-message latency through
// ncclbind next to raw ncclAllReduce from the same library.
//
// GPU only: it needs the CUDA runtime and a GPU per rank. Build and run on the
// GPU machine with tests/multigpu/run_c.sh; it is not part of `bazel test`.
#include <ncclbind/nccl.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace {

int g_rank = 0, g_nranks = 1;
int g_failures = 0, g_checks = 0;
std::set<std::string> g_absent;  // calls the loaded libnccl lacks ("not in this release")

#define CUDA_OK(call)                                                                        \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "rank %d: %s failed: %s\n", g_rank, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

#define NB_OK(call)                                                                                       \
  do {                                                                                                    \
    nb_ncclResult_t r_ = (call);                                                                          \
    if (r_ != nb_ncclSuccess) {                                                                           \
      std::fprintf(stderr, "rank %d: %s failed: %s (%s) %s %s\n", g_rank, #call, ncclbind_result_name(r_), \
                   ncclbind_result_description(r_), ncclbind_last_error(), ncclbind_nccl_last_error());    \
      std::exit(3);                                                                                       \
    }                                                                                                     \
  } while (0)

void check(bool ok, const std::string &what) {
  ++g_checks;
  if (!ok) {
    ++g_failures;
    if (g_failures < 20) std::fprintf(stderr, "rank %d: FAIL %s\n", g_rank, what.c_str());
  }
}

// The result of a call that may be newer than the loaded libnccl: true on success; false
// when the library lacks the function (the runtime's message must say which release first
// has it, else that is a failed check), printed once per call and counted once in
// g_absent; any other error ends the rank as NB_OK does.
bool present(nb_ncclResult_t r, const char *what) {
  if (r == nb_ncclSuccess) return true;
  if (int(r) == int(NCCLBIND_ERROR_SYMBOL_NOT_FOUND)) {
    const std::string message = ncclbind_last_error();
    check(message.find("first appears in") != std::string::npos,
          std::string(what) + ": symbol not found without the release that has it: " + message);
    if (g_absent.insert(what).second) std::printf("rank %d: %s skipped: %s\n", g_rank, what, message.c_str());
    return false;
  }
  std::fprintf(stderr, "rank %d: %s failed: %s (%s) %s %s\n", g_rank, what, ncclbind_result_name(r),
               ncclbind_result_description(r), ncclbind_last_error(), ncclbind_nccl_last_error());
  std::exit(3);
}

struct DType {
  nb_ncclDataType_t id;
  const char *name;
  size_t size;
  nb_ncclRedOp_t op;  // fp8 sums are not exact for these values: max instead
};
const DType kTypes[] = {
    {nb_ncclInt8, "int8", 1, nb_ncclSum},         {nb_ncclUint8, "uint8", 1, nb_ncclSum},
    {nb_ncclInt32, "int32", 4, nb_ncclSum},       {nb_ncclUint32, "uint32", 4, nb_ncclSum},
    {nb_ncclInt64, "int64", 8, nb_ncclSum},       {nb_ncclUint64, "uint64", 8, nb_ncclSum},
    {nb_ncclFloat16, "float16", 2, nb_ncclSum},   {nb_ncclFloat32, "float32", 4, nb_ncclSum},
    {nb_ncclFloat64, "float64", 8, nb_ncclSum},   {nb_ncclBfloat16, "bfloat16", 2, nb_ncclSum},
    {nb_ncclFloat8e4m3, "fp8e4m3", 1, nb_ncclMax}, {nb_ncclFloat8e5m2, "fp8e5m2", 1, nb_ncclMax},
};

// Small integers, exact in every type (sums of up to 8 ranks stay <= 40).
double value(int rank, size_t i) { return double((rank + i) % 5 + 1); }

void store(const DType &t, void *base, size_t i, double v) {
  char *p = static_cast<char *>(base) + i * t.size;
  switch (t.id) {
    case nb_ncclInt8: *reinterpret_cast<int8_t *>(p) = int8_t(v); break;
    case nb_ncclUint8: *reinterpret_cast<uint8_t *>(p) = uint8_t(v); break;
    case nb_ncclInt32: *reinterpret_cast<int32_t *>(p) = int32_t(v); break;
    case nb_ncclUint32: *reinterpret_cast<uint32_t *>(p) = uint32_t(v); break;
    case nb_ncclInt64: *reinterpret_cast<int64_t *>(p) = int64_t(v); break;
    case nb_ncclUint64: *reinterpret_cast<uint64_t *>(p) = uint64_t(v); break;
    case nb_ncclFloat16: *reinterpret_cast<__half *>(p) = __float2half(float(v)); break;
    case nb_ncclFloat32: *reinterpret_cast<float *>(p) = float(v); break;
    case nb_ncclFloat64: *reinterpret_cast<double *>(p) = v; break;
    case nb_ncclBfloat16: *reinterpret_cast<__nv_bfloat16 *>(p) = __float2bfloat16(float(v)); break;
    case nb_ncclFloat8e4m3: *reinterpret_cast<__nv_fp8_e4m3 *>(p) = __nv_fp8_e4m3(float(v)); break;
    case nb_ncclFloat8e5m2: *reinterpret_cast<__nv_fp8_e5m2 *>(p) = __nv_fp8_e5m2(float(v)); break;
    default: std::abort();
  }
}

double load(const DType &t, const void *base, size_t i) {
  const char *p = static_cast<const char *>(base) + i * t.size;
  switch (t.id) {
    case nb_ncclInt8: return *reinterpret_cast<const int8_t *>(p);
    case nb_ncclUint8: return *reinterpret_cast<const uint8_t *>(p);
    case nb_ncclInt32: return *reinterpret_cast<const int32_t *>(p);
    case nb_ncclUint32: return *reinterpret_cast<const uint32_t *>(p);
    case nb_ncclInt64: return double(*reinterpret_cast<const int64_t *>(p));
    case nb_ncclUint64: return double(*reinterpret_cast<const uint64_t *>(p));
    case nb_ncclFloat16: return __half2float(*reinterpret_cast<const __half *>(p));
    case nb_ncclFloat32: return *reinterpret_cast<const float *>(p);
    case nb_ncclFloat64: return *reinterpret_cast<const double *>(p);
    case nb_ncclBfloat16: return __bfloat162float(*reinterpret_cast<const __nv_bfloat16 *>(p));
    case nb_ncclFloat8e4m3: return float(*reinterpret_cast<const __nv_fp8_e4m3 *>(p));
    case nb_ncclFloat8e5m2: return float(*reinterpret_cast<const __nv_fp8_e5m2 *>(p));
    default: std::abort();
  }
}

double reduce_expected(const DType &t, size_t i, int nranks) {
  double acc = value(0, i);
  for (int r = 1; r < nranks; ++r) acc = t.op == nb_ncclMax ? std::fmax(acc, value(r, i)) : acc + value(r, i);
  return acc;
}

struct Buffers {
  void *send = nullptr, *recv = nullptr;
  std::vector<char> host;
  size_t bytes = 0;
  void alloc(size_t send_bytes, size_t recv_bytes) {
    CUDA_OK(cudaMalloc(&send, send_bytes ? send_bytes : 1));
    CUDA_OK(cudaMalloc(&recv, recv_bytes ? recv_bytes : 1));
    CUDA_OK(cudaMemset(recv, 0xff, recv_bytes ? recv_bytes : 1));  // poison: every element must be written
    host.resize(std::max(send_bytes, recv_bytes));
    bytes = recv_bytes;
  }
  void fill(const DType &t, size_t count, int rank) {
    for (size_t i = 0; i < count; ++i) store(t, host.data(), i, value(rank, i));
    CUDA_OK(cudaMemcpy(send, host.data(), count * t.size, cudaMemcpyHostToDevice));
  }
  const char *fetch(size_t bytes_) {
    CUDA_OK(cudaMemcpy(host.data(), recv, bytes_, cudaMemcpyDeviceToHost));
    return host.data();
  }
  ~Buffers() {
    cudaFree(send);
    cudaFree(recv);
  }
};

// Every collective and a ring, for one type and element count.
// A data type the loaded release predates (fp8 before NCCL 2.24) is refused by NCCL itself
// with ncclInvalidArgument: a one-element all_reduce asks the library, not a release table.
bool type_supported(nb_ncclComm_t comm, cudaStream_t s, const DType &t) {
  void *one = nullptr;
  CUDA_OK(cudaMalloc(&one, 16));
  CUDA_OK(cudaMemset(one, 0, 16));
  const nb_ncclResult_t r = nb_ncclAllReduce(one, one, 1, t.id, t.op, comm, s);
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaFree(one));
  if (r == nb_ncclInvalidArgument) {
    if (g_absent.insert(t.name).second)
      std::printf("rank %d: %s skipped: the loaded NCCL refuses the data type (%s)\n", g_rank, t.name,
                  ncclbind_nccl_last_error());
    return false;
  }
  return present(r, t.name);
}

void check_collectives(nb_ncclComm_t comm, cudaStream_t s, const DType &t, size_t count) {
  const int n = g_nranks, me = g_rank;
  std::string tag = std::string(t.name) + " x" + std::to_string(count);
  {
    Buffers b;
    b.alloc(count * t.size, count * t.size);
    b.fill(t, count, me);
    NB_OK(nb_ncclAllReduce(b.send, b.recv, count, t.id, t.op, comm, s));
    CUDA_OK(cudaStreamSynchronize(s));
    const char *out = b.fetch(count * t.size);
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) bad += load(t, out, i) != reduce_expected(t, i, n);
    check(bad == 0, "all_reduce " + tag + ": " + std::to_string(bad) + " wrong");
  }
  {
    Buffers b;
    const int root = n - 1;
    b.alloc(count * t.size, count * t.size);
    b.fill(t, count, me);
    NB_OK(nb_ncclBroadcast(b.send, b.recv, count, t.id, root, comm, s));
    CUDA_OK(cudaStreamSynchronize(s));
    const char *out = b.fetch(count * t.size);
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) bad += load(t, out, i) != value(root, i);
    check(bad == 0, "broadcast " + tag);
  }
  {
    Buffers b;
    const int root = 0;
    b.alloc(count * t.size, count * t.size);
    b.fill(t, count, me);
    NB_OK(nb_ncclReduce(b.send, b.recv, count, t.id, t.op, root, comm, s));
    CUDA_OK(cudaStreamSynchronize(s));
    if (me == root) {
      const char *out = b.fetch(count * t.size);
      size_t bad = 0;
      for (size_t i = 0; i < count; ++i) bad += load(t, out, i) != reduce_expected(t, i, n);
      check(bad == 0, "reduce " + tag);
    }
  }
  {
    Buffers b;
    b.alloc(count * t.size, count * n * t.size);
    b.fill(t, count, me);
    NB_OK(nb_ncclAllGather(b.send, b.recv, count, t.id, comm, s));
    CUDA_OK(cudaStreamSynchronize(s));
    const char *out = b.fetch(count * n * t.size);
    size_t bad = 0;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) bad += load(t, out, r * count + i) != value(r, i);
    check(bad == 0, "all_gather " + tag);
  }
  {
    Buffers b;
    b.alloc(count * n * t.size, count * t.size);
    for (size_t i = 0; i < count * n; ++i) store(t, b.host.data(), i, value(me, i));
    CUDA_OK(cudaMemcpy(b.send, b.host.data(), count * n * t.size, cudaMemcpyHostToDevice));
    NB_OK(nb_ncclReduceScatter(b.send, b.recv, count, t.id, t.op, comm, s));
    CUDA_OK(cudaStreamSynchronize(s));
    const char *out = b.fetch(count * t.size);
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) bad += load(t, out, i) != reduce_expected(t, me * count + i, n);
    check(bad == 0, "reduce_scatter " + tag);
  }
  {
    Buffers b;  // all-to-all: block j of rank r goes to rank j, block r
    b.alloc(count * n * t.size, count * n * t.size);
    for (size_t i = 0; i < count * n; ++i) store(t, b.host.data(), i, value(me, i));
    CUDA_OK(cudaMemcpy(b.send, b.host.data(), count * n * t.size, cudaMemcpyHostToDevice));
    if (present(nb_ncclAlltoAll(b.send, b.recv, count, t.id, comm, s), "all_to_all")) {
      CUDA_OK(cudaStreamSynchronize(s));
      const char *out = b.fetch(count * n * t.size);
      size_t bad = 0;
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) bad += load(t, out, r * count + i) != value(r, me * count + i);
      check(bad == 0, "all_to_all " + tag);
    }
  }
  {
    Buffers b;  // gather to the last rank, then scatter from it
    const int root = n - 1;
    b.alloc(count * n * t.size, count * n * t.size);
    b.fill(t, count, me);
    if (present(nb_ncclGather(b.send, b.recv, count, t.id, root, comm, s), "gather")) {
      CUDA_OK(cudaStreamSynchronize(s));
      if (me == root) {
        const char *out = b.fetch(count * n * t.size);
        size_t bad = 0;
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) bad += load(t, out, r * count + i) != value(r, i);
        check(bad == 0, "gather " + tag);
      }
    }
    if (me == root) {
      for (size_t i = 0; i < count * n; ++i) store(t, b.host.data(), i, value(7, i));
      CUDA_OK(cudaMemcpy(b.send, b.host.data(), count * n * t.size, cudaMemcpyHostToDevice));
    }
    if (present(nb_ncclScatter(b.send, b.recv, count, t.id, root, comm, s), "scatter")) {
      CUDA_OK(cudaStreamSynchronize(s));
      const char *out = b.fetch(count * t.size);
      size_t bad = 0;
      for (size_t i = 0; i < count; ++i) bad += load(t, out, i) != value(7, me * count + i);
      check(bad == 0, "scatter " + tag);
    }
  }
  {
    Buffers b;  // ring: send to the next rank, receive from the previous one
    b.alloc(count * t.size, count * t.size);
    b.fill(t, count, me);
    NB_OK(nb_ncclGroupStart());
    NB_OK(nb_ncclSend(b.send, count, t.id, (me + 1) % n, comm, s));
    NB_OK(nb_ncclRecv(b.recv, count, t.id, (me + n - 1) % n, comm, s));
    NB_OK(nb_ncclGroupEnd());
    CUDA_OK(cudaStreamSynchronize(s));
    const char *out = b.fetch(count * t.size);
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) bad += load(t, out, i) != value((me + n - 1) % n, i);
    check(bad == 0, "send/recv ring " + tag);
  }
}

void check_group_mix(nb_ncclComm_t comm, cudaStream_t s) {
  const DType &t = kTypes[7];  // float32
  const size_t count = 4096;
  Buffers a, p;
  a.alloc(count * 4, count * 4);
  p.alloc(count * 4, count * 4);
  a.fill(t, count, g_rank);
  p.fill(t, count, g_rank + 10);
  NB_OK(nb_ncclGroupStart());
  NB_OK(nb_ncclAllReduce(a.send, a.recv, count, t.id, nb_ncclSum, comm, s));
  NB_OK(nb_ncclSend(p.send, count, t.id, (g_rank + 1) % g_nranks, comm, s));
  NB_OK(nb_ncclRecv(p.recv, count, t.id, (g_rank + g_nranks - 1) % g_nranks, comm, s));
  NB_OK(nb_ncclGroupEnd());
  CUDA_OK(cudaStreamSynchronize(s));
  const char *out = a.fetch(count * 4);
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) bad += load(t, out, i) != reduce_expected(t, i, g_nranks);
  out = p.fetch(count * 4);
  for (size_t i = 0; i < count; ++i) bad += load(t, out, i) != value((g_rank + g_nranks - 1) % g_nranks + 10, i);
  check(bad == 0, "group of all_reduce + send/recv");
}

void check_sub_comm(nb_ncclComm_t sub, cudaStream_t s, const std::vector<int> &members, const char *what) {
  int n = 0, me = -1;
  NB_OK(nb_ncclCommCount(sub, &n));
  NB_OK(nb_ncclCommUserRank(sub, &me));
  check(n == int(members.size()), std::string(what) + " size");
  const DType &t = kTypes[7];
  const size_t count = 1000;
  Buffers b;
  b.alloc(count * 4, count * 4);
  b.fill(t, count, g_rank);
  NB_OK(nb_ncclAllReduce(b.send, b.recv, count, t.id, nb_ncclSum, sub, s));
  CUDA_OK(cudaStreamSynchronize(s));
  const char *out = b.fetch(count * 4);
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r : members) want += value(r, i);
    bad += load(t, out, i) != want;
  }
  check(bad == 0, std::string(what) + " all_reduce");
}

void check_registration(nb_ncclComm_t comm, cudaStream_t s) {
  const size_t count = 1 << 20, bytes = count * 4;
  const DType &t = kTypes[7];
  void *buf = nullptr, *out = nullptr;
  NB_OK(nb_ncclMemAlloc(&buf, bytes));
  NB_OK(nb_ncclMemAlloc(&out, bytes));
  std::vector<char> host(bytes);
  for (size_t i = 0; i < count; ++i) store(t, host.data(), i, value(g_rank, i));
  CUDA_OK(cudaMemcpy(buf, host.data(), bytes, cudaMemcpyHostToDevice));
  void *h1 = nullptr, *h2 = nullptr;
  NB_OK(nb_ncclCommRegister(comm, buf, bytes, &h1));
  NB_OK(nb_ncclCommRegister(comm, out, bytes, &h2));
  NB_OK(nb_ncclAllReduce(buf, out, count, t.id, nb_ncclSum, comm, s));
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(host.data(), out, bytes, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) bad += load(t, host.data(), i) != reduce_expected(t, i, g_nranks);
  check(bad == 0, "all_reduce on registered buffers");
  // A release that registers nothing here (2.19.3 without NVLS or CollNet) hands back no handle.
  if (!h1 || !h2) std::printf("rank %d: ncclCommRegister returned no handle (the release registers nothing here)\n", g_rank);
  if (h1) NB_OK(nb_ncclCommDeregister(comm, h1));
  if (h2) NB_OK(nb_ncclCommDeregister(comm, h2));

  // Windows (newer than some releases): only what was registered is deregistered.
  nb_ncclWindow_t w1 = nullptr, w2 = nullptr;
  const char *reg = "ncclCommWindowRegister", *dereg = "ncclCommWindowDeregister";
  bool have1 = present(nb_ncclCommWindowRegister(comm, buf, bytes, &w1, NB_NCCL_WIN_COLL_SYMMETRIC), reg);
  bool have2 = have1 && present(nb_ncclCommWindowRegister(comm, out, bytes, &w2, NB_NCCL_WIN_COLL_SYMMETRIC), reg);
  if (have1 && have2) {
    CUDA_OK(cudaMemset(out, 0, bytes));
    NB_OK(nb_ncclAllReduce(buf, out, count, t.id, nb_ncclSum, comm, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(host.data(), out, bytes, cudaMemcpyDeviceToHost));
    bad = 0;
    for (size_t i = 0; i < count; ++i) bad += load(t, host.data(), i) != reduce_expected(t, i, g_nranks);
    check(bad == 0, "all_reduce on symmetric windows");
  }
  if (have1) present(nb_ncclCommWindowDeregister(comm, w1), dereg);
  if (have2) present(nb_ncclCommWindowDeregister(comm, w2), dereg);
  NB_OK(nb_ncclMemFree(buf));
  NB_OK(nb_ncclMemFree(out));
}

void check_dev_comm(nb_ncclComm_t comm, int version) {
  // The loaded library's layout: 2.28 has no size/magic/version header.
  nb_ncclDevComm_t__v22809 dev28;
  nb_ncclDevComm_t dev;
  nb_ncclResult_t rc;
  if (version < 23203) {
    nb_ncclDevCommRequirements_t__v22809 reqs;
    std::memset(&reqs, 0, sizeof reqs);
    reqs.lsaBarrierCount = 1;
    rc = nb_ncclDevCommCreate(comm, reinterpret_cast<const nb_ncclDevCommRequirements_t *>(&reqs),
                              reinterpret_cast<nb_ncclDevComm_t *>(&dev28));
  } else if (version < 23206) {
    // The layout of 2.31.2 and 2.32.3 (its mirror's suffix: the first release with it), stamped
    // with the loaded release, as nccl.h's comment on versioned records says: its initializer
    // stamps the layout's newest release, which an older library refuses ("library is too old").
    nb_ncclDevCommRequirements_t__v23102 reqs;
    nb_init_NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER__v23102(&reqs);
    reqs.version = unsigned(version);
    reqs.lsaBarrierCount = 1;
    rc = nb_ncclDevCommCreate(comm, reinterpret_cast<const nb_ncclDevCommRequirements_t *>(&reqs), &dev);
  } else {
    nb_ncclDevCommRequirements_t reqs;
    nb_init_NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER(&reqs);
    reqs.lsaBarrierCount = 1;
    rc = nb_ncclDevCommCreate(comm, &reqs, &dev);
  }
  // A release without ncclDevCommCreate: the runtime says so and nothing was created.
  const bool absent = int(rc) == int(NCCLBIND_ERROR_SYMBOL_NOT_FOUND);
  if (absent) present(rc, "ncclDevCommCreate");
  else
    check(rc == nb_ncclSuccess, std::string("ncclDevCommCreate: ") + ncclbind_result_name(rc) + " " +
                                    ncclbind_nccl_last_error());
  // ncclTeamLsa returns no result code: the runtime's error code says whether it was called.
  ncclbind_clear_error();
  nb_ncclTeam_t lsa = nb_ncclTeamLsa(comm);
  const int lsa_code = ncclbind_last_error_code();
  if (lsa_code == NCCLBIND_OK)
    check(lsa.nRanks == g_nranks, "LSA team of " + std::to_string(lsa.nRanks) + " ranks (one NVLink node)");
  else
    present(nb_ncclResult_t(lsa_code), "ncclTeamLsa");
  if (rc == nb_ncclSuccess) {
    rc = version < 23203 ? nb_ncclDevCommDestroy(comm, reinterpret_cast<nb_ncclDevComm_t *>(&dev28))
                         : nb_ncclDevCommDestroy(comm, &dev);
    check(rc == nb_ncclSuccess, "ncclDevCommDestroy");
  }
}

using RawAllReduce = int (*)(const void *, void *, size_t, int, int, void *, void *);

void bench(nb_ncclComm_t comm, cudaStream_t s) {
  const int n = g_nranks;
  if (g_rank == 0) std::printf("\n%-14s %12s %10s %10s\n", "collective", "bytes", "time_us", "busbw_GB/s");
  const char *names[] = {"all_reduce", "all_gather", "reduce_scatter"};
  for (int c = 0; c < 3; ++c) {
    for (size_t bytes = 8; bytes <= (size_t(256) << 20); bytes *= 8) {
      size_t count = bytes / 4 / (c == 0 ? 1 : n);
      if (count == 0) continue;
      Buffers b;
      b.alloc(count * 4 * (c == 2 ? n : 1), count * 4 * (c == 1 ? n : 1));
      auto run = [&] {
        if (c == 0) NB_OK(nb_ncclAllReduce(b.send, b.recv, count, nb_ncclFloat32, nb_ncclSum, comm, s));
        if (c == 1) NB_OK(nb_ncclAllGather(b.send, b.recv, count, nb_ncclFloat32, comm, s));
        if (c == 2) NB_OK(nb_ncclReduceScatter(b.send, b.recv, count, nb_ncclFloat32, nb_ncclSum, comm, s));
      };
      for (int i = 0; i < 5; ++i) run();
      cudaEvent_t e0, e1;
      CUDA_OK(cudaEventCreate(&e0));
      CUDA_OK(cudaEventCreate(&e1));
      const int iters = bytes >= (size_t(64) << 20) ? 10 : 50;
      CUDA_OK(cudaEventRecord(e0, s));
      for (int i = 0; i < iters; ++i) run();
      CUDA_OK(cudaEventRecord(e1, s));
      CUDA_OK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      double us = ms * 1000.0 / iters, algbw = double(bytes) / (us * 1e3);
      double factor = c == 0 ? 2.0 * (n - 1) / n : double(n - 1) / n;
      if (g_rank == 0) std::printf("%-14s %12zu %10.2f %10.2f\n", names[c], bytes, us, algbw * factor);
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
    }
  }

  // Small messages: a 2-float all-reduce through ncclbind and raw from the same library.
  void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  RawAllReduce raw = lib ? reinterpret_cast<RawAllReduce>(dlsym(lib, "ncclAllReduce")) : nullptr;
  Buffers b;
  b.alloc(8, 8);
  cudaStream_t nonblocking;
  CUDA_OK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
  struct {
    const char *name;
    cudaStream_t stream;
  } streams[] = {{"created stream", s}, {"non-blocking stream", nonblocking}, {"legacy default stream", 0}};
  const int iters = 2000, batch = 200;
  for (auto &st : streams) {
    for (int variant = 0; variant < 2; ++variant) {
      auto call = [&] {
        if (variant == 0) {
          NB_OK(nb_ncclAllReduce(b.send, b.recv, 2, nb_ncclFloat32, nb_ncclSum, comm, st.stream));
        } else {
          raw(b.send, b.recv, 2, nb_ncclFloat32, nb_ncclSum, comm, st.stream);
        }
      };
      for (int mode = 0; mode < 3; ++mode) {  // with sync, back to back, enqueue only
        double best = 1e30;
        for (int round = 0; round < 3; ++round) {
          double us = 0;
          if (mode == 2) {  // host time of batches short enough not to fill the launch queue
            for (int i = 0; i < iters; i += batch) {
              auto t0 = std::chrono::steady_clock::now();
              for (int j = 0; j < batch; ++j) call();
              us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
              CUDA_OK(cudaStreamSynchronize(st.stream));
            }
          } else {
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < iters; ++i) {
              call();
              if (mode == 0) CUDA_OK(cudaStreamSynchronize(st.stream));
            }
            CUDA_OK(cudaStreamSynchronize(st.stream));
            us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
          }
          best = std::min(best, us / iters);
        }
        if (g_rank == 0)
          std::printf("latency 2-float all_reduce, %-22s %-11s %-13s best of 3: %.2f us/call\n", st.name,
                      variant == 0 ? "ncclbind C" : "raw C",
                      mode == 0 ? "with sync" : mode == 1 ? "back to back" : "enqueue only", best);
      }
    }
  }
  cudaStreamDestroy(nonblocking);
}

int run_rank(const char *id_file, bool bench_only, size_t max_bytes) {
  CUDA_OK(cudaSetDevice(g_rank));
  nb_ncclUniqueId id;
  if (g_rank == 0) {
    NB_OK(nb_ncclGetUniqueId(&id));
    std::string tmp = std::string(id_file) + ".tmp";
    FILE *f = std::fopen(tmp.c_str(), "wb");
    std::fwrite(&id, sizeof id, 1, f);
    std::fclose(f);
    std::rename(tmp.c_str(), id_file);
  } else {
    for (int tries = 0;; ++tries) {
      FILE *f = std::fopen(id_file, "rb");
      if (f && std::fread(&id, sizeof id, 1, f) == 1) {
        std::fclose(f);
        break;
      }
      if (f) std::fclose(f);
      if (tries > 3000) {
        std::fprintf(stderr, "rank %d: no unique id in %s\n", g_rank, id_file);
        return 2;
      }
      usleep(10000);
    }
  }
  nb_ncclComm_t comm;
  NB_OK(nb_ncclCommInitRank(&comm, g_nranks, id, g_rank));
  int version = 0;
  NB_OK(nb_ncclGetVersion(&version));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  if (bench_only) {
    bench(comm, s);
    NB_OK(nb_ncclCommDestroy(comm));
    return 0;
  }
  for (const DType &t : kTypes) {
    if (!type_supported(comm, s, t)) continue;
    for (size_t count : {size_t(1), size_t(4099), size_t(1) << 18}) check_collectives(comm, s, t, count);
  }
  for (size_t bytes = size_t(1) << 20; bytes <= max_bytes; bytes <<= 4) {
    check_collectives(comm, s, kTypes[7], bytes / 4);  // float32
    check_collectives(comm, s, kTypes[0], bytes);      // int8
  }
  check_group_mix(comm, s);
  check_registration(comm, s);
  check_dev_comm(comm, version);

  // split by parity, then shrink away the last rank (which does not take part)
  nb_ncclComm_t half = nullptr;
  NB_OK(nb_ncclCommSplit(comm, g_rank % 2, g_rank, &half, nullptr));
  std::vector<int> same;
  for (int r = 0; r < g_nranks; ++r)
    if (r % 2 == g_rank % 2) same.push_back(r);
  check_sub_comm(half, s, same, "split by parity");
  NB_OK(nb_ncclCommDestroy(half));
  if (g_nranks > 1) {
    int last = g_nranks - 1;
    if (g_rank != last) {
      nb_ncclComm_t shrunk = nullptr;
      if (present(nb_ncclCommShrink(comm, &last, 1, &shrunk, nullptr, NB_NCCL_SHRINK_DEFAULT), "ncclCommShrink")) {
        std::vector<int> rest;
        for (int r = 0; r < last; ++r) rest.push_back(r);
        check_sub_comm(shrunk, s, rest, "shrink without the last rank");
        NB_OK(nb_ncclCommDestroy(shrunk));
      }
    }
  }

  // abort while a peer waits: rank 0 posts a receive that nobody will match
  if (g_nranks > 1) {
    nb_ncclComm_t doomed = nullptr;
    NB_OK(nb_ncclCommSplit(comm, 0, g_rank, &doomed, nullptr));
    void *buf;
    CUDA_OK(cudaMalloc(&buf, 1024));
    // One matched exchange first: NCCL connects peers on first use, on the host.
    if (g_rank <= 1) {
      NB_OK(nb_ncclGroupStart());
      NB_OK(nb_ncclSend(buf, 256, nb_ncclFloat32, 1 - g_rank, doomed, s));
      NB_OK(nb_ncclRecv(buf, 256, nb_ncclFloat32, 1 - g_rank, doomed, s));
      NB_OK(nb_ncclGroupEnd());
      CUDA_OK(cudaStreamSynchronize(s));
    }
    if (g_rank == 0) {
      NB_OK(nb_ncclRecv(buf, 256, nb_ncclFloat32, 1, doomed, s));  // never matched
      usleep(200000);
      check(cudaStreamQuery(s) == cudaErrorNotReady, "the unmatched receive is still pending before abort");
    }
    auto t0 = std::chrono::steady_clock::now();
    nb_ncclResult_t rc = nb_ncclCommAbort(doomed);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    check(rc == nb_ncclSuccess, "abort returned " + std::string(ncclbind_result_name(rc)));
    if (g_rank == 0) std::printf("abort with a pending receive returned after %.2f s\n", secs);
    cudaStreamDestroy(s);
    CUDA_OK(cudaStreamCreate(&s));
  }
  NB_OK(nb_ncclCommFinalize(comm));
  NB_OK(nb_ncclCommDestroy(comm));
  std::printf("rank %d/%d (libnccl %d): %d checks, %d failed, %zu not in this release\n", g_rank, g_nranks, version,
              g_checks, g_failures, g_absent.size());
  return g_failures ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv) {
  int nranks = argc > 1 ? std::atoi(argv[1]) : 0;
  bool bench_only = argc > 2 && std::strcmp(argv[2], "--bench") == 0;
  size_t max_bytes = std::getenv("NCCLBIND_TEST_MAX_BYTES") ? std::strtoull(std::getenv("NCCLBIND_TEST_MAX_BYTES"), 0, 0)
                                                           : size_t(256) << 20;
  // CUDA must not be initialised in the parent before fork: count GPUs in a child.
  int devices = 0;
  pid_t probe = fork();
  if (probe == 0) {
    int n = 0;
    std::_Exit(cudaGetDeviceCount(&n) == cudaSuccess ? n : 0);
  }
  int probe_status = 0;
  waitpid(probe, &probe_status, 0);
  devices = WIFEXITED(probe_status) ? WEXITSTATUS(probe_status) : 0;
  if (devices == 0) {
    std::printf("SKIPPED: no GPU (this program needs one GPU per rank)\n");
    return 77;
  }
  if (nranks <= 0) nranks = devices;
  if (nranks > devices) {
    std::printf("SKIPPED: %d ranks asked, %d GPUs present\n", nranks, devices);
    return 77;
  }
  char id_file[] = "/tmp/ncclbind-id-XXXXXX";
  int fd = mkstemp(id_file);
  close(fd);
  unlink(id_file);
  std::vector<pid_t> kids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      g_rank = r;
      g_nranks = nranks;
      alarm(600);  // a hang fails the run instead of holding the machine
      std::exit(run_rank(id_file, bench_only, max_bytes));
    }
    kids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  unlink(id_file);
  std::printf("%d ranks: %d passed, %d failed\n", nranks, nranks - failed, failed);
  return failed ? 1 : 0;
}
