import sys

from recordmill.cli import main

sys.exit(main())
