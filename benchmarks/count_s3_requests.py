"""The requests a write to object storage makes, counted on the wire.

    python benchmarks/count_s3_requests.py               # the template: 4 tasks, 4 partitions
    python benchmarks/count_s3_requests.py --tasks 40 --partitions 8

A moto S3 server on 127.0.0.1 behind ``tests/s3proxy.py``'s ``CountingProxy`` (both from
``bench_cache.py``'s ``Server``), and ``python writer.py --script templates/template`` run
three times into one output: a first write, an ``--overwrite`` and an ``--append``. Prints the
requests of each run by method. Requests are what a write to S3 waits on (tens of milliseconds
each there) and pays for; they do not depend on the machine.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cache import Server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    server = Server()
    try:
        uri = server.uri("counted/out", counted=True)
        for flags in ([], ["--overwrite"], ["--append"]):
            server.proxy.counts.seen.clear()
            done = subprocess.run(
                [
                    *(sys.executable, str(REPO / "writer.py")),
                    *("--script", str(REPO / "templates" / "template"), "--output", uri),
                    *("--partitions", str(args.partitions), "--tasks", str(args.tasks)),
                    *("--quiet", *flags),
                ],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise SystemExit(done.stderr)
            seen = list(server.proxy.counts.seen)
            methods = collections.Counter(method for method, _ in seen)
            kinds = ", ".join(f"{n} {m}" for m, n in methods.most_common())
            print(f"{' '.join(flags) or 'first write':<12} {len(seen):>4} requests: {kinds}")
    finally:
        server.proxy.close()
        server.process.kill()


if __name__ == "__main__":
    main()
