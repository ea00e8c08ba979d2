"""One process driving every visible GPU: Communicator.init_all() and group()."""
import cupy as cp

import ncclbind as nccl  # an nccl4py program: import nccl.core as nccl

comms = nccl.Communicator.init_all()
ndev = len(comms)
assert ndev == cp.cuda.runtime.getDeviceCount() and [c.rank for c in comms] == list(range(ndev))

n = 4096
buffers = []
for c in comms:
    with cp.cuda.Device(c.device.device_id):
        buffers.append(cp.full(n, c.rank + 1, dtype=cp.float32))

with nccl.group():  # one thread issues every rank's call: they must be one group
    for c, x in zip(comms, buffers):
        with cp.cuda.Device(c.device.device_id):
            c.allreduce(x, x, nccl.SUM)

wanted = ndev * (ndev + 1) / 2
for c, x in zip(comms, buffers):
    with cp.cuda.Device(c.device.device_id):
        cp.cuda.Device().synchronize()
        assert bool(cp.all(x == wanted)), (c.rank, x[:4].get(), wanted)

gathered = []
with nccl.group():
    for c, x in zip(comms, buffers):
        with cp.cuda.Device(c.device.device_id):
            out = cp.zeros(n * ndev, dtype=cp.float32)
            gathered.append(out)
            c.allgather(x, out)
for c, out in zip(comms, gathered):
    with cp.cuda.Device(c.device.device_id):
        cp.cuda.Device().synchronize()
        assert bool(cp.all(out == wanted)), (c.rank, out[:4].get())

for c in comms:
    c.destroy()
print(f"OK init_all_group on {ndev} devices", flush=True)
