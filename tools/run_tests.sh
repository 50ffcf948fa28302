#!/usr/bin/env bash
# The project's test command: the whole suite, slow end-to-end tests included.
# Tests that need ../shared skip cleanly when it is absent; GPU tests skip without a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
# The suite starts hundreds of Python processes (CLI runs, MPI ranks, cluster boxes): they share
# the bytecode the first of them compiles, in a folder of this run's own (never the checkout),
# also where PYTHONDONTWRITEBYTECODE is set (each process would compile caffepy again, ~1 s).
pyc=$(mktemp -d "${TMPDIR:-/tmp}/caffepy-pyc.XXXXXX")
trap 'rm -rf "$pyc"' EXIT
export PYTHONPYCACHEPREFIX="$pyc"
unset PYTHONDONTWRITEBYTECODE
python3 -m pytest -q -p no:cacheprovider --timeout=1200 "$@" tests
rc=$?
if [ "$rc" -eq 5 ]; then echo "no tests collected"; exit 1; fi
exit $rc
