"""Every label, annotation and finalizer key Punctual reads or writes, in one place.

Why it exists: a key is an interface: users set the annotations on a CronSchedule,
admission policies and dashboards select Jobs by their labels, and a Job's finalizer must
be the same string for every replica and version. Defined once here, a key cannot drift
between the module that writes it and the one that reads it.

What it must never do: hold anything but these constants, or import anything of
Punctual's. Like all of `punctual.core`, it never talks to the API server.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "punctual.dev"

# On a CronSchedule, set by a user (or the CLI): each distinct value is one request.
# Fire it now (the value is the request id; see `triggers` for its two spellings).
TRIGGER_ANNOTATION: Final = f"{GROUP}/trigger"
# Resume a schedule paused by pauseOnFailure.
RESUME_ANNOTATION: Final = f"{GROUP}/resume"
# Backfill a past range (JSON, see `backfilling`).
BACKFILL_ANNOTATION: Final = f"{GROUP}/backfill"
