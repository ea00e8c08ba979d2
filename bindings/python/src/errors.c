/* Raising ncclbind.errors exceptions from C. The classes live in the
 * generated Python module ncclbind.errors; this file only finds and calls it. */
#include "ncclbind_python.h"

#include <stdarg.h>
#include <stdio.h>

static PyObject *errors_module; /* ncclbind._generated.errors (public: ncclbind.errors), imported at the first error */

static PyObject *errors(void) {
  if (!errors_module) errors_module = PyImport_ImportModule("ncclbind._generated.errors");
  return errors_module;
}

PyObject *nbpy_error_class(const char *name) {
  PyObject *module = errors();
  return module ? PyObject_GetAttrString(module, name) : NULL;
}

static int is_runtime_code(int code) {
  return code == NCCLBIND_ERROR_LIBRARY_NOT_FOUND || code == NCCLBIND_ERROR_SYMBOL_NOT_FOUND ||
         code == NCCLBIND_ERROR_INVALID_ARGUMENT || code == NCCLBIND_ERROR_STATE ||
         code == NCCLBIND_ERROR_FOREIGN_EXCEPTION;
}

PyObject *nbpy_raise_result(int code, const char *function) {
  /* Read the thread's texts before anything else can overwrite them. */
  const char *detail = is_runtime_code(code) ? ncclbind_last_error() : ncclbind_nccl_last_error();
  PyObject *detail_text = PyUnicode_DecodeUTF8(detail, (Py_ssize_t)strlen(detail), "replace");
  PyObject *module = errors();
  if (!module || !detail_text) {
    Py_XDECREF(detail_text);
    return NULL;
  }
  PyObject *exc = PyObject_CallMethod(module, "error_for_result", "isssO", code, function,
                                      ncclbind_result_name(code),
                                      ncclbind_result_description(code), detail_text);
  Py_DECREF(detail_text);
  if (!exc) return NULL;
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return NULL;
}

PyObject *nbpy_raise_invalid(const char *function, const char *argument, const char *fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  PyObject *cls = nbpy_error_class("NcclInvalid");
  if (!cls) return NULL;
  PyObject *exc = PyObject_CallFunction(cls, "sss", text, argument, function);
  Py_DECREF(cls);
  if (!exc) return NULL;
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return NULL;
}
