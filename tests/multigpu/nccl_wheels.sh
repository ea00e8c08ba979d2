#!/usr/bin/env bash
# NCCL releases other than the GPU machine's own 2.28.9 (2.32.3, the CUDA 12 line's 2.19-2.26,
# 2.27.7, ...) and NCCL EP on the GPU machine, which has none of them and reaches no network.
# What travels is the header sets' folders as tools/fetch_inputs.py unpacked them here
# (.cache/header_sets/<set>/{include,lib}: the headers and the one library, not the wheels, which
# setup deletes). Each set is its own tar.xz (xz halves a libnccl; gzip saves a quarter), split
# into parts small enough for one run each (prepare, here: .gpuparts/<set>/part_aa ..., SHA256),
# kept in /tmp/parts/<set> there while the machine stays warm, then checked and unpacked by
# assemble, which takes every set whose parts are all there, so a release can be used while the
# next one still travels. Parts are PART_SIZE (48M): a run carries at most 64 MiB, the work tree
# (about 11 MiB) included.
#   here:  bash tests/multigpu/nccl_wheels.sh prepare [SET ...]   # .gpuparts/<set>/part_a?, SHA256
#   there: bash tests/multigpu/nccl_wheels.sh receive .gpuparts/<set>/part_aa   # carry it and SHA256
#   there: eval "$(bash tests/multigpu/nccl_wheels.sh assemble [SET])"  # unpacks; exports SET (or the
#          first prepared set) as the NCCL in use
#   there: eval "$(bash tests/multigpu/nccl_wheels.sh use nccl-2.21.5)"  # another carried NCCL set
#   here:  bash tests/multigpu/nccl_wheels.sh prepare cute-dsl-cp312   # the CuTe DSL (tools/setup.sh --gpu)
#   there: eval "$(bash tests/multigpu/nccl_wheels.sh cute)"           # after assemble: it on PYTHONPATH
# SET defaults to the newest NCCL set and the NCCL EP set (generator/header_sets.toml). With the
# EP set, the NCCL headers its kernels were built with (its kernel_headers set) travel too
# (include/ only), and the exports set NCCL_HOME there: NCCL EP compiles its kernels with
# $NCCL_HOME/include, which must be those headers, not the running libnccl's (docs/ep.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=/tmp/nccl-wheels
# The GPU machine's CuTe DSL (cp312 wheels installed here by tools/setup.sh --gpu; pip --target
# ignores the package's .pth, so `cute` exports its dsl_packages folder): carried as a set of its own.
CUTE_SITE=cute-dsl-cp312
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
      [[ -n $row || $set == "$CUTE_SITE" ]] || { echo "nccl_wheels: $set is not a header set of generator/header_sets.toml (nor $CUTE_SITE)" >&2; exit 2; }
      [[ -z $row || -d $SETS_DIR/$set/lib ]] || { echo "nccl_wheels: $SETS_DIR/$set is missing (run tools/setup.sh)" >&2; exit 2; }
      [[ -n $row || -f .cache/$set/.stamp ]] || { echo "nccl_wheels: .cache/$set is missing (run tools/setup.sh --gpu)" >&2; exit 2; }
      paths+=("$set")
      read -r _ library kernel _ <<<"$row"
      if [[ $library == nccl_ep ]]; then paths+=("$kernel/include"); fi
    done
    mkdir -p .gpuparts
    grep -qx '/.gpuparts/' .git/info/exclude 2>/dev/null || echo '/.gpuparts/' >>.git/info/exclude
    for set in "${sets[@]}"; do  # one archive per set: the set's folder, and EP's kernel headers
      members=("$set")
      row=$(printf '%s\n' "${table[@]}" | awk -v s="$set" '$1 == s')
      read -r _ library kernel _ <<<"$row"
      [[ $library == nccl_ep ]] && members+=("$kernel/include")
      rm -rf ".gpuparts/$set" && mkdir -p ".gpuparts/$set"
      from=$SETS_DIR
      [[ $set == "$CUTE_SITE" ]] && from=.cache
      tar cf - -C "$from" "${members[@]}" | xz -T0 -6 |
        tee >(sha256sum | cut -d' ' -f1 >".gpuparts/$set/SHA256") |
        (cd ".gpuparts/$set" && split -b "${PART_SIZE:-48M}" - part_)
    done
    printf '%s\n' "${sets[@]}" >.gpuparts/SETS
    ls -l .gpuparts/* ;;
  receive)  # PART ...: each into /tmp/parts/<set>/, with its set's SHA256 where it was carried
    shift
    for part in "$@"; do
      set=$(basename "$(dirname "$part")")
      mkdir -p "/tmp/parts/$set" && cp "$part" "/tmp/parts/$set/"
      [[ -f $(dirname "$part")/SHA256 ]] && cp "$(dirname "$part")/SHA256" "/tmp/parts/$set/"
    done
    ls -l /tmp/parts/* ;;
  assemble)  # every set whose parts are all there (its checksum matches), then SET's exports
    mkdir -p "$ROOT"
    for dir in /tmp/parts/*/; do
      set=$(basename "$dir")
      [[ -d $ROOT/$set ]] && continue
      if [[ -f $dir/SHA256 && "$(cat "$dir"/part_* | sha256sum | cut -d' ' -f1)" == "$(cat "$dir/SHA256")" ]]; then
        cat "$dir"/part_* | python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)' |
          tar xf - -C "$ROOT" && echo "echo 'nccl_wheels: $set unpacked' >&2"
      else
        echo "echo 'nccl_wheels: $set not complete yet (a part or its SHA256 missing, or damaged)' >&2"
      fi
    done
    want=${2:-}
    if [[ -z $want ]]; then
      for set in $(cat .gpuparts/SETS 2>/dev/null) $(ls /tmp/parts); do [[ -f $ROOT/$set/lib/libnccl.so.2 ]] && { want=$set; break; }; done
    fi
    [[ -n $want && -f $ROOT/$want/lib/libnccl.so.2 ]] || { echo "echo 'nccl_wheels: no NCCL set assembled' >&2; false"; exit 1; }
    exports_for "$want" ;;
  cute)  # the exports that put the carried CuTe DSL on PYTHONPATH (after assemble)
    [[ -d $ROOT/$CUTE_SITE/nvidia_cutlass_dsl ]] || { echo "echo 'nccl_wheels: $CUTE_SITE was not carried' >&2; false"; exit 1; }
    echo "export PYTHONPATH=$ROOT/$CUTE_SITE/nvidia_cutlass_dsl/dsl_packages:$ROOT/$CUTE_SITE\${PYTHONPATH:+:\$PYTHONPATH}" ;;
  use)
    [[ -f $ROOT/${2:-}/lib/libnccl.so.2 ]] || { echo "echo 'nccl_wheels: ${2:-?} was not carried' >&2; false"; exit 1; }
    exports_for "$2" ;;
  *) echo "usage: $0 prepare [SET ...] | receive PART ... | assemble [SET] | use SET | cute" >&2; exit 2 ;;
esac
