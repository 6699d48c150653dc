#!/bin/sh
# The Python package's tests (tests/python/test_*.py) under Debian's
# python3 and python3-pytest (SIGMA_PYTHON: another interpreter), against
# this build's libsigma-runtime; 77 (skipped) without pytest.
here=$(cd "$(dirname "$0")" && pwd)
py=${SIGMA_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
"$py" -c 'import pytest' 2>/dev/null || { echo "python3-pytest is not installed for $py"; exit 77; }
exec "$py" -m pytest -q -p no:cacheprovider "$here"
