"""Write runtime.lock: the blocks of requirements.lock that Punctual needs at run time.

Why it exists: the lock pins the dev tools too (pytest, ruff, mypy). The image keeps
only the [project] dependencies and everything the lock says ("# via") they pulled
in, each with its hashes, so `pip install --require-hashes` still checks every file.
It is a file (not a Dockerfile heredoc) so that every builder runs it: BuildKit,
and the buildah/podman that Debian ships, which refuse heredocs.

What it must never do: resolve, download or relax a pin; a name missing from the
lock is an error.
"""

from __future__ import annotations

import re
import sys
import tomllib


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_blocks(pyproject: str, lock: str) -> dict[str, str]:
    """The lock's blocks (name -> text) of the run-time dependencies and what they pull in."""
    dependencies = tomllib.loads(pyproject)["project"]["dependencies"]
    runtime = {norm(re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0]) for d in dependencies}
    blocks: dict[str, str] = {}
    parents: dict[str, set[str]] = {}
    for block in re.split(r"\n(?=\S)", lock):
        if match := re.match(r"([A-Za-z0-9_.\-]+)==", block):
            name = norm(match[1])
            blocks[name] = block.rstrip() + "\n"
            via = re.findall(r"#\s+(?:via\s+)?([A-Za-z0-9_.\-]+)\s*$", block, re.M)
            parents[name] = {norm(p) for p in via}
    while new := {n for n, ps in parents.items() if ps & runtime} - runtime:
        runtime |= new
    missing = runtime - blocks.keys()
    if missing:
        raise SystemExit(f"not in requirements.lock: {sorted(missing)}")
    return {name: blocks[name] for name in sorted(runtime)}


def main() -> None:
    with open("pyproject.toml") as f, open("requirements.lock") as g:
        blocks = runtime_blocks(f.read(), g.read())
    with open("runtime.lock", "w") as f:
        f.writelines(blocks.values())
    print("runtime dependencies:", " ".join(blocks), file=sys.stderr)


if __name__ == "__main__":
    main()
