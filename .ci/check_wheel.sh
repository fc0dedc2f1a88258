#!/usr/bin/env bash
# CI: build the wheel, install it (not editable) into a fresh virtual environment, .venv-wheel,
# and check from an empty folder, away from the repository, that it is complete: `recordmill
# plugins` lists every folder of plugins/ as an installed built-in, `recordmill new` gives a plugin
# that runs as it is, `recordmill new --package` a package that installs, runs and passes its test,
# and the built-in imagenet plugin loads and shows its options.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
venv=$repo/.venv-wheel
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
    echo "check_wheel: FAILED: $*" >&2
    exit 1
}

# Built from a copy of the files git would see (tracked or new, not ignored), so that no stale
# build/ folder is reused and nothing is written into the repository.
mkdir "$tmp/source"
git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' file; do [[ -f $file ]] && printf '%s\0' "$file"; done |
    tar -c --null -T - | tar -x -C "$tmp/source"
# pip's and setuptools' warnings go to a log, shown if a step fails.
python3 -m pip wheel --quiet --no-deps -w "$tmp/dist" "$tmp/source" >"$tmp/pip.log" 2>&1 ||
    fail "building the wheel:"$'\n'"$(cat "$tmp/pip.log")"
wheel=$(echo "$tmp"/dist/recordmill-*.whl)
[[ -f $wheel ]] || fail "no wheel was built"

python3 -m venv --clear "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel" \
    >"$tmp/pip.log" 2>&1 || fail "installing $wheel:"$'\n'"$(cat "$tmp/pip.log")"
recordmill=$venv/bin/recordmill

mkdir "$tmp/empty"
cd "$tmp/empty"
unset PYTHONPATH
echo "+ (in an empty folder, with the wheel installed) recordmill plugins / new / write"

listed=$("$recordmill" plugins) || fail "recordmill plugins failed"
for folder in "$repo"/plugins/*/; do
    name=$(basename "$folder")
    [[ -f $folder/plugin.py ]] || continue
    grep -qE "^$name +builtin +.*/site-packages/recordmill/builtin_plugins/$name/plugin\.py$" \
        <<<"$listed" || fail "recordmill plugins does not list the built-in $name:"$'\n'"$listed"
done

created=$("$recordmill" new xyz) || fail "recordmill new xyz failed"
[[ -f xyz/plugin.py ]] || fail "recordmill new xyz made no xyz/plugin.py"
grep -q "recordmill write --script xyz " <<<"$created" ||
    fail "recordmill new's hint does not name recordmill write:"$'\n'"$created"
"$recordmill" write --script xyz --output out/xyz --partitions 2 --workers 2 --quiet ||
    fail "recordmill write --script xyz (a fresh copy of the template) failed"
[[ -n $(ls -A out/xyz) ]] || fail "recordmill write --script xyz wrote nothing to out/xyz"

help=$("$recordmill" write --script imagenet --help) ||
    fail "recordmill write --script imagenet --help failed"
grep -q -- "--image-dir" <<<"$help" ||
    fail "recordmill write --script imagenet --help does not show --image-dir"

# `recordmill new --package`: a plugin package that installs (into the wheel's environment; its
# build backend, setuptools, from the index), is listed, writes, and passes its own test.
"$recordmill" new --package pkgcheck >/dev/null || fail "recordmill new --package pkgcheck failed"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "./pkgcheck[test]" \
    >"$tmp/pip.log" 2>&1 || fail "installing the package pkgcheck:"$'\n'"$(cat "$tmp/pip.log")"
listed=$("$recordmill" plugins) || fail "recordmill plugins failed"
grep -qE "^pkgcheck +entrypoint +recordmill_pkgcheck\.plugin$" <<<"$listed" ||
    fail "recordmill plugins does not list the package's plugin:"$'\n'"$listed"
(cd pkgcheck && "$recordmill" write --script pkgcheck --output out --partitions 2 --quiet &&
    "$venv/bin/python" -c "import recordmill; assert len(recordmill.open('out')) == 400") ||
    fail "recordmill write --script pkgcheck failed"
(cd pkgcheck && "$venv/bin/python" -m pytest -q -p no:cacheprovider >"$tmp/pytest.log" 2>&1) ||
    fail "the package's own test failed:"$'\n'"$(cat "$tmp/pytest.log")"

# The README's first set-up command, with the wheel installed instead of an editable install.
"$venv/bin/python" "$repo/writer.py" --script "$repo/templates/template" --output out/demo \
    --partitions 4 --overwrite --quiet || fail "python writer.py --script templates/template failed"

echo "check_wheel: ok ($(basename "$wheel"))"
