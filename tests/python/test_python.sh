#!/bin/sh
# The Python package's tests (tests/python/test_*.py) under Debian's
# python3 and python3-pytest (SIGMA_PYTHON: another interpreter), against
# this build's libsigma-runtime; 77 (skipped) without pytest, or when
# SIGMA_SKIP_PYTHON=1 (contrib/check's sanitizer stage: the library the
# package loads there is built with ASan, which a plain python3 cannot
# load, and its tests ran in the unit-test stage).
here=$(cd "$(dirname "$0")" && pwd)
[ "${SIGMA_SKIP_PYTHON:-0}" = 1 ] && { echo "SIGMA_SKIP_PYTHON=1: the Python tests ran in another stage"; exit 77; }
py=${SIGMA_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
"$py" -c 'import pytest' 2>/dev/null || { echo "python3-pytest is not installed for $py"; exit 77; }
# SIGMA_PYTHON_QUICK=1 (contrib/check's distcheck, whose tarball must hold
# the package and its example, run in full by the unit-test stage): not
# the tests that train over several processes
quick=
[ "${SIGMA_PYTHON_QUICK:-0}" = 1 ] && quick="not test_replica"
exec "$py" -m pytest -q -p no:cacheprovider ${quick:+-k "$quick"} "$here"
