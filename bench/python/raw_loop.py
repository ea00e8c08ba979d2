"""The benchmarks' raw C rows: NCCL's collectives from a C loop (bench_loop.c), a
module built here on first use with the system compiler (into NCCLBIND_BENCH_BUILD,
default ~/.cache/ncclbind-bench), so that the production extension ncclbind._nccl
carries no benchmark code.

    import raw_loop
    raw = raw_loop.raw_all_reduce_loop()  # raw(comm, send, recv, count, datatype, stream, iterations, sync)
    coll = raw_loop.raw_collective_loop()  # coll(name, comm, send, recv, count, datatype, stream, iterations,
                                           #      synchronize 0/1/2, op=0, root=0, send_peer=0, recv_peer=0)
"""
from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sysconfig
from pathlib import Path

SOURCE = Path(os.path.abspath(__file__)).with_name("bench_loop.c")
MODULE = "ncclbind_bench_loop"


def build(out_dir: Path) -> Path:
    """Compile bench_loop.c into out_dir (again only when the source is newer)."""
    target = out_dir / (MODULE + sysconfig.get_config_var("EXT_SUFFIX"))
    if not target.exists() or target.stat().st_mtime < SOURCE.stat().st_mtime:
        out_dir.mkdir(parents=True, exist_ok=True)
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Werror",
                        f"-I{sysconfig.get_paths()['include']}", str(SOURCE), "-ldl", "-o", str(target)],
                       check=True)
    return target


def load():
    out_dir = Path(os.environ.get("NCCLBIND_BENCH_BUILD", Path.home() / ".cache" / "ncclbind-bench"))
    spec = importlib.util.spec_from_file_location(MODULE, build(out_dir))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def raw_all_reduce_loop():
    """raw_all_reduce bound to the libnccl that ncclbind has loaded (call it after ncclbind has)."""
    import ncclbind
    return functools.partial(load().raw_all_reduce, ncclbind.library_info("nccl").path)


def raw_collective_loop():
    """raw_collective bound to the libnccl that ncclbind has loaded (call it after ncclbind has)."""
    import ncclbind
    return functools.partial(load().raw_collective, ncclbind.library_info("nccl").path)


def stream_synchronize():
    """cuStreamSynchronize(stream) from the same module: the raw loop's way to synchronize."""
    return load().stream_synchronize
