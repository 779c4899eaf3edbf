"""Punctual: a Kubernetes operator for cron that creates exactly one Job per tick.

The package is split into a pure core (schedule math, planning, naming: functions of
spec, status and an injected clock) and a thin shell that talks to the API server.
The core never imports the shell.
"""

__version__ = "0.1.0"
