#!/usr/bin/env bash
# CI: the tests on the oldest pyarrow pyproject.toml allows (the floor of its "pyarrow>=" pin),
# in a second fresh virtual environment, .venv-oldest, beside the newest one .ci/run tests. Only
# recordmill's own dependencies at their floor where they must go with it (numpy 1.x: pyarrow
# before 16 is built against it) and the test runners; the tests of optional tools (Dask, Ray,
# the other readers, S3, torch) skip with their reasons, as they do without those tools.
set -euo pipefail
cd "$(dirname "$0")/.."

floor=$(grep -m1 -oE '"pyarrow>=[0-9.]+"' pyproject.toml | grep -oE '[0-9][0-9.]*')
[[ -n $floor ]] || { echo "oldest.sh: no pyarrow>= pin found in pyproject.toml" >&2; exit 1; }
major=${floor%%.*}
pins=("pyarrow==$floor.*")
if ((major < 16)); then pins+=("numpy<2"); fi

python3 -m venv --clear .venv-oldest
. .venv-oldest/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet "${pins[@]}" -e . "pytest>=8" "hypothesis>=6"
python -c 'import pyarrow; print("+ the oldest pyarrow allowed:", pyarrow.__version__)'
python -m pytest -q -p no:cacheprovider "$@"
