/* Library search, dlopen, and lazy per-symbol resolution. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ncclbind/runtime.h"
#include "runtime_internal.h"

static const library_descriptor descriptors[NCCLBIND_LIB_COUNT] = {
    [NCCLBIND_LIB_NCCL] = {"libnccl",
                           "NCCL",
                           {"libnccl.so.2", NULL, NULL},
                           "NCCLBIND_NCCL_PATH",
                           "ncclGetVersion",
                           1000,
                           999999,
                           "NCCL_HOME",
                           "include/nccl.h",
                           "NCCL_VERSION_CODE"},
    /* libnccl_ep.so is the link name the wheel ships; libnccl_ep.so.0 is its SONAME. */
    [NCCLBIND_LIB_NCCL_EP] = {"libnccl_ep",
                              "NCCL EP",
                              {"libnccl_ep.so", "libnccl_ep.so.0", NULL},
                              "NCCLBIND_NCCL_EP_PATH",
                              "ncclEpGetVersion",
                              1,
                              999999,
                              "NCCL_EP_HOME",
                              "include/nccl_ep/device",
                              NULL},
};

typedef struct registered_table {
  ncclbind_symbol *const *syms;
  struct registered_table *next; /* immutable once linked; nodes are never freed */
} registered_table;

typedef struct library_state {
  pthread_mutex_t mutex; /* guards everything below except a published handle */
  void *_Atomic handle;  /* set with release once path and version_code are final */
  char *explicit_path;
  char **search_dirs;
  size_t search_dir_count;
  registered_table *tables;
  char path[PATH_MAX];
  int version_code;
  /* Decided at the load, before the handle is published (kernel_headers.c). */
  int kernel_headers_status;
  ncclbind_message kernel_headers_message;
} library_state;

static library_state libraries[NCCLBIND_LIB_COUNT] = {
    [NCCLBIND_LIB_NCCL] = {.mutex = PTHREAD_MUTEX_INITIALIZER},
    [NCCLBIND_LIB_NCCL_EP] = {.mutex = PTHREAD_MUTEX_INITIALIZER},
};

static int valid_lib(ncclbind_lib lib) {
  return (unsigned)lib < NCCLBIND_LIB_COUNT;
}

static void *published_handle(const library_state *state) {
  return atomic_load_explicit(&state->handle, memory_order_acquire);
}

static int resolve_now_requested(void) {
  const char *value = getenv("NCCLBIND_RESOLVE_NOW");
  return value && value[0] && strcmp(value, "0") != 0;
}

/* ---- Search ------------------------------------------------------------ */

typedef struct search {
  const library_descriptor *descriptor;
  ncclbind_message report; /* every candidate tried, with the reason it failed */
  int attempts;
  /* The last "undefined symbol" failure: the object dlopen named and the symbol. */
  char undefined_in[PATH_MAX];
  char undefined_symbol[128];
  char found[PATH_MAX];              /* the first candidate that exists but did not load, or "" */
  char conflict[2 * PATH_MAX + 512]; /* an explicit path vs another copy already loaded, or "" */
} search;

/* glibc's dlerror: "<object>: undefined symbol: <name>[, version <v>]". */
static void note_undefined_symbol(search *s, const char *candidate, const char *reason) {
  static const char marker[] = ": undefined symbol: ";
  const char *hit = strstr(reason, marker);
  if (!hit) return;
  size_t object_length = (size_t)(hit - reason);
  if (object_length > 0 && object_length < sizeof s->undefined_in) {
    memcpy(s->undefined_in, reason, object_length);
    s->undefined_in[object_length] = '\0';
  } else {
    snprintf(s->undefined_in, sizeof s->undefined_in, "%s", candidate);
  }
  const char *symbol = hit + sizeof marker - 1;
  snprintf(s->undefined_symbol, sizeof s->undefined_symbol, "%.*s", (int)strcspn(symbol, ", "), symbol);
}

static void record_failure(search *s, const char *candidate, const char *origin, const char *reason) {
  size_t candidate_length = strlen(candidate);
  /* dlerror() usually repeats the path as "path: reason"; keep only the reason. */
  if (strncmp(reason, candidate, candidate_length) == 0 && reason[candidate_length] == ':' &&
      reason[candidate_length + 1] == ' ')
    reason += candidate_length + 2;
  ncclbind_message_append(&s->report, "  %d. %s [%s]: %s\n", ++s->attempts, candidate, origin, reason);
}

/* ---- Checks before dlopen ------------------------------------------------
 * dlopen maps what the program headers say: a truncated file faults (SIGBUS) inside
 * it, a FIFO blocks it forever, another machine's library gets a misleading reason.
 * A candidate path is read first; what the dynamic loader finds by name is its own. */

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__powerpc64__)
#define HOST_MACHINE EM_PPC64
#endif

static const char *machine_name(unsigned machine) {
  switch (machine) {
    case EM_386:
      return "x86 (32-bit)";
    case EM_X86_64:
      return "x86_64";
    case EM_AARCH64:
      return "aarch64";
    case EM_ARM:
      return "arm (32-bit)";
    case EM_PPC64:
      return "ppc64";
    case EM_RISCV:
      return "riscv";
    case EM_S390:
      return "s390";
    default:
      return NULL;
  }
}

static const char *file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

/* 0 when the file at path can be handed to dlopen; else -1 with the reason in reason. */
static int check_candidate(const char *path, char *reason, size_t size) {
  struct stat st;
  if (stat(path, &st) != 0) return 0; /* nothing to map: dlopen's own reason says why */
  if (!S_ISREG(st.st_mode)) {
    snprintf(reason, size, "%s, not a regular file", file_kind(st.st_mode));
    return -1;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    snprintf(reason, size, "cannot be read: %s", strerror(errno));
    return -1;
  }
  int ok = -1;
  Elf64_Ehdr eh;
  ssize_t got = pread(fd, &eh, sizeof eh, 0);
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(reason, size, "changed while it was checked");
  } else if (got < EI_NIDENT || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    snprintf(reason, size, "not an ELF file (invalid ELF header; %lld bytes%s)", (long long)st.st_size,
             got >= 2 && ((const char *)&eh)[0] == '#' && ((const char *)&eh)[1] == '!' ? ", a script" : "");
  } else if (eh.e_ident[EI_CLASS] != ELFCLASS64) {
    snprintf(reason, size, "a %s ELF file (ELFCLASS%s); this process is 64-bit",
             eh.e_ident[EI_CLASS] == ELFCLASS32 ? "32-bit" : "malformed",
             eh.e_ident[EI_CLASS] == ELFCLASS32 ? "32" : "NONE");
  } else if (got < (ssize_t)sizeof eh) {
    snprintf(reason, size, "truncated: %lld bytes, shorter than an ELF header", (long long)st.st_size);
  } else if (eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    snprintf(reason, size, "a big-endian ELF file; this process is little-endian");
#ifdef HOST_MACHINE
  } else if (eh.e_machine != HOST_MACHINE) {
    const char *built = machine_name(eh.e_machine);
    if (built)
      snprintf(reason, size, "built for %s; this process is %s", built, machine_name(HOST_MACHINE));
    else
      snprintf(reason, size, "built for ELF machine %u; this process is %s", eh.e_machine, machine_name(HOST_MACHINE));
#endif
  } else if (eh.e_type != ET_DYN) {
    snprintf(reason, size, "not a shared library (ELF type %u)", eh.e_type);
  } else if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phoff > (Elf64_Off)st.st_size ||
             (Elf64_Off)eh.e_phnum * sizeof(Elf64_Phdr) > (Elf64_Off)st.st_size - eh.e_phoff) {
    snprintf(reason, size, "truncated or malformed: its program headers lie outside its %lld bytes",
             (long long)st.st_size);
  } else {
    ok = 0;
    for (unsigned i = 0; i < eh.e_phnum && ok == 0; i++) {
      Elf64_Phdr ph;
      if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph) {
        snprintf(reason, size, "cannot read program header %u", i);
        ok = -1;
      } else if (ph.p_type == PT_LOAD &&
                 (ph.p_offset > (Elf64_Off)st.st_size || ph.p_filesz > (Elf64_Off)st.st_size - ph.p_offset)) {
        snprintf(reason, size, "truncated: segment %u needs bytes up to %llu, the file has %lld", i,
                 (unsigned long long)ph.p_offset + (unsigned long long)ph.p_filesz, (long long)st.st_size);
        ok = -1;
      }
    }
  }
  close(fd);
  return ok;
}

static void *try_open(search *s, const char *candidate, const char *origin) {
  if (strchr(candidate, '/')) {
    char reason[256];
    if (check_candidate(candidate, reason, sizeof reason) != 0) {
      record_failure(s, candidate, origin, reason);
      return NULL;
    }
  }
  dlerror();
  void *handle = dlopen(candidate, RTLD_NOW | RTLD_GLOBAL);
  if (handle) return handle;
  const char *reason = dlerror();
  if (reason) note_undefined_symbol(s, candidate, reason);
  size_t candidate_length = strlen(candidate);
  int absent = reason && strncmp(reason, candidate, candidate_length) == 0 &&
               strncmp(reason + candidate_length, ": cannot open shared object file",
                       sizeof ": cannot open shared object file" - 1) == 0;
  if (!absent && !s->found[0]) snprintf(s->found, sizeof s->found, "%s", candidate);
  record_failure(s, candidate, origin, reason ? reason : "dlopen failed without a reason");
  return NULL;
}

static void *try_in_directory(search *s, const char *directory, const char *subdirectory, const char *origin) {
  for (const char *const *name = s->descriptor->sonames; *name; name++) {
    char candidate[PATH_MAX];
    int length = snprintf(candidate, sizeof candidate, "%s%s/%s", directory, subdirectory, *name);
    if (length < 0 || (size_t)length >= sizeof candidate) {
      record_failure(s, directory, origin, "path too long");
      continue;
    }
    void *handle = try_open(s, candidate, origin);
    if (handle) return handle;
  }
  return NULL;
}

static void *find_in_process(search *s) {
  for (const char *const *name = s->descriptor->sonames; *name; name++) {
    void *handle = dlopen(*name, RTLD_NOLOAD | RTLD_NOW | RTLD_GLOBAL);
    if (handle) return handle;
    dlerror();
    ncclbind_message_append(&s->report, "  %d. %s [already in this process]: not loaded\n", ++s->attempts, *name);
  }
  return NULL;
}

static const char *explicit_path_of(const library_state *state, const library_descriptor *d, const char **origin) {
  if (state->explicit_path) {
    if (origin) *origin = "ncclbind_set_library_path";
    return state->explicit_path;
  }
  const char *path = getenv(d->path_env);
  if (origin) *origin = d->path_env;
  return path && path[0] ? path : NULL;
}

static const char *handle_file(void *handle) {
  struct link_map *map = NULL;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0]) return map->l_name;
  dlerror();
  return NULL;
}

static int same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Another library of the process (torch, say) loaded its own copy first. With an explicit
 * path set that copy is used only when it is the named file; otherwise the load fails and
 * says so, never running silently on a version the user did not ask for. */
static void *take_in_process(search *s, void *handle, const char *explicit_path, const char *origin) {
  const library_descriptor *d = s->descriptor;
  const char *loaded = handle_file(handle);
  if (!explicit_path || (loaded && same_file(loaded, explicit_path))) return handle;
  char loaded_version[32] = "unknown version", wanted_version[24] = "", real_loaded[PATH_MAX];
  typedef int (*get_version_fn)(int *);
  get_version_fn get_version = (get_version_fn)dlsym(handle, d->version_symbol);
  int code = 0;
  if (get_version && get_version(&code) == 0 && code > 0)
    ncclbind_format_version((ncclbind_lib)(d - descriptors), code, loaded_version, sizeof loaded_version);
  dlerror();
  if (loaded && realpath(loaded, real_loaded)) loaded = real_loaded;
  int known = ncclbind_read_file_version(explicit_path, wanted_version, sizeof wanted_version);
  snprintf(s->conflict, sizeof s->conflict,
           "%s names %s%s%s%s%s%s, but a different %s is already loaded in this process: %s "
           "(%s %s), loaded by another library first (torch, for one). Load ncclbind's library "
           "before that one (in Python: call ncclbind.library_info(\"%s\") before importing "
           "torch), or unset %s to use the one already loaded.\n",
           origin, explicit_path, known ? " (" : "", known ? d->product_name : "", known ? " " : "",
           known ? wanted_version : "", known ? ")" : "", d->sonames[0], loaded ? loaded : "(unknown path)",
           d->product_name, loaded_version, d - descriptors == NCCLBIND_LIB_NCCL ? "nccl" : "nccl_ep", d->path_env);
  dlclose(handle); /* drops only the reference RTLD_NOLOAD took */
  return NULL;
}

/* Called with state->mutex held. */
static void *search_library(library_state *state, search *s) {
  const char *origin = NULL;
  const char *explicit_path = explicit_path_of(state, s->descriptor, &origin);
  void *handle = find_in_process(s);
  if (handle) return take_in_process(s, handle, explicit_path, origin);

  if (explicit_path) {
    /* An explicit path is the user's choice: a wrong one is an error, never a
     * silent fall-back to some other copy of the library. */
    handle = try_open(s, explicit_path, origin);
    if (!handle)
      ncclbind_message_append(&s->report, "  (an explicit path is set, so no other location was searched)\n");
    return handle;
  }

  for (size_t i = 0; i < state->search_dir_count; i++) {
    handle = try_in_directory(s, state->search_dirs[i], "", "ncclbind_add_search_dir");
    if (handle) return handle;
  }

  const char *cuda_home = getenv("CUDA_HOME");
  if (!cuda_home || !cuda_home[0]) cuda_home = "/usr/local/cuda";
  handle = try_in_directory(s, cuda_home, "/lib", "CUDA_HOME");
  if (!handle) handle = try_in_directory(s, cuda_home, "/lib64", "CUDA_HOME");
  if (handle) return handle;

  for (const char *const *name = s->descriptor->sonames; *name; name++) {
    handle = try_open(s, *name, "dynamic loader search");
    if (handle) return handle;
  }
  return NULL;
}

/* Called with state->mutex held, before the handle is published. */
static void record_loaded_library(library_state *state, const library_descriptor *d, void *handle) {
  typedef int (*get_version_fn)(int *);
  get_version_fn get_version = (get_version_fn)dlsym(handle, d->version_symbol);
  int version = 0;
  if (!get_version || get_version(&version) != 0) version = 0;
  state->version_code = version;

  const char *name = NULL;
  struct link_map *map = NULL;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0]) name = map->l_name;
  Dl_info info;
  if (!name && get_version && dladdr((void *)get_version, &info) && info.dli_fname) name = info.dli_fname;
  if (!name) name = d->sonames[0];
  if (!realpath(name, state->path)) snprintf(state->path, sizeof state->path, "%s", name);
  dlerror();
}

/* A preloaded interposer (ncclbind's shim, which exports ncclbind_shim_version) wraps NCCL's
 * functions; calling through the library's handle would bypass it. Its wrappers are taken
 * from the global scope, and only its own: a name it does not wrap still comes from the
 * library ncclbind loaded, never from another libnccl of the process. */
static void *lookup(ncclbind_lib lib, void *handle, const char *name) {
  if (lib == NCCLBIND_LIB_NCCL) {
    void *marker = dlsym(RTLD_DEFAULT, "ncclbind_shim_version");
    Dl_info shim, found;
    if (marker && dladdr(marker, &shim)) {
      void *fn = dlsym(RTLD_DEFAULT, name);
      if (fn && dladdr(fn, &found) && found.dli_fbase == shim.dli_fbase) return fn;
    }
    dlerror();
  }
  return dlsym(handle, name);
}

static int resolve_into(ncclbind_symbol *sym, void *handle) {
  if (atomic_load_explicit(&sym->fn, memory_order_acquire)) return 1;
  void *fn = lookup(sym->lib, handle, sym->name);
  if (!fn) {
    dlerror();
    return 0;
  }
  atomic_store_explicit(&sym->fn, fn, memory_order_release);
  return 1;
}

static void resolve_table_now(ncclbind_lib lib, void *handle, ncclbind_symbol *const *syms) {
  for (; *syms; syms++)
    if ((*syms)->lib == lib && (*syms)->name) resolve_into(*syms, handle);
}

/* What generated code registered (ncclbind_register_dependency): the library each one
 * needs, as index + 1 (0: none), and the version code it needs. */
static _Atomic int dependency_of[NCCLBIND_LIB_COUNT];
static _Atomic int dependency_needed[NCCLBIND_LIB_COUNT];

/* A library built against a newer dependency than the one in use fails in dlopen with
 * "undefined symbol <a function the old one lacks>". That is said first, with the three
 * versions, then the list of candidates tried; out receives the whole message. */
static void explain_failure(ncclbind_lib lib, search *s, ncclbind_message *out) {
  const library_descriptor *d = &descriptors[lib];
  int dependency = atomic_load_explicit(&dependency_of[lib], memory_order_acquire) - 1;
  int needed = atomic_load_explicit(&dependency_needed[lib], memory_order_acquire);
  ncclbind_message_init(out);
  char note[PATH_MAX + 256] = "";
  if (dependency >= 0 && dependency < NCCLBIND_LIB_COUNT) {
    const library_descriptor *dd = &descriptors[dependency];
    const library_state *in_use = &libraries[dependency];
    char needed_text[48] = "";
    if (needed > 0) {
      char version[24];
      ncclbind_format_version((ncclbind_lib)dependency, needed, version, sizeof version);
      snprintf(needed_text, sizeof needed_text, " %s or newer", version);
    }
    if (!published_handle(in_use)) {
      snprintf(note, sizeof note, "  (%s needs %s of %s%s, which ncclbind could not load either)\n", d->display_name,
               dd->sonames[0], dd->product_name, needed_text);
    } else {
      char in_use_version[32];
      ncclbind_format_version((ncclbind_lib)dependency, in_use->version_code, in_use_version, sizeof in_use_version);
      const char *file = s->undefined_in[0] ? s->undefined_in : s->found[0] ? s->found : NULL;
      if (file && needed > 0 && in_use->version_code > 0 && in_use->version_code < needed) {
        char own_version[24] = "", real_file[PATH_MAX];
        if (realpath(file, real_file)) file = real_file;
        int known = ncclbind_read_file_version(file, own_version, sizeof own_version);
        ncclbind_message_append(out, "%s%s%s at %s needs %s%s, but the %s in use is %s %s (%s)", d->display_name,
                                known ? " " : "", known ? own_version : "", file, dd->product_name, needed_text,
                                dd->display_name, dd->product_name, in_use_version, in_use->path);
        if (s->undefined_symbol[0] && !dlsym(published_handle(in_use), s->undefined_symbol))
          ncclbind_message_append(out, ", which lacks %s", s->undefined_symbol);
        dlerror();
        ncclbind_message_append(out, ". Load a %s of %s%s first (set %s to its path).\n", dd->sonames[0],
                                dd->product_name, needed_text, dd->path_env);
      } else {
        snprintf(note, sizeof note, "  (%s needs %s of %s%s; the one in use is %s at %s)\n", d->display_name,
                 dd->sonames[0], dd->product_name, needed_text, in_use_version, in_use->path);
      }
    }
  }
  if (s->conflict[0]) {
    ncclbind_message_append(out, "%s", s->conflict);
  } else {
    ncclbind_message_append(out, "%s%s%s", s->report.text, s->report.truncated ? "\n" : "", note);
  }
  if (!out->truncated && out->length && out->text[out->length - 1] == '\n') out->text[--out->length] = '\0';
}

/* What was loaded must be the library: its version function, reporting a version
 * in range (libm loads fine as "libnccl"). 0, or -1 with the reason in the report. */
static int check_loaded(const library_descriptor *d, void *handle, search *s) {
  typedef int (*get_version_fn)(int *);
  get_version_fn get_version = (get_version_fn)dlsym(handle, d->version_symbol);
  const char *name = NULL;
  struct link_map *map = NULL;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0]) name = map->l_name;
  dlerror();
  if (!name) name = d->sonames[0];
  char reason[256];
  if (!get_version) {
    snprintf(reason, sizeof reason, "has no %s: not %s", d->version_symbol, d->display_name);
    record_failure(s, name, "loaded", reason);
    return -1;
  }
  int version = 0;
  int result = get_version(&version);
  if (result != 0 || version < d->min_version || version > d->max_version) {
    snprintf(reason, sizeof reason, "%s returned %d and version %d, not a %s version (%d..%d)", d->version_symbol,
             result, version, d->product_name, d->min_version, d->max_version);
    record_failure(s, name, "loaded", reason);
    return -1;
  }
  return 0;
}

/* Loads lib once; a failed attempt leaves nothing behind and the next call
 * searches again (so a binding can fix the path and retry). */
static int load_library(ncclbind_lib lib, int report_errors) {
  library_state *state = &libraries[lib];
  if (published_handle(state)) return NCCLBIND_OK;

  /* libnccl_ep needs libnccl.so.2: loading ours first makes that dependency bind
   * to the libnccl this runtime chose instead of whatever the loader finds. */
  if (lib == NCCLBIND_LIB_NCCL_EP) {
    /* With a libnccl named explicitly, a libnccl_ep bound to any other would be the silent
     * mismatch that path is there to prevent: its failure is this one's. */
    int named = explicit_path_of(&libraries[NCCLBIND_LIB_NCCL], &descriptors[NCCLBIND_LIB_NCCL], NULL) != NULL;
    int result = load_library(NCCLBIND_LIB_NCCL, report_errors && named);
    if (result != NCCLBIND_OK && named) return result;
  }

  search s;
  s.descriptor = &descriptors[lib];
  s.attempts = 0;
  s.undefined_in[0] = s.undefined_symbol[0] = s.found[0] = s.conflict[0] = '\0';
  ncclbind_message_init(&s.report);
  ncclbind_message_append(&s.report, "%s could not be loaded; tried, in order:\n", s.descriptor->display_name);

  pthread_mutex_lock(&state->mutex);
  if (published_handle(state)) {
    pthread_mutex_unlock(&state->mutex);
    return NCCLBIND_OK;
  }
  void *handle = search_library(state, &s);
  if (handle && check_loaded(s.descriptor, handle, &s) != 0) {
    dlclose(handle);
    handle = NULL;
  }
  registered_table *tables = NULL;
  if (handle) {
    record_loaded_library(state, s.descriptor, handle);
    if (lib == NCCLBIND_LIB_NCCL_EP) {
      ncclbind_default_home(&descriptors[NCCLBIND_LIB_NCCL_EP], state->path);
      ncclbind_settle_kernel_headers(lib, state->version_code, state->path, &state->kernel_headers_status,
                                     &state->kernel_headers_message);
    }
    atomic_store_explicit(&state->handle, handle, memory_order_release);
    tables = state->tables;
  }
  pthread_mutex_unlock(&state->mutex);

  if (!handle) {
    if (!report_errors) return NCCLBIND_ERROR_LIBRARY_NOT_FOUND;
    ncclbind_message explained;
    explain_failure(lib, &s, &explained);
    return ncclbind_error_set_message(NCCLBIND_ERROR_LIBRARY_NOT_FOUND, &explained);
  }
  if (tables && resolve_now_requested())
    for (registered_table *t = tables; t; t = t->next) resolve_table_now(lib, handle, t->syms);
  return NCCLBIND_OK;
}

/* ---- Public API -------------------------------------------------------- */

int ncclbind_load(ncclbind_lib lib) {
  if (!valid_lib(lib)) return ncclbind_set_invalid_argument("ncclbind_load: unknown library %d", (int)lib);
  return load_library(lib, 1);
}

int ncclbind_set_library_path(ncclbind_lib lib, const char *path) {
  if (!valid_lib(lib)) return ncclbind_set_invalid_argument("ncclbind_set_library_path: unknown library %d", (int)lib);
  library_state *state = &libraries[lib];
  char *copy = NULL;
  if (path && path[0] && !(copy = strdup(path)))
    return ncclbind_set_invalid_argument("ncclbind_set_library_path: out of memory");
  pthread_mutex_lock(&state->mutex);
  if (published_handle(state)) {
    pthread_mutex_unlock(&state->mutex);
    free(copy);
    return ncclbind_error_set(NCCLBIND_ERROR_STATE, "ncclbind_set_library_path: %s is already loaded from %s",
                              descriptors[lib].display_name, state->path);
  }
  free(state->explicit_path);
  state->explicit_path = copy;
  pthread_mutex_unlock(&state->mutex);
  return NCCLBIND_OK;
}

int ncclbind_add_search_dir(ncclbind_lib lib, const char *dir) {
  if (!valid_lib(lib)) return ncclbind_set_invalid_argument("ncclbind_add_search_dir: unknown library %d", (int)lib);
  if (!dir || !dir[0]) return ncclbind_set_invalid_argument("ncclbind_add_search_dir: empty directory");
  library_state *state = &libraries[lib];
  char *copy = strdup(dir);
  if (!copy) return ncclbind_set_invalid_argument("ncclbind_add_search_dir: out of memory");
  pthread_mutex_lock(&state->mutex);
  if (published_handle(state)) {
    pthread_mutex_unlock(&state->mutex);
    free(copy);
    return ncclbind_error_set(NCCLBIND_ERROR_STATE, "ncclbind_add_search_dir: %s is already loaded from %s",
                              descriptors[lib].display_name, state->path);
  }
  char **dirs = realloc(state->search_dirs, (state->search_dir_count + 1) * sizeof *dirs);
  if (!dirs) {
    pthread_mutex_unlock(&state->mutex);
    free(copy);
    return ncclbind_set_invalid_argument("ncclbind_add_search_dir: out of memory");
  }
  dirs[state->search_dir_count++] = copy;
  state->search_dirs = dirs;
  pthread_mutex_unlock(&state->mutex);
  return NCCLBIND_OK;
}

static int valid_symbol(const ncclbind_symbol *sym) {
  return sym && sym->name && sym->name[0] && valid_lib(sym->lib);
}

void *ncclbind_resolve(ncclbind_symbol *sym) {
  if (!valid_symbol(sym)) {
    ncclbind_set_invalid_argument("ncclbind_resolve: %s",
                                  sym ? "symbol slot without a name or with an unknown library" : "NULL symbol slot");
    return NULL;
  }
  void *fn = atomic_load_explicit(&sym->fn, memory_order_acquire);
  if (fn) return fn;
  if (load_library(sym->lib, 1) != NCCLBIND_OK) return NULL;

  library_state *state = &libraries[sym->lib];
  void *handle = published_handle(state);
  fn = lookup(sym->lib, handle, sym->name);
  if (fn) {
    atomic_store_explicit(&sym->fn, fn, memory_order_release);
    return fn;
  }
  dlerror();

  const library_descriptor *d = &descriptors[sym->lib];
  char loaded_version[32];
  ncclbind_format_version(sym->lib, state->version_code, loaded_version, sizeof loaded_version);
  ncclbind_message message;
  ncclbind_message_init(&message);
  ncclbind_message_append(&message, "%s is not in the loaded %s %s (%s)", sym->name, d->display_name, loaded_version,
                          state->path);
  if (sym->until_version > 0 && state->version_code >= sym->until_version) {
    char until[32];
    ncclbind_format_version(sym->lib, sym->until_version, until, sizeof until);
    ncclbind_message_append(&message, "; it was removed in %s %s", d->product_name, until);
    if (sym->since_version > 0) {
      char since[32];
      ncclbind_format_version(sym->lib, sym->since_version, since, sizeof since);
      ncclbind_message_append(&message, " (a release from %s to before %s has it)", since, until);
    }
  } else if (sym->since_version > 0) {
    char since[32];
    ncclbind_format_version(sym->lib, sym->since_version, since, sizeof since);
    ncclbind_message_append(&message, "; it first appears in %s %s", d->product_name, since);
  }
  ncclbind_error_set_message(NCCLBIND_ERROR_SYMBOL_NOT_FOUND, &message);
  return NULL;
}

int ncclbind_resolve_all(ncclbind_symbol *const *syms) {
  if (!syms) return 0;
  int loaded[NCCLBIND_LIB_COUNT] = {0}; /* 0: not tried yet, 1: loaded, -1: failed */
  int resolved = 0;
  for (; *syms; syms++) {
    ncclbind_symbol *sym = *syms;
    if (!valid_symbol(sym)) continue;
    if (!loaded[sym->lib]) loaded[sym->lib] = load_library(sym->lib, 1) == NCCLBIND_OK ? 1 : -1;
    if (loaded[sym->lib] < 0) continue;
    resolved += resolve_into(sym, published_handle(&libraries[sym->lib]));
  }
  return resolved;
}

void ncclbind_register_table(ncclbind_lib lib, ncclbind_symbol *const *syms) {
  if (!valid_lib(lib) || !syms) {
    ncclbind_set_invalid_argument("ncclbind_register_table: %s", syms ? "unknown library" : "NULL table");
    return;
  }
  registered_table *node = malloc(sizeof *node);
  if (!node) {
    ncclbind_set_invalid_argument("ncclbind_register_table: out of memory");
    return;
  }
  library_state *state = &libraries[lib];
  node->syms = syms;
  pthread_mutex_lock(&state->mutex);
  node->next = state->tables;
  state->tables = node;
  void *handle = published_handle(state);
  pthread_mutex_unlock(&state->mutex);
  /* Registered after the load: the load did not see this table. */
  if (handle && resolve_now_requested()) resolve_table_now(lib, handle, syms);
}

void ncclbind_register_dependency(ncclbind_lib lib, ncclbind_lib dependency, int needed_version) {
  if (!valid_lib(lib) || !valid_lib(dependency) || lib == dependency) {
    ncclbind_set_invalid_argument("ncclbind_register_dependency: library %d cannot depend on %d", (int)lib,
                                  (int)dependency);
    return;
  }
  atomic_store_explicit(&dependency_needed[lib], needed_version > 0 ? needed_version : 0, memory_order_release);
  atomic_store_explicit(&dependency_of[lib], (int)dependency + 1, memory_order_release);
}

int ncclbind_kernel_headers(ncclbind_lib lib, const char **message) {
  static const char no_kernels[] = "libnccl compiles no kernels at run time: it has no kernel headers to check";
  if (lib != NCCLBIND_LIB_NCCL_EP) {
    if (!valid_lib(lib)) ncclbind_set_invalid_argument("ncclbind_kernel_headers: unknown library %d", (int)lib);
    if (message) *message = valid_lib(lib) ? no_kernels : ncclbind_last_error();
    return NCCLBIND_KERNEL_HEADERS_UNKNOWN;
  }
  if (load_library(lib, 1) != NCCLBIND_OK) {
    if (message) *message = ncclbind_last_error();
    return NCCLBIND_KERNEL_HEADERS_UNKNOWN;
  }
  const library_state *state = &libraries[lib]; /* final before its handle was published */
  if (message) *message = state->kernel_headers_message.text;
  return state->kernel_headers_status;
}

/* ---- For the other runtime files --------------------------------------- */

const library_descriptor *ncclbind_descriptor(ncclbind_lib lib) {
  return valid_lib(lib) ? &descriptors[lib] : NULL;
}

int ncclbind_loaded_library(ncclbind_lib lib, const char **path, int *version_code) {
  if (!valid_lib(lib) || !published_handle(&libraries[lib])) return 0;
  if (path) *path = libraries[lib].path;
  if (version_code) *version_code = libraries[lib].version_code;
  return 1;
}

void *ncclbind_resolve_if_loaded(ncclbind_symbol *sym) {
  void *fn = atomic_load_explicit(&sym->fn, memory_order_acquire);
  if (fn) return fn;
  void *handle = published_handle(&libraries[sym->lib]);
  if (!handle || !resolve_into(sym, handle)) return NULL;
  return atomic_load_explicit(&sym->fn, memory_order_acquire);
}
