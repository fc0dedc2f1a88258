#!/usr/bin/env bash
# Mutation testing, a habit and not a CI step (minutes per module on 2 cores): mutmut 2 changes
# one module at a time, in a git worktree of HEAD (the working tree is never touched), and runs
# the tests that cover it against each mutant. Prints each module's score (killed / mutants) and
# writes each survivor's change to mutation/MODULE.txt (git-ignored), to read.
#
#   bash .ci/mutation.sh                          # every module listed below, one after another
#   bash .ci/mutation.sh recordmill/read/order.py # one (or several) of them
#   JOBS=2 bash .ci/mutation.sh                   # two modules at a time (one per core)
#   MUTATION_TESTS="tests/read/test_torch.py tests/read/test_skips.py" bash .ci/mutation.sh \
#       recordmill/read/torch/datasets.py         # its survivors again, against these tests
#
# Needs the project's venv (.venv, with the test extra) and mutmut 2 in a venv of its own
# (MUTMUT=/path/to/mutmut; made in .venv-mutmut on first use). docs/development.md records the
# scores to hold and why each survivor left is equivalent. Never run `mutmut show` in a run's
# worktree while it runs: it renumbers the cache's lines from the module as it is then (mutated),
# and the run then stops on "Attribute Mutant.line is required".
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PY:-$ROOT/.venv/bin/python}
[[ $PY = /* ]] || PY=$ROOT/$PY # (absolute, the venv's own: not the interpreter it links to)
if [[ -z ${MUTMUT:-} ]]; then
    [[ -x .venv-mutmut/bin/mutmut ]] || { python3 -m venv .venv-mutmut && .venv-mutmut/bin/pip install -q "mutmut>=2.5,<3"; }
    MUTMUT=$ROOT/.venv-mutmut/bin/mutmut
fi

# Each module and the tests that cover it (a mutant is killed by the first failing test).
QUICK_TORCH='"not lightning and not killed_job and not persistent and not forked_worker and not formula"'
declare -A TESTS=(
    [recordmill/read/order.py]="tests/read/test_order.py tests/read/test_shared_orders.py"
    [recordmill/read/states.py]="tests/read/test_states.py tests/read/test_torch_refusals.py"
    [recordmill/read/dealing.py]="tests/read/test_dealing.py"
    [recordmill/read/mixing.py]="tests/read/test_mixing.py"
    [recordmill/read/options.py]="tests/read/test_options.py"
    [recordmill/read/skips.py]="tests/read/test_read_rejects.py"
    [recordmill/read/segments.py]="tests/read/test_segments.py tests/read/test_remote_damage.py tests/read/test_layouts.py tests/read/test_cache.py"
    [recordmill/read/gather.py]="tests/read/test_gather.py tests/read/test_steps.py tests/read/test_dataset.py"
    [recordmill/read/decode.py]="tests/read/test_decode.py"
    [recordmill/read/passes.py]="tests/read/test_passes.py tests/read/test_steps.py"
    [recordmill/read/formats.py]="tests/read/test_formats.py"
    [recordmill/read/mix_arguments.py]="tests/read/test_mix_arguments.py tests/read/test_mixture.py tests/read/test_read_refusals.py"
    [recordmill/read/decode_check.py]="tests/read/test_decode_check.py"
    [recordmill/read/groups.py]="tests/read/test_groups.py tests/read/test_dataset.py tests/read/test_segments.py tests/read/test_layouts.py tests/read/test_checked.py"
    [recordmill/read/iteration.py]="tests/read/test_iteration.py tests/read/test_dataset.py tests/read/test_steps.py tests/read/test_passes.py"
    [recordmill/read/verify.py]="tests/read/test_verify.py tests/read/test_untrusted.py"
    [recordmill/read/tokens.py]="tests/read/test_token_stream.py tests/read/test_tokens.py tests/read/test_steps.py"
    [recordmill/read/mixture.py]="tests/read/test_mixture_edges.py tests/read/test_mixture.py tests/read/test_mix_arguments.py tests/read/test_read_refusals.py"
    [recordmill/read/machine/checked.py]="tests/read/test_checked.py"
    [recordmill/read/dataset.py]="tests/read/test_dataset.py tests/read/test_read_refusals.py tests/read/test_iteration.py"
    [recordmill/read/files.py]="tests/read/test_files.py tests/read/test_read_refusals.py tests/read/test_layouts.py"
    [recordmill/read/machine/shared_orders.py]="tests/read/test_shared_orders.py"
    [recordmill/read/machine/cache_folder.py]="tests/read/test_cache_folder.py"
    [recordmill/dataset/storage.py]="tests/dataset/test_storage.py tests/read/test_untrusted.py"
    [recordmill/read/machine/cache.py]="tests/read/test_cache.py"
    [recordmill/read/torch/collated.py]="tests/read/test_collated.py"
    [recordmill/read/torch/chunks.py]="tests/read/test_skips.py"
    [recordmill/read/torch/skipping.py]="tests/read/test_skips.py"
    [recordmill/read/torch/pipes.py]="tests/read/test_pipes.py"
    # The torch modules' tests without those that start trainers or kill jobs (a minute each):
    # checked by hand against what survives.
    [recordmill/read/torch/datasets.py]="tests/read/test_torch_refusals.py tests/read/test_torch.py -k $QUICK_TORCH"
    [recordmill/read/torch/dealt.py]="tests/read/test_torch_refusals.py tests/read/test_torch.py tests/read/test_tokens.py -k $QUICK_TORCH"
    [recordmill/read/torch/sources.py]="tests/read/test_torch_refusals.py tests/read/test_torch.py tests/read/test_tokens.py -k $QUICK_TORCH"
    [recordmill/read/torch/tokens.py]="tests/read/test_torch_refusals.py tests/read/test_tokens.py"
    [recordmill/read/torch/trainer.py]="tests/read/test_trainers.py"
    [recordmill/dataset/checksum.py]="tests/dataset/test_checksum.py tests/test_forkserver.py::test_what_the_fork_server_preloads_leaves_out_what_no_worker_needs"
    [recordmill/dataset/layout.py]="tests/dataset/test_layout.py"
    [recordmill/dataset/rejects.py]="tests/dataset/test_rejects.py tests/engine/test_append.py::test_each_version_keeps_its_rejects"
    [recordmill/dataset/versions.py]="tests/dataset/test_versions.py"
    [recordmill/dataset/rows.py]="tests/dataset/test_rows.py"
    [recordmill/dataset/sizes.py]="tests/dataset/test_sizes.py"
    [recordmill/dataset/schema.py]="tests/dataset/test_schema.py"
    [recordmill/dataset/manifest.py]="tests/dataset/test_manifest.py tests/dataset/test_versions.py tests/dataset/test_dataset_refusals.py tests/read/test_untrusted.py::test_a_manifest_past_its_bounds_is_refused_before_it_is_read"
    [recordmill/dataset/manifest_check.py]="tests/dataset/test_manifest_check.py tests/dataset/test_dataset_refusals.py tests/dataset/test_manifest.py"
    [recordmill/dataset/columns.py]="tests/dataset/test_columns.py tests/dataset/test_schema.py"
)
modules=("$@")
((${#modules[@]})) || mapfile -t modules < <(printf '%s\n' "${!TESTS[@]}" | sort)

one() {
    local module=$1 tests=${MUTATION_TESTS:-${TESTS[$1]:?no tests listed for $1 in .ci/mutation.sh}}
    local tree name
    tree=$(mktemp -d)
    name=$(echo "$module" | tr / _)
    git worktree add -f --detach "$tree" HEAD >/dev/null 2>&1
    mkdir -p "$ROOT/mutation"
    # mutmut's cache of the module's last run: a killed mutant stays killed, the others are
    # tested again where the tests changed since (a second pass with MUTATION_TESTS: only them).
    [[ -f $ROOT/mutation/$name.cache ]] && cp "$ROOT/mutation/$name.cache" "$tree/.mutmut-cache"
    local rc=0
    (
        cd "$tree"
        # Each run held to 4 GiB (a mutant that allocates without end fails, not the machine) and
        # to MUTANT_SECONDS (mutmut's own timeout ends only the shell around the tests: a test
        # process left looping held mutmut's pipes, and the run waited without end),
        # the venv's commands first (its moto_server: another on PATH failed multipart uploads),
        # and any failure made exit code 1: mutmut 2 counts only 1 as a failure, so a mutant that
        # crashes the tests (an abort, an import error: 134, 2) would count as one that survived.
        tested="timeout -k 10 ${MUTANT_SECONDS:-300} prlimit --as=$((4 << 30)) env PATH=$(dirname "$PY"):$PATH PYTHONPATH=$tree PYTHONDONTWRITEBYTECODE=1 $PY -m pytest -x -q -p no:cacheprovider $tests"
        # timeout puts the tests in a process group of their own (its pid): what they leave
        # running (a rank a mutant sent looping) is ended with it, not left spinning.
        runner="sh -c '$tested & p=\$!; wait \$p; rc=\$?; pkill -KILL -g \$p; [ \$rc = 0 ] || exit 1'"
        # Where mutmut 2 fails to find a mutant's line in its own cache (its lines renumbered
        # meanwhile, as by a `mutmut show` in the worktree) it stops checking (a traceback in its
        # log) but never exits: the run is ended and run again, which goes on from the mutants
        # not yet tested (its cache).
        : >"$ROOT/mutation/$name.log"
        for _ in 1 2 3 4 5 6 7 8; do
            "$MUTMUT" run --paths-to-mutate "$module" --runner "$runner" --tests-dir tests \
                --no-progress >"$ROOT/mutation/$name.run" 2>&1 & # its exit code counts survivors
            local pid=$!
            while kill -0 "$pid" 2>/dev/null; do
                sleep 5
                if grep -q "^Traceback" "$ROOT/mutation/$name.run"; then
                    sleep 20 # (time to end, should it be ending)
                    pkill -P "$pid" 2>/dev/null || true
                    kill "$pid" 2>/dev/null || true
                fi
            done
            wait "$pid" || true
            cat "$ROOT/mutation/$name.run" >>"$ROOT/mutation/$name.log"
            grep -q "^Traceback" "$ROOT/mutation/$name.run" || break
            git checkout -q -- "$module" # a mutant it left in the module, undone
            rm -f "$module.bak"
        done
        rm -f "$ROOT/mutation/$name.run"
        # The counts from mutmut's cache: killed (failed, or ran 10x the baseline: "timeout", or
        # slower: "suspicious") against survived.
        "$PY" - "$module" "$tests" >"$ROOT/mutation/$name.txt" <<'PYTHON'
import os, sqlite3, sys
module, tests = sys.argv[1:]
try:
    db = sqlite3.connect(".mutmut-cache") if os.path.exists(".mutmut-cache") else None
    status = dict(db.execute("select status, count(*) from Mutant group by status").fetchall())
except (AttributeError, sqlite3.OperationalError):  # no cache, or no table: mutmut stopped
    status = {}
if not status or set(status) == {"untested"}:
    sys.exit(f"{module}: mutmut did not run (mutation/{module.replace('/', '_')}.log says why)")
killed = sum(status.get(s, 0) for s in ("ok_killed", "ok_suspicious", "bad_timeout"))
print(f"{module}: {killed} of {sum(status.values())} mutants killed ({tests})")
PYTHON
        for id in $("$PY" -c "import sqlite3; print(*[i for (i,) in sqlite3.connect('.mutmut-cache').execute(\"select id from Mutant where status = 'bad_survived' order by id\")])"); do
            "$MUTMUT" show "$id" 2>/dev/null | grep -E "^[-+][^-+]" >>"$ROOT/mutation/$name.txt" || true
            echo >>"$ROOT/mutation/$name.txt"
        done
        head -1 "$ROOT/mutation/$name.txt"
        cp .mutmut-cache "$ROOT/mutation/$name.cache"
    ) || rc=$?
    git -C "$ROOT" worktree remove --force "$tree" 2>/dev/null || true
    return $rc
}

running=0 failed=0
for module in "${modules[@]}"; do
    one "$module" &
    running=$((running + 1))
    if ((running >= ${JOBS:-1})); then
        wait -n || failed=1
        running=$((running - 1))
    fi
done
while ((running > 0)); do
    wait -n || failed=1
    running=$((running - 1))
done
exit $failed
