#!/usr/bin/env bash
# Builds the runtime and its tests with a plain C compiler and runs them, for
# use until the Bazel targets in this directory are wired up.
#   tests/runtime/run_local.sh            # gcc, then a clang -Werror build of the runtime
#   CC=clang tests/runtime/run_local.sh
#   TSAN=0 tests/runtime/run_local.sh     # skip the ThreadSanitizer run of concurrency_test
#   EXTRA_CFLAGS=-fsanitize=address,undefined TSAN=0 tests/runtime/run_local.sh
# Inputs: every libnccl of generator/header_sets.toml ($CUDA_HOME's for the cuda_toolkit set,
# .cache/header_sets/<name>/lib for a wheel, <path>/lib for a directory), NCCL EP's with the
# set it depends_on; CUDA_STUB overrides the driver stub.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${BUILD_DIR:-$root/build/runtime_tests}
cc=${CC:-gcc}
cflags=(-std=c11 -O2 -g -Wall -Wextra -Werror)
read -ra extra_cflags <<<"${EXTRA_CFLAGS:-}"  # e.g. EXTRA_CFLAGS=-fsanitize=address,undefined
cflags+=("${extra_cflags[@]}")
cuda_home=${CUDA_HOME:-/usr/local/cuda}
cuda_stub=${CUDA_STUB:-$cuda_home/lib64/stubs/libcuda.so}

# One line per header set, oldest first: library, id, version code, library path, and the
# library path of the set it depends_on ("-" if none).
header_sets() {
  /usr/bin/python3 "$root/tools/bazel/header_sets_json.py" "$root/generator/header_sets.toml" |
    CUDA_HOME=$cuda_home ROOT=$root /usr/bin/python3 -c '
import json, os, sys
sets = json.load(sys.stdin)
def lib(hs):
    if hs["source"] == "cuda_toolkit":
        home = os.environ["CUDA_HOME"]
        d = next((home + "/" + d for d in ("lib64", "lib") if os.path.isdir(home + "/" + d)), home + "/lib")
    elif hs["source"] == "wheel":
        d = os.environ["ROOT"] + "/.cache/header_sets/" + hs["name"] + "/lib"
    else:
        d = os.path.join(os.environ["ROOT"], os.path.expandvars(hs["path"]), "lib")
    return d + "/" + hs["soname"]
def code(hs):
    major, minor, patch = (int(x) for x in hs["version"].split("."))
    old = hs["library"] == "nccl" and major <= 2 and minor <= 8
    return major * 1000 + minor * 100 + patch if old else major * 10000 + minor * 100 + patch
by_name = {hs["name"]: hs for hs in sets}
for hs in sets:
    dep = by_name.get(hs.get("depends_on") or "")
    print(hs["library"], hs["name"].replace("-", "_").replace(".", "_"), code(hs), lib(hs), lib(dep) if dep else "-")
'
}
mapfile -t sets < <(header_sets)
oldest_nccl=
for line in "${sets[@]}"; do
  read -r library _ _ path _ <<<"$line"
  [[ $library == nccl && -z $oldest_nccl ]] && oldest_nccl=$path
done

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
"$cc" "${cflags[@]}" -shared -fPIC "$root/tests/runtime/bad_version_nccl.c" -o "$out/libbad_version_nccl.so"
tests=(result_codes_test library_load_test nccl_calls_test nccl_ep_load_test load_failure_test
       missing_symbol_test concurrency_test resolve_now_test bad_library_path_test)
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
for line in "${sets[@]}"; do
  read -r library id code path dep_path <<<"$line"
  if [[ $library == nccl ]]; then
    run "library_load_test_$id"   "$out/library_load_test" "$path" "$code" cu13
    run "nccl_calls_test_$id"     "$out/nccl_calls_test" "$path"
  elif [[ $library == nccl_ep ]]; then
    run "nccl_ep_load_test_no_cuda_$id"   "$out/nccl_ep_load_test" missing-cuda "$path" "$dep_path"
    run "nccl_ep_load_test_cuda_stub_$id" "$out/nccl_ep_load_test" with-stub "$path" "$dep_path" "$code" "$cuda_stub"
  fi
done
run load_failure_test            "$out/load_failure_test" "$oldest_nccl"
run missing_symbol_test          "$out/missing_symbol_test" "$out/libfake_nccl.so"
run bad_library_path_test        "$out/bad_library_path_test" "$oldest_nccl" "$out/libbad_version_nccl.so"
run concurrency_test             "$out/concurrency_test" "$oldest_nccl" 10
run resolve_now_test             "$out/resolve_now_test" "$oldest_nccl"

if [[ ${TSAN:-1} == 1 ]]; then
  build_runtime "$cc" "$out/tsan" -fsanitize=thread &&
    build_test "$cc" "$out/tsan" concurrency_test -fsanitize=thread &&
    run concurrency_test_tsan env TSAN_OPTIONS=halt_on_error=1 "$out/tsan/concurrency_test" "$oldest_nccl" 3
fi

echo "$failed failed; logs in $out"
exit $((failed > 0))
