/* Linked into the wheel build's extension with -Wl,--wrap=stat,--wrap=fstat (setup.py,
 * NCCLBIND_OLD_GLIBC=1; x86_64 only). Before glibc 2.33, stat and fstat were inline wrappers
 * around __xstat/__fxstat, which every glibc since 2.2.5 exports; the real functions (GLIBC_2.33)
 * would raise the wheel's glibc floor from 2.17 to 2.33. */
#include <sys/stat.h>

extern int __xstat(int version, const char *path, struct stat *status);
extern int __fxstat(int version, int fd, struct stat *status);

enum { kStatVersion = 1 }; /* _STAT_VER_LINUX on x86_64: the kernel's struct stat */

int __wrap_stat(const char *path, struct stat *status) { return __xstat(kStatVersion, path, status); }

int __wrap_fstat(int fd, struct stat *status) { return __fxstat(kStatVersion, fd, status); }
