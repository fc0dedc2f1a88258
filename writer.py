"""Run a dataset plugin and write partitioned record files: ``python writer.py --script xyz ...``.

The same as the ``recordmill write`` command; kept at the top level for MindRecord users, whose
``run_*.sh`` scripts call ``python writer.py --mindrecord_script xyz ...``.
"""

import sys

from recordmill.cli import write_main

if __name__ == "__main__":
    sys.exit(write_main())
