/* Both generated headers compile as strict C11 without nccl.h or CUDA's headers,
 * and their mirrors have the sizes the IR recorded for the newest header set. */
#include <ncclbind/nccl_ep.h>

#include <stdio.h>

_Static_assert(sizeof(nb_ncclUniqueId) == NB_NCCL_UNIQUE_ID_BYTES, "unique id size");
_Static_assert(sizeof(nb_ncclComm_t) == sizeof(void *), "communicator handle size");

int main(void) {
  nb_ncclEpGroupConfig_t cfg;
  nb_init_NCCL_EP_GROUP_CONFIG_INIT(&cfg);
  printf("nb_ncclEpGroupConfig_t: size %u, magic %#x\n", cfg.size, cfg.magic);
  return cfg.size == sizeof cfg ? 0 : 1;
}
