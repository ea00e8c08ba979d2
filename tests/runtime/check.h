/* Assertions for the runtime tests: a failed check prints where and why, then
 * exits 1. Inputs (library paths, expected versions) come from argv, else from
 * the environment variable named for that position. */
#ifndef NCCLBIND_TESTS_RUNTIME_CHECK_H_
#define NCCLBIND_TESTS_RUNTIME_CHECK_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(condition, ...)                                                         \
  do {                                                                                \
    if (!(condition)) {                                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n  ", __FILE__, __LINE__, #condition); \
      fprintf(stderr, __VA_ARGS__);                                                   \
      fprintf(stderr, "\n");                                                          \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

#define CHECK_INT_EQ(actual, expected)                                                             \
  do {                                                                                             \
    long long check_actual_ = (long long)(actual), check_expected_ = (long long)(expected);        \
    CHECK(check_actual_ == check_expected_, "%s = %lld (0x%llx), expected %lld (0x%llx)", #actual, \
          check_actual_, check_actual_, check_expected_, check_expected_);                         \
  } while (0)

#define CHECK_STR_EQ(actual, expected)                                                       \
  do {                                                                                       \
    const char *check_actual_ = (actual), *check_expected_ = (expected);                     \
    CHECK(check_actual_ &&strcmp(check_actual_, check_expected_) == 0,                       \
          "%s = \"%s\", expected \"%s\"", #actual, check_actual_ ? check_actual_ : "(null)", \
          check_expected_);                                                                  \
  } while (0)

#define CHECK_CONTAINS(text, needle)                                      \
  do {                                                                    \
    const char *check_text_ = (text), *check_needle_ = (needle);          \
    CHECK(check_text_ &&strstr(check_text_, check_needle_),               \
          "%s does not contain \"%s\"; it is:\n%s", #text, check_needle_, \
          check_text_ ? check_text_ : "(null)");                          \
  } while (0)

#define CHECK_NOT_CONTAINS(text, needle)                                                        \
  do {                                                                                          \
    const char *check_text_ = (text), *check_needle_ = (needle);                                \
    CHECK(check_text_ && !strstr(check_text_, check_needle_), "%s contains \"%s\"; it is:\n%s", \
          #text, check_needle_, check_text_ ? check_text_ : "(null)");                          \
  } while (0)

/* argv[index], else $env_name; exits 2 with a usage line when neither is set. */
static inline const char *test_input(int argc, char **argv, int index, const char *env_name) {
  if (index < argc && argv[index][0]) return argv[index];
  const char *value = getenv(env_name);
  if (value && value[0]) return value;
  fprintf(stderr, "%s: missing input %d (argument %d or $%s)\n", argv[0], index, index, env_name);
  exit(2);
}

#endif /* NCCLBIND_TESTS_RUNTIME_CHECK_H_ */
