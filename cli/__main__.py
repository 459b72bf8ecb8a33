"""python -m cli COMMAND: the response-templates command line."""

import sys

from cli.app import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m cli"))
