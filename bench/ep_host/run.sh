#!/usr/bin/env bash
# The host cost per NCCL EP dispatch and combine of each layer (C, Rust, Python, Python's raw
# generated call) on this machine, over the stand-in libnccl_ep and libnccl of the tests (no GPU
# needed): ROUNDS rounds (7), a process per layer per round, the order rotating, each timing N
# dispatches and N combines (100000) after a warm-up; rounds.py prints the table (docs/ep.md).
#   bash bench/ep_host/run.sh [N] [ROUNDS] [--verbose]
# Needs cc, cargo (offline: no crates), and a python3 with NumPy (PYTHON, default /usr/bin/python3).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/bench/ep_host"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc=${CC:-cc}
python=${PYTHON:-/usr/bin/python3}
cargo=${CARGO:-$(command -v cargo || echo "$HOME/.cargo/bin/cargo")}
includes=(-I"$root/bindings/c/include" -I"$root/runtime/include")
if [[ -n "${NCCLBIND_FAKE_NCCL:-}" ]]; then  # stand-ins built already (Bazel's)
  cp "$NCCLBIND_FAKE_NCCL" "$work/libnccl.so.2"
else
  "$cc" -O2 -shared -fPIC -fvisibility=hidden -o "$work/libnccl.so.2" "$root/tests/python/fake_nccl.c"
fi
if [[ -n "${NCCLBIND_FAKE_NCCL_EP:-}" ]]; then
  cp "$NCCLBIND_FAKE_NCCL_EP" "$work/libnccl_ep.so"
else
  "$cc" -O2 -shared -fPIC -fvisibility=hidden -std=c11 "${includes[@]}" -o "$work/libnccl_ep.so" \
    "$root/tests/python/fake_nccl_ep.c"
fi
# C: the generated binding and the runtime compiled in, as tests/multigpu/ep/c/run.sh builds ep_ranks.
"${CXX:-c++}" -O2 -std=c++17 -Wall -Wextra -Werror "${includes[@]}" -c "$root/runtime/src/foreign_exceptions.cc" \
  -o "$work/foreign_exceptions.o"
"$cc" -O2 -std=c11 -Wall -Wextra -Werror "${includes[@]}" -o "$work/ep_host_c" "$here/ep_host.c" \
  "$root/bindings/c/src/nccl.c" "$root/bindings/c/src/nccl_ep.c" "$root"/runtime/src/*.c \
  "$work/foreign_exceptions.o" -ldl -lpthread -lstdc++
# Rust: release, into bindings/rust/target/ep-host (rust/.cargo/config.toml).
(cd "$here/rust" && "$cargo" build --release --offline --quiet)
cp "$root/bindings/rust/target/ep-host/release/ep_host" "$work/ep_host_rust"
# Python: the package and its extension built outside the checkout (nothing left in the tree).
mkdir -p "$work/site"
cp -r "$root/bindings/python/ncclbind" "$work/site/"
find "$work/site" -name __pycache__ -prune -exec rm -rf {} +
(cd "$root" && "$python" setup.py -q build_ext -b "$work/site" -t "$work/build" >/dev/null 2>&1) ||
  (cd "$root" && "$python" setup.py build_ext -b "$work/site" -t "$work/build")

# The stand-ins by path for every layer (C, Rust and Python all load them through the runtime);
# NCCL_HOME unset: the stand-in compiles no kernels; no CUDA device is asked about host memory.
export NCCLBIND_NCCL_PATH="$work/libnccl.so.2" NCCLBIND_NCCL_EP_PATH="$work/libnccl_ep.so"
export PYTHONPATH="$work/site" CUDA_VISIBLE_DEVICES="" NCCLBIND_CUDA_BACKEND=helper
unset NCCL_HOME NCCL_EP_HOME
verbose=()
[[ "${3:-}" == --verbose ]] && verbose=(--verbose)
"$python" "$here/rounds.py" --n "${1:-100000}" --rounds "${2:-7}" --c "$work/ep_host_c" \
  --rust "$work/ep_host_rust" --python "$python" --python-script "$here/ep_host.py" "${verbose[@]}"
