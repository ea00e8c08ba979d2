/* Forced into every C file of the wheel build (setup.py, NCCLBIND_OLD_GLIBC=1; x86_64 only) by
 * tools/build_wheel.sh. glibc 2.34 moved dlopen & co. from libdl into libc under a new default
 * version GLIBC_2.34, so linking on Debian 12 (glibc 2.36) binds them there. libc.so.6 still
 * exports the old versions; bind those instead, the versions libdl.so.2 has had since glibc 2.2.5
 * (dlinfo: 2.3.3), so that the extension loads on glibc 2.17. No system header here: the file
 * is read before each source's own _GNU_SOURCE. stat/fstat (GLIBC_2.33) are wrapped by
 * old_glibc_stat.c. */
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dlclose,dlclose@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
__asm__(".symver dlinfo,dlinfo@GLIBC_2.3.3");
