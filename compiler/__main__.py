"""python -m compiler COMMAND: the response-templates command line (see cli.app)."""

import sys

from cli.app import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m compiler"))
