/* A program that calls NCCL directly (linked against libnccl.so.2, no ncclbind), for the
 * shim's tests: run under LD_PRELOAD it must behave exactly as without, and the trace must
 * hold what it prints that it issued. Over the stand-in library (fake_nccl.c) collectives of
 * a one-rank communicator run on host memory.
 *   traced_program [--threads N] [--fork] [--errno] [--gated NAME] [--checkpoint] [--bcast]
 * prints "issued <function> <calls> <bytes>" lines, then "ok". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  char internal[128];
} unique_id;
typedef void *comm_t;
int ncclGetVersion(int *version);
int ncclGetUniqueId(unique_id *id);
int ncclCommInitRank(comm_t *comm, int nranks, unique_id id, int rank);
int ncclCommSplit(comm_t comm, int color, int key, comm_t *out, void *config);
int ncclCommDestroy(comm_t comm);
int ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op, comm_t comm, void *stream);
int ncclBroadcast(const void *send, void *recv, size_t count, int dtype, int root, comm_t comm, void *stream);
int ncclBcast(void *buff, size_t count, int dtype, int root, comm_t comm, void *stream);
int ncclSend(const void *send, size_t count, int dtype, int peer, comm_t comm, void *stream);
int ncclRecv(void *recv, size_t count, int dtype, int peer, comm_t comm, void *stream);
int ncclGroupStart(void);
int ncclGroupEnd(void);
int ncclbind_shim_checkpoint_prepare(void) __attribute__((weak));
int ncclbind_shim_checkpoint_restore(void) __attribute__((weak));
const char *ncclbind_shim_last_error(void) __attribute__((weak));

enum { FLOAT32 = 7, INT32 = 2, SUM = 0 };
static int all_reduces, broadcasts, bcasts, sends, recvs, groups;

static void check(int result, const char *what) {
  if (result != 0) {
    fprintf(stderr, "%s failed: %d\n", what, result);
    exit(1);
  }
}

static comm_t make_comm(void) {
  unique_id id;
  comm_t comm;
  check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  check(ncclCommInitRank(&comm, 1, id, 0), "ncclCommInitRank");
  return comm;
}

static void *collectives(void *arg) {
  comm_t comm = arg;
  float send[4] = {1, 2, 3, 4}, recv[4];
  for (int i = 0; i < 10; ++i) {
    check(ncclAllReduce(send, recv, 4, FLOAT32, SUM, comm, NULL), "ncclAllReduce");
    __atomic_fetch_add(&all_reduces, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int threads = 0, do_fork = 0, do_errno = 0, do_checkpoint = 0, do_bcast = 0;
  const char *gated = NULL;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--threads"))
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--fork"))
      do_fork = 1;
    else if (!strcmp(argv[i], "--errno"))
      do_errno = 1;
    else if (!strcmp(argv[i], "--checkpoint"))
      do_checkpoint = 1;
    else if (!strcmp(argv[i], "--bcast"))
      do_bcast = 1;
    else if (!strcmp(argv[i], "--gated"))
      gated = argv[++i];
  }
  if (gated) { /* the program's own gating: a function its libnccl lacks must not be found */
    printf("gated %s %s\n", gated, dlsym(RTLD_DEFAULT, gated) ? "found" : "absent");
    return 0;
  }
  int version = 0;
  check(ncclGetVersion(&version), "ncclGetVersion");
  comm_t comm = make_comm();
  float send[8] = {1, 2, 3, 4, 5, 6, 7, 8}, recv[8] = {0};
  check(ncclAllReduce(send, recv, 8, FLOAT32, SUM, comm, (void *)0x1234), "ncclAllReduce");
  ++all_reduces;
  if (recv[7] != 8) return fprintf(stderr, "wrong all-reduce result %g\n", recv[7]), 1;
  check(ncclBroadcast(send, recv, 3, INT32, 0, comm, NULL), "ncclBroadcast");
  ++broadcasts;
  if (do_bcast) { /* libnccl's ncclBcast calls ncclBroadcast through its exported symbol */
    check(ncclBcast(recv, 5, INT32, 0, comm, NULL), "ncclBcast");
    ++bcasts;
  }
  check(ncclGroupStart(), "ncclGroupStart");
  check(ncclSend(send, 2, FLOAT32, 0, comm, NULL), "ncclSend");
  check(ncclRecv(recv, 2, FLOAT32, 0, comm, NULL), "ncclRecv");
  check(ncclGroupEnd(), "ncclGroupEnd");
  ++sends, ++recvs, ++groups;
  if (do_errno) {
    errno = EXDEV;
    int r = ncclAllReduce(send, recv, 8, 99, SUM, comm, NULL); /* a data type NCCL refuses */
    printf("failed-call %d errno %s\n", r, errno == EXDEV ? "kept" : strerror(errno));
  }
  if (threads) {
    pthread_t t[64];
    for (int i = 0; i < threads; ++i) pthread_create(&t[i], NULL, collectives, comm);
    for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
  }
  if (do_fork) {
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) { /* the child calls too: its own trace file */
      collectives(comm);
      exit(0); /* not _exit: the shim flushes what the child recorded at exit */
    }
    int status;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status)) return fprintf(stderr, "child failed\n"), 1;
    printf("child %ld\n", (long)child);
  }
  if (do_checkpoint) {
    comm_t child_comm;
    check(ncclCommSplit(comm, 0, 0, &child_comm, NULL), "ncclCommSplit");
    if (!ncclbind_shim_checkpoint_prepare) return fprintf(stderr, "the shim is not loaded\n"), 1;
    int r = ncclbind_shim_checkpoint_prepare();
    if (r) return fprintf(stderr, "prepare: %d %s\n", r, ncclbind_shim_last_error()), 1;
    int during = ncclAllReduce(send, recv, 8, FLOAT32, SUM, comm, NULL);
    printf("during-checkpoint %d\n", during);
    r = ncclbind_shim_checkpoint_restore();
    if (r) return fprintf(stderr, "restore: %d %s\n", r, ncclbind_shim_last_error()), 1;
    memset(recv, 0, sizeof recv);
    check(ncclAllReduce(send, recv, 8, FLOAT32, SUM, comm, NULL), "ncclAllReduce after restore");
    check(ncclAllReduce(send, recv, 8, FLOAT32, SUM, child_comm, NULL), "ncclAllReduce on the split after restore");
    all_reduces += 2;
    printf("restored %g\n", recv[7]);
    check(ncclCommDestroy(child_comm), "ncclCommDestroy");
  }
  check(ncclCommDestroy(comm), "ncclCommDestroy");
  printf("issued ncclAllReduce %d %d\n", all_reduces, 0);
  printf("issued ncclBroadcast %d %d\n", broadcasts, 12 * broadcasts);
  if (do_bcast) printf("issued ncclBcast %d %d\n", bcasts, 20 * bcasts);
  printf("issued ncclSend %d %d\n", sends, 8 * sends);
  printf("issued ncclRecv %d %d\n", recvs, 8 * recvs);
  printf("version %d\nok\n", version);
  return 0;
}
