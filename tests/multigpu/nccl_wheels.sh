#!/usr/bin/env bash
# NCCL releases other than the GPU machine's own 2.28.9 (2.32.3, the CUDA 12 line's 2.19-2.26,
# 2.27.7, ...) and NCCL EP on the GPU machine, which has none of them and reaches no network.
# What travels is the header sets' folders as tools/fetch_inputs.py unpacked them here
# (.cache/header_sets/<set>/{include,lib}: the headers and the one library, not the wheels, which
# setup deletes), as one tar.gz split into parts small enough for one run each (prepare, here),
# kept in /tmp/parts there while the machine stays warm, then checked, unpacked and turned into
# exports by the last run (assemble, there). Parts are PART_SIZE (48M): a run carries at most
# 64 MiB, the work tree (about 11 MiB) included.
#   here:  bash tests/multigpu/nccl_wheels.sh prepare [SET ...]      # .gpuparts/part_aa ..., SHA256, SETS
#   there: bash tests/multigpu/nccl_wheels.sh receive .gpuparts/part_aa   # one per run
#   there: eval "$(bash tests/multigpu/nccl_wheels.sh assemble)"     # checks, unpacks, exports the first set
#   there: eval "$(bash tests/multigpu/nccl_wheels.sh use nccl-2.21.5)"  # another carried NCCL set
# SET defaults to the newest NCCL set and the NCCL EP set (generator/header_sets.toml). With the
# EP set, the NCCL headers its kernels were built with (its kernel_headers set) travel too
# (include/ only), and the exports set NCCL_HOME there: NCCL EP compiles its kernels with
# $NCCL_HOME/include, which must be those headers, not the running libnccl's (docs/ep.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=/tmp/nccl-wheels
SETS_DIR=${NCCLBIND_CACHE:-.cache}/header_sets

# name library kernel_headers depends_on, one line per set, from the header-set table (oldest first)
sets_table() {
  python3 - <<'PY'
import tomllib
for s in tomllib.load(open("generator/header_sets.toml", "rb"))["header_set"]:
    print(s["name"], s["library"], s.get("kernel_headers", "-"), s.get("depends_on", "-"))
PY
}

exports_for() {  # the exports that make a carried NCCL set the one in use, with NCCL EP where it was built on it
  local set=$1 paths="$ROOT/$1/lib" ep=""
  while read -r name library kernel depends_on; do
    if [[ $library == nccl_ep && $depends_on == "$set" && -d $ROOT/$name ]]; then
      paths+=":$ROOT/$name/lib"
      ep=" NCCLBIND_NCCL_EP_PATH=$ROOT/$name/lib/libnccl_ep.so NCCL_HOME=$ROOT/$kernel"
    fi
  done < <(sets_table)
  echo "export NCCLBIND_NCCL_PATH=$ROOT/$set/lib/libnccl.so.2 LD_LIBRARY_PATH=$paths:\${LD_LIBRARY_PATH:-}$ep"
}

case ${1:-} in
  prepare)
    shift
    mapfile -t table < <(sets_table)
    sets=("$@")
    if ((${#sets[@]} == 0)); then  # the newest NCCL set, and the EP set
      for row in "${table[@]}"; do read -r name library _ <<<"$row"; [[ $library == nccl ]] && newest=$name; done
      sets=("$newest")
      for row in "${table[@]}"; do read -r name library _ <<<"$row"; [[ $library == nccl_ep ]] && sets+=("$name"); done
    fi
    paths=()
    for set in "${sets[@]}"; do
      row=$(printf '%s\n' "${table[@]}" | awk -v s="$set" '$1 == s')
      [[ -n $row ]] || { echo "nccl_wheels: $set is not a header set of generator/header_sets.toml" >&2; exit 2; }
      [[ -d $SETS_DIR/$set/lib ]] || { echo "nccl_wheels: $SETS_DIR/$set is missing (run tools/setup.sh)" >&2; exit 2; }
      paths+=("$set")
      read -r _ library kernel _ <<<"$row"
      if [[ $library == nccl_ep ]]; then paths+=("$kernel/include"); fi
    done
    mkdir -p .gpuparts && rm -f .gpuparts/part_*
    grep -qx '/.gpuparts/' .git/info/exclude 2>/dev/null || echo '/.gpuparts/' >>.git/info/exclude
    tar czf - -C "$SETS_DIR" "${paths[@]}" | tee >(sha256sum | cut -d' ' -f1 >.gpuparts/SHA256) |
      (cd .gpuparts && split -b "${PART_SIZE:-48M}" - part_)
    printf '%s\n' "${sets[@]}" >.gpuparts/SETS
    ls -l .gpuparts ;;
  receive)
    mkdir -p /tmp/parts && cp "$2" /tmp/parts/ && ls -l /tmp/parts ;;
  assemble)
    mkdir -p "$ROOT"
    [[ "$(cat /tmp/parts/part_* | sha256sum | cut -d' ' -f1)" == "$(cat .gpuparts/SHA256)" ]] ||
      { echo "echo 'nccl_wheels: checksum mismatch (a part missing or damaged)' >&2; false"; exit 1; }
    cat /tmp/parts/part_* | tar xzf - -C "$ROOT"
    exports_for "$(head -1 .gpuparts/SETS)" ;;
  use)
    [[ -f $ROOT/${2:-}/lib/libnccl.so.2 ]] || { echo "echo 'nccl_wheels: ${2:-?} was not carried' >&2; false"; exit 1; }
    exports_for "$2" ;;
  *) echo "usage: $0 prepare [SET ...] | receive PART | assemble | use SET" >&2; exit 2 ;;
esac
