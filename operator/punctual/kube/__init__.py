"""Everything Punctual knows of the Kubernetes API: the runtime and the CLI reach the API
server only through this package (Punctual's requests through `client`, kopf's through
`watching`). Its modules:

- `client`: the async HTTP client, its typed errors, and `Api`, the one client Protocol
  (five verbs and a watch) that everything else takes.
- `credentials`: where the API server is and how to authenticate (kubeconfig or service
  account), with exec-plugin and oidc credentials renewed before they expire.
- `leases`: THE LEASE LOOP, leader election on a Lease; its decisions pure at the top.
- `sharding`: schedules split into shards by uid, each led through its own Lease, the
  shards shared fairly by the live replicas.
- `fencing`: the Fence the admission policy checks every Job create against; each new
  leader raises it before it writes.
- `applying`: THE CLAIM PROTOCOL, done: the fenced status claim, deletes, creates,
  history clean-up, in that order.
- `following`: a list in pages, then a watch from its resourceVersion, resumed; a
  relist after 410 Gone.
- `schedulewatching`: every CronSchedule, followed by `following`, packed in memory.
- `jobwatching`: Punctual's Jobs, followed by `following`, indexed by schedule uid.
- `workloads`: the kinds of --workload-kinds, found by discovery and followed into the
  same index.
- `groups`: concurrency groups' members (from the schedules) and limits (ConcurrencyGroup
  objects, listed, then as kopf tells of them).
- `watching`: kopf, for the small kinds (FreezeWindows, ClusterFreezeWindows, Calendars,
  ConcurrencyGroups, Namespaces), logged in with `credentials`.
- `events`: Kubernetes Events about schedules, from a bounded queue that yields to the
  creates in flight.
- `ratelimiting`: how fast the writes go: the server's pace, paused after a 429 or a
  5xx, fewer in flight after a 429.
- `migrating`: the switch between a CronJob and a CronSchedule, both ways, as writes in
  order (`punctual migrate`).
- `asking`: a request by annotation (trigger, resume, backfill) written only when none
  waits before it, with a resourceVersion precondition, and followed until it is taken.
- `reviewing`: who the API server takes the caller to be (SelfSubjectReview), for
  `punctual trigger`.

What it must never do: decide. What to write comes from `punctual.core`; this package
only writes it, in the order the protocol needs, and reports what happened. (The Lease
and Fence rules in `leases`, `sharding` and `fencing` are pure, table-tested functions:
who may lead, never what a schedule does.)
"""
