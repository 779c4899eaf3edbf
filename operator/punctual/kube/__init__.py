"""The only package that talks to the API server.

`client` (our lean async client and its Protocol, credentials), `leases` (THE LEASE
LOOP and the Fence), `applying` (THE CLAIM PROTOCOL, done: claim, create, record, in
that order), `watching` (kopf's indices of schedules and Jobs), `events` and
`ratelimiting`.

What it must never do: decide. What to write comes from `punctual.core`; this
package only writes it, in the order the protocol needs, and reports what happened.
"""
