"""A deterministic simulator of Punctual: the real runtime, two replicas, a model cluster.

Why it exists: each feature is tested alone and holds alone; where features meet
(a backfill under maxConcurrent, a retry during a leader change) nothing looked. This
package runs the runtime's own pieces (the Lease election, the followers and indices,
the leader's view, the scheduler loop, the Reconciler, the Applier) on simulated time
against a model API server and Job controller, with random specs, actions and faults
drawn from one seed, and checks the README's promises after every step. A seed replays
a run exactly.

What it must never do: read the wall clock, sleep real time, draw randomness from
anything but the run's own `random.Random(seed)`, or change code under operator/.
"""
