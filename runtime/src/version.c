/* Version codes, library information, and the CUDA version a library was built for. */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ncclbind/runtime.h"
#include "runtime_internal.h"

void ncclbind_decode_version(int code, int *major, int *minor, int *patch) {
  int x = 0, y = 0, z = 0;
  if (code > 0 && code < 10000) { /* NCCL_VERSION for 2.8 and older: X*1000+Y*100+Z */
    x = code / 1000;
    y = code % 1000 / 100;
    z = code % 100;
  } else if (code >= 10000) {
    x = code / 10000;
    y = code % 10000 / 100;
    z = code % 100;
  }
  if (major) *major = x;
  if (minor) *minor = y;
  if (patch) *patch = z;
}

void ncclbind_decode_library_version(ncclbind_lib lib, int code, int *major, int *minor,
                                     int *patch) {
  if (lib != NCCLBIND_LIB_NCCL_EP) {
    ncclbind_decode_version(code, major, minor, patch);
    return;
  }
  int positive = code > 0 ? code : 0;
  if (major) *major = positive / 10000;
  if (minor) *minor = positive % 10000 / 100;
  if (patch) *patch = positive % 100;
}

void ncclbind_format_version(ncclbind_lib lib, int code, char *out, size_t size) {
  if (code <= 0) {
    snprintf(out, size, "of unknown version");
    return;
  }
  int major, minor, patch;
  ncclbind_decode_library_version(lib, code, &major, &minor, &patch);
  snprintf(out, size, "%d.%d.%d", major, minor, patch);
}

/* ---- CUDA build variant -------------------------------------------------- */

typedef struct cuda_build {
  int major, minor;
  char version[24]; /* the library's own "x.y.z" from the same banner */
} cuda_build;

static int is_version_char(char c) {
  return (c >= '0' && c <= '9') || c == '.';
}

static int parse_number(const char **cursor, const char *end, int *value) {
  const char *p = *cursor;
  long n = 0;
  while (p < end && *p >= '0' && *p <= '9' && n < 100000) n = n * 10 + (*p++ - '0');
  if (p == *cursor) return 0;
  *value = (int)n;
  *cursor = p;
  return 1;
}

/* "<major>.<minor>" at cursor. */
static int parse_cuda_version(const char *cursor, const char *end, cuda_build *out) {
  int major, minor;
  if (!parse_number(&cursor, end, &major) || cursor >= end || *cursor != '.') return 0;
  cursor++;
  if (!parse_number(&cursor, end, &minor)) return 0;
  out->major = major;
  out->minor = minor;
  return 1;
}

/* Looks for "version <x.y.z>+cuda<major>.<minor>", the banner NCCL and NCCL EP embed. */
static int scan_for_cuda_build(const char *data, size_t size, cuda_build *out) {
  static const char marker[] = "+cuda";
  static const char prefix[] = "version ";
  const size_t marker_length = sizeof marker - 1, prefix_length = sizeof prefix - 1;
  const char *end = data + size;
  for (const char *hit = data; (hit = memmem(hit, (size_t)(end - hit), marker, marker_length));
       hit += marker_length) {
    const char *version_start = hit;
    while (version_start > data && is_version_char(version_start[-1])) version_start--;
    int has_version = version_start < hit && (size_t)(version_start - data) >= prefix_length &&
                      memcmp(version_start - prefix_length, prefix, prefix_length) == 0;
    if (has_version && parse_cuda_version(hit + marker_length, end, out)) {
      size_t length = (size_t)(hit - version_start);
      if (length >= sizeof out->version) length = sizeof out->version - 1;
      memcpy(out->version, version_start, length);
      out->version[length] = '\0';
      return 1;
    }
  }
  return 0;
}

static int within(size_t offset, size_t length, size_t file_size) {
  return offset <= file_size && length <= file_size - offset;
}

/* Scans .rodata; without section headers, every read-only, non-executable segment. */
static int scan_elf(const unsigned char *file, size_t size, cuda_build *out) {
  if (size < sizeof(Elf64_Ehdr) || memcmp(file, ELFMAG, SELFMAG) != 0 ||
      file[EI_CLASS] != ELFCLASS64)
    return 0;
  const Elf64_Ehdr *header = (const Elf64_Ehdr *)file;
  if (header->e_shoff && header->e_shentsize == sizeof(Elf64_Shdr) &&
      within(header->e_shoff, (size_t)header->e_shnum * sizeof(Elf64_Shdr), size) &&
      header->e_shstrndx < header->e_shnum) {
    const Elf64_Shdr *sections = (const Elf64_Shdr *)(file + header->e_shoff);
    const Elf64_Shdr *names = &sections[header->e_shstrndx];
    for (size_t i = 0; i < header->e_shnum; i++) {
      const Elf64_Shdr *section = &sections[i];
      if (section->sh_type != SHT_PROGBITS || section->sh_name >= names->sh_size ||
          !within(names->sh_offset + section->sh_name, sizeof ".rodata", size) ||
          memcmp(file + names->sh_offset + section->sh_name, ".rodata", sizeof ".rodata") != 0 ||
          !within(section->sh_offset, section->sh_size, size))
        continue;
      if (scan_for_cuda_build((const char *)file + section->sh_offset, section->sh_size, out))
        return 1;
    }
  }
  if (header->e_phoff && header->e_phentsize == sizeof(Elf64_Phdr) &&
      within(header->e_phoff, (size_t)header->e_phnum * sizeof(Elf64_Phdr), size)) {
    const Elf64_Phdr *segments = (const Elf64_Phdr *)(file + header->e_phoff);
    for (size_t i = 0; i < header->e_phnum; i++) {
      const Elf64_Phdr *segment = &segments[i];
      if (segment->p_type != PT_LOAD || (segment->p_flags & (PF_X | PF_W)) ||
          !within(segment->p_offset, segment->p_filesz, size))
        continue;
      if (scan_for_cuda_build((const char *)file + segment->p_offset, segment->p_filesz, out))
        return 1;
    }
  }
  return 0;
}

static int read_cuda_build(const char *path, cuda_build *out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat status;
  int found = 0;
  if (fstat(fd, &status) == 0 && status.st_size > 0) {
    void *file = mmap(NULL, (size_t)status.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (file != MAP_FAILED) {
      found = scan_elf(file, (size_t)status.st_size, out);
      munmap(file, (size_t)status.st_size);
    }
  }
  close(fd);
  return found;
}

/* The scan touches the file once per library; the result is kept. */
static pthread_mutex_t cuda_build_mutex = PTHREAD_MUTEX_INITIALIZER;
static int cuda_build_scanned[NCCLBIND_LIB_COUNT];
static cuda_build cuda_builds[NCCLBIND_LIB_COUNT];

static cuda_build library_cuda_build(ncclbind_lib lib, const char *path) {
  pthread_mutex_lock(&cuda_build_mutex);
  if (!cuda_build_scanned[lib]) {
    cuda_build found = {0, 0, ""};
    if (read_cuda_build(path, &found)) cuda_builds[lib] = found;
    cuda_build_scanned[lib] = 1;
  }
  cuda_build result = cuda_builds[lib];
  pthread_mutex_unlock(&cuda_build_mutex);
  return result;
}

int ncclbind_get_library_info(ncclbind_lib lib, ncclbind_library_info *out) {
  if (!out) return ncclbind_set_invalid_argument("ncclbind_get_library_info: NULL output");
  memset(out, 0, sizeof *out);
  int status = ncclbind_load(lib);
  if (status != NCCLBIND_OK) return status;
  const char *path = NULL;
  int version_code = 0;
  if (!ncclbind_loaded_library(lib, &path, &version_code))
    return ncclbind_error_set(NCCLBIND_ERROR_STATE,
                              "ncclbind_get_library_info: library not loaded");
  out->loaded = 1;
  out->version_code = version_code;
  ncclbind_decode_library_version(lib, version_code, &out->major, &out->minor, &out->patch);
  snprintf(out->path, sizeof out->path, "%s", path);
  cuda_build build = library_cuda_build(lib, path);
  out->cuda_major = build.major;
  out->cuda_minor = build.minor;
  if (build.major > 0) snprintf(out->cuda_variant, sizeof out->cuda_variant, "cu%d", build.major);
  return NCCLBIND_OK;
}

int ncclbind_library_cuda_major(ncclbind_lib lib, const char *path) {
  return path ? library_cuda_build(lib, path).major : 0;
}

int ncclbind_read_file_version(const char *path, char *out, size_t size) {
  cuda_build found = {0, 0, ""};
  if (!path || !read_cuda_build(path, &found) || !found.version[0]) return 0;
  snprintf(out, size, "%s", found.version);
  return 1;
}
