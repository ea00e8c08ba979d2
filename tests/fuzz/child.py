"""Runs one Python fuzz class in this process and prints one line per case, for driver.py:

    child.py CLASS SEED COUNT FIRST

Before case i it prints "start i" (flushed), so a parent that sees the process die or stall
knows which case did it, and starts another child at i + 1. After it, "done i OUTCOME what".
Outcomes (outcomes.py's words): clean, raw, silent, refused. Which ncclbind this process runs
is its PYTHONPATH's; which libnccl, NCCLBIND_NCCL_PATH's (the stand-in).
"""
from __future__ import annotations

import os
import random
import sys
import traceback

import ncclbind
from ncclbind.errors import NcclError, NcclInvalid

import python_cases

PACKAGE = os.path.dirname(os.path.abspath(ncclbind.__file__))


def raised_inside_package(error: BaseException) -> bool:
    """Whether the exception's innermost frame is ncclbind's (not Python's own argument binding)."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and os.path.abspath(frames[-1].filename).startswith(PACKAGE)


def outcome(case: python_cases.Case) -> tuple[str, str]:
    try:
        case.call()
    except AssertionError as e:
        if case.judge is None:
            raise
        return case.judge(e), str(e)[:200]
    except NcclInvalid as e:
        return ("clean", f"NcclInvalid({e.argument})") if case.bad or case.either else ("refused", f"NcclInvalid: {e}")
    except NcclError as e:
        detail = f"{type(e).__name__} from {getattr(e, 'function', '')}: {e}"
        if case.either and type(e).__name__ == "NcclSymbolNotFoundError":
            return "clean", detail  # the loaded library lacks the call: named, and NCCL not called
        return ("silent" if case.bad else "refused"), detail  # NCCL (the stand-in) was reached and said no
    except Exception as e:  # noqa: BLE001 - sorting every other exception is the point
        where = "inside ncclbind" if raised_inside_package(e) else "at the call"
        return "raw", f"{type(e).__name__} {where}: {str(e)[:120]}"
    return ("silent" if case.bad else "clean"), "accepted"


def main() -> None:
    name, seed, count, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    classes = dict(python_cases.CLASSES)
    if os.environ.get("NCCLBIND_FUZZ_SELF_TEST"):
        classes.update(python_cases.SELF_TEST)
    make = classes[name]
    context = python_cases.Python()
    for i in range(first, count):
        context.index = i
        case = make(random.Random(f"{name}:{seed}:{i}"), context)
        print(f"start {i}", flush=True)
        word, detail = outcome(case)
        what = case.what.encode("ascii", "backslashreplace").decode()
        detail = detail.encode("ascii", "backslashreplace").decode().replace("\n", " ")
        print(f"done {i} {word} {what} | {detail}", flush=True)
    context.close()


if __name__ == "__main__":
    main()
