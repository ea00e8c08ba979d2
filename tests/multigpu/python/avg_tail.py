"""Reproduces an NCCL defect seen on an H200 (docs/nccl-defects.md): on a one-rank communicator an
out-of-place all_reduce with AVG leaves the last (count % 4) float32 of the output unwritten.
Prints one line per case that goes wrong and a verdict; exit 0 either way (it describes the loaded
library, it does not judge ncclbind). Needs one GPU and CuPy:
    NCCLBIND_NCCL_PATH=.../libnccl.so.2 python3 tests/multigpu/python/avg_tail.py
"""
import cupy as cp

import ncclbind as nccl

comm = nccl.Communicator.init(1, 0, nccl.get_unique_id())
print(f"libnccl {nccl.version_code()}")
wrong = 0
for op in ("SUM", "AVG", "MAX"):
    for count in (8196, 8197, 8198, 8199, 100001, (1 << 20) | 3):
        for in_place in (False, True):
            x = (cp.arange(count) % 7 + 1).astype(cp.float32)
            y = x if in_place else cp.full(count, cp.nan, dtype=cp.float32)
            want = x.copy()
            comm.all_reduce(x, y, getattr(nccl, op))
            cp.cuda.runtime.deviceSynchronize()
            bad = cp.flatnonzero(y != want).get()
            if len(bad):
                wrong += 1
                where = "in place" if in_place else "out of place"
                print(f"{op} {count} {where}: {len(bad)} wrong from [{bad[0]}], {y[bad[:1]].get()}")
comm.destroy()
print("the tail defect is present" if wrong else "no case wrong")
