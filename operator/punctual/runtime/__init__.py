"""The process: wiring and lifecycle only.

`process` composes watching, the Lease loop, the scheduler loop and the applier
into `punctual run`, and owns signals, supervision and shutdown; `scheduling` is the
scheduler loop (a heap of next-fire times, round-robin across namespaces).

What it must never do: decide (that is `punctual.core`) or write to the API server
other than through `punctual.kube`.
"""
