#!/usr/bin/env bash
# Regenerate the bindings: set up the machine, then run the generator from the repo root.
# Arguments go to `python3 -m generator generate`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup.sh
exec /usr/bin/python3 -m generator generate "$@"
