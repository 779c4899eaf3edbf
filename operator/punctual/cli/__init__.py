"""The `punctual` command line (also `kubectl punctual`).

`main` parses the arguments and dispatches to a subcommand: the schedule questions
(`next`, `explain`, in `main`), the operator (`run`, in `running`) and the cluster
commands (`trigger`, `history`, `resume`, `backfill`, `describe`, in `cluster`; the one
screen of `describe` is drawn by `describing`), and `migrate` (from a CronJob and back,
in `migrating`).
Every subcommand answers bad input with one line and exit status 2.
"""

from punctual.cli.main import main

__all__ = ["main"]
