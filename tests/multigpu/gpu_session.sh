#!/usr/bin/env bash
# One session on a GPU machine (no Bazel, no network there): named steps, each
# logged to $OUT/<step>.log (or /tmp/ncclbind-gpu/<step>.log), a line per step.
#   bash tests/multigpu/gpu_session.sh env pip pytest pybench c1 c2 rust1 ...
# Steps:
#   env      the machine: GPUs, driver, Python packages, the NCCL that Python sees
#   pip      pip install of the Python package (builds the extension; no Bazel)
#   nccl4py  nccl4py 0.6.0 from its wheel, carried in .whl/, into its own folder (pybench and pybenchab add it)
#   before   the package as it was at the commit in .whl/before-<rev>.tar.gz (git archive), for pybenchab
#   pybenchab  bench_allreduce.py's in-place rows, before and after, alternating (A B A B) in one call
#            (PYBENCH_ROWS, PYBENCH_ITERATIONS (5000), PYBENCH_REPEATS (3), PYBENCH_ROUNDS (2),
#            PYBENCH_PIN: the CPU for bench_allreduce.py --pin)
#   programs1 programs2  tests/multigpu/nccl4py_programs (nccl4py-style programs) on 1 and 2 GPUs
#   programs_cute  its CuTe DSL program on 1 GPU (the CuTe DSL on PYTHONPATH first, as for cute)
#   programs_ep  its NCCL EP program on EP_RANKS (1) GPUs (after nccl_wheels.sh assemble)
#   pytest   tests/python on one GPU (marker gpu)
#   pybench  bench/python/bench_allreduce.py (one rank, 2-float all-reduce)
#   c1 c2    the C multi-rank test on 1 and 2 GPUs; cbench: its --bench on every GPU
#   rust1    the Rust GPU test and benchmarks (bench/rust/run_on_gpu.sh)
#   py1 py2  the Python multi-rank test on 1 and 2 GPUs; pybench2: its --bench on 2
#   rust2    the Rust multi-rank test on every GPU; rust2bench: its --bench
#   pybenchlegacy  pybench on the legacy default stream
#   devapi   the device-API kernel over the bindings' DevComm
#   devapicpp  CUDA C++ kernels compiled through ncclbind.device.cuda_source (tests/multigpu/devapi/run.sh)
#   device   ncclbind.device's Numba kernels and the one-shot all-reduce benchmark
#   cute cutebench  ncclbind.device.cute's rank program, and the one-shot benchmark with its CuTe
#            columns (the CuTe DSL on PYTHONPATH first: eval "$(bash tests/multigpu/nccl_wheels.sh cute)";
#            a release before 2.30 links ncclbind's wrapper bitcode, built by clang here and carried
#            into /tmp/ncclbind-device-cache: the GPU machine has no clang)
#   symmetric  ncclbind.symmetric on every GPU, and its latency table
#   bench    python -m ncclbind.bench: every collective, every backend, then the latency pass and -R 2
#            (needs the Rust worker carried; alone in its call: up to 590 s, BENCH_TIMEOUT 360 for the sweep)
#   shim shimbench  the interposition library under torch DDP and the C test; its cost per call
#   ep_py ep_pybench epc2 eprust2 epbench  NCCL EP from Python, C and Rust, and the merged benchmark
#            (NCCL 2.32.3 + EP: eval "$(bash tests/multigpu/nccl_wheels.sh assemble)" first)
#   @SET     the steps after it run on carried NCCL set SET (nccl_wheels.sh use SET: NCCLBIND_NCCL_PATH
#            and LD_LIBRARY_PATH), their logs named <step>@SET; @ alone goes back to the machine's own
# Another NCCL release (the CUDA 12 line, 2.27.7): `nccl_wheels.sh prepare nccl-2.19.3 nccl-2.21.5
# nccl-2.27.7` here, its parts received there and assembled, then e.g.
#   bash tests/multigpu/gpu_session.sh pip @nccl-2.19.3 c1 programs1 rust2 @nccl-2.21.5 c1 ...
# (torch links libnccl.so.2 by SONAME and binds to whichever is loaded first, so programs that import
# torch need a release with every symbol torch 2.11 uses: 2.28.9 or newer.)
#   pack     last: everything in the log folder into one logs.tgz (the device tool brings back
#            only a few files of \$OUT)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
logs=${OUT:-/tmp/ncclbind-gpu}
mkdir -p "$logs"
site=/tmp/ncclbind-site
tag="" skipping=""  # @SET: the carried NCCL release the following steps run on
own_ld=${LD_LIBRARY_PATH:-}

step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS label=$name${tag/@/.}  # step.set: $OUT takes no '@' in a file name
  timeout "$limit" "$@" >"$logs/$label.log" 2>&1
  local rc=$?
  echo "== $label: exit $rc in $((SECONDS - t0)) s; last lines:"
  tail -n "${TAIL:-15}" "$logs/$label.log"
}

for s in "$@"; do
  case $s in
    @) tag=""; skipping=""; unset NCCLBIND_NCCL_PATH NCCLBIND_NCCL_EP_PATH NCCL_HOME; export LD_LIBRARY_PATH=$own_ld; continue ;;
    @*) tag=$s skipping=""; export LD_LIBRARY_PATH=$own_ld
        exports=$(bash tests/multigpu/nccl_wheels.sh use "${s#@}") && eval "$exports" ||
          { echo "== $s: not carried (nccl_wheels.sh receive, assemble first): its steps are skipped"; skipping=1; }
        continue ;;
  esac
  if [[ -n $skipping ]]; then echo "== $s$tag: skipped"; continue; fi
  case $s in
    env) step env 60 bash -c 'nvidia-smi -L; nvidia-smi --query-gpu=driver_version,memory.total --format=csv
        nvidia-smi topo -m
        python3 -c "import sys, torch, cupy; print(sys.version, torch.__version__, torch.cuda.device_count(), cupy.__version__)"
        python3 -m pip list 2>/dev/null | grep -iE "nccl|cuda|torch|cupy"' ;;
    pip) step pip 300 python3 -m pip install -v --upgrade --no-build-isolation --no-deps --no-index --target "$site" . ;;
    pytest) step pytest 400 env PYTHONPATH="$site" python3 -m pytest tests/python -m gpu -v -rs -p no:cacheprovider ;;
    before) step before 300 bash -c 'set -e; rm -rf /tmp/ncclbind-before-src; mkdir -p /tmp/ncclbind-before-src
        tar xzf .whl/before-*.tar.gz -C /tmp/ncclbind-before-src
        python3 -m pip install --upgrade --no-build-isolation --no-deps --no-index --target /tmp/ncclbind-before \
          /tmp/ncclbind-before-src' ;;
    pybenchab) step pybenchab 560 bash -c 'for round in $(seq "${PYBENCH_ROUNDS:-2}"); do for side in before after; do
        site=$([ $side = before ] && echo /tmp/ncclbind-before || echo '"$site"')
        echo "#### $side (round $round)"; PYTHONPATH=$site:'"$site"'-nccl4py python3 bench/python/bench_allreduce.py \
          --rows "${PYBENCH_ROWS:-in place|in-place layout|prepare|nccl4py}" --iterations "${PYBENCH_ITERATIONS:-5000}" --repeats "${PYBENCH_REPEATS:-3}" \
          ${PYBENCH_PIN:+--pin "$PYBENCH_PIN"} --json '"$logs"'/pybench-$side-$round.json
        done; done' ;;
    programs1) step programs1 300 env PYTHONPATH="$site" bash tests/multigpu/nccl4py_programs/run.sh 1 ;;
    programs2) step programs2 300 env PYTHONPATH="$site" bash tests/multigpu/nccl4py_programs/run.sh 2 ;;
    programs_cute) step programs_cute 300 env PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" NCCLBIND_DEVICE_CACHE=/tmp/ncclbind-device-cache \
        PROGRAMS=cute_all_reduce.py bash tests/multigpu/nccl4py_programs/run.sh 1 ;;
    programs_ep) step programs_ep 300 env PYTHONPATH="$site" bash tests/multigpu/nccl4py_programs/run.sh "${EP_RANKS:-1}" ep ;;
    pybench) step pybench 300 env PYTHONPATH="$site:$site-nccl4py" python3 bench/python/bench_allreduce.py ;;
    nccl4py) step nccl4py 120 python3 -m pip install --no-deps --no-index --target "$site-nccl4py" .whl/nccl4py-0.6.0-*.whl ;;
    c1) step c1 400 bash tests/multigpu/run_c.sh 1 ;;
    c2) step c2 500 bash tests/multigpu/run_c.sh 2 ;;
    cbench) step cbench 300 bash tests/multigpu/run_c.sh 0 --bench ;;
    rust1) step rust1 300 bash bench/rust/run_on_gpu.sh ;;
    py1) step py1 500 env PYTHONPATH="$site" python3 tests/multigpu/python/ranks.py 1 ;;
    py2) step py2 500 env PYTHONPATH="$site" python3 tests/multigpu/python/ranks.py 2 ;;
    pybench2) step pybench2 400 env PYTHONPATH="$site" python3 tests/multigpu/python/ranks.py 2 --bench ;;
    rust2) step rust2 500 bash tests/multigpu/rust/run.sh ;;
    rust2bench) step rust2bench 300 bash tests/multigpu/rust/run.sh 0 --bench ;;
    pybenchlegacy) step pybenchlegacy 300 env PYTHONPATH="$site:$site-nccl4py" python3 bench/python/bench_allreduce.py --stream legacy ;;
    devapi) step devapi 300 bash tests/multigpu/devapi/build_and_run.sh ;;
    devapicpp) step devapicpp 400 env PYTHONPATH="$site" bash tests/multigpu/devapi/run.sh ;;
    device) step device 420 env PYTHONPATH="$site" bash tests/multigpu/device/run.sh ;;
    cute) step cute 300 env PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" NCCLBIND_DEVICE_CACHE=/tmp/ncclbind-device-cache \
        python3 tests/multigpu/device/cute_ranks.py ;;
    cutebench) step cutebench 420 env PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" \
        NCCLBIND_DEVICE_CACHE=/tmp/ncclbind-device-cache ONESHOT_JSON="$logs/oneshot${tag/@/.}.json" \
        python3 tests/multigpu/device/oneshot_bench.py ;;
    symmetric) step symmetric 300 env PYTHONPATH="$site" bash tests/multigpu/symmetric/run.sh ;;
    bench) step bench 590 env PYTHONPATH="$site" BENCH_TIMEOUT="${BENCH_TIMEOUT:-360}" bash tests/multigpu/bench/run.sh ;;
    shim) step shim 540 env PYTHONPATH="$site" bash tests/multigpu/shim/run.sh ;;
    shimbench) step shimbench 300 env PYTHONPATH="$site" bash bench/shim/run_gpu.sh ;;
    ep_py) step ep_py 420 env PYTHONPATH="$site" bash tests/multigpu/ep/python/run.sh 2 ;;
    ep_pybench) step ep_pybench 300 env PYTHONPATH="$site" bash tests/multigpu/ep/python/run.sh 2 --bench ;;
    epc2) step epc2 300 bash tests/multigpu/ep/c/run.sh 2 ;;
    eprust2) step eprust2 300 bash tests/multigpu/ep/rust/run.sh 2 ;;
    epbench) step epbench 580 env PYTHONPATH="$site" bash tests/multigpu/ep/bench.sh 2 ;;
    pack) tar czf /tmp/ncclbind-gpu-logs.tgz -C "$logs" . && rm -rf "${logs:?}"/* && mv /tmp/ncclbind-gpu-logs.tgz "$logs/logs.tgz" ;;
    *) echo "unknown step $s" ;;
  esac
done
