#!/usr/bin/env bash
# Builds the GPU test and the benchmarks (x86-64, release) into bindings/rust/target/gpu/,
# for a machine with a GPU but no Rust toolchain; run them there with run_on_gpu.sh.
set -euo pipefail
crate=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../bindings/rust" && pwd)
out=$crate/target/gpu
cargo=${CARGO:-$(command -v cargo || echo "$HOME/.cargo/bin/cargo")}
mkdir -p "$out"
"$cargo" build --manifest-path "$crate/Cargo.toml" --release --example gpu_allreduce \
  --bench allreduce_overhead --bench trivial_call --message-format=json-render-diagnostics |
  /usr/bin/python3 -c '
import json, shutil, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        shutil.copy2(msg["executable"], sys.argv[1] + "/" + msg["target"]["name"])
        print("built", sys.argv[1] + "/" + msg["target"]["name"])
' "$out"
