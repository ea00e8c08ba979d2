"""CuTe kernels that open GIN or multimem on a device communicator without them are refused while
they are traced, before any launch (ncclbind.device.cute's DevComm._require, the CuTe counterpart
of Numba's gin_context): an ncclGin (DevComm.gin), a GIN barrier session over every context, and
an LSA barrier session with multimem=True. Prints one line per kernel, "<name> REFUSED <error
chain>" or "<name> COMPILED", and exits 0; the caller judges the lines.

    python3 tests/multigpu/device/cute_refusals.py   # the CuTe DSL on PYTHONPATH; any libnccl whose
                                                      # DevComm has neither (the CPU test's stand-in, an H200)
"""
import cutlass.cute as cute

import ncclbind
import ncclbind.device.cute as nc


@cute.kernel
def gin_kernel(d: nc.DevComm):
    d.gin(nc.GinBackendMask.ALL, 0)


@cute.jit
def gin_program(d: nc.DevComm):
    gin_kernel(d).launch(grid=[1, 1, 1], block=[32, 1, 1])


@cute.kernel
def all_contexts_kernel(d: nc.DevComm):
    nc.gin_session(nc.cta(), nc.GIN_ALL_CONTEXTS, d, d.team_rail, d.rail_gin_barrier, 0)


@cute.jit
def all_contexts_program(d: nc.DevComm):
    all_contexts_kernel(d).launch(grid=[1, 1, 1], block=[32, 1, 1])


@cute.kernel
def multimem_kernel(d: nc.DevComm):
    nc.lsa_session(nc.cta(), d, d.team_lsa, d.lsa_barrier, 0, multimem=True, mm_handle=d.lsa_multimem)


@cute.jit
def multimem_program(d: nc.DevComm):
    multimem_kernel(d).launch(grid=[1, 1, 1], block=[32, 1, 1])


PROGRAMS = {"gin": gin_program, "gin_session over every context": all_contexts_program,
            "lsa_session with multimem": multimem_program}


def main() -> int:
    comm = ncclbind.Communicator.init(1, 0, ncclbind.UniqueId.generate())
    dev = comm.create_dev_comm()
    for name, program in PROGRAMS.items():
        try:
            cute.compile(program, nc.DevComm(dev), options="--gpu-arch sm_90a")
            print(name, "COMPILED", flush=True)
        except Exception as e:  # noqa: BLE001 - the whole chain is the line the caller judges
            chain, seen = [], e
            while seen is not None:
                chain.append(f"{type(seen).__name__}: {seen}")
                seen = seen.__cause__ or seen.__context__
            print(name, "REFUSED", " <- ".join(chain).replace("\n", " ")[:800], flush=True)
    dev.close()
    comm.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
