"""The benchmarks' raw C rows: NCCL's collectives from a C loop (bench_loop.c), a
module built here on first use with the system compiler (into NCCLBIND_BENCH_BUILD,
default ~/.cache/ncclbind-bench), so that the production extension ncclbind._nccl
carries no benchmark code.

    import raw_loop
    raw = raw_loop.raw_all_reduce_loop()  # raw(comm, send, recv, count, datatype, stream, iterations, sync)
    coll = raw_loop.raw_collective_loop()  # coll(name, comm, send, recv, count, datatype, stream, iterations,
                                           #      synchronize 0/1/2, op=0, root=0, send_peer=0, recv_peer=0)
    pair = raw_loop.raw_ep_pair()          # pair(handle, d_in, d_out, layout_info, c_in, c_out, stream, sync)
"""
from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sysconfig
from pathlib import Path

SOURCE = Path(os.path.abspath(__file__)).with_name("bench_loop.c")
ROOT = SOURCE.parents[2]
# raw_ep_pair takes NCCL EP's function types from the generated header (and it the runtime's).
INCLUDES = [ROOT / "bindings" / "c" / "include", ROOT / "runtime" / "include"]
HEADERS = [INCLUDES[0] / "ncclbind" / "nccl_ep.h", INCLUDES[0] / "ncclbind" / "nccl.h",
           INCLUDES[1] / "ncclbind" / "runtime.h"]
MODULE = "ncclbind_bench_loop"


def build(out_dir: Path) -> Path:
    """Compile bench_loop.c into out_dir (again only when it or a header it includes is newer)."""
    target = out_dir / (MODULE + sysconfig.get_config_var("EXT_SUFFIX"))
    newest = max(path.stat().st_mtime for path in [SOURCE, *HEADERS])
    if not target.exists() or target.stat().st_mtime < newest:
        out_dir.mkdir(parents=True, exist_ok=True)
        cc = os.environ.get("CC", "cc")
        # Into a file of this process's, then renamed: ranks that build at once never load a half-written one.
        partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Werror",
                        f"-I{sysconfig.get_paths()['include']}", *(f"-I{path}" for path in INCLUDES),
                        str(SOURCE), "-ldl", "-o", str(partial)], check=True)
        os.replace(partial, target)
    return target


@functools.lru_cache(maxsize=None)
def load():
    out_dir = Path(os.environ.get("NCCLBIND_BENCH_BUILD", Path.home() / ".cache" / "ncclbind-bench"))
    spec = importlib.util.spec_from_file_location(MODULE, build(out_dir))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def raw_all_reduce_loop():
    """raw_all_reduce bound to the libnccl that ncclbind has loaded (call it after ncclbind has)."""
    import ncclbind
    return functools.partial(load().raw_all_reduce, str(ncclbind.library_info("nccl").path))


def raw_collective_loop():
    """raw_collective bound to the libnccl that ncclbind has loaded (call it after ncclbind has)."""
    import ncclbind
    return functools.partial(load().raw_collective, str(ncclbind.library_info("nccl").path))


def raw_ep_pair():
    """raw_ep_pair bound to the libnccl_ep that ncclbind has loaded (call it after ncclbind has):
    pair(handle, dispatch_inputs, dispatch_outputs, layout_info, combine_inputs, combine_outputs,
    stream, synchronize) -> (dispatch seconds, combine seconds), the addresses as ints (0: none)."""
    import ncclbind
    return functools.partial(load().raw_ep_pair, str(ncclbind.library_info("nccl_ep").path))


def stream_synchronize():
    """cuStreamSynchronize(stream) from the same module: the raw loop's way to synchronize."""
    return load().stream_synchronize
