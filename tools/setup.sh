#!/usr/bin/env bash
# Bootstrap a Debian 12 machine for ncclbind. Idempotent, and silent and fast (well under
# a second) when there is nothing to do:
#   1. apt-get installs whichever of the Debian packages below is missing (one
#      `apt-get update` first, only then);
#   2. /usr/bin/python3 tools/fetch_inputs.py unpacks the pinned NCCL wheels of
#      generator/header_sets.toml into .cache/header_sets/ (it skips sets already there).
# The CUDA toolkit ($CUDA_HOME, default /usr/local/cuda, with NCCL 2.28.9) is not
# installed here; it must already be on the machine.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(
  bazel-bootstrap    # Bazel 4.2.3 (/usr/bin/bazel); pulls in build-essential
  python3-clang-19   # clang.cindex for the generator
  libclang1-19
  python3-jinja2
  python3-pytest
  python3-dev
  python3-pip        # tools/fetch_inputs.py downloads wheels with pip
  python3-numpy
  clang-format
  mypy               # tests/python/test_public_names.py: user code type-checks against ncclbind
  python3-hypothesis # tests/python/test_properties.py: seeded property tests of the buffer resolver and conversions
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  # "ii " = wanted install, installed; anything else (absent, half-installed) counts as missing.
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
  [[ "$status" == ii* ]] || missing+=("$pkg")
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
