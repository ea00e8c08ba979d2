#!/usr/bin/env bash
# Builds the runtime and its tests with a plain C compiler and runs them, for
# use until the Bazel targets in this directory are wired up.
#   tests/runtime/run_local.sh            # gcc, then a clang -Werror build of the runtime
#   CC=clang tests/runtime/run_local.sh
#   TSAN=0 tests/runtime/run_local.sh     # skip the ThreadSanitizer run of concurrency_test
#   EXTRA_CFLAGS=-fsanitize=address,undefined TSAN=0 tests/runtime/run_local.sh
# Inputs (override through the environment): NCCL_2_28_9, NCCL_2_32_3, NCCL_EP, CUDA_STUB.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${BUILD_DIR:-$root/build/runtime_tests}
cc=${CC:-gcc}
cflags=(-std=c11 -O2 -g -Wall -Wextra -Werror)
read -ra extra_cflags <<<"${EXTRA_CFLAGS:-}"  # e.g. EXTRA_CFLAGS=-fsanitize=address,undefined
cflags+=("${extra_cflags[@]}")
nccl_2_28_9=${NCCL_2_28_9:-/usr/local/cuda/lib/libnccl.so.2}
nccl_2_32_3=${NCCL_2_32_3:-$root/.cache/header_sets/nccl-2.32.3/lib/libnccl.so.2}
nccl_ep=${NCCL_EP:-$root/.cache/header_sets/nccl-ep-0.2.0/lib/libnccl_ep.so}
cuda_stub=${CUDA_STUB:-/usr/local/cuda/lib64/stubs/libcuda.so}

build_runtime() { # compiler, output dir, extra flags...
  local compiler=$1 dir=$2; shift 2
  mkdir -p "$dir"
  local objects=()
  for source in "$root"/runtime/src/*.c; do
    local object="$dir/$(basename "${source%.c}").o"
    "$compiler" "${cflags[@]}" "$@" -fPIC -I"$root/runtime/include" -c "$source" -o "$object" || return 1
    objects+=("$object")
  done
  rm -f "$dir/libncclbind_runtime.a"
  ar rcs "$dir/libncclbind_runtime.a" "${objects[@]}"
}

build_test() { # compiler, output dir, name, extra flags...
  local compiler=$1 dir=$2 name=$3; shift 3
  "$compiler" "${cflags[@]}" "$@" -I"$root/runtime/include" "$root/tests/runtime/$name.c" \
    "$dir/libncclbind_runtime.a" -ldl -lpthread -o "$dir/$name"
}

set -e
build_runtime "$cc" "$out"
if [[ $cc != clang* ]] && command -v clang >/dev/null; then
  build_runtime clang "$out/clang"  # -Werror under clang too
fi
"$cc" "${cflags[@]}" -shared -fPIC "$root/tests/runtime/fake_nccl.c" -o "$out/libfake_nccl.so"
tests=(result_codes_test library_load_test nccl_calls_test nccl_ep_load_test load_failure_test
       missing_symbol_test concurrency_test resolve_now_test)
for t in "${tests[@]}"; do build_test "$cc" "$out" "$t"; done
set +e

failed=0
run() { # name, command...
  local name=$1; shift
  if "$@" >"$out/$name.log" 2>&1; then
    echo "PASS  $name"
  else
    echo "FAIL  $name (exit $?)"; sed 's/^/      /' "$out/$name.log"; failed=$((failed + 1))
  fi
}
run result_codes_test            "$out/result_codes_test"
run library_load_test_2_28_9     "$out/library_load_test" "$nccl_2_28_9" 22809 cu13
run library_load_test_2_32_3     "$out/library_load_test" "$nccl_2_32_3" 23203 cu13
run nccl_calls_test_2_28_9       "$out/nccl_calls_test" "$nccl_2_28_9"
run nccl_calls_test_2_32_3       "$out/nccl_calls_test" "$nccl_2_32_3"
run nccl_ep_load_test_no_cuda    "$out/nccl_ep_load_test" missing-cuda "$nccl_ep" "$nccl_2_32_3"
run nccl_ep_load_test_cuda_stub  "$out/nccl_ep_load_test" with-stub "$nccl_ep" "$nccl_2_32_3" 200 "$cuda_stub"
run load_failure_test            "$out/load_failure_test" "$nccl_2_28_9"
run missing_symbol_test          "$out/missing_symbol_test" "$out/libfake_nccl.so"
run concurrency_test             "$out/concurrency_test" "$nccl_2_28_9" 10
run resolve_now_test             "$out/resolve_now_test" "$nccl_2_28_9"

if [[ ${TSAN:-1} == 1 ]]; then
  build_runtime "$cc" "$out/tsan" -fsanitize=thread &&
    build_test "$cc" "$out/tsan" concurrency_test -fsanitize=thread &&
    run concurrency_test_tsan env TSAN_OPTIONS=halt_on_error=1 "$out/tsan/concurrency_test" "$nccl_2_28_9" 3
fi

echo "$failed failed; logs in $out"
exit $((failed > 0))
