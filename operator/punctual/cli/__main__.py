"""`python -m punctual.cli ...`: the same as the `punctual` command."""

import sys

from punctual.cli.main import main

sys.exit(main())
