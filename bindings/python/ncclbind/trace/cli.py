"""python -m ncclbind.trace {run,summarize,library}."""
from __future__ import annotations

import argparse
import os
import pathlib
import signal
import subprocess
import sys

from ..command_line import CommandLineError, OneLineParser
from .library import SHIM_NAME, ShimBuildError, loaded_release_of, shim_library
from .store import StoreServer


def _run(args) -> int:
    command = args.command[1:] if args.command and args.command[0] == "--" else args.command
    if not command:
        print("ncclbind.trace run: no command (usage: python -m ncclbind.trace run [options] -- CMD ...)",
              file=sys.stderr)
        return 2
    try:
        library, nccl, code = shim_library(args.nccl)
    except ShimBuildError as e:
        print(f"ncclbind.trace run: {e}", file=sys.stderr)
        return 2
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(p for p in (str(library), env.get("LD_PRELOAD", "")) if p)
    env["NCCLBIND_SHIM_MODE"] = args.mode
    env["NCCLBIND_SHIM_DIR"] = str(out)
    env["NCCLBIND_SHIM_NCCL_PATH"] = nccl
    # ncclbind's runtime takes NCCL's functions from a preloaded shim (it looks for
    # ncclbind_shim_version), so it loads the same libnccl the shim forwards to.
    if "/" in nccl:
        env["NCCLBIND_NCCL_PATH"] = nccl
    elif SHIM_NAME.match(os.path.basename(env.get("NCCLBIND_NCCL_PATH", ""))):
        del env["NCCLBIND_NCCL_PATH"]
    if args.gpu_time:
        env["NCCLBIND_SHIM_GPU_TIME"] = "1"
    server = None
    if args.checkpoint:
        env["NCCLBIND_SHIM_CHECKPOINT"] = "1"
        if "NCCLBIND_SHIM_STORE" not in env:
            server = StoreServer()
            env["NCCLBIND_SHIM_STORE"] = f"tcp:127.0.0.1:{server.port}"
    print(f"ncclbind.trace: {library.name} (NCCL {loaded_release_of(library)} wrappers) in front of {nccl} "
          f"(NCCL {code}); mode {args.mode}; traces in {out}", file=sys.stderr)
    proc = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        rc = proc.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        # A hung job: stop it whole; the shims flushed within NCCLBIND_SHIM_FLUSH_MS.
        print(f"ncclbind.trace run: {command[0]} ran past --timeout {args.timeout} s: stopping it "
              f"(python -m ncclbind.trace summarize {out} says where the ranks diverged)", file=sys.stderr)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        rc = 124
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait()
    finally:
        if server:
            server.close()
    return rc


def _summarize(args) -> int:
    from .summary import TraceError, summarize
    try:
        summary = summarize(args.directory, png=args.png, out=sys.stdout, strict=args.strict)
    except TraceError as e:
        print(f"ncclbind.trace summarize: {e}", file=sys.stderr)
        return 2
    return 3 if summary.divergences and args.fail_on_divergence else 0


def _library(args) -> int:
    try:
        library, nccl, code = shim_library(args.nccl)
    except ShimBuildError as e:
        print(f"ncclbind.trace library: {e}", file=sys.stderr)
        return 2
    print(library)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m ncclbind.trace", description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="run CMD (and every process it starts) under the shim")
    run.add_argument("--mode", choices=["off", "counts", "full"], default="full")
    run.add_argument("--out", default="ncclbind-trace", help="directory of the JSONL traces (default ./ncclbind-trace)")
    run.add_argument("--gpu-time", action="store_true", help="time every collective on the GPU with CUDA events")
    run.add_argument("--checkpoint", action="store_true",
                     help="virtual communicator handles, for ncclbind.shim.checkpoint_prepare/restore; serves the "
                          "job's unique-id store on localhost")
    run.add_argument("--nccl", help="the libnccl the program loads (default: found as the program would)")
    run.add_argument("--timeout", type=float, default=None, help="stop the job after this many seconds (exit 124)")
    run.add_argument("command", nargs=argparse.REMAINDER)
    summarize = sub.add_parser("summarize", help="tables, timeline and divergence of a trace directory")
    summarize.add_argument("directory")
    summarize.add_argument("--png", help="the timeline's file (default DIRECTORY/timeline.png)")
    summarize.add_argument("--fail-on-divergence", action="store_true", help="exit 3 when ranks diverge")
    summarize.add_argument("--strict", action="store_true",
                           help="stop at the first damaged record (exit 2) instead of skipping and naming each")
    library = sub.add_parser("library", help="print the shim library for the libnccl found (building it once)")
    library.add_argument("--nccl")
    try:
        args = parser.parse_args(argv)
    except CommandLineError as e:
        print(f"python -m ncclbind.trace: {e}", file=sys.stderr)
        return 2
    return {"run": _run, "summarize": _summarize, "library": _library}[args.action](args)
