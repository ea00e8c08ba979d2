"""nvcc (compile only, -arch=sm_90, no GPU) over the device API's C ABI and the CUDA C++
programs on it, against one header set's real headers:

    nvcc_device_test.py HEADER_SETS_JSON SET_NAME wrapper     # bindings/device_wrapper/nccl_device_wrapper-<set>.cu, and
                                                              # its ncclCoopAny (NCCL's or the wrapper's own)
                                                              # with the IR's layout
    nvcc_device_test.py HEADER_SETS_JSON SET_NAME signatures  # its definitions == nccl_device_wrapper.h's declarations
    nvcc_device_test.py HEADER_SETS_JSON SET_NAME programs    # tests/multigpu/devapi: lsa_exchange.cu, and the
                                                              # kernels cuda_cpp_kernel.py / oneshot.py compile,
                                                              # with the options ncclbind.device.cuda_source uses
"""
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
sys.path.insert(0, str(REPO / "bindings" / "python"))

DEVICE = REPO / "bindings" / "device_wrapper"
DEVAPI = REPO / "tests" / "multigpu" / "devapi"


class Failed(Exception):
    pass


def nvcc(args, what, expect_ok=True):
    proc = subprocess.run([str(NVCC), "-std=c++17", "-arch=sm_90", *args], capture_output=True, text=True)
    if (proc.returncode == 0) != expect_ok:
        print(proc.stdout + proc.stderr)
        raise Failed(f"{what}: nvcc {'failed' if expect_ok else 'accepted it'}")
    print(f"PASS {what}")
    return proc


TWINS = "#ifdef NCCLBIND_DEVICE_TWINS"


def definitions(source: str, twins: bool = False) -> list[tuple[str, str]]:
    """(signature, name) of every C-ABI function the generated wrapper defines (after its
    declarations, before the twins), or (twins=True) of every twin."""
    end = source.find(TWINS) if TWINS in source else len(source)
    body = source[end:] if twins else source[source.rindex("#endif", 0, end):end]
    return re.findall(r"^__device__ ([^{;]*?\b(\w+)\s*\([^{;]*?\))\s*\{", body, re.M | re.S)


def shard() -> tuple[int, int]:
    """(this shard, shards) under Bazel's test sharding (shard_count), else (0, 1)."""
    total = int(os.environ.get("TEST_TOTAL_SHARDS", "1"))
    if os.environ.get("TEST_SHARD_STATUS_FILE"):
        Path(os.environ["TEST_SHARD_STATUS_FILE"]).touch()  # this test splits its work
    return int(os.environ.get("TEST_SHARD_INDEX", "0")), total


def check_wrapper(hs, includes, tmp):
    """The wrapper compiles. Sharded, each shard compiles the wrapper with the definitions of its
    share of the units (ncclbind.device.linking.unit_of: core, gin, one per reduce/copy function;
    every declaration kept), so every definition is compiled by exactly one shard."""
    from ncclbind.device import linking
    source = DEVICE / f"nccl_device_wrapper-{hs['name']}.cu"
    text = source.read_text()
    defined, twins = definitions(text), definitions(text, twins=True)
    index, total = shard()
    units = sorted({linking.unit_of(name) for _, name in defined})
    mine = set(units[index::total])
    kept = []

    def keep(m):
        if linking.unit_of(m.group(1)) in mine:
            kept.append(m.group(1))
            return m.group(0)
        return ""
    part = tmp / source.name
    part.write_text(linking._DEFINITION.sub(keep, text))
    nvcc(["--extended-lambda", "-DNCCLBIND_DEVICE_TWINS", "-c", *includes, f"-I{DEVICE}", str(part),
          "-o", str(tmp / "wrapper.o")],
         f"{source.name} (shard {index + 1} of {total}: {len(mine)} of {len(units)} units, {len(kept)} definitions; "
         f"the whole wrapper: {len(defined)} C-ABI functions and {len(twins)} twins) compiles against "
         f"{hs['name']}'s headers")
    if index == 0:
        check_coop_any_layout(hs, includes, tmp, source)


def check_coop_any_layout(hs, includes, tmp, source):
    """ncclCoopAny, NCCL's or (a release whose headers lack it) the wrapper's own, has the size and
    alignment of the merged IR's newest ncclCoopAny: the layout every language's record of it has.
    The wrapper's own also static_asserts it; an altered one must be refused by that assert."""
    merged = json.loads((REPO / "bindings" / "ir" / "api" / "nccl.json").read_text())
    record = merged["record_variants"]["ncclCoopAny"][-1]["record"]
    text = source.read_text()
    if "ncclCoopAny" not in text:
        raise Failed(f"{source.name} does not name ncclCoopAny")
    unit = tmp / "coop_any_layout.cu"
    unit.write_text(text + f"\nstatic_assert(sizeof(ncclCoopAny) == {record['size']} && alignof(ncclCoopAny) == "
                           f"{record['align']}, \"ncclCoopAny's layout is not the IR's\");\n")
    own = re.search(r"^struct alignas\(\d+\) ncclCoopAny \{\n  unsigned char storage\[(\d+)\];", text, re.M)
    nvcc(["--extended-lambda", "-c", *includes, str(unit), "-o", str(tmp / "layout.o")],
         f"ncclCoopAny ({'the wrapper' if own else 'NCCL'}'s, {hs['name']}) is {record['size']} bytes, "
         f"aligned to {record['align']}: the IR's")
    if own is None:
        return
    altered = text.replace(own.group(0), own.group(0).replace(f"[{own.group(1)}]", f"[{int(own.group(1)) + 8}]"))
    unit.write_text(altered)
    proc = nvcc(["--extended-lambda", "-c", *includes, str(unit), "-o", str(tmp / "altered.o")],
                "the wrapper's ncclCoopAny with another size is refused", expect_ok=False)
    if "must have the IR's layout" not in proc.stdout + proc.stderr:
        print(proc.stdout + proc.stderr)
        raise Failed("nvcc refused the altered ncclCoopAny, but not by the wrapper's static_assert")


def signature_unit(defined, nccl_names) -> str:
    """NCCL's declarations, then the generated ones in a namespace, and one static_assert per
    function that both have the same type. A header_inline function (nb_<name>: NCCL's own is an
    inline C++ function, perhaps overloaded) is checked by whether NCCL's `name` converts to a
    pointer of exactly the generated type."""
    lines = ["#include <nccl_device.h>", "#include <nccl_device_wrapper.h>", "#include <type_traits>",
             "namespace ncclbind_generated {", 'extern "C" {']
    lines += [f"__device__ {signature};" for signature, _ in defined]
    lines += ["}", "}"]
    for _, symbol in defined:
        name = nccl_names.get(symbol, symbol)
        if name == symbol:
            lines.append(f"static_assert(std::is_same<decltype(&::{name}), decltype(&ncclbind_generated::{name})>::value, "
                         f'"{name}: the generated signature differs from nccl_device_wrapper.h");')
            continue
        lines += [f"template <class F, class = void> struct has_{symbol} : std::false_type {{}};",
                  f"template <class F> struct has_{symbol}<F, std::void_t<decltype(static_cast<F>(&::{name}))>> "
                  f": std::true_type {{}};",
                  f"static_assert(has_{symbol}<decltype(&ncclbind_generated::{symbol})>::value, "
                  f'"{symbol}: the generated signature differs from NCCL\'s {name}");']
    return "\n".join(lines) + "\n"


def check_signatures(hs, includes, tmp, ir):
    source = DEVICE / f"nccl_device_wrapper-{hs['name']}.cu"
    defined = definitions(source.read_text())
    from ncclbind.device.wrapper_table import FUNCTIONS
    declared = {f["name"] for f in ir.get("device_functions", [])}
    if not any(not f.get("header_inline") for f in ir.get("device_functions", [])):
        raise Failed(f"{hs['name']}'s IR has no device functions: it has no nccl_device_wrapper.h to check against")
    nccl_names = {FUNCTIONS[name]["symbol"]: name for name in FUNCTIONS}
    names = {nccl_names.get(symbol, symbol) for _, symbol in defined}
    if names != declared:
        raise Failed(f"the wrapper defines {sorted(names - declared)} beyond and lacks {sorted(declared - names)} "
                     f"of the header's functions")
    inline = [symbol for _, symbol in defined if nccl_names.get(symbol, symbol) != symbol]
    if not inline:
        raise Failed("the wrapper defines no header_inline (nb_) function to check")
    good = tmp / "signatures.cu"
    good.write_text(signature_unit(defined, nccl_names))
    nvcc(["-c", *includes, str(good), "-o", str(tmp / "signatures.o")],
         f"the {len(defined)} generated signatures are nccl_device_wrapper.h's and ({len(inline)} nb_) "
         f"the device headers' ({hs['name']})")
    # The check can fail: one parameter's type changed must be refused, for a function of
    # nccl_device_wrapper.h and for a header_inline one.
    for kind, pick in (("nccl_device_wrapper.h", lambda symbol: symbol not in inline),
                       ("header_inline", lambda symbol: symbol in inline)):
        changed, done = [], False
        for sig, symbol in defined:
            altered = re.sub(r"\bsize_t (\w+)\)$", r"int \1)", sig, count=1)
            if not done and pick(symbol) and altered != sig:
                changed.append((altered, symbol))
                done = True
            else:
                changed.append((sig, symbol))
        if not done:
            raise Failed(f"no {kind} signature with a trailing size_t parameter to alter for the negative check")
        bad = tmp / "signatures_altered.cu"
        bad.write_text(signature_unit(changed, nccl_names))
        proc = nvcc(["-c", *includes, str(bad), "-o", str(tmp / "altered.o")],
                    f"an altered {kind} signature is refused", expect_ok=False)
        if "the generated signature differs" not in proc.stdout + proc.stderr:
            print(proc.stdout + proc.stderr)
            raise Failed("nvcc refused the altered unit, but not by the signature check")


def check_programs(hs, includes, tmp):
    """Three compilations, each its own shard under Bazel (shard_count 3): a whole programs run
    took up to 84 s on a busy CI machine, its coop kernels unit the most."""
    index, total = shard()
    steps = (compile_lsa_exchange, compile_coop_kernels, compile_oneshot)
    for i, step in enumerate(steps):
        if i % total == index:
            step(hs, includes, tmp)


def compile_lsa_exchange(hs, includes, tmp):
    nvcc(["-Xcompiler", "-Wall", f"-I{REPO / 'runtime' / 'include'}", f"-I{REPO / 'bindings' / 'c' / 'include'}",
          f"-I{DEVICE}", *includes, "-c", str(DEVAPI / "lsa_exchange.cu"), "-o", str(tmp / "lsa_exchange.o")],
         f"lsa_exchange.cu compiles against {hs['name']} (layouts from ncclbind_device_layouts.h)")


def program_options(hs, includes):
    """What compile_module passes nvcc, with this set's headers in place of the loaded library's,
    and the functions the set's wrapper lacks."""
    from ncclbind.device import cuda_source
    version = hs["version"]
    opts = list(cuda_source.compile_options(version, include_dirs=[i[2:] for i in includes]))
    opts.remove("-std=c++17")  # nvcc() adds it
    return opts, cuda_source.missing_functions(version)


def compile_coop_kernels(hs, includes, tmp):
    from ncclbind.device import cuda_source
    version = hs["version"]
    opts, missing = program_options(hs, includes)
    sys.path.insert(0, str(DEVAPI))
    from cuda_cpp_kernel import C_ABI_BARRIER_FUNCTIONS, C_ABI_FUNCTIONS
    reduce = [] if any(f in missing for f in C_ABI_FUNCTIONS) else ["-DNCCLBIND_HAVE_C_ABI_REDUCE"]
    lacking_barrier = [f for f in C_ABI_BARRIER_FUNCTIONS if f in missing]
    barrier = [] if lacking_barrier else ["-DNCCLBIND_HAVE_C_ABI_BARRIER"]
    unit = tmp / "coop_kernels_unit.cu"
    unit.write_text(cuda_source.wrapper_source(version) + "\n" + (DEVAPI / "coop_kernels.cu").read_text())
    cubin = tmp / "coop.cubin"
    nvcc([*opts, *reduce, *barrier, "--cubin", str(unit), "-o", str(cubin)],
         f"coop_kernels.cu after the {version} wrapper compiles: "
         + ("the C-ABI exchange kernels (every coop kind, the LSA barrier session)" if barrier else
            f"no C-ABI exchange kernels (the wrapper lacks {', '.join(lacking_barrier)})") + "; "
         + ("the C-ABI reduce kernels" if reduce else "no C-ABI reduce kernels (the wrapper lacks the reduce's functions)"))
    # The kernels are there: the cubin names each (extern "C", so unmangled).
    image = cubin.read_bytes()
    kinds = ["thread", "warp", "lanes", "warp_span", "cta"]
    for flag, prefix in ((barrier, "exchange_c_"), (reduce, "reduce_")):
        present = [k for k in kinds if (prefix + k).encode() + b"\0" in image]
        if present != (kinds if flag else []):
            raise Failed(f"the cubin has the {prefix}* kernels {present}, expected {kinds if flag else 'none'}")


def compile_oneshot(hs, includes, tmp):
    opts, missing = program_options(hs, includes)
    lsa = [] if "ncclLsaReduceSum_F32" in missing else ["-DNCCLBIND_HAVE_LSA_REDUCE_SUM"]
    nvcc([*opts, *lsa, "--cubin", str(DEVAPI / "oneshot_kernel.cu"), "-o", str(tmp / "oneshot.cubin")],
         f"oneshot_kernel.cu compiles ({'ncclLsaReduceSum' if lsa else 'peer loop'})")


def main() -> int:
    global NVCC
    inputs_json, set_name, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    inputs = json.loads(inputs_json.read_text())
    hs = next(h for h in inputs["header_sets"] if h["name"] == set_name)
    NVCC = Path(os.environ.get("CUDA_HOME", inputs["cuda_home"])) / "bin" / "nvcc"
    includes = [f"-I{(inputs_json.parent / d).absolute()}" for d in hs["include_dirs"]]
    ir = json.loads((REPO / "bindings" / "ir" / f"{set_name}.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if mode == "wrapper":
                check_wrapper(hs, includes, Path(tmp))
            elif mode == "signatures":
                check_signatures(hs, includes, Path(tmp), ir)
            elif mode == "programs":
                check_programs(hs, includes, Path(tmp))
            else:
                raise Failed(f"unknown mode {mode!r}")
        except Failed as e:
            print(f"FAIL: {e}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
