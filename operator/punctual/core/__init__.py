"""The pure core: what Punctual decides, apart from doing it.

`schedules` (cron text to UTC ticks), `planning` (THE TICK PLANNER: which ticks are
due, missed or skipped), `deciding` (THE CLAIM PROTOCOL, decided: what to claim,
create, delete and record), the rules a decision applies (`overlapping`, `pausing`,
`backfilling`, `finishing`, `succeeding`) and what it is assembled from (`drafting`),
`models`, `naming`, `jobs` and `times`.

What it must never do: read a clock, touch the network or the disk, or import the
shell (`punctual.kube`, `punctual.runtime`, `punctual.cli`), kopf, aiohttp,
prometheus_client or asyncio. Every function here is a function of its arguments;
`make lint` checks the imports.
"""
