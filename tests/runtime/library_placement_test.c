/* Where the loaded libraries are, and what follows from it, each case in a fresh child
 * process (the runtime loads a library once per process):
 *  - a wheel-like layout sets NCCL_EP_HOME / NCCL_HOME for NCCL EP's kernel compiler,
 *    unless the user set them; a flat folder sets neither;
 *  - an explicit path naming a different file than the copy already in the process is an
 *    error naming both; the same file (through a symlink) is used;
 *  - a preloaded shim's wrappers are what the runtime resolves.
 * Usage: library_placement_test STAND_IN_NCCL STAND_IN_NCCL_EP SHIM_STAND_IN */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ncclbind/runtime.h"

static char root[PATH_MAX / 2];
static const char *nccl_input, *ep_input, *shim_input;

static void make_dirs(const char *path) {
  char copy[PATH_MAX];
  snprintf(copy, sizeof copy, "%s", path);
  for (char *p = copy + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(copy, 0755);
      *p = '/';
    }
  mkdir(copy, 0755);
}

/* Copies from to root/to (making its folders); returns the new path in out. */
static void place(const char *from, const char *to, char *out) {
  snprintf(out, PATH_MAX, "%s/%s", root, to);
  char folder[PATH_MAX];
  snprintf(folder, sizeof folder, "%s", out);
  *strrchr(folder, '/') = '\0';
  make_dirs(folder);
  FILE *in = fopen(from, "rb"), *dst = fopen(out, "wb");
  CHECK(in && dst, "cannot copy %s to %s", from, out);
  char buffer[65536];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, in)) > 0) fwrite(buffer, 1, n, dst);
  fclose(in);
  fclose(dst);
}

static void touch(const char *relative) {
  char path[PATH_MAX];
  place("/dev/null", relative, path);
}

static const char *real(const char *relative) {
  static char buffers[4][PATH_MAX];
  static int next;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", root, relative);
  char *out = buffers[next++ % 4];
  CHECK(realpath(path, out), "realpath(%s)", path);
  return out;
}

static void clean_environment(void) {
  unsetenv("NCCL_HOME");
  unsetenv("NCCL_EP_HOME");
  unsetenv("NCCLBIND_NCCL_PATH");
  unsetenv("NCCLBIND_NCCL_EP_PATH");
}

static void wheel_homes_set(void) {
  char nccl[PATH_MAX], ep[PATH_MAX];
  place(nccl_input, "wheel/nvidia/nccl/lib/libnccl.so.2", nccl);
  touch("wheel/nvidia/nccl/include/nccl.h");
  place(ep_input, "wheel/nccl/ep/lib/cu13/libnccl_ep.so", ep);
  touch("wheel/nccl/ep/include/nccl_ep.h");
  touch("wheel/nccl/ep/include/nccl_ep/device/ll_ep.cuh");
  setenv("NCCLBIND_NCCL_PATH", nccl, 1);
  setenv("NCCLBIND_NCCL_EP_PATH", ep, 1);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL), NCCLBIND_OK);
  CHECK(!getenv("NCCL_HOME"), "libnccl alone set NCCL_HOME=%s", getenv("NCCL_HOME"));
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL_EP), NCCLBIND_OK);
  CHECK_STR_EQ(getenv("NCCL_EP_HOME"), real("wheel/nccl/ep"));
  CHECK_STR_EQ(getenv("NCCL_HOME"), real("wheel/nvidia/nccl"));
}

static void user_home_kept(void) {
  char nccl[PATH_MAX], ep[PATH_MAX];
  place(nccl_input, "kept/nvidia/nccl/lib/libnccl.so.2", nccl);
  touch("kept/nvidia/nccl/include/nccl.h");
  place(ep_input, "kept/nccl/ep/lib/libnccl_ep.so", ep);
  touch("kept/nccl/ep/include/nccl_ep/device/ll_ep.cuh");
  setenv("NCCLBIND_NCCL_PATH", nccl, 1);
  setenv("NCCLBIND_NCCL_EP_PATH", ep, 1);
  setenv("NCCL_HOME", "/mine", 1);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL_EP), NCCLBIND_OK);
  CHECK_STR_EQ(getenv("NCCL_HOME"), "/mine");
  CHECK_STR_EQ(getenv("NCCL_EP_HOME"), real("kept/nccl/ep"));
}

static void flat_folder_sets_nothing(void) {
  char nccl[PATH_MAX], ep[PATH_MAX];
  place(nccl_input, "flat/libnccl.so.2", nccl);
  place(ep_input, "flat/libnccl_ep.so", ep);
  setenv("NCCLBIND_NCCL_PATH", nccl, 1);
  setenv("NCCLBIND_NCCL_EP_PATH", ep, 1);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL_EP), NCCLBIND_OK);
  CHECK(!getenv("NCCL_HOME") && !getenv("NCCL_EP_HOME"), "set from a flat folder: %s, %s", getenv("NCCL_HOME"),
        getenv("NCCL_EP_HOME"));
}

static void other_copy_refused(void) {
  char first[PATH_MAX], named[PATH_MAX];
  place(nccl_input, "first/libnccl.so.2", first);
  place(nccl_input, "named/libnccl.so.2", named);
  CHECK(dlopen(first, RTLD_NOW | RTLD_LOCAL), "dlopen(%s): %s", first, dlerror());
  setenv("NCCLBIND_NCCL_PATH", named, 1);
  for (int attempt = 0; attempt < 2; attempt++) {
    CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
    const char *message = ncclbind_last_error();
    CHECK_CONTAINS(message, "NCCLBIND_NCCL_PATH names ");
    CHECK_CONTAINS(message, named);
    CHECK_CONTAINS(message, real("first/libnccl.so.2"));
    CHECK_CONTAINS(message, "already loaded in this process");
    CHECK_CONTAINS(message, "NCCL 2.32.3");
    CHECK_CONTAINS(message, "ncclbind.library_info(\"nccl\") before importing torch");
    CHECK_CONTAINS(message, "unset NCCLBIND_NCCL_PATH");
  }
  /* libnccl_ep on top of the refused libnccl would bind to the other copy: refused too. */
  char ep[PATH_MAX];
  place(ep_input, "first/libnccl_ep.so", ep);
  setenv("NCCLBIND_NCCL_EP_PATH", ep, 1);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL_EP), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  CHECK_CONTAINS(ncclbind_last_error(), "NCCLBIND_NCCL_PATH names ");
  printf("ok %s\n", ncclbind_last_error());
}

static void same_copy_taken(void) {
  char first[PATH_MAX], link[PATH_MAX];
  place(nccl_input, "same/libnccl.so.2", first);
  snprintf(link, sizeof link, "%s/same/link.so", root);
  CHECK(symlink(first, link) == 0, "symlink %s", link);
  CHECK(dlopen(first, RTLD_NOW | RTLD_LOCAL), "dlopen(%s): %s", first, dlerror());
  setenv("NCCLBIND_NCCL_PATH", link, 1);
  ncclbind_library_info info;
  CHECK_INT_EQ(ncclbind_get_library_info(NCCLBIND_LIB_NCCL, &info), NCCLBIND_OK);
  CHECK_STR_EQ(info.path, real("same/libnccl.so.2"));
}

static void other_ep_copy_refused(void) {
  char first[PATH_MAX], named[PATH_MAX];
  place(ep_input, "epfirst/libnccl_ep.so", first);
  place(ep_input, "epnamed/libnccl_ep.so", named);
  CHECK(dlopen(first, RTLD_NOW | RTLD_LOCAL), "dlopen(%s): %s", first, dlerror());
  setenv("NCCLBIND_NCCL_EP_PATH", named, 1);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL_EP), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  CHECK_CONTAINS(ncclbind_last_error(), "NCCLBIND_NCCL_EP_PATH names ");
  CHECK_CONTAINS(ncclbind_last_error(), real("epfirst/libnccl_ep.so"));
  CHECK_CONTAINS(ncclbind_last_error(), "ncclbind.library_info(\"nccl_ep\")");
}

typedef const char *(*error_string_fn)(int);
static ncclbind_symbol error_string_slot = {NULL, "ncclGetErrorString", NCCLBIND_LIB_NCCL, 0};
static ncclbind_symbol version_slot = {NULL, "ncclGetVersion", NCCLBIND_LIB_NCCL, 0};

static void through(int with_shim) {
  char nccl[PATH_MAX];
  place(nccl_input, with_shim ? "shim/libnccl.so.2" : "noshim/libnccl.so.2", nccl);
  if (with_shim) CHECK(dlopen(shim_input, RTLD_NOW | RTLD_GLOBAL), "dlopen shim: %s", dlerror());
  setenv("NCCLBIND_NCCL_PATH", nccl, 1);
  error_string_fn error_string = (error_string_fn)ncclbind_resolve(&error_string_slot);
  CHECK(error_string, "%s", ncclbind_last_error());
  CHECK_STR_EQ(error_string(0), with_shim ? "from the shim" : "from the library");
  /* A function the shim does not wrap comes from the library the runtime loaded. */
  void *version = ncclbind_resolve(&version_slot);
  Dl_info info;
  char found[PATH_MAX];
  CHECK(version && dladdr(version, &info) && realpath(info.dli_fname, found), "ncclGetVersion");
  CHECK_STR_EQ(found, real(with_shim ? "shim/libnccl.so.2" : "noshim/libnccl.so.2"));
}

static void with_shim(void) {
  through(1);
}
static void without_shim(void) {
  through(0);
}

int main(int argc, char **argv) {
  nccl_input = test_input(argc, argv, 1, "NCCLBIND_TEST_STAND_IN_NCCL");
  ep_input = test_input(argc, argv, 2, "NCCLBIND_TEST_STAND_IN_NCCL_EP");
  shim_input = test_input(argc, argv, 3, "NCCLBIND_TEST_SHIM_STAND_IN");
  const char *tmp = getenv("TEST_TMPDIR");
  snprintf(root, sizeof root, "%s/placementXXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  CHECK(mkdtemp(root), "mkdtemp(%s)", root);
  static char shim_copy[PATH_MAX];
  CHECK(realpath(shim_input, shim_copy), "realpath(%s)", shim_input);
  shim_input = shim_copy;
  struct {
    const char *name;
    void (*run)(void);
  } cases[] = {
      {"wheel_homes_set", wheel_homes_set},
      {"user_home_kept", user_home_kept},
      {"flat_folder_sets_nothing", flat_folder_sets_nothing},
      {"other_copy_refused", other_copy_refused},
      {"same_copy_taken", same_copy_taken},
      {"other_ep_copy_refused", other_ep_copy_refused},
      {"with_shim", with_shim},
      {"without_shim", without_shim},
  };
  int failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fflush(stdout);
    pid_t child = fork();
    CHECK(child >= 0, "fork");
    if (child == 0) {
      clean_environment();
      cases[i].run();
      fflush(stdout);
      _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("%s %s\n", ok ? "PASS" : "FAIL", cases[i].name);
    failed += !ok;
  }
  printf("%d of %zu cases failed\n", failed, sizeof cases / sizeof cases[0]);
  return failed != 0;
}
