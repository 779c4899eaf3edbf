"""The process: wiring and lifecycle only.

- `process`: `punctual run`, composing the indices, the Lease loop, the scheduler loop
  and the applier; owns readiness, signals and shutdown.
- `scheduling`: the scheduler loop (a heap of next-wake times, round-robin across
  namespaces, routine writes in a lane of their own).
- `reconciling`: one pass over one schedule (decide, let the status wait, apply).
- `view`: the leader's view of schedules and Jobs, fresher than the watch.
- `chains`: who runs after whom (spec.after), to wake a downstream when its upstream's
  run ends.
- `early`: deciding the schedules due soon while the lists stream in.
- `freezewindows`: the FreezeWindows as kopf tells of them, and their status.
- `clusterwide`: the Calendars, ClusterFreezeWindows and Namespace labels as kopf tells
  of them, and their status.
- `supervision`: a part that ends early is fatal; the stop signals.
- `calibrating`: keeps the estimate of the API server's clock sharp.
- `sampling`: the event loop's lag, sampled (`punctual_event_loop_lag_seconds`).
- `trimming`: freed memory handed back to the operating system once a minute.
- `options`: the settings of `punctual run`.
- `logs`: the log format.

What it must never do: decide (that is `punctual.core`) or write to the API server
other than through `punctual.kube`.
"""
