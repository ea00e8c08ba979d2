/* Thread-local last error, and names and descriptions of result codes. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ncclbind/runtime.h"
#include "runtime_internal.h"

static _Thread_local char last_error_text[NCCLBIND_ERROR_CAPACITY];
static _Thread_local int last_error_code;

/* Marks a cut-off text so that truncation is never silent. */
static void mark_truncated(char *text, size_t capacity) {
  static const char marker[] = "...";
  memcpy(text + capacity - sizeof marker, marker, sizeof marker);
}

static void format_bounded(char *text, size_t capacity, const char *fmt, va_list args) {
  int written = vsnprintf(text, capacity, fmt, args);
  if (written < 0) {
    snprintf(text, capacity, "(error message could not be formatted: %s)", fmt);
  } else if ((size_t)written >= capacity) {
    mark_truncated(text, capacity);
  }
}

void ncclbind_message_init(ncclbind_message *message) {
  message->text[0] = '\0';
  message->length = 0;
  message->truncated = 0;
}

void ncclbind_message_append(ncclbind_message *message, const char *fmt, ...) {
  if (message->truncated) return;
  size_t room = sizeof message->text - message->length;
  va_list args;
  va_start(args, fmt);
  int written = vsnprintf(message->text + message->length, room, fmt, args);
  va_end(args);
  if (written < 0) return;
  if ((size_t)written >= room) {
    message->truncated = 1;
    message->length = sizeof message->text - 1;
    mark_truncated(message->text, sizeof message->text);
    return;
  }
  message->length += (size_t)written;
}

int ncclbind_error_set_message(int code, const ncclbind_message *message) {
  memcpy(last_error_text, message->text, message->length + 1);
  last_error_code = code;
  return code;
}

int ncclbind_error_set(int code, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  format_bounded(last_error_text, sizeof last_error_text, fmt, args);
  va_end(args);
  last_error_code = code;
  return code;
}

const char *ncclbind_last_error(void) {
  return last_error_text;
}

int ncclbind_last_error_code(void) {
  return last_error_code;
}

void ncclbind_clear_error(void) {
  last_error_text[0] = '\0';
  last_error_code = NCCLBIND_OK;
}

int ncclbind_set_invalid_argument(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  format_bounded(last_error_text, sizeof last_error_text, fmt, args);
  va_end(args);
  last_error_code = NCCLBIND_ERROR_INVALID_ARGUMENT;
  return NCCLBIND_ERROR_INVALID_ARGUMENT;
}

/* ---- Result codes ------------------------------------------------------ */

typedef struct result_text {
  int code;
  const char *name;
  const char *description;
} result_text;

/* nccl_results[]: ncclResult_t's codes and names from the IR, rendered by the generator. */
#include "generated/result_codes.h"

static const result_text runtime_results[] = {
    {NCCLBIND_ERROR_LIBRARY_NOT_FOUND, "NCCLBIND_ERROR_LIBRARY_NOT_FOUND",
     "the NCCL library could not be loaded (ncclbind_last_error() lists the paths tried)"},
    {NCCLBIND_ERROR_SYMBOL_NOT_FOUND, "NCCLBIND_ERROR_SYMBOL_NOT_FOUND",
     "the loaded NCCL library does not export the function (it is older than the binding)"},
    {NCCLBIND_ERROR_INVALID_ARGUMENT, "NCCLBIND_ERROR_INVALID_ARGUMENT",
     "an argument was rejected before NCCL was called"},
    {NCCLBIND_ERROR_STATE, "NCCLBIND_ERROR_STATE",
     "the call is not allowed in the runtime's current state (e.g. the library is already loaded)"},
    {NCCLBIND_ERROR_FOREIGN_EXCEPTION, "NCCLBIND_ERROR_FOREIGN_EXCEPTION",
     "the library threw a C++ exception out of the function (caught; ncclbind_last_error() has its text)"},
};

static const result_text *find_result(int code) {
  for (size_t i = 0; i < sizeof nccl_results / sizeof nccl_results[0]; i++)
    if (nccl_results[i].code == code) return &nccl_results[i];
  for (size_t i = 0; i < sizeof runtime_results / sizeof runtime_results[0]; i++)
    if (runtime_results[i].code == code) return &runtime_results[i];
  return NULL;
}

static int is_runtime_code(int code) {
  return (code & ~0xFFFF) == 0x4E420000;
}

static _Thread_local char unknown_name[48];
static _Thread_local char unknown_description[48];

const char *ncclbind_result_name(int code) {
  const result_text *known = find_result(code);
  if (known) return known->name;
  snprintf(unknown_name, sizeof unknown_name, "unknown result code %d", code);
  return unknown_name;
}

typedef const char *(*get_error_string_fn)(int);
static ncclbind_symbol get_error_string_slot = {NULL, "ncclGetErrorString", NCCLBIND_LIB_NCCL, 0, 0};

const char *ncclbind_result_description(int code) {
  if (!is_runtime_code(code)) {
    get_error_string_fn get_error_string =
        (get_error_string_fn)ncclbind_resolve_if_loaded(&get_error_string_slot);
    const char *text = get_error_string ? get_error_string(code) : NULL;
    /* An older library answers "unknown result code" for codes added after it. */
    if (text && text[0] && strncmp(text, "unknown result code", 19) != 0) return text;
  }
  const result_text *known = find_result(code);
  if (known) return known->description;
  snprintf(unknown_description, sizeof unknown_description, "unknown result code %d", code);
  return unknown_description;
}

typedef const char *(*get_last_error_fn)(void *comm);
static ncclbind_symbol get_last_error_slot = {NULL, "ncclGetLastError", NCCLBIND_LIB_NCCL, 0, 0};

const char *ncclbind_nccl_last_error(void) {
  get_last_error_fn get_last_error =
      (get_last_error_fn)ncclbind_resolve_if_loaded(&get_last_error_slot);
  const char *text = get_last_error ? get_last_error(NULL) : NULL;
  return text ? text : "";
}
