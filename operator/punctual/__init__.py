"""Punctual: a Kubernetes operator for cron that creates exactly one Job per tick.

The rooms, outermost first (each imports only the ones after it; `make lint`
checks it with import-linter):

- `cli`: the `punctual` command: `next`, `explain`, and the cluster commands.
- `ui`: `punctual ui`'s local web page (timeline, a schedule's story, actions), which
  acts through the commands `cli` hands it.
- `runtime`: the `punctual run` process: wiring, lifecycle, the scheduler loop.
- `kube`: the only package that talks to the API server: client, the Lease loop,
  the applier of the claim protocol, watching, Events, rate limiting.
- `core`: pure decisions: schedule math, the tick planner, the claim protocol.
- `clocks`, `metrics`: leaves that any shell room may use.

docs/architecture.md follows one firing through them.
"""

__version__ = "0.1.0"
