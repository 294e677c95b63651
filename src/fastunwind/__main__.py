"""`python -m fastunwind` runs the CLI."""

import sys

from fastunwind.cli import main

sys.exit(main())
