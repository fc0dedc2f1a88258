"""Run a dataset plugin and write partitioned record files: ``python writer.py --script xyz ...``.

The same as the ``recordmill write`` command; kept at the top level for MindRecord users, whose
``run_*.sh`` scripts call ``python writer.py --mindrecord_script xyz ...``.
"""

import sys

from recordmill.cli import finish, start_early, write_main

if __name__ == "__main__":
    start_early(sys.argv[1:])  # the fork server imports beside this process, from here on
    finish(write_main())
