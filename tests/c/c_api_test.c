/* The generated C binding over the runtime, against a real libnccl (no GPU here):
 * version, error strings, unique id, the communicator-init error path, the
 * initializer functions, and version gating of a function the library lacks.
 * EXPECTED_VERSION_CODE is the loaded library's version, HEADER_SET_VERSION_CODES the
 * version codes of every NCCL header set, oldest first (both from BUILD, which reads
 * generator/header_sets.toml); the library comes from NCCLBIND_NCCL_PATH. */
#include <ncclbind/nccl.h>

#include <stdio.h>
#include <string.h>

static int failures;
#define EXPECT(cond, ...)                                  \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
      ++failures;                                          \
    }                                                      \
  } while (0)

static ncclbind_symbol *find_slot(const char *name) {
  for (ncclbind_symbol *const *s = nb_nccl_symbols; *s; ++s)
    if (strcmp((*s)->name, name) == 0) return *s;
  return NULL;
}

static void version_text(int code, char *out, size_t size) {
  int major, minor, patch;
  ncclbind_decode_version(code, &major, &minor, &patch);
  snprintf(out, size, "%d.%d.%d", major, minor, patch);
}

int main(void) {
  int version = 0;
  EXPECT(nb_ncclGetVersion(&version) == nb_ncclSuccess, "ncclGetVersion: %s", ncclbind_last_error());
  EXPECT(version == EXPECTED_VERSION_CODE, "version %d, expected %d", version, EXPECTED_VERSION_CODE);

  const char *text = nb_ncclGetErrorString(nb_ncclInvalidArgument);
  EXPECT(text && strlen(text) > 0, "ncclGetErrorString returned nothing");

  nb_ncclUniqueId id;
  memset(&id, 0, sizeof id);
  EXPECT(nb_ncclGetUniqueId(&id) == nb_ncclSuccess, "ncclGetUniqueId: %s", ncclbind_last_error());
  int nonzero = 0;
  for (size_t i = 0; i < sizeof id.internal; ++i) nonzero |= id.internal[i];
  EXPECT(nonzero, "unique id is all zero");

  /* No GPU: init fails inside NCCL with a real result code and last-error text. */
  nb_ncclComm_t comm = NULL;
  nb_ncclResult_t rc = nb_ncclCommInitRank(&comm, 1, id, 0);
  EXPECT(rc != nb_ncclSuccess && rc < nb_ncclNumResults, "ncclCommInitRank without a GPU gave %d", (int)rc);
  printf("ncclCommInitRank without a GPU: %s (%s); NCCL says: %s\n", ncclbind_result_name(rc),
         ncclbind_result_description(rc), ncclbind_nccl_last_error());

  /* The unsuffixed initializer has the layout and stamp of the newest header set. */
  static const int set_codes[] = {HEADER_SET_VERSION_CODES};
  const size_t set_count = sizeof set_codes / sizeof set_codes[0];
  nb_ncclConfig_t config;
  nb_init_NCCL_CONFIG_INITIALIZER(&config);
  EXPECT(config.size == sizeof config, "config.size %zu", config.size);
  EXPECT(config.magic == 0xcafebeef, "config.magic %x", config.magic);
  EXPECT(config.version == (unsigned)set_codes[set_count - 1] && config.version == NB_NCCL_VERSION_CODE,
         "config.version %u, newest header set %d", config.version, set_codes[set_count - 1]);
  EXPECT(config.blocking == NB_NCCL_CONFIG_UNDEF_INT, "config.blocking %d", config.blocking);

  /* ncclCommGrow is newer than the oldest header set. Its slot's since_version is a header
   * set's version, and the loaded library has the function exactly when it is not older than
   * that: run against every set's library, this pins since_version to the first set that
   * exports it. An older library gets an error naming both versions. */
  ncclbind_symbol *grow = find_slot("ncclCommGrow");
  EXPECT(grow != NULL, "no ncclCommGrow slot");
  int since = grow ? grow->since_version : -1, since_is_a_set = 0;
  for (size_t i = 0; i < set_count; ++i) since_is_a_set |= set_codes[i] == since;
  EXPECT(since_is_a_set && since > set_codes[0], "ncclCommGrow slot since %d", since);
  if (grow && EXPECTED_VERSION_CODE < since) {
    rc = nb_ncclCommGrow(NULL, 2, NULL, -1, NULL, NULL);
    EXPECT((int)rc == NCCLBIND_ERROR_SYMBOL_NOT_FOUND, "ncclCommGrow on an old library gave %d", (int)rc);
    const char *msg = ncclbind_last_error();
    char since_text[32], loaded_text[32];
    version_text(since, since_text, sizeof since_text);
    version_text(EXPECTED_VERSION_CODE, loaded_text, sizeof loaded_text);
    EXPECT(strstr(msg, "ncclCommGrow") && strstr(msg, since_text) && strstr(msg, loaded_text),
           "message does not name the function, %s and %s: %s", since_text, loaded_text, msg);
    printf("ncclCommGrow with %d loaded: %s\n", EXPECTED_VERSION_CODE, msg);
  } else if (grow) {
    EXPECT(ncclbind_resolve(grow) != NULL, "ncclCommGrow (since %d) not resolved in %d: %s", since, version,
           ncclbind_last_error());
  }

  ncclbind_library_info info;
  EXPECT(ncclbind_get_library_info(NCCLBIND_LIB_NCCL, &info) == NCCLBIND_OK, "library info");
  EXPECT(info.loaded && info.version_code == EXPECTED_VERSION_CODE && info.path[0] == '/',
         "library info %d %d %s", info.loaded, info.version_code, info.path);
  printf("loaded libnccl %d.%d.%d (%s) from %s\n", info.major, info.minor, info.patch, info.cuda_variant,
         info.path);
  if (failures) fprintf(stderr, "%d failed\n", failures);
  return failures ? 1 : 0;
}
