"""The pure core: what Punctual decides, apart from doing it.

`schedules` (cron text to UTC ticks), `planning` (THE TICK PLANNER: which ticks are
due, missed or skipped), `deciding` (THE CLAIM PROTOCOL, decided: the outline of one
decision), `reading` (step 1: the spec as one record), `admitting` (THE ONE ROOM:
how many more runs may start, for every kind of run), the rules it composes, each
returning a frozen record (`claiming`,
`overlapping`, `pausing`, `freezing`, `backfilling`, `finishing`, `succeeding`,
`pending`, `retrying`, `groups`, `chaining` (spec.after: runs after other schedules'
runs, and the gate)), `calendars` (shared exclusions a schedule names), the
records they share (`records`), the one status builder (`status`), what the shell is
handed (`decisions`, `creating`, `delaying`, `settling`), `keys` (every label,
annotation and finalizer key), `models`, `naming`, `jobs`, `workloads` (the kinds a
workloadTemplate creates), `completion` (whether a workload succeeded or failed: per
kind, or by the schedule's CEL rules), `ownership`, `stamping`, `triggers`, `asking`
(whether the operator has taken a request made by annotation), `migrating`
(what a CronJob becomes, and the hand-over by cursor), `early` (which schedules a new
leader may decide before its lists are in) and `times`.

What it must never do: read a clock, touch the network or the disk, or import the
shell (`punctual.kube`, `punctual.runtime`, `punctual.cli`), kopf, aiohttp,
prometheus_client or asyncio. Every function here is a function of its arguments;
`make lint` checks the imports.
"""
