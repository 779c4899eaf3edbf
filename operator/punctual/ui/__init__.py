"""`punctual ui`: a local web page of the fleet's timeline, each schedule's story, and its
actions, served on 127.0.0.1 with the caller's own kubeconfig.

Why it exists: Punctual records more about every tick than a person reads as YAML; this
package draws it (`timelines`: the fleet's ticks aggregated server-side; `stories`: one
schedule's page and "why didn't it run at T?"; `serving`: the token-guarded server and
its static page). It sits between the CLI, which starts it and hands it the CLI's own
commands to act with, and the kube and core layers it reads through.

What it must never do: import the CLI (actions come in as a `Runner`), run in the
cluster, or load anything from the network at run time: the page is the files in
`static/`, with no build step and no framework.
"""
