#include <stdio.h>
#include <ncclbind/nccl.h>

int main(void) {
  int version;
  nb_ncclResult_t result = nb_ncclGetVersion(&version);
  if (result != nb_ncclSuccess) {
    fprintf(stderr, "ncclGetVersion: %s: %s\n", ncclbind_result_name(result), ncclbind_last_error());
    return 1;
  }
  printf("NCCL %d\n", version);
  return 0;
}
