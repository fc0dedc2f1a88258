import sys

from recordmill.cli import main

# Worker processes import the main module again (multiprocessing's spawn and forkserver do).
if __name__ == "__main__":
    sys.exit(main())
