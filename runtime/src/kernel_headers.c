/* NCCL EP's kernel-header policy. libnccl_ep compiles its kernels at run time against NCCL's
 * device headers, read from $NCCL_HOME/include, and against its own, from $NCCL_EP_HOME; the
 * headers must be those of the NCCL release it was built with (another release lays out the
 * structs its host code hands the kernels differently). Generated code registers, per NCCL EP
 * version, the NCCL release it needs (ncclbind_register_kernel_headers); when the loader has
 * loaded libnccl_ep, ncclbind_settle_kernel_headers sets the homes it can prove right and says
 * what it found, which ncclbind_kernel_headers reports. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ncclbind/runtime.h"
#include "runtime_internal.h"

/* The wheel-like home of a library file (<home>/lib[/<sub>]/<file> beside <home>/<marker>)
 * into home; 1 if there is one. */
int ncclbind_wheel_home(const library_descriptor *d, const char *library_path, char *home, size_t size) {
  char folder[PATH_MAX];
  snprintf(folder, sizeof folder, "%s", library_path);
  for (int up = 0; up < 3; up++) { /* the file, lib/ and lib/<sub>/ */
    char *slash = strrchr(folder, '/');
    if (!slash || slash == folder) return 0;
    *slash = '\0';
    if (up == 0) continue;
    char marker[PATH_MAX + 64];
    struct stat st;
    snprintf(marker, sizeof marker, "%s/%s", folder, d->home_marker);
    if (stat(marker, &st) == 0) {
      snprintf(home, size, "%s", folder);
      return 1;
    }
  }
  return 0;
}

/* A library loaded from a wheel-like layout gives NCCL EP's kernel compiler its header home,
 * unless the user set it: the folders baked into libnccl_ep at its build exist only on its
 * build machine. */
void ncclbind_default_home(const library_descriptor *d, const char *library_path) {
  char home[PATH_MAX];
  if (d->home_env && !getenv(d->home_env) && ncclbind_wheel_home(d, library_path, home, sizeof home))
    setenv(d->home_env, home, 0);
}

/* What generated code registered (ncclbind_register_kernel_headers): per version of a
 * library, the release whose device headers its run-time kernel compiles need. */
typedef struct kernel_headers_registration {
  ncclbind_lib lib;
  int lib_version;
  ncclbind_lib headers_lib;
  int headers_version;
} kernel_headers_registration;

enum { MAX_KERNEL_HEADERS_REGISTRATIONS = 32 };
static pthread_mutex_t registrations_mutex = PTHREAD_MUTEX_INITIALIZER;
static kernel_headers_registration registrations[MAX_KERNEL_HEADERS_REGISTRATIONS];
static size_t registration_count;

static int is_blank(char c) {
  return c == ' ' || c == '\t';
}

/* The version code in <home>/<home_marker> (`#define <version_macro> <n>`): > 0, or 0 with
 * the reason in reason. */
static int read_header_version(const library_descriptor *d, const char *home, char *reason, size_t size) {
  char header[PATH_MAX + 64];
  snprintf(header, sizeof header, "%s/%s", home, d->home_marker);
  FILE *file = fopen(header, "r");
  if (!file) {
    snprintf(reason, size, "%s cannot be read: %s", header, strerror(errno));
    return 0;
  }
  size_t macro_length = strlen(d->version_macro);
  char line[1024];
  int code = 0, found = 0;
  while (!found && fgets(line, sizeof line, file)) {
    const char *p = line;
    while (is_blank(*p)) p++;
    if (*p++ != '#') continue;
    while (is_blank(*p)) p++;
    if (strncmp(p, "define", 6) != 0 || !is_blank(p[6])) continue;
    for (p += 6; is_blank(*p); p++) {
    }
    if (strncmp(p, d->version_macro, macro_length) != 0 || !is_blank(p[macro_length])) continue;
    found = 1;
    char *end;
    long value = strtol(p + macro_length, &end, 10);
    int whole = end != p + macro_length && (!*end || is_blank(*end) || *end == '\r' || *end == '\n' || *end == '/');
    if (whole && value > 0 && value < INT_MAX) code = (int)value;
  }
  int read_error = ferror(file);
  fclose(file);
  if (!code && read_error)
    snprintf(reason, size, "%s could not be read to the end", header);
  else if (!code && found)
    snprintf(reason, size, "%s defines %s as something other than a number", header, d->version_macro);
  else if (!code)
    snprintf(reason, size, "%s has no \"#define %s <n>\" line", header, d->version_macro);
  return code;
}

/* "NCCL 2.32.3's headers (<home>/include/nccl.h)", or why the home has no version. */
static void describe_home(ncclbind_message *m, const library_descriptor *hd, ncclbind_lib headers_lib, int code,
                          const char *home, const char *reason) {
  if (code > 0) {
    char version[24];
    ncclbind_format_version(headers_lib, code, version, sizeof version);
    ncclbind_message_append(m, "%s %s's headers (%s/%s)", hd->product_name, version, home, hd->home_marker);
  } else {
    ncclbind_message_append(m, "no readable version: %s", reason);
  }
}

/* The fix, with the releases from the registration: the pip wheel of the needed headers. */
static void append_fix(ncclbind_message *m, ncclbind_lib lib, const char *path, ncclbind_lib headers_lib, int needed) {
  const library_descriptor *hd = ncclbind_descriptor(headers_lib);
  char version[24];
  ncclbind_format_version(headers_lib, needed, version, sizeof version);
  /* The wheels of a release are one per CUDA major: the one NCCL EP was built for. */
  const char *headers_path = NULL;
  int cuda = ncclbind_library_cuda_major(lib, path);
  if (!cuda && ncclbind_loaded_library(headers_lib, &headers_path, NULL))
    cuda = ncclbind_library_cuda_major(headers_lib, headers_path);
  char wheel[32];
  if (cuda > 0)
    snprintf(wheel, sizeof wheel, "cu%d", cuda);
  else
    snprintf(wheel, sizeof wheel, "cu<CUDA major>");
  ncclbind_message_append(m,
                          " Fix: give it %s %s's headers (the loaded %s may stay as it is): "
                          "pip install --no-deps --target DIR nvidia-nccl-%s==%s, then %s=DIR/nvidia/nccl.",
                          hd->product_name, version, hd->display_name, wheel, version, hd->home_env);
}

void ncclbind_settle_kernel_headers(ncclbind_lib lib, int version_code, const char *path, int *status,
                                    ncclbind_message *m) {
  const library_descriptor *d = ncclbind_descriptor(lib);
  ncclbind_lib headers_lib = NCCLBIND_LIB_NCCL;
  int needed = ncclbind_kernel_headers_required(lib, version_code, &headers_lib);
  const library_descriptor *hd = ncclbind_descriptor(headers_lib);
  ncclbind_message_init(m);
  char own_version[24], needed_version[24];
  ncclbind_format_version(lib, version_code, own_version, sizeof own_version);
  ncclbind_format_version(headers_lib, needed, needed_version, sizeof needed_version);

  const char *user = getenv(hd->home_env);
  if (user && !user[0]) user = NULL;
  const char *headers_path = NULL;
  char candidate[PATH_MAX] = "";
  int loaded = ncclbind_loaded_library(headers_lib, &headers_path, NULL);
  int has_candidate = loaded && ncclbind_wheel_home(hd, headers_path, candidate, sizeof candidate);
  char reason[PATH_MAX + 128] = "";
  const char *home = user ? user : has_candidate ? candidate : NULL;
  int found = home ? read_header_version(hd, home, reason, sizeof reason) : 0;

  if (!needed) {
    /* Nothing registered for this version: the wheel home, unchecked, as before the rule. */
    if (!user && has_candidate) setenv(hd->home_env, candidate, 1);
    *status = NCCLBIND_KERNEL_HEADERS_UNKNOWN;
    ncclbind_message_append(m,
                            "%s %s (%s): these bindings register no %s release for this version's run-time "
                            "kernel compiles, so %s is not checked: ",
                            d->display_name, own_version, path, hd->product_name, hd->home_env);
    if (home) {
      ncclbind_message_append(m, "%s=%s%s holds ", hd->home_env, home, user ? "" : " (set by ncclbind)");
      describe_home(m, hd, headers_lib, found, home, reason);
      ncclbind_message_append(m, ".");
    } else {
      ncclbind_message_append(m, "%s is not set.", hd->home_env);
    }
    return;
  }

  ncclbind_message_append(m,
                          "%s %s (%s) compiles its kernels at run time against %s %s's device headers "
                          "(those it was built with), read from $%s/include; ",
                          d->display_name, own_version, path, hd->product_name, needed_version, hd->home_env);
  if (found == needed) {
    if (!user) setenv(hd->home_env, candidate, 1);
    *status = NCCLBIND_KERNEL_HEADERS_MATCH;
    ncclbind_message_append(m, "%s=%s holds them (%s%s%s).", hd->home_env, home,
                            user ? "set by the user" : "set by ncclbind: the loaded ", user ? "" : hd->display_name,
                            user ? "" : "'s home");
    return;
  }
  if (user) {
    *status = NCCLBIND_KERNEL_HEADERS_MISMATCH;
    ncclbind_message_append(m, "but %s=%s holds ", hd->home_env, user);
    describe_home(m, hd, headers_lib, found, user, reason);
    ncclbind_message_append(m,
                            ": another release lays out the structs its host code hands the kernels "
                            "differently, and they would read their arguments at wrong offsets (an illegal "
                            "memory access).");
  } else {
    *status = NCCLBIND_KERNEL_HEADERS_UNSET;
    ncclbind_message_append(m, "%s is not set, and ", hd->home_env);
    if (has_candidate) {
      ncclbind_message_append(m, "the loaded %s's home %s would have been it, but holds ", hd->display_name, candidate);
      describe_home(m, hd, headers_lib, found, candidate, reason);
      ncclbind_message_append(m, ", so ncclbind left it unset");
    } else if (loaded) {
      ncclbind_message_append(m, "the loaded %s (%s) has no home with %s around it to set it to", hd->display_name,
                              headers_path, hd->home_marker);
    } else {
      ncclbind_message_append(m, "no %s is loaded to take it from", hd->display_name);
    }
    ncclbind_message_append(m,
                            ": %s's compiler falls back to the folders of its build machine, and its first "
                            "kernel compile fails (ncclInternalError).",
                            d->product_name);
  }
  append_fix(m, lib, path, headers_lib, needed);
}

/* ---- Public API -------------------------------------------------------- */

void ncclbind_register_kernel_headers(ncclbind_lib lib, int lib_version, ncclbind_lib headers_lib,
                                      int headers_version) {
  if (!ncclbind_descriptor(lib) || !ncclbind_descriptor(headers_lib) || lib == headers_lib || lib_version <= 0 ||
      headers_version <= 0) {
    ncclbind_set_invalid_argument(
        "ncclbind_register_kernel_headers: library %d version %d cannot need the "
        "headers of library %d version %d",
        (int)lib, lib_version, (int)headers_lib, headers_version);
    return;
  }
  pthread_mutex_lock(&registrations_mutex);
  size_t i = 0;
  while (i < registration_count && !(registrations[i].lib == lib && registrations[i].lib_version == lib_version)) i++;
  if (i < MAX_KERNEL_HEADERS_REGISTRATIONS) {
    registrations[i] = (kernel_headers_registration){lib, lib_version, headers_lib, headers_version};
    if (i == registration_count) registration_count++;
  }
  pthread_mutex_unlock(&registrations_mutex);
  if (i == MAX_KERNEL_HEADERS_REGISTRATIONS)
    ncclbind_set_invalid_argument("ncclbind_register_kernel_headers: more than %d registrations",
                                  MAX_KERNEL_HEADERS_REGISTRATIONS);
}

int ncclbind_kernel_headers_required(ncclbind_lib lib, int lib_version, ncclbind_lib *headers_lib) {
  int needed = 0;
  pthread_mutex_lock(&registrations_mutex);
  for (size_t i = 0; i < registration_count; i++)
    if (registrations[i].lib == lib && registrations[i].lib_version == lib_version) {
      needed = registrations[i].headers_version;
      if (headers_lib) *headers_lib = registrations[i].headers_lib;
    }
  pthread_mutex_unlock(&registrations_mutex);
  return needed;
}
