/* ncclbind._nccl: the extension module. It holds the runtime's Python face
 * (library info and paths, last errors, result names), the CUDA runtime helper,
 * the buffer cache and the methods' fast path
 * (buffer_cache.c, call_engine.c), plus the generated nccl functions
 * and struct mirrors; it also creates ncclbind._nccl_ep from the generated
 * nccl_ep code. Both modules live in this one shared object so that they
 * share one runtime (one loader state, one set of symbol slots). */
#include "call_engine.h"
#include "ncclbind_python.h"

#include <ncclbind/nccl.h>
#include <ncclbind/nccl_ep.h>

PyObject *nbpy_cuda_runtime_available(PyObject *, PyObject *);
PyObject *nbpy_cuda_add_search_dir(PyObject *, PyObject *);
PyObject *nbpy_cuda_get_device(PyObject *, PyObject *);
PyObject *nbpy_cuda_set_device(PyObject *, PyObject *);
PyObject *nbpy_cuda_device_count(PyObject *, PyObject *);
PyObject *nbpy_cuda_pointer_device(PyObject *, PyObject *);
PyObject *nbpy_cuda_stream_synchronize(PyObject *, PyObject *);
PyObject *nbpy_cuda_memcpy(PyObject *, PyObject *const *, Py_ssize_t);
PyObject *nbpy_dlpack_info(PyObject *, PyObject *);
PyObject *nbpy_buffer_cache_setup(PyObject *, PyObject *const *, Py_ssize_t);
PyObject *nbpy_buffer_cache_remember(PyObject *, PyObject *const *, Py_ssize_t);
PyObject *nbpy_buffer_cache_lookup(PyObject *, PyObject *);

static int lib_of(PyObject *arg, ncclbind_lib *lib) {
  long v = PyLong_AsLong(arg);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v < 0 || v >= NCCLBIND_LIB_COUNT) {
    nbpy_raise_invalid("ncclbind", "lib", "lib must be LIB_NCCL or LIB_NCCL_EP, not %ld", v);
    return -1;
  }
  *lib = (ncclbind_lib)v;
  return 0;
}

static const char *lib_function(ncclbind_lib lib) {
  return lib == NCCLBIND_LIB_NCCL_EP ? "ncclEpGetVersion" : "ncclGetVersion";
}

static PyObject *library_info(PyObject *self, PyObject *arg) {
  (void)self;
  ncclbind_lib lib;
  if (lib_of(arg, &lib) < 0) return NULL;
  ncclbind_library_info info;
  int rc = ncclbind_get_library_info(lib, &info);
  if (rc != NCCLBIND_OK) return nbpy_raise_result(rc, lib_function(lib));
  return Py_BuildValue("{s:O,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:s}", "loaded", info.loaded ? Py_True : Py_False,
                       "version_code", info.version_code, "major", info.major, "minor", info.minor, "patch",
                       info.patch, "cuda_major", info.cuda_major, "cuda_minor", info.cuda_minor, "cuda_variant",
                       info.cuda_variant, "path", info.path);
}

static PyObject *kernel_headers(PyObject *self, PyObject *arg) {
  (void)self;
  ncclbind_lib lib;
  if (lib_of(arg, &lib) < 0) return NULL;
  const char *message = NULL;
  int status;
  Py_BEGIN_ALLOW_THREADS
  status = ncclbind_kernel_headers(lib, &message);
  Py_END_ALLOW_THREADS
  return Py_BuildValue("(iN)", status, nbpy_from_string(message));
}

static PyObject *set_library_path(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  ncclbind_lib lib;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "set_library_path(lib, path)");
    return NULL;
  }
  const char *path = NULL;
  if (lib_of(args[0], &lib) < 0) return NULL;
  if (args[1] != Py_None && !(path = PyUnicode_AsUTF8(args[1]))) return NULL;
  int rc = ncclbind_set_library_path(lib, path);
  if (rc != NCCLBIND_OK) return nbpy_raise_result(rc, "ncclbind_set_library_path");
  Py_RETURN_NONE;
}

static PyObject *add_search_dir(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  ncclbind_lib lib;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "add_search_dir(lib, directory)");
    return NULL;
  }
  const char *dir;
  if (lib_of(args[0], &lib) < 0 || !(dir = PyUnicode_AsUTF8(args[1]))) return NULL;
  int rc = ncclbind_add_search_dir(lib, dir);
  if (rc != NCCLBIND_OK) return nbpy_raise_result(rc, "ncclbind_add_search_dir");
  Py_RETURN_NONE;
}

static PyObject *load(PyObject *self, PyObject *arg) {
  (void)self;
  ncclbind_lib lib;
  if (lib_of(arg, &lib) < 0) return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = ncclbind_load(lib);
  Py_END_ALLOW_THREADS
  if (rc != NCCLBIND_OK) return nbpy_raise_result(rc, lib_function(lib));
  Py_RETURN_NONE;
}

static PyObject *resolve_all(PyObject *self, PyObject *arg) {
  (void)self;
  ncclbind_lib lib;
  if (lib_of(arg, &lib) < 0) return NULL;
  int n;
  ncclbind_symbol *const *table = lib == NCCLBIND_LIB_NCCL ? nb_nccl_symbols : nb_nccl_ep_symbols;
  Py_BEGIN_ALLOW_THREADS
  n = ncclbind_resolve_all(table);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(n);
}

static PyObject *last_error(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return nbpy_from_string(ncclbind_last_error());
}

static PyObject *last_error_code(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyLong_FromLong(ncclbind_last_error_code());
}

static PyObject *nccl_last_error(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return nbpy_from_string(ncclbind_nccl_last_error());
}

static PyObject *result_name(PyObject *self, PyObject *arg) {
  (void)self;
  long code = PyLong_AsLong(arg);
  if (code == -1 && PyErr_Occurred()) return NULL;
  return nbpy_from_string(ncclbind_result_name((int)code));
}

static PyObject *result_description(PyObject *self, PyObject *arg) {
  (void)self;
  long code = PyLong_AsLong(arg);
  if (code == -1 && PyErr_Occurred()) return NULL;
  return nbpy_from_string(ncclbind_result_description((int)code));
}

static PyMethodDef runtime_methods[] = {
    {"library_info", library_info, METH_O,
     "library_info(lib, /)\n--\n\nLoad the library if needed and return its version, CUDA build and path\n"
     "as a dict; raises NcclLibraryNotFoundError (listing every path tried) if it cannot load."},
    {"kernel_headers", kernel_headers, METH_O,
     "kernel_headers(lib, /)\n--\n\nLoad the library if needed; (status, message) of ncclbind_kernel_headers: whether\n"
     "NCCL_HOME holds the NCCL headers its run-time kernel compiles need (KERNEL_HEADERS_*)."},
    {"set_library_path", (PyCFunction)(void (*)(void))set_library_path, METH_FASTCALL,
     "set_library_path(lib, path, /)\n--\n\nThe only file to load for lib (None clears it); before the load."},
    {"add_search_dir", (PyCFunction)(void (*)(void))add_search_dir, METH_FASTCALL,
     "add_search_dir(lib, directory, /)\n--\n\nA directory to search for lib, after an explicit path."},
    {"load", load, METH_O, "load(lib, /)\n--\n\nLoad lib now (idempotent)."},
    {"resolve_all", resolve_all, METH_O,
     "resolve_all(lib, /)\n--\n\nResolve every function of lib now; the number resolved."},
    {"last_error", last_error, METH_NOARGS, "The runtime's last error message on this thread."},
    {"last_error_code", last_error_code, METH_NOARGS, "The runtime code of last_error()."},
    {"nccl_last_error", nccl_last_error, METH_NOARGS, "The loaded libnccl's ncclGetLastError(NULL)."},
    {"result_name", result_name, METH_O, "result_name(code, /)\n--\n\nName of a result code."},
    {"result_description", result_description, METH_O,
     "result_description(code, /)\n--\n\nDescription of a result code."},
    {"cuda_runtime_available", nbpy_cuda_runtime_available, METH_NOARGS,
     "Whether libcudart can be loaded."},
    {"cuda_add_search_dir", nbpy_cuda_add_search_dir, METH_O,
     "cuda_add_search_dir(directory, /)\n--\n\nA directory to search for libcudart."},
    {"cuda_get_device", nbpy_cuda_get_device, METH_NOARGS, "cudaGetDevice()."},
    {"cuda_set_device", nbpy_cuda_set_device, METH_O, "cuda_set_device(device, /)\n--\n\ncudaSetDevice."},
    {"cuda_device_count", nbpy_cuda_device_count, METH_NOARGS,
     "cudaGetDeviceCount(), 0 when there is no driver or device."},
    {"cuda_pointer_device", nbpy_cuda_pointer_device, METH_O,
     "cuda_pointer_device(address, /)\n--\n\n(memory type, device) from cudaPointerGetAttributes."},
    {"cuda_stream_synchronize", nbpy_cuda_stream_synchronize, METH_O,
     "cuda_stream_synchronize(stream, /)\n--\n\ncudaStreamSynchronize (GIL released)."},
    {"cuda_memcpy", (PyCFunction)(void (*)(void))nbpy_cuda_memcpy, METH_FASTCALL,
     "cuda_memcpy(dst, src, nbytes, /)\n--\n\ncudaMemcpy with cudaMemcpyDefault (GIL released)."},
    {"dlpack_info", nbpy_dlpack_info, METH_O,
     "dlpack_info(capsule, /)\n--\n\n(address, shape, strides or None, (code, bits, lanes), (device_type,\n"
     "device_id), read_only) of an unconsumed DLPack capsule; the capsule is left as it is."},
    {"_buffer_cache_setup", (PyCFunction)(void (*)(void))nbpy_buffer_cache_setup, METH_FASTCALL,
     "_buffer_cache_setup(numpy_dtypes, cupy_types, buffer_type, /)\n--\n\nncclbind.base.buffer's "
     "containers, handed over once: NumPy dtype numbers -> NcclDataType,\nthe types it reads as CuPy arrays that "
     "cannot be weakly referenced, and NcclBuffer.\nReturns the cache, id(obj) -> entry, as a mapping."},
    {"_buffer_cache_remember", (PyCFunction)(void (*)(void))nbpy_buffer_cache_remember, METH_FASTCALL,
     "_buffer_cache_remember(obj, buffer, probe, /)\n--\n\nCache obj's resolved NcclBuffer (without owner) until obj "
     "goes; probe: valid only while\nobj.data_ptr() and obj.numel() are unchanged. TypeError if obj cannot be weakly "
     "referenced;\nnothing is cached if the buffer's fields are not plain ints."},
    {"_buffer_cache_lookup", nbpy_buffer_cache_lookup, METH_O,
     "_buffer_cache_lookup(obj, /)\n--\n\nobj's cached NcclBuffer (without owner) if still valid, else None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef nccl_module = {
    PyModuleDef_HEAD_INIT, "ncclbind._nccl",
    "NCCL's C API for Python: generated from nccl.h (functions, struct mirrors), over the ncclbind runtime.",
    -1, runtime_methods, NULL, NULL, NULL, NULL,
};

static struct PyModuleDef nccl_ep_module = {
    PyModuleDef_HEAD_INIT, "ncclbind._nccl_ep",
    "NCCL EP's C API for Python: generated from nccl_ep.h, over the ncclbind runtime.",
    -1, NULL, NULL, NULL, NULL, NULL,
};

int nbpy_module_add(PyObject *module, const char *name, PyObject *value) {
  if (!value) return -1;
  if (PyModule_AddObject(module, name, value) < 0) {
    Py_DECREF(value);
    return -1;
  }
  return 0;
}

static int add_int(PyObject *module, const char *name, long value) {
  return PyModule_AddIntConstant(module, name, value);
}

PyMODINIT_FUNC PyInit__nccl(void) {
  if (PyType_Ready(&nbpy_record_base_type) < 0) return NULL;
  PyObject *module = PyModule_Create(&nccl_module);
  if (!module) return NULL;
  Py_INCREF(&nbpy_record_base_type);
  if (PyModule_AddObject(module, "Record", (PyObject *)&nbpy_record_base_type) < 0) {
    Py_DECREF(&nbpy_record_base_type);
    goto fail;
  }
  if (add_int(module, "LIB_NCCL", NCCLBIND_LIB_NCCL) < 0 || add_int(module, "LIB_NCCL_EP", NCCLBIND_LIB_NCCL_EP) < 0 ||
      add_int(module, "ERROR_LIBRARY_NOT_FOUND", NCCLBIND_ERROR_LIBRARY_NOT_FOUND) < 0 ||
      add_int(module, "ERROR_SYMBOL_NOT_FOUND", NCCLBIND_ERROR_SYMBOL_NOT_FOUND) < 0 ||
      add_int(module, "ERROR_INVALID_ARGUMENT", NCCLBIND_ERROR_INVALID_ARGUMENT) < 0 ||
      add_int(module, "ERROR_STATE", NCCLBIND_ERROR_STATE) < 0 ||
      add_int(module, "ERROR_FOREIGN_EXCEPTION", NCCLBIND_ERROR_FOREIGN_EXCEPTION) < 0 ||
      add_int(module, "KERNEL_HEADERS_UNKNOWN", NCCLBIND_KERNEL_HEADERS_UNKNOWN) < 0 ||
      add_int(module, "KERNEL_HEADERS_MATCH", NCCLBIND_KERNEL_HEADERS_MATCH) < 0 ||
      add_int(module, "KERNEL_HEADERS_MISMATCH", NCCLBIND_KERNEL_HEADERS_MISMATCH) < 0 ||
      add_int(module, "KERNEL_HEADERS_UNSET", NCCLBIND_KERNEL_HEADERS_UNSET) < 0 || nbpy_add_nccl(module) < 0 ||
      nbpy_call_engine_ready(module) < 0 || nbpy_ep_steps_ready(module) < 0)
    goto fail;
  PyObject *ep = PyModule_Create(&nccl_ep_module);
  if (!ep) goto fail;
  if (nbpy_add_nccl_ep(ep) < 0 || PyDict_SetItemString(PyImport_GetModuleDict(), "ncclbind._nccl_ep", ep) < 0) {
    Py_DECREF(ep);
    goto fail;
  }
  Py_DECREF(ep);
  return module;
fail:
  Py_DECREF(module);
  return NULL;
}
