#!/usr/bin/env bash
# The project's test command: the whole suite, slow end-to-end tests included.
# Tests that need ../shared skip cleanly when it is absent; GPU tests skip without a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pytest -q -p no:cacheprovider --timeout=1200 "$@" tests
rc=$?
if [ "$rc" -eq 5 ]; then echo "no tests collected"; exit 1; fi
exit $rc
