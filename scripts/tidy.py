#!/usr/bin/env python3
"""clang-tidy over src/, each file checked again only when something it is checked with
changed. scripts/test.sh's lint stage runs it:

    scripts/tidy.py BUILD_DIR [-j N]

BUILD_DIR holds compile_commands.json of a tree configured without unity batches (the
`lint` preset; configuring also generates the sources clang-tidy reads). A file whose check passed is remembered in a cache outside the
clone (PGJOBD_TIDY_CACHE, default ~/.cache/pgjobd-tidy) under a key of everything its result
depends on: clang-tidy's version, .clang-tidy, the file's compile command (paths made
relative to the checkout, so another clone's folder gives the same key), the file itself
and every header of src/ and include/ (any header change checks every file again: coarse,
but never stale). Findings are never cached: a file with one is checked at every run.
.clang-tidy has WarningsAsErrors, so any finding fails the run (exit 1).
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import pathlib
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def relative_command(entry: dict) -> bytes:
    """The compile command with this checkout's and build tree's paths made relative."""
    words = entry.get("arguments") or shlex.split(entry["command"])
    root = str(ROOT)
    return "\0".join(w.replace(root, "<root>") for w in words).encode()


def headers_digest() -> bytes:
    paths = sorted(
        p for d in ("src", "include") for p in (ROOT / d).rglob("*") if p.suffix in (".hpp", ".in")
    )
    return digest(*(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() for p in paths)).encode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("-j", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()

    build_dir = pathlib.Path(args.build_dir).resolve()
    entries = json.loads((build_dir / "compile_commands.json").read_text())
    src = ROOT / "src"
    files = {}
    for entry in entries:
        file = pathlib.Path(entry["directory"], entry["file"]).resolve()
        if file.is_relative_to(src):
            files[file] = entry
    if not files:
        print("tidy.py: no src/ file in compile_commands.json", file=sys.stderr)
        return 2

    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, check=True).stdout
    common = digest(version, (ROOT / ".clang-tidy").read_bytes(), headers_digest())
    cache = pathlib.Path(
        os.environ.get("PGJOBD_TIDY_CACHE", pathlib.Path.home() / ".cache" / "pgjobd-tidy")
    )
    cache.mkdir(parents=True, exist_ok=True)

    todo = []
    for file, entry in sorted(files.items()):
        key = digest(common.encode(), relative_command(entry), str(file.relative_to(ROOT)).encode(),
                     file.read_bytes())
        if not (cache / key).exists():
            todo.append((file, key))
    print(f"clang-tidy: {len(todo)} of {len(files)} src/ files to check "
          f"({len(files) - len(todo)} unchanged since a clean check)", flush=True)

    def check(item):
        file, key = item
        run = subprocess.run(["clang-tidy", "--quiet", "-p", str(build_dir), str(file)],
                             capture_output=True, text=True)
        return file, key, run

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.j) as pool:
        for file, key, run in pool.map(check, todo):
            if run.returncode == 0:
                (cache / key).touch()
                continue
            failed += 1
            print(f"== {file.relative_to(ROOT)}", flush=True)
            sys.stdout.write(run.stdout + run.stderr)
    if failed:
        print(f"clang-tidy: findings in {failed} file(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
