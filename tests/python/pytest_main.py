"""Runs one test file under pytest: the main of the py_test targets in BUILD."""
import os
import sys

import pytest

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    args = [os.path.join(here, os.path.basename(a)) if a.endswith(".py") else a for a in sys.argv[1:]]
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-rs"] + args))
