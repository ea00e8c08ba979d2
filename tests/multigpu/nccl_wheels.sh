#!/usr/bin/env bash
# NCCL 2.32.3 and NCCL EP on the GPU machine, which has neither and reaches no network.
# The pinned wheels (.cache/wheels/, 327 MB) travel split into parts small enough for one
# run each (prepare, here), are kept in /tmp/parts there while the machine stays warm, and
# are put together and unpacked by the last run (assemble, there). Parts are PART_SIZE (48M):
# a run carries at most 64 MiB, the work tree (about 11 MiB now) included.
#   here:  bash tests/multigpu/nccl_wheels.sh prepare        # .gpuparts/part_aa ... and .gpuparts/SHA256
#   there: bash tests/multigpu/nccl_wheels.sh receive .gpuparts/part_aa   # one per run
#   there: eval "$(bash tests/multigpu/nccl_wheels.sh assemble)"        # checks, unpacks, prints exports
# NCCL EP compiles its kernels with $NCCL_HOME/include, which must be the NCCL headers libnccl_ep was
# built with (header_sets.toml: the EP set's kernel_headers), not the running libnccl's: prepare also
# packs that release's include/ (under 1 MiB, from its pinned wheel) into .gpuparts/kernel_headers.tgz,
# and assemble exports NCCL_HOME at it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
NCCL_WHEEL=.cache/wheels/nvidia_nccl_cu13-2.32.3-py3-none-manylinux_2_27_x86_64.whl
EP_WHEEL=".cache/wheels/nccl_extensions-0.1.0-*.whl"
ROOT=/tmp/nccl-wheels

case ${1:-} in
  prepare)
    mkdir -p .gpuparts && rm -f .gpuparts/part_*
    grep -qx '/.gpuparts/' .git/info/exclude 2>/dev/null || echo '/.gpuparts/' >>.git/info/exclude
    size=$(stat -c %s "$NCCL_WHEEL")
    # shellcheck disable=SC2086
    cat "$NCCL_WHEEL" $EP_WHEEL | tee >(sha256sum | cut -d' ' -f1 >.gpuparts/SHA256) | (cd .gpuparts && split -b "${PART_SIZE:-48M}" - part_)
    echo "$size" >.gpuparts/NCCL_WHEEL_SIZE
    kernel_set=$(python3 - <<'PY'
import tomllib
sets = tomllib.load(open("generator/header_sets.toml", "rb"))["header_set"]
ep = [s for s in sets if s["library"] == "nccl_ep" and s.get("default", True)][-1]
print(ep["kernel_headers"])
PY
)
    kernel_wheel=$(ls .cache/wheels/nvidia_nccl_cu13-"${kernel_set#nccl-}"-*.whl)
    rm -rf .gpuparts/kernel_headers && mkdir -p .gpuparts/kernel_headers
    python3 - "$kernel_wheel" .gpuparts/kernel_headers <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for name in z.namelist():
    if name.startswith("nvidia/nccl/include/"):
        z.extract(name, sys.argv[2])
PY
    tar czf .gpuparts/kernel_headers.tgz -C .gpuparts/kernel_headers nvidia && rm -rf .gpuparts/kernel_headers
    echo "$kernel_set" >.gpuparts/KERNEL_HEADERS
    ls -l .gpuparts ;;
  receive)
    mkdir -p /tmp/parts && cp "$2" /tmp/parts/ && ls -l /tmp/parts ;;
  assemble)
    mkdir -p "$ROOT" && cat /tmp/parts/part_* >"$ROOT/both.bin"
    [[ "$(sha256sum "$ROOT/both.bin" | cut -d' ' -f1)" == "$(cat .gpuparts/SHA256)" ]] || { echo "echo 'nccl_wheels: checksum mismatch' >&2; false"; exit 1; }
    size=$(cat .gpuparts/NCCL_WHEEL_SIZE)
    head -c "$size" "$ROOT/both.bin" >"$ROOT/nccl.whl" && tail -c +"$((size + 1))" "$ROOT/both.bin" >"$ROOT/ep.whl"
    python3 -m zipfile -e "$ROOT/nccl.whl" "$ROOT/nccl" && python3 -m zipfile -e "$ROOT/ep.whl" "$ROOT/ep" >&2
    rm -f "$ROOT/both.bin"
    lib=$ROOT/nccl/nvidia/nccl/lib ep=$ROOT/ep/nccl/ep/lib/cu13
    mkdir -p "$ROOT/kernel_headers" && tar xzf .gpuparts/kernel_headers.tgz -C "$ROOT/kernel_headers"
    echo "export NCCLBIND_NCCL_PATH=$lib/libnccl.so.2 NCCLBIND_NCCL_EP_PATH=$ep/libnccl_ep.so LD_LIBRARY_PATH=$lib:$ep:\${LD_LIBRARY_PATH:-} NCCL_HOME=$ROOT/kernel_headers/nvidia/nccl" ;;
  *) echo "usage: $0 prepare | receive PART | assemble" >&2; exit 2 ;;
esac
