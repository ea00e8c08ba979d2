#!/usr/bin/env bash
# Call overhead of a runtime slot against a direct (PLT) call and a plain
# dlsym'd pointer, for ncclGetVersion in a trivial libnccl.so.2 (the call
# mechanism alone) and in the real libnccl.
#   Ir/call: valgrind callgrind instruction count, (Ir(N calls) - Ir(0 calls)) / N;
#            includes the loop's own few instructions, the same in every row.
#   ns/call: best of REPEATS wall-clock runs of CALLS calls.
# Usage: bench/runtime/run.sh   (env: CC, CALLS=10000000, REPEATS=7, IR_CALLS=1000000,
#                                NCCL=/usr/local/cuda/lib/libnccl.so.2)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${BUILD_DIR:-$root/build/runtime_bench}
cc=${CC:-gcc}
calls=${CALLS:-10000000}
repeats=${REPEATS:-7}
ir_calls=${IR_CALLS:-1000000}
nccl=${NCCL:-/usr/local/cuda/lib/libnccl.so.2}
cflags=(-std=c11 -O2 -Wall -Wextra -Werror)

mkdir -p "$out/trivial" "$out/real" "$out/runtime"
objects=()
for source in "$root"/runtime/src/*.c; do
  object="$out/runtime/$(basename "${source%.c}").o"
  "$cc" "${cflags[@]}" -fPIC -I"$root/runtime/include" -c "$source" -o "$object"
  objects+=("$object")
done
"$cc" "${cflags[@]}" -shared -fPIC -Wl,-soname,libnccl.so.2 "$root/bench/runtime/trivial_nccl.c" \
  -o "$out/trivial/libnccl.so.2"
ln -sfn "$(readlink -f "$nccl")" "$out/real/libnccl.so.2"
for variant in trivial real; do
  "$cc" "${cflags[@]}" -I"$root/runtime/include" "$root/bench/runtime/call_overhead.c" "${objects[@]}" \
    -L"$out/$variant" -l:libnccl.so.2 -Wl,-rpath,"$out/$variant" -ldl -lpthread \
    -o "$out/call_overhead_$variant"
done

instructions() { # binary mode calls -> total Ir
  local file="$out/callgrind.out"
  valgrind --tool=callgrind --callgrind-out-file="$file" "$@" >/dev/null 2>&1
  awk '/^(summary|totals):/ { print $2; exit }' "$file"
}

pin=""  # one core: less noise from migrations on a small VM
command -v taskset >/dev/null && pin="taskset -c $(($(nproc) - 1))"
have_valgrind=0
command -v valgrind >/dev/null && have_valgrind=1
printf '%-22s %-26s %9s %9s\n' "ncclGetVersion in" "call through" "Ir/call" "ns/call"
for variant in trivial real; do
  binary="$out/call_overhead_$variant"
  label="trivial libnccl.so.2"
  [[ $variant == real ]] && label="real libnccl.so.2"
  base=""
  ((have_valgrind)) && base=$(instructions "$binary" none 0)
  for mode in direct slot pointer; do
    ir="n/a"
    if ((have_valgrind)); then
      total=$(instructions "$binary" "$mode" "$ir_calls")
      ir=$(awk -v t="$total" -v b="$base" -v n="$ir_calls" 'BEGIN { printf "%.2f", (t - b) / n }')
    fi
    ns=$($pin "$binary" "$mode" "$calls" "$repeats")
    case $mode in
      direct) what="direct call (PLT)" ;;
      slot) what="ncclbind_symbol_get + call" ;;
      pointer) what="dlsym'd pointer + call" ;;
    esac
    printf '%-22s %-26s %9s %9s\n' "$label" "$what" "$ir" "$ns"
  done
done
echo "real libnccl.so.2: $(readlink -f "$nccl")"
echo "($(nproc) CPUs, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); $cc -O2; CALLS=$calls REPEATS=$repeats IR_CALLS=$ir_calls)"
