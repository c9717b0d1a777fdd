"""`python -m fair_retrieval` runs the command line."""

import sys

from fair_retrieval.cli import main

sys.exit(main())
