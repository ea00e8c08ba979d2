/* A corpus of bad library paths, each refused with its reason and never a crash or a
 * hang: a truncated copy of libnccl (dlopen would fault mapping it), a FIFO (dlopen
 * would block), a directory, text, an empty file, a script, libm (no ncclGetVersion),
 * copies of libm edited to another machine, class, byte order or type, or with its
 * program headers outside the file, and a library reporting version -7. Then the real
 * library loads. Run under ASan+UBSan by
 * EXTRA_CFLAGS="-fsanitize=address,undefined" TSAN=0 tests/runtime/run_local.sh.
 * Usage: bad_library_path_test LIBNCCL BAD_VERSION_LIBNCCL */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ncclbind/runtime.h"

static char dir[4096];

static char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  CHECK(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  *size = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *data = malloc(*size ? *size : 1);
  CHECK(data && fread(data, 1, *size, f) == *size, "cannot read %s", path);
  fclose(f);
  return data;
}

static const char *write_file(const char *name, const void *data, size_t size) {
  static char path[8][4200];
  static int next;
  char *out = path[next++ % 8];
  snprintf(out, sizeof path[0], "%s/%s", dir, name);
  FILE *f = fopen(out, "wb");
  CHECK(f && fwrite(data, 1, size, f) == size, "cannot write %s", out);
  fclose(f);
  return out;
}

/* Setting the path succeeds only while nothing is loaded: a refused candidate left none. */
static void refused(const char *what, const char *path, const char *reason) {
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, path), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL), NCCLBIND_ERROR_LIBRARY_NOT_FOUND);
  const char *message = ncclbind_last_error();
  CHECK_CONTAINS(message, path);
  CHECK_CONTAINS(message, reason);
  printf("ok %-28s %s\n", what, reason);
}

/* A copy of elf with `size` bytes at `offset` replaced by the little-endian `value`. */
static const char *edited(const char *name, const char *elf, size_t n, size_t offset, size_t size,
                          unsigned long long value) {
  char *copy = malloc(n);
  CHECK(copy, "out of memory");
  memcpy(copy, elf, n);
  for (size_t i = 0; i < size; i++) copy[offset + i] = (char)(value >> (8 * i));
  const char *path = write_file(name, copy, n);
  free(copy);
  return path;
}

int main(int argc, char **argv) {
  CHECK(argc == 3, "usage: %s LIBNCCL BAD_VERSION_LIBNCCL", argv[0]);
  const char *base = getenv("TEST_TMPDIR");
  snprintf(dir, sizeof dir, "%s/bad_library_path.XXXXXX", base && base[0] ? base : "/tmp");
  CHECK(mkdtemp(dir), "mkdtemp failed");

  size_t nccl_size, libm_size;
  char *nccl = read_file(argv[1], &nccl_size);
  CHECK(nccl_size > (1 << 20), "%s is too small to truncate", argv[1]);
  refused("truncated copy of libnccl", write_file("truncated.so", nccl, 1 << 20), "truncated: segment");
  free(nccl);

  char fifo[4200];
  snprintf(fifo, sizeof fifo, "%s/fifo.so", dir);
  CHECK_INT_EQ(mkfifo(fifo, 0600), 0);
  refused("FIFO", fifo, "a FIFO, not a regular file");  /* dlopen would block here forever */
  refused("directory", dir, "a directory, not a regular file");
  const char text[] = "INPUT(libnccl.so.2)\n";
  refused("text file", write_file("text.so", text, sizeof text - 1), "invalid ELF header");
  refused("empty file", write_file("empty.so", "", 0), "invalid ELF header; 0 bytes");
  const char script[] = "#!/bin/sh\nexit 0\n";
  refused("script", write_file("script.so", script, sizeof script - 1), "a script");

  void *libm_handle = dlopen("libm.so.6", RTLD_NOW);
  struct link_map *map = NULL;
  CHECK(libm_handle && dlinfo(libm_handle, RTLD_DI_LINKMAP, &map) == 0, "no libm.so.6");
  char libm_path[4200];
  snprintf(libm_path, sizeof libm_path, "%s", map->l_name);
  refused("libm as libnccl", libm_path, "has no ncclGetVersion: not libnccl");
  char *libm = read_file(libm_path, &libm_size);
  refused("aarch64 copy of libm", edited("aarch64.so", libm, libm_size, 18, 2, 183), "built for aarch64");
  refused("unknown machine", edited("machine.so", libm, libm_size, 18, 2, 0x7777), "ELF machine 30583");
  refused("32-bit class", edited("elf32.so", libm, libm_size, 4, 1, 1), "a 32-bit ELF file");
  refused("big-endian", edited("msb.so", libm, libm_size, 5, 1, 2), "big-endian");
  refused("executable type", edited("exec.so", libm, libm_size, 16, 2, 2), "not a shared library");
  refused("program headers outside", edited("phoff.so", libm, libm_size, 32, 8, 1ull << 40),
          "program headers lie outside");
  refused("segment past the end", write_file("cut.so", libm, libm_size / 2), "truncated: segment");
  free(libm);
  refused("version -7", argv[2], "version -7, not a NCCL version");

  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, argv[1]), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_load(NCCLBIND_LIB_NCCL), NCCLBIND_OK);
  printf("ok the real library loads after them\n");
  return 0;
}
