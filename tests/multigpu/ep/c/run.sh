#!/usr/bin/env bash
# Build and run the NCCL EP C test on a GPU machine (no Bazel there):
#   bash tests/multigpu/ep/c/run.sh [NRANKS] [--bench]
# NRANKS defaults to every GPU. ep_ranks runs LL and HT, checked; then (without --bench) README's
# "NCCL EP from C" example is built as written and run (one rank). Needs gcc and the CUDA
# toolkit (CUDA_HOME), and NCCL 2.32.3 + NCCL EP 0.2.0 from the pinned wheels:
#   NCCLBIND_NCCL_PATH=.../libnccl.so.2 NCCLBIND_NCCL_EP_PATH=.../libnccl_ep.so (LD_LIBRARY_PATH too)
# Prints PASS/FAIL lines and a summary; exits non-zero on failure (77: no GPU).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cuda=${CUDA_HOME:-/usr/local/cuda}
out=${BUILD_DIR:-/tmp/ncclbind-ep-c}
mkdir -p "$out"
echo "libnccl: ${NCCLBIND_NCCL_PATH:-unset, the runtime searches}; libnccl_ep: ${NCCLBIND_NCCL_EP_PATH:-unset}"
sources=(bindings/c/src/nccl.c bindings/c/src/nccl_ep.c runtime/src/*.c)
# nccl_ep.c's wrappers call NCCL EP through the runtime's one C++ file (ncclbind_call_guarded).
g++ -O2 -std=c++17 -Wall -Werror -Iruntime/include -c runtime/src/foreign_exceptions.cc -o "$out/foreign_exceptions.o"
gcc -O2 -std=c11 -Wall -Werror -Iruntime/include -Ibindings/c/include -I"$cuda/include" \
  tests/multigpu/ep/c/ep_ranks.c "${sources[@]}" "$out/foreign_exceptions.o" -L"$cuda/lib64" \
  -Wl,-rpath,"$cuda/lib64" -lcudart -ldl -lpthread -lm -lstdc++ -o "$out/ep_ranks"

set +e
ht_rc=0
if [[ "${2:-}" == --bench || -n "${NCCLBIND_EP_ALGOS:-}" ]]; then
  "$out/ep_ranks" "$@"
  rc=$?
else
  # LL and HT each in its own process: every HT fault so far (C, Rust, Python) came in a process
  # whose communicator had LL groups made and destroyed before; NCCL EP's own tests make HT groups
  # on a fresh communicator. Alone, HT tells a library-state problem from one of its own.
  echo "LL (NCCLBIND_EP_ALGOS=ll):"
  NCCLBIND_EP_ALGOS=ll "$out/ep_ranks" "$@"
  rc=$?
  [[ $rc == 77 ]] && exit 77
  echo "HT alone, a fresh process and communicator (NCCLBIND_EP_ALGOS=ht):"
  NCCLBIND_EP_ALGOS=ht timeout 120 "$out/ep_ranks" "$@"
  ht_rc=$?
  [[ $ht_rc != 0 && $rc == 0 ]] && rc=$ht_rc
fi
set -e
[[ $rc == 77 ]] && exit 77
if [[ $ht_rc != 0 && -z "${NCCLBIND_EP_HT_RECV:-}" ]]; then
  # What HT's fault depends on, each probe in its own processes (a device fault is sticky).
  EP_RANKS="$out/ep_ranks" bash tests/multigpu/ep/c/ht_probe.sh "${1:-0}" || true
fi
if [[ "${2:-}" != --bench ]]; then
  # The README example, extracted and built with the README's own gcc line.
  python3 - "$out/readme" <<'PY'
import pathlib, re, sys
section = pathlib.Path("README.md").read_text().split("### NCCL EP from C", 1)[1].split("\n## ", 1)[0]
blocks = dict(re.findall(r"^```(\w+)\n(.*?)^```$", section, flags=re.S | re.M))
work = pathlib.Path(sys.argv[1]); work.mkdir(parents=True, exist_ok=True)
(work / "ep.c").write_text(blocks["c"])
(work / "build.sh").write_text(blocks["sh"].replace("/usr/local/cuda", "${CUDA_HOME:-/usr/local/cuda}"))
PY
  (cd "$out/readme" && NCCLBIND=$OLDPWD LD_LIBRARY_PATH="$cuda/lib64:${LD_LIBRARY_PATH:-}" bash build.sh) >"$out/readme/log" 2>&1 || true
  cat "$out/readme/log"
  if grep -q "^token 5: sent 6, combined 6$" "$out/readme/log"; then
    echo "PASS README NCCL EP example (one rank)"
  else
    echo "FAIL README NCCL EP example (one rank): expected 'token 5: sent 6, combined 6'"
    readme_failed=1
  fi
fi
if [[ ${readme_failed:-0} == 1 && $rc == 0 ]]; then rc=1; fi
exit $rc
