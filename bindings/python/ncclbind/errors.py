"""ncclbind.errors: the generated module ncclbind/_generated/errors.py under its public name."""
import sys

from ._generated import errors as _generated

# One module object under both names, so classes, pickling and private names are shared.
sys.modules[__name__] = _generated
