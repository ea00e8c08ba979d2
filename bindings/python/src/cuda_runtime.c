/* The few CUDA runtime calls the Python layer needs when cuda-bindings is not
 * installed (current device, pointer attributes, stream sync), through a
 * lazily dlopen'ed libcudart: the copy already in the process (torch's,
 * CuPy's) first, then directories the Python layer adds (pip wheels),
 * then $CUDA_HOME, then the dynamic loader's search. Called with the GIL
 * held, which serializes the one-time load. */
#define _GNU_SOURCE
#include "ncclbind_python.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const sonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                                      "libcudart.so", NULL};

typedef struct cuda_pointer_attributes { /* struct cudaPointerAttributes, CUDA >= 11 */
  int type;
  int device;
  void *device_pointer;
  void *host_pointer;
  long reserved[8]; /* room should a later CUDA grow it */
} cuda_pointer_attributes;

static struct {
  void *handle;
  char **dirs;
  int dir_count;
  int (*get_device)(int *);
  int (*set_device)(int);
  int (*get_device_count)(int *);
  int (*pointer_get_attributes)(cuda_pointer_attributes *, const void *);
  int (*stream_synchronize)(void *);
  int (*memcpy)(void *, const void *, size_t, int);
  const char *(*get_error_name)(int);
  const char *(*get_error_string)(int);
} cudart;

static void *open_first(char *tried, size_t size) {
  size_t used = 0;
  for (int i = 0; sonames[i]; ++i) {
    void *h = dlopen(sonames[i], RTLD_NOW | RTLD_NOLOAD);
    if (h) return h;
  }
  char path[4096];
  const char *cuda_home = getenv("CUDA_HOME");
  const char *fallback[] = {cuda_home ? cuda_home : "/usr/local/cuda", NULL};
  for (int d = 0; d < cudart.dir_count + 1; ++d) {
    const char *dir = d < cudart.dir_count ? cudart.dirs[d] : NULL;
    for (int sub = 0; sub < (dir ? 1 : 2); ++sub) {
      for (int i = 0; sonames[i]; ++i) {
        if (dir)
          snprintf(path, sizeof path, "%s/%s", dir, sonames[i]);
        else
          snprintf(path, sizeof path, "%s/%s/%s", fallback[0], sub ? "lib" : "lib64", sonames[i]);
        void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        if (h) return h;
        const char *why = dlerror();
        if (used < size) used += (size_t)snprintf(tried + used, size - used, "\n  %s: %s", path, why ? why : "?");
      }
    }
  }
  for (int i = 0; sonames[i]; ++i) {
    void *h = dlopen(sonames[i], RTLD_NOW | RTLD_GLOBAL);
    if (h) return h;
  }
  if (used < size) snprintf(tried + used, size - used, "\n  (and the sonames through the dynamic loader)");
  return NULL;
}

/* 0, or -1 with an exception set. */
static int load(void) {
  if (cudart.handle) return 0;
  char tried[4096] = "";
  void *h = open_first(tried, sizeof tried);
  if (!h) {
    PyObject *cls = nbpy_error_class("NcclLibraryNotFoundError");
    if (cls) {
      PyErr_Format(cls, "the CUDA runtime (libcudart) could not be loaded; tried:%s", tried);
      Py_DECREF(cls);
    }
    return -1;
  }
#define RESOLVE(field, name) *(void **)&cudart.field = dlsym(h, name)
  RESOLVE(get_device, "cudaGetDevice");
  RESOLVE(set_device, "cudaSetDevice");
  RESOLVE(get_device_count, "cudaGetDeviceCount");
  RESOLVE(pointer_get_attributes, "cudaPointerGetAttributes");
  RESOLVE(stream_synchronize, "cudaStreamSynchronize");
  RESOLVE(memcpy, "cudaMemcpy");
  RESOLVE(get_error_name, "cudaGetErrorName");
  RESOLVE(get_error_string, "cudaGetErrorString");
#undef RESOLVE
  if (!cudart.get_device || !cudart.set_device || !cudart.get_device_count ||
      !cudart.pointer_get_attributes || !cudart.stream_synchronize || !cudart.memcpy) {
    PyErr_SetString(PyExc_RuntimeError, "libcudart lacks a function ncclbind needs");
    return -1;
  }
  cudart.handle = h;
  return 0;
}

static PyObject *raise_cuda(int err, const char *function) {
  const char *name = cudart.get_error_name ? cudart.get_error_name(err) : "cudaError";
  const char *text = cudart.get_error_string ? cudart.get_error_string(err) : "";
  PyObject *cls = nbpy_error_class("NcclError");
  if (!cls) return NULL;
  PyObject *exc = PyObject_CallFunction(cls, "s", "");
  Py_DECREF(cls);
  if (!exc) return NULL;
  PyObject *message = PyUnicode_FromFormat("%s failed: %s (%s)", function, name, text);
  if (message) {
    PyObject *args = PyTuple_Pack(1, message);
    if (args) PyObject_SetAttrString(exc, "args", args);
    Py_XDECREF(args);
    Py_DECREF(message);
  }
  PyObject *code = PyLong_FromLong(err);
  if (code) PyObject_SetAttrString(exc, "code", code);
  Py_XDECREF(code);
  PyObject *n = PyUnicode_FromString(name);
  if (n) PyObject_SetAttrString(exc, "name", n);
  Py_XDECREF(n);
  PyObject *f = PyUnicode_FromString(function);
  if (f) PyObject_SetAttrString(exc, "function", f);
  Py_XDECREF(f);
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return NULL;
}

PyObject *nbpy_cuda_runtime_available(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  if (load() < 0) {
    PyErr_Clear();
    Py_RETURN_FALSE;
  }
  Py_RETURN_TRUE;
}

PyObject *nbpy_cuda_add_search_dir(PyObject *self, PyObject *arg) {
  (void)self;
  const char *dir = PyUnicode_AsUTF8(arg);
  if (!dir) return NULL;
  char **dirs = PyMem_Realloc(cudart.dirs, sizeof *dirs * (size_t)(cudart.dir_count + 1));
  if (!dirs) return PyErr_NoMemory();
  cudart.dirs = dirs;
  size_t n = strlen(dir) + 1;
  if (!(dirs[cudart.dir_count] = PyMem_Malloc(n))) return PyErr_NoMemory();
  memcpy(dirs[cudart.dir_count++], dir, n);
  Py_RETURN_NONE;
}

PyObject *nbpy_cuda_get_device(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int device = -1, err;
  if (load() < 0) return NULL;
  if ((err = cudart.get_device(&device)) != 0) return raise_cuda(err, "cudaGetDevice");
  return PyLong_FromLong(device);
}

PyObject *nbpy_cuda_set_device(PyObject *self, PyObject *arg) {
  (void)self;
  long device = PyLong_AsLong(arg);
  if (device == -1 && PyErr_Occurred()) return NULL;
  if (load() < 0) return NULL;
  int err = cudart.set_device((int)device);
  if (err != 0) return raise_cuda(err, "cudaSetDevice");
  Py_RETURN_NONE;
}

PyObject *nbpy_cuda_device_count(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int count = 0;
  if (load() < 0) return NULL;
  if (cudart.get_device_count(&count) != 0) count = 0; /* no driver or no device: none */
  return PyLong_FromLong(count);
}

PyObject *nbpy_cuda_pointer_device(PyObject *self, PyObject *arg) {
  (void)self;
  void *p;
  if (nbpy_arg_pointer(arg, "cudaPointerGetAttributes", "address", &p) < 0 || load() < 0) return NULL;
  cuda_pointer_attributes attributes;
  memset(&attributes, 0, sizeof attributes);
  int err = cudart.pointer_get_attributes(&attributes, p);
  if (err != 0) return raise_cuda(err, "cudaPointerGetAttributes");
  return Py_BuildValue("(ii)", attributes.type, attributes.device);
}

int nbpy_cuda_load(void) { return load(); }

int nbpy_cuda_stream_synchronize_loaded(void *stream) { return cudart.stream_synchronize(stream); }

PyObject *nbpy_cuda_stream_synchronize(PyObject *self, PyObject *arg) {
  (void)self;
  void *stream;
  if (nbpy_arg_pointer(arg, "cudaStreamSynchronize", "stream", &stream) < 0 || load() < 0) return NULL;
  int err;
  Py_BEGIN_ALLOW_THREADS
  err = cudart.stream_synchronize(stream);
  Py_END_ALLOW_THREADS
  if (err != 0) return raise_cuda(err, "cudaStreamSynchronize");
  Py_RETURN_NONE;
}

PyObject *nbpy_cuda_memcpy(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  void *dst, *src;
  unsigned long long n;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "cuda_memcpy(dst, src, nbytes)");
    return NULL;
  }
  if (nbpy_arg_pointer(args[0], "cudaMemcpy", "dst", &dst) < 0 ||
      nbpy_arg_pointer(args[1], "cudaMemcpy", "src", &src) < 0 ||
      nbpy_arg_unsigned(args[2], "cudaMemcpy", "nbytes", SIZE_MAX, &n) < 0 || load() < 0)
    return NULL;
  int err;
  Py_BEGIN_ALLOW_THREADS
  err = cudart.memcpy(dst, src, (size_t)n, 4 /* cudaMemcpyDefault */);
  Py_END_ALLOW_THREADS
  if (err != 0) return raise_cuda(err, "cudaMemcpy");
  Py_RETURN_NONE;
}
