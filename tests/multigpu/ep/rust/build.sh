#!/usr/bin/env bash
# Builds ep_ranks (x86-64, release) into bindings/rust/target/gpu/ for the GPU machine, which
# has no Rust toolchain; run it there with run.sh. No crates are fetched.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
out=$repo/bindings/rust/target/gpu
cargo=${CARGO:-$(command -v cargo || echo "$HOME/.cargo/bin/cargo")}
host=$("${cargo%cargo}rustc" -vV 2>/dev/null | sed -n 's/^host: //p' || true)
if [[ -n $host && $host != x86_64-* ]]; then
  echo "build.sh: rustc builds for $host here; the GPU machine is x86-64" >&2
  exit 1
fi
cd "$here"
"$cargo" build --release --offline --bin ep_ranks
mkdir -p "$out"
cp "$repo/bindings/rust/target/ep-multigpu/release/ep_ranks" "$out/"
echo "built $out/ep_ranks ($(du -h "$out/ep_ranks" | cut -f1))"
