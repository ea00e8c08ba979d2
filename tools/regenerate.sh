#!/usr/bin/env bash
# Regenerate the bindings: set up the machine, then run the generator from the repo root.
# Arguments go to `python3 -m generator generate`. -h / --help prints the generator's help and
# installs nothing.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
for arg in "$@"; do
  if [[ "$arg" == -h || "$arg" == --help ]]; then
    echo "usage: bash tools/regenerate.sh [options]: tools/setup.sh, then python -m generator generate [options]"
    exec /usr/bin/python3 -m generator generate --help
  fi
done
bash tools/setup.sh
exec /usr/bin/python3 -m generator generate "$@"
