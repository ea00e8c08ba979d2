/* libnccl_ep against a libnccl older than the one its header set depends on: the load
 * fails, and the error says so first, naming libnccl_ep's version, the libnccl in use
 * (version and path) and the version needed, before the list of candidates tried.
 * Usage:
 *   nccl_ep_old_nccl_test old LIBNCCL_EP EP_VERSION LIBNCCL LIBNCCL_VERSION NEEDED_VERSION CUDA_STUB
 *   nccl_ep_old_nccl_test new-enough LIBNCCL_EP LIBNCCL NEEDED_VERSION CUDA_STUB
 *   (either followed by --register NEEDED_CODE when the generated binding, whose constructor
 *   registers the dependency, is not linked in: the sanitized build links the runtime alone)
 * old: LIBNCCL (the toolkit's) is older than NEEDED_VERSION (the IR's depends_on set).
 * new-enough: LIBNCCL claims NEEDED_VERSION but lacks what libnccl_ep needs: the load fails,
 *   and no "too old" claim is made; the note names the version needed and the one in use.
 * The CUDA driver stub (SONAME libcuda.so.1) is loaded first so that the only missing
 * piece is libnccl's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include "check.h"
#include "ncclbind/runtime.h"

static void load_stub(const char *cuda_stub) {
  CHECK(dlopen(cuda_stub, RTLD_NOW | RTLD_GLOBAL), "cannot load the CUDA stub: %s", dlerror());
}

static const char *failed_load(const char *ep_library, const char *nccl_library) {
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, nccl_library), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL_EP, ep_library), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL_EP), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  return ncclbind_last_error();
}

static int old(char **argv) {
  const char *ep_library = argv[2], *ep_version = argv[3], *nccl_library = argv[4],
             *nccl_version = argv[5], *needed = argv[6];
  load_stub(argv[7]);
  const char *message = failed_load(ep_library, nccl_library);
  char ep_path[PATH_MAX], nccl_path[PATH_MAX], expected[3 * PATH_MAX];
  CHECK(realpath(ep_library, ep_path), "realpath(%s) failed", ep_library);
  CHECK(realpath(nccl_library, nccl_path), "realpath(%s) failed", nccl_library);

  /* The explanation comes first, then the candidates. */
  snprintf(expected, sizeof expected,
           "libnccl_ep %s at %s needs NCCL %s or newer, but the libnccl in use is NCCL %s (%s)",
           ep_version, ep_path, needed, nccl_version, nccl_path);
  CHECK(strncmp(message, expected, strlen(expected)) == 0, "the message does not start with\n%s\n"
        "it is:\n%s", expected, message);
  snprintf(expected, sizeof expected, "Load a libnccl.so.2 of NCCL %s or newer first (set NCCLBIND_NCCL_PATH",
           needed);
  CHECK_CONTAINS(message, expected);
  CHECK_CONTAINS(message, "\nlibnccl_ep could not be loaded; tried, in order:\n");
  CHECK_CONTAINS(message, "undefined symbol: ");

  /* The function it names is one the old libnccl really lacks and the needed one has. */
  const char *lacks = strstr(message, ", which lacks ");
  CHECK(lacks, "the message names no missing function:\n%s", message);
  char symbol[128];
  CHECK(sscanf(lacks + strlen(", which lacks "), "%127[A-Za-z0-9_]", symbol) == 1, "%s", lacks);
  void *old_nccl = dlopen(nccl_library, RTLD_NOW | RTLD_NOLOAD);
  CHECK(old_nccl, "the old libnccl is not loaded: %s", dlerror());
  CHECK(!dlsym(old_nccl, symbol), "%s is in %s, yet the message says it lacks it", symbol, nccl_path);
  printf("PASS nccl_ep_old_nccl_test old:\n%s\n", message);
  return 0;
}

static int new_enough(char **argv) {
  const char *ep_library = argv[2], *nccl_library = argv[3], *needed = argv[4];
  load_stub(argv[5]);
  const char *message = failed_load(ep_library, nccl_library);
  char nccl_path[PATH_MAX], expected[2 * PATH_MAX];
  CHECK(realpath(nccl_library, nccl_path), "realpath(%s) failed", nccl_library);
  CHECK(strncmp(message, "libnccl_ep could not be loaded; tried, in order:\n",
                strlen("libnccl_ep could not be loaded; tried, in order:\n")) == 0,
        "a libnccl of the needed version is no reason to blame its version:\n%s", message);
  CHECK_NOT_CONTAINS(message, "but the libnccl in use is");
  snprintf(expected, sizeof expected,
           "  (libnccl_ep needs libnccl.so.2 of NCCL %s or newer; the one in use is %s at %s)",
           needed, needed, nccl_path);
  CHECK_CONTAINS(message, expected);
  CHECK_CONTAINS(message, "undefined symbol: ");
  printf("PASS nccl_ep_old_nccl_test new-enough:\n%s\n", message);
  return 0;
}

int main(int argc, char **argv) {
  int cases = argc >= 2 && strcmp(argv[1], "old") == 0 ? 8 : 6;
  CHECK(argc == cases || (argc == cases + 2 && strcmp(argv[cases], "--register") == 0),
        "usage: see the comment at the top of %s", __FILE__);
  if (argc == cases + 2)
    ncclbind_register_dependency(NCCLBIND_LIB_NCCL_EP, NCCLBIND_LIB_NCCL, atoi(argv[cases + 1]));
  if (strcmp(argv[1], "old") == 0) return old(argv);
  if (strcmp(argv[1], "new-enough") == 0) return new_enough(argv);
  CHECK(0, "unknown case %s", argv[1]);
  return 1;
}
