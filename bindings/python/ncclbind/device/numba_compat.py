"""The Numba-CUDA names ncclbind.device uses, from wherever the installed numba-cuda keeps them:
numba-cuda 0.2x and later have their own type system under numba.cuda; older ones share
numba.core's. Importing this module imports numba (it is needed only for Numba kernels)."""
from __future__ import annotations

import numpy

if not hasattr(numpy, "row_stack"):
    # numba-cuda 0.30 registers an overload of np.row_stack at import, which NumPy 2.4 removed (the
    # GPU machine pairs numba-cuda 0.30.4 with NumPy 2.5): without the alias numba.cuda cannot import.
    numpy.row_stack = numpy.vstack  # type: ignore[attr-defined]

from numba import cuda  # noqa: F401,E402  (the CUDA target must be registered before the extensions)
from llvmlite import ir  # noqa: F401

try:
    from numba.cuda import cgutils, types
    from numba.cuda.extending import core_models as models
    from numba.cuda.extending import (intrinsic, overload, overload_attribute, overload_method,
                                      register_jitable, register_model)
    from numba.cuda.np.numpy_support import from_dtype
except ImportError:  # numba-cuda before its own type system
    from numba.core import cgutils, types  # type: ignore[no-redef]
    from numba.core.extending import (intrinsic, models, overload, overload_attribute,  # type: ignore[no-redef]
                                      overload_method, register_jitable, register_model)
    from numba.np.numpy_support import from_dtype  # type: ignore[no-redef]

try:
    from numba.cuda.codegen import ExternalCodeLibrary
    from numba.cuda.cudadrv.linkable_code import LTOIR, Cubin
except ImportError as error:  # pragma: no cover - very old numba-cuda
    raise ImportError("ncclbind.device needs numba-cuda with linkable code objects (numba.cuda.Cubin, "
                      "numba-cuda 0.10 or newer; tools/setup.sh pins 0.30.4)") from error

__all__ = ["cuda", "ir", "cgutils", "types", "intrinsic", "models", "overload", "overload_attribute",
           "overload_method", "register_jitable", "register_model", "from_dtype", "ExternalCodeLibrary",
           "Cubin", "LTOIR"]
