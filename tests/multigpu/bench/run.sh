#!/usr/bin/env bash
# ncclbind.bench on a GPU machine: all_reduce, all_gather, reduce_scatter, broadcast, all_to_all and
# send/recv from 8 B to 1 GiB (x2) on every GPU, every backend side by side (ncclbind Python, Rust
# and C, torch.distributed, CuPy, nccl4py when installed), -c 1 on; nccl-tests' tables on stdout,
# then the latency pass (8 B..1 KiB: the Python backends in one process per rank, interleaved in
# rounds; the small-message goal is judged from it); JSON + PNG + the tables in $OUT (or
# /tmp/ncclbind-bench-out); then all_reduce with -R 2 (symmetric windows) on the ncclbind backends.
# The summary's "# wall time" line gives each backend's and the latency pass's seconds.
#   bash tests/multigpu/bench/run.sh
# Environment (defaults): BENCH_F (2) and BENCH_N (100): -f and -n of the main sweep;
# BENCH_LATENCY_ITERS (1000) and BENCH_LATENCY_ROUNDS (10): calls per backend, size and round, and
# rounds, of the latency pass; BENCH_T (150): -T, seconds per backend and for the latency pass;
# BENCH_TIMEOUT (400): seconds for the whole main run.
# Needs: the Python package in /tmp/ncclbind-site (gpu_session.sh's pip step; installed here if
# absent), gcc (the C worker is built here), the Rust worker carried in
# bindings/rust/target/gpu/ncclbind_bench_worker (bench/cli/rust/build.sh, run where Rust is).
# Prints PASS/FAIL lines and a summary; exit status 0 only when every backend that could run ran
# with no wrong element. The speed goals are reported (goal met / MISSED), not part of PASS.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
out=${OUT:-/tmp/ncclbind-bench-out}
site=${NCCLBIND_SITE:-/tmp/ncclbind-site}
build=${BUILD_DIR:-/tmp/ncclbind-bench}
mkdir -p "$out" "$build"
status=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; status=1; }

if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.device_count() else 1)' 2>/dev/null; then
  echo "SKIPPED: no GPU (or no torch to count them)"
  exit 0
fi
ngpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')

if ! PYTHONPATH=$site python3 -c 'import ncclbind._nccl' 2>/dev/null; then
  python3 -m pip install -q --no-build-isolation --no-deps --no-index --target "$site" . || fail "pip install"
fi
# The bench subpackage is pure Python: this checkout's copy, over whatever the site holds.
rm -rf "$site/ncclbind/bench" && cp -r bindings/python/ncclbind/bench "$site/ncclbind/bench"

find_in_site_packages() { # glob relative to site-packages; prints the first match
  python3 - "$1" <<'PY' 2>/dev/null || true
import glob, site, sys
for d in site.getsitepackages() + [site.getusersitepackages()]:
    for path in sorted(glob.glob(d + "/" + sys.argv[1])):
        print(path)
        sys.exit()
PY
}
# One libnccl for every backend that lets us choose: the nvidia-nccl wheel's (torch's too).
nccl=${NCCLBIND_NCCL_PATH:-$(find_in_site_packages "nvidia/nccl/lib/libnccl.so.2")}
[[ -n $nccl ]] && export NCCLBIND_NCCL_PATH=$nccl
cudart=${NCCLBIND_CUDART_PATH:-$(find_in_site_packages "nvidia/*/lib/libcudart.so.1[0-9]")}
[[ -z $cudart && -e ${CUDA_HOME:-/usr/local/cuda}/lib64/libcudart.so ]] && cudart=${CUDA_HOME:-/usr/local/cuda}/lib64/libcudart.so
[[ -n $cudart ]] && export NCCLBIND_CUDART_PATH=$cudart
echo "GPUs: $ngpus  NCCLBIND_NCCL_PATH=${NCCLBIND_NCCL_PATH:-unset} NCCLBIND_CUDART_PATH=${NCCLBIND_CUDART_PATH:-unset}"

c_worker=$(bash bench/cli/c/build.sh "$build" 2>"$out/c_build.log" | tail -n 1)
if [[ -x $c_worker ]]; then pass "C worker built ($c_worker)"; else fail "C worker build: $(tail -n 5 "$out/c_build.log")"; fi
rust_worker=bindings/rust/target/gpu/ncclbind_bench_worker
[[ -x $rust_worker ]] || echo "NOTE: no $rust_worker (build it with bench/cli/rust/build.sh where Rust is): the rust backend is reported unavailable"

t0=$SECONDS
PYTHONPATH=$site timeout "${BENCH_TIMEOUT:-400}" python3 -m ncclbind.bench -b 8 -e 1G -f "${BENCH_F:-2}" -g "$ngpus" \
  -n "${BENCH_N:-100}" -w 10 -c 1 --iter-bytes-cap 32G -T "${BENCH_T:-150}" --progress never \
  --latency-max 1K --latency-iters "${BENCH_LATENCY_ITERS:-1000}" --latency-rounds "${BENCH_LATENCY_ROUNDS:-10}" \
  --collectives all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,send_recv \
  --backends ncclbind,torch,cupy,c,rust,nccl4py --c-worker "$c_worker" --rust-worker "$rust_worker" \
  -J "$out/bench.json" --plot "$out/bench.png" >"$out/bench.txt" 2>"$out/bench.err"
rc=$?
cat "$out/bench.txt"
echo "== stderr:"; tail -n 40 "$out/bench.err"
echo "== ncclbind.bench: exit $rc in $((SECONDS - t0)) s"

[[ $rc -eq 0 ]] && pass "every backend that could run ran, no wrong element" || fail "ncclbind.bench exit $rc (see above)"
[[ -s $out/bench.json ]] && pass "JSON $out/bench.json" || fail "no JSON"
[[ -s $out/bench.png ]] && pass "plot $out/bench.png" || fail "no plot"
python3 - "$out/bench.json" <<'PY' || status=1
import json, sys
doc = json.load(open(sys.argv[1]))
bad = 0
for name, b in doc["backends"].items():
    line = f"backend {name}: {b['status']}" + (f" ({b['reason'].splitlines()[0]})" if b.get("reason") else "")
    if b["status"] == "failed":
        bad = 1
        print("FAIL:", line)
    elif name in ("ncclbind", "c", "torch", "cupy") and b["status"] != "ran":
        bad = 1  # these must run on the GPU machine
        print("FAIL:", line)
    else:
        print("PASS:" if b["status"] == "ran" else "NOTE:", line)
checked = [r for r in doc["results"] if r["wrong"] is not None]
wrong = sum(r["wrong"] for r in checked)
print(("PASS" if not wrong and checked else "FAIL") + f": {len(checked)} checked results, {wrong} wrong elements")
for r in checked:
    if r["wrong"]:
        print(f"FAIL: {r['backend']} {r['collective']} {r['size']} B {'in' if r['in_place'] else 'out of'} place: "
              f"{r['wrong']} wrong")
# The latency pass must have run ncclbind beside torch and CuPy, every warm-up ncclbind call (the timed calls' objects) on the C fast path.
lat, status = doc.get("latency", []), doc.get("latency_pass", {})
names = sorted({r["backend"] for r in lat})
if status.get("status") != "ran" or not {"ncclbind", "torch", "cupy"} <= set(names):
    bad = 1
    print(f"FAIL: latency pass {status.get('status')}: backends {names} ({status.get('reason', '').splitlines()[:1]})")
else:
    print(f"PASS: latency pass ran {names} in {status.get('seconds')} s, {len(lat)} results")
counts = [r["fast_path"] for r in lat if r["backend"] == "ncclbind" and r.get("fast_path")]
declined = sum(c[1] for c in counts)
if counts:
    made = sum(c[0] for c in counts)
    print(("PASS" if not declined else "FAIL") + f": ncclbind in the latency pass: {made} of {made + declined} "
          "warm-up calls made by the C fast path")
sys.exit(bad or wrong or not checked or declined)
PY
# -R 2 (symmetric windows over ncclMemAlloc) on the ncclbind backends: all_reduce, 8 B to 64 MiB.
t1=$SECONDS
PYTHONPATH=$site timeout 100 python3 -m ncclbind.bench -b 8 -e 64M -f 4 -g "$ngpus" -n 50 -w 5 -c 1 -R 2 -T 80 --latency-max 0 \
  --progress never --collectives all_reduce --backends ncclbind,rust,c --c-worker "$c_worker" \
  --rust-worker "$rust_worker" -J "$out/bench_R2.json" >"$out/bench_R2.txt" 2>"$out/bench_R2.err"
rc2=$?
grep -E '^# (ncclbind.bench|note|-R|goal|backend)|^ ' "$out/bench_R2.txt"; tail -n 10 "$out/bench_R2.err"
echo "== -R 2 run: exit $rc2 in $((SECONDS - t1)) s"
[[ $rc2 -eq 0 ]] && pass "-R 2 (symmetric windows): ran, no wrong element" || fail "-R 2 run exit $rc2"

echo "== goals (reported, not asserted):"
grep -E '^# goal' "$out/bench.txt" || echo "(no goal lines: ncclbind or the other backends did not run)"
grep -E '^# wall time' "$out/bench.txt"
echo "== summary: $( [[ $status -eq 0 ]] && echo PASSED || echo FAILED )"
exit $status
