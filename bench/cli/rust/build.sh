#!/usr/bin/env bash
# Builds ncclbind_bench_worker (x86-64, release) into bindings/rust/target/gpu/ for the GPU
# machine, which has no Rust toolchain; ncclbind.bench finds it there (or via --rust-worker).
# No crates are fetched.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
out=$repo/bindings/rust/target/gpu
cargo=${CARGO:-$(command -v cargo || echo "$HOME/.cargo/bin/cargo")}
host=$("${cargo%cargo}rustc" -vV 2>/dev/null | sed -n 's/^host: //p' || true)
if [[ -n $host && $host != x86_64-* ]]; then
  echo "build.sh: rustc builds for $host here; the GPU machine is x86-64" >&2
  exit 1
fi
cd "$here"  # so that .cargo/config.toml puts the build in bindings/rust/target/benchcli
"$cargo" build --release --offline --bin ncclbind_bench_worker
mkdir -p "$out"
cp "$repo/bindings/rust/target/benchcli/release/ncclbind_bench_worker" "$out/"
echo "$out/ncclbind_bench_worker"
