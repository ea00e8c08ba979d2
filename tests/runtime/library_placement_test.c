/* Where the loaded libraries are, and what follows from it, each case in a fresh child
 * process (the runtime loads a library once per process):
 *  - a wheel-like layout sets NCCL_EP_HOME / NCCL_HOME for NCCL EP's kernel compiler,
 *    unless the user set them; a flat folder sets neither. NCCL_HOME only to a home whose
 *    include/nccl.h is the release the generated binding registers as NCCL EP's kernel
 *    headers (ncclbind_kernel_headers: MATCH); another release's home is left unset (UNSET);
 *    the user's NCCL_HOME is kept, and another release there is MISMATCH, the message naming
 *    both releases and the fix; a version with no registration sets it unchecked (UNKNOWN);
 *  - an explicit path naming a different file than the copy already in the process is an
 *    error naming both; the same file (through a symlink) is used;
 *  - a preloaded shim's wrappers are what the runtime resolves.
 * Usage: library_placement_test STAND_IN_NCCL STAND_IN_NCCL_EP SHIM_STAND_IN
 *        STAND_IN_NCCL_EP_UNREGISTERED EP_VERSION_CODE (the stand-in's: the EP header set's) */
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
static const char *nccl_input, *ep_input, *shim_input, *unregistered_ep_input;
static int ep_version;

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

/* An nccl.h as NCCL's wheels have it: its version code on a #define line. */
static void nccl_header(const char *relative, int version_code) {
  char path[PATH_MAX];
  place("/dev/null", relative, path);
  FILE *header = fopen(path, "w");
  CHECK(header, "cannot write %s", path);
  fprintf(header, "#define NCCL_MAJOR 2\n#define NCCL_SUFFIX \"\"\n\n#define NCCL_VERSION_CODE %d\n", version_code);
  fclose(header);
}

/* The NCCL version code the generated binding registers as the stand-in libnccl_ep's kernel headers. */
static int needed_headers(void) {
  ncclbind_lib headers_lib = NCCLBIND_LIB_COUNT;
  int needed = ncclbind_kernel_headers_required(NCCLBIND_LIB_NCCL_EP, ep_version, &headers_lib);
  CHECK(needed > 0, "no kernel headers registered for NCCL EP version code %d", ep_version);
  CHECK_INT_EQ(headers_lib, NCCLBIND_LIB_NCCL);
  return needed;
}

/* "2.30.7" of an NCCL version code. */
static const char *nccl_version(int code) {
  static char buffers[4][32];
  static int next;
  int major, minor, patch;
  ncclbind_decode_version(code, &major, &minor, &patch);
  char *out = buffers[next++ % 4];
  snprintf(out, 32, "%d.%d.%d", major, minor, patch);
  return out;
}

static const char *kernel_headers_message(int expected_status) {
  const char *message = NULL;
  CHECK_INT_EQ(ncclbind_kernel_headers(NCCLBIND_LIB_NCCL_EP, &message), expected_status);
  CHECK(message && message[0], "no message");
  return message;
}

/* The fix names the registered release, from the registration. */
static void check_fix(const char *message, int needed) {
  char pin[64];
  snprintf(pin, sizeof pin, "==%s, then NCCL_HOME=DIR/nvidia/nccl", nccl_version(needed));
  CHECK_CONTAINS(message, "pip install --no-deps --target DIR nvidia-nccl-cu");
  CHECK_CONTAINS(message, pin);
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

/* Both wheels side by side: libnccl's home holds nccl.h of version_code. */
static void load_from_wheels(const char *folder, const char *ep_file, int version_code) {
  char nccl[PATH_MAX], ep[PATH_MAX], relative[PATH_MAX / 2];
  snprintf(relative, sizeof relative, "%s/nvidia/nccl/lib/libnccl.so.2", folder);
  place(nccl_input, relative, nccl);
  snprintf(relative, sizeof relative, "%s/nvidia/nccl/include/nccl.h", folder);
  nccl_header(relative, version_code);
  snprintf(relative, sizeof relative, "%s/nccl/ep/lib/cu13/libnccl_ep.so", folder);
  place(ep_file, relative, ep);
  snprintf(relative, sizeof relative, "%s/nccl/ep/include/nccl_ep.h", folder);
  touch(relative);
  snprintf(relative, sizeof relative, "%s/nccl/ep/include/nccl_ep/device/ll_ep.cuh", folder);
  touch(relative);
  setenv("NCCLBIND_NCCL_PATH", nccl, 1);
  setenv("NCCLBIND_NCCL_EP_PATH", ep, 1);
  const char *before = getenv("NCCL_HOME");
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL), NCCLBIND_OK);
  CHECK(getenv("NCCL_HOME") == before, "libnccl alone set NCCL_HOME=%s", getenv("NCCL_HOME"));
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL_EP), NCCLBIND_OK);
}

static void wheel_homes_set(void) {
  int needed = needed_headers();
  load_from_wheels("wheel", ep_input, needed);
  CHECK_STR_EQ(getenv("NCCL_EP_HOME"), real("wheel/nccl/ep"));
  CHECK_STR_EQ(getenv("NCCL_HOME"), real("wheel/nvidia/nccl"));
  const char *message = kernel_headers_message(NCCLBIND_KERNEL_HEADERS_MATCH);
  CHECK_CONTAINS(message, real("wheel/nvidia/nccl"));
  CHECK_CONTAINS(message, nccl_version(needed));
  CHECK_CONTAINS(message, "set by ncclbind");
}

/* The loaded libnccl's wheel holds another release's headers: NCCL_HOME is not set to them. */
static void wheel_home_of_another_release_left_unset(void) {
  int needed = needed_headers(), other = needed + 1;
  load_from_wheels("otherwheel", ep_input, other);
  CHECK(!getenv("NCCL_HOME"), "NCCL_HOME set to another release's headers: %s", getenv("NCCL_HOME"));
  CHECK_STR_EQ(getenv("NCCL_EP_HOME"), real("otherwheel/nccl/ep")); /* NCCL EP's own home: as before */
  const char *message = kernel_headers_message(NCCLBIND_KERNEL_HEADERS_UNSET);
  CHECK_CONTAINS(message, "libnccl_ep ");
  CHECK_CONTAINS(message, nccl_version(needed));
  CHECK_CONTAINS(message, nccl_version(other));
  CHECK_CONTAINS(message, real("otherwheel/nvidia/nccl"));
  CHECK_CONTAINS(message, "NCCL_HOME is not set");
  CHECK_CONTAINS(message, "first kernel compile fails");
  check_fix(message, needed);
  printf("ok %s\n", message);
}

/* The user's NCCL_HOME holds another release's headers: kept, and reported with the fix. */
static void user_home_of_another_release_kept(void) {
  int needed = needed_headers(), other = needed + 1;
  nccl_header("mine/include/nccl.h", other);
  char mine[PATH_MAX];
  snprintf(mine, sizeof mine, "%s", real("mine"));
  setenv("NCCL_HOME", mine, 1);
  load_from_wheels("userwheel", ep_input, needed); /* the wheel's would match: still not taken */
  CHECK_STR_EQ(getenv("NCCL_HOME"), mine);
  const char *message = kernel_headers_message(NCCLBIND_KERNEL_HEADERS_MISMATCH);
  CHECK_CONTAINS(message, nccl_version(needed));
  CHECK_CONTAINS(message, nccl_version(other));
  CHECK_CONTAINS(message, mine);
  CHECK_CONTAINS(message, "wrong offsets");
  check_fix(message, needed);
  printf("ok %s\n", message);
}

static void user_home_of_the_release_matches(void) {
  int needed = needed_headers();
  nccl_header("right/include/nccl.h", needed);
  char right[PATH_MAX];
  snprintf(right, sizeof right, "%s", real("right"));
  setenv("NCCL_HOME", right, 1);
  load_from_wheels("rightwheel", ep_input, needed + 1);
  CHECK_STR_EQ(getenv("NCCL_HOME"), right);
  const char *message = kernel_headers_message(NCCLBIND_KERNEL_HEADERS_MATCH);
  CHECK_CONTAINS(message, right);
  CHECK_CONTAINS(message, "set by the user");
}

/* A user NCCL_HOME without a readable nccl.h: kept, and a mismatch (nothing says it matches). */
static void user_home_kept(void) {
  setenv("NCCL_HOME", "/mine", 1);
  load_from_wheels("kept", ep_input, needed_headers());
  CHECK_STR_EQ(getenv("NCCL_HOME"), "/mine");
  CHECK_STR_EQ(getenv("NCCL_EP_HOME"), real("kept/nccl/ep"));
  const char *message = kernel_headers_message(NCCLBIND_KERNEL_HEADERS_MISMATCH);
  CHECK_CONTAINS(message, "/mine/include/nccl.h cannot be read");
}

/* A version of libnccl_ep the bindings register nothing for: the wheel home, unchecked. */
static void unregistered_version_unknown(void) {
  load_from_wheels("unregistered", unregistered_ep_input, needed_headers());
  CHECK_STR_EQ(getenv("NCCL_HOME"), real("unregistered/nvidia/nccl"));
  const char *message = kernel_headers_message(NCCLBIND_KERNEL_HEADERS_UNKNOWN);
  CHECK_CONTAINS(message, "register no NCCL release");
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
  const char *message = kernel_headers_message(NCCLBIND_KERNEL_HEADERS_UNSET);
  CHECK_CONTAINS(message, real("flat/libnccl.so.2"));
  check_fix(message, needed_headers());
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
static ncclbind_symbol error_string_slot = {NULL, "ncclGetErrorString", NCCLBIND_LIB_NCCL, 0, 0};
static ncclbind_symbol version_slot = {NULL, "ncclGetVersion", NCCLBIND_LIB_NCCL, 0, 0};

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
  unregistered_ep_input = test_input(argc, argv, 4, "NCCLBIND_TEST_STAND_IN_NCCL_EP_UNREGISTERED");
  ep_version = atoi(test_input(argc, argv, 5, "NCCLBIND_TEST_NCCL_EP_VERSION_CODE"));
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
      {"wheel_home_of_another_release_left_unset", wheel_home_of_another_release_left_unset},
      {"user_home_of_another_release_kept", user_home_of_another_release_kept},
      {"user_home_of_the_release_matches", user_home_of_the_release_matches},
      {"user_home_kept", user_home_kept},
      {"unregistered_version_unknown", unregistered_version_unknown},
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
