/* A C++ exception thrown out of NCCL EP's C API reaches no C frame of the program: the generated
 * wrappers call NCCL EP through ncclbind_call_guarded (conventions.toml: throws), which returns
 * NCCLBIND_ERROR_FOREIGN_EXCEPTION and names the function, the exception's type and its text.
 * Over a stand-in libnccl_ep that throws (throwing_nccl_ep.cc) and a libnccl that claims the
 * version NCCL EP needs. Args: the stand-in, that libnccl, NCCL EP's version code (the IR's). */
#define _GNU_SOURCE
#include <stdlib.h>

#include "check.h"
#include "ncclbind/nccl_ep.h"
#include "ncclbind/runtime.h"

static int answer(void *args) { return *(int *)args; }

int main(int argc, char **argv) {
  CHECK(argc == 4, "usage: %s THROWING_NCCL_EP LIBNCCL EP_VERSION_CODE", argv[0]);
  setenv("THROWING_NCCL_EP_VERSION", argv[3], 1);
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL_EP, argv[1]), NCCLBIND_OK);
  CHECK_INT_EQ(ncclbind_set_library_path(NCCLBIND_LIB_NCCL, argv[2]), NCCLBIND_OK);

  /* Nothing thrown: the guard returns what the call returns and sets no error. */
  int value = 7;
  ncclbind_clear_error();
  CHECK_INT_EQ(ncclbind_call_guarded(answer, &value, "answer"), 7);
  CHECK_STR_EQ(ncclbind_last_error(), "");
  int version = -1;
  CHECK_INT_EQ(nb_ncclEpGetVersion(&version), nb_ncclSuccess);
  CHECK_INT_EQ(version, atoi(argv[3]));

  /* A std::exception: its type and what(). */
  CHECK_INT_EQ(nb_ncclEpGroupDestroy((nb_ncclEpGroup_t)0x10), NCCLBIND_ERROR_FOREIGN_EXCEPTION);
  CHECK_INT_EQ(ncclbind_last_error_code(), NCCLBIND_ERROR_FOREIGN_EXCEPTION);
  CHECK_STR_EQ(ncclbind_last_error(),
               "ncclEpGroupDestroy threw a C++ exception (std::runtime_error): stand-in: CUDA error: an illegal "
               "memory access was encountered");
  CHECK_STR_EQ(ncclbind_result_name(NCCLBIND_ERROR_FOREIGN_EXCEPTION), "NCCLBIND_ERROR_FOREIGN_EXCEPTION");
  CHECK_CONTAINS(ncclbind_result_description(NCCLBIND_ERROR_FOREIGN_EXCEPTION), "C++ exception");

  /* Anything else thrown: its type. */
  CHECK_INT_EQ(nb_ncclEpHandleDestroy((nb_ncclEpHandle_t)0x20), NCCLBIND_ERROR_FOREIGN_EXCEPTION);
  CHECK_STR_EQ(ncclbind_last_error(), "ncclEpHandleDestroy threw a C++ exception (int)");

  /* The process goes on, and so does the library. */
  CHECK_INT_EQ(nb_ncclEpGetVersion(&version), nb_ncclSuccess);
  printf("PASS: NCCL EP's C++ exceptions became NCCLBIND_ERROR_FOREIGN_EXCEPTION\n");
  return 0;
}
