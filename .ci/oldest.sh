#!/usr/bin/env bash
# CI: the tests on the oldest pyarrow that pyproject.toml allows (the floor of its "pyarrow>="
# pin), in a second fresh virtual environment, .venv-oldest, beside the newest that .ci/run tests.
# It holds recordmill and the tools its own tests need (the S3 server, the independent TFRecord
# writer, LMDB, DuckDB, setuptools to build packages); the tests of other tools (Dask, Ray,
# pandas, Polars, Hugging Face datasets, torch, daft) skip, saying why, as they do without them.
# PYARROW=19 bash .ci/oldest.sh tries another version; arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

floor=$(grep -m1 -oE '"pyarrow>=[0-9.]+"' pyproject.toml | grep -oE '[0-9][0-9.]*' || true)
version=${PYARROW:-$floor}
[[ -n $version ]] || { echo "oldest.sh: no pyarrow>= pin found in pyproject.toml" >&2; exit 1; }
pins=("pyarrow==${version}.*")
if ((${version%%.*} < 16)); then pins+=("numpy<2"); fi # pyarrow before 16 is built against numpy 1

python3 -m venv --clear .venv-oldest
. .venv-oldest/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet "${pins[@]}" -e . "pytest>=8" "pytest-xdist>=3.5" "hypothesis>=6" \
    "setuptools>=70.1" \
    "duckdb>=1.0" "tfrecord>=1.14" "crc32c>=2" "lmdb>=1.4" "boto3>=1.35" "moto[server]>=5,<5.2"
python -c 'import pyarrow; print("+ tests on pyarrow", pyarrow.__version__)'
# The docs' examples (tests/test_docs.py) use the other tools: they run on the newest pyarrow.
python -m pytest -q -p no:cacheprovider -n auto --ignore tests/test_docs.py "$@"
