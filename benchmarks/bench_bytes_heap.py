"""What a process imported first moves the time of making a binary column's ``bytes`` by 2x.

    python benchmarks/bench_bytes_heap.py --runs 5

The images of ``bench_first_pass.py``'s dataset (20,000 JPEGs, 601 MB, 648 record batches of
about 1 MB; made on first use), each record batch's image column made Python ``bytes`` with
``to_pylist()``, in a new process for each run of each case:

- ``pyarrow only``: the process imports pyarrow and nothing else;
- ``after import pandas``: pandas imported first (as ``datasets``, torch or ``pyarrow.dataset``
  would be in a training script);
- ``MALLOC_TOP_PAD_``: pyarrow only, with glibc told to keep 64 MB above the heap's top.

Each run reports its seconds and the page faults (minor) of the conversion alone. glibc gives
the heap's top back to the kernel when a batch's values are freed, and the next batch faults the
pages in again; a heap with something long-lived above that space (what the imports leave)
cannot shrink. Nothing of recordmill's runs in the timed part: it reads the files with pyarrow.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CASES = {
    "pyarrow only": ("", {}),
    "after import pandas": ("import pandas", {}),
    "MALLOC_TOP_PAD_": ("", {"MALLOC_TOP_PAD_": str(64 << 20)}),
}
ONE = """
{first}
import glob, json, resource, sys, time
import pyarrow as pa

columns = []
for name in sorted(glob.glob(sys.argv[1] + "/part-*.arrow")):
    reader = pa.ipc.open_file(pa.memory_map(name))
    columns += [reader.get_batch(i).column("image") for i in range(reader.num_record_batches)]
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
start = time.perf_counter()
total = sum(sum(map(len, column.to_pylist())) for column in columns)
seconds = time.perf_counter() - start
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
print(json.dumps({{"seconds": seconds, "faults": faults, "total": total}}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    import bench_first_pass

    bench_first_pass.make()
    data = str(bench_first_pass.DATA / "arrow")
    got: dict[str, list[dict]] = {case: [] for case in CASES}
    for _ in range(args.runs):  # interleaved: the machine's drift falls on every case alike
        for case, (first, env) in CASES.items():
            code = ONE.format(first=first)
            run = subprocess.run(
                [sys.executable, "-c", code, data],
                env={**os.environ, **env},
                capture_output=True,
                text=True,
                check=True,
            )
            got[case].append(json.loads(run.stdout))
    totals = {r["total"] for runs in got.values() for r in runs}
    assert len(totals) == 1, f"the cases made different bytes: {totals}"
    print("| case | seconds (median) | page faults (median) |")
    print("| --- | ---: | ---: |")
    for case, runs in got.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        faults = statistics.median(r["faults"] for r in runs)
        print(f"| {case} | {seconds:.3f} | {faults:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
