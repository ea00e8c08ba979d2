// ncclbind_call_guarded (runtime.h): the runtime's one C++ file. A library written in C++ (NCCL
// EP) can throw out of its C API; caught here, the exception becomes the runtime's error code and
// the thread's last error, instead of unwinding into C, Python or Rust frames that cannot take it.
#include <cxxabi.h>

#include <cstdlib>
#include <exception>
#include <typeinfo>

#include "runtime_internal.h"

namespace {

// The exception's C++ type, demangled where the ABI can ("std::runtime_error").
struct TypeName {
  char *demangled = nullptr;
  const char *text = "an exception of unknown type";
  explicit TypeName(const std::type_info *type) {
    if (!type) return;
    int status = 0;
    demangled = abi::__cxa_demangle(type->name(), nullptr, nullptr, &status);
    text = status == 0 && demangled ? demangled : type->name();
  }
  ~TypeName() { std::free(demangled); }
  TypeName(const TypeName &) = delete;
  TypeName &operator=(const TypeName &) = delete;
};

}  // namespace

extern "C" int ncclbind_call_guarded(int (*call)(void *args), void *args, const char *function) {
  try {
    return call(args);
  } catch (const std::exception &e) {
    TypeName type(&typeid(e));
    return ncclbind_error_set(NCCLBIND_ERROR_FOREIGN_EXCEPTION, "%s threw a C++ exception (%s): %s", function,
                              type.text, e.what());
  } catch (...) {
    TypeName type(abi::__cxa_current_exception_type());
    return ncclbind_error_set(NCCLBIND_ERROR_FOREIGN_EXCEPTION, "%s threw a C++ exception (%s)", function,
                              type.text);
  }
}
