#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what it needs, builds, starts a throwaway
# PostgreSQL 15 as an unprivileged user, and runs
#   0. lint: clang-format and clang-tidy (.clang-format, .clang-tidy), first because it
#      fails fastest;
#   0b. fuzz: builds the libFuzzer targets of tests/fuzz (clang-14) and runs each briefly
#      over its corpus; like lint it needs no database;
#   1. every test (unit, integration, end-to-end, the dashboard in headless Chromium) on the
#      release build;
#   2. every test again but the browser's under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the concurrency tests under ThreadSanitizer.
# The server is stopped however the tests end. PGJOBD_TEST_STAGES=release limits the stages
# (e.g. "release asan") for a quicker local loop.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's header says when it began, from the script's start, so that CI's log shows
# where the minutes go (the suite is kept under an hour; CI cuts it at 90 minutes).
header() { printf '== %s (at %d:%02d)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }

scripts/install-deps.sh --with-test --with-tools
stages=${PGJOBD_TEST_STAGES:-lint fuzz release asan tsan}
jobs=$(nproc)

# Style and static analysis; needs no database and no build, only a configured release tree
# for compile_commands.json (configuring also generates the sources clang-tidy reads).
lint() {
  header "lint: clang-format"
  find src include tests -type f \( -name '*.cpp' -o -name '*.hpp' \) -print0 |
    xargs -0 clang-format --dry-run --Werror
  header "lint: clang-tidy over src/"
  cmake --preset release >/dev/null
  # run-clang-tidy selects files of compile_commands.json by regular expression: this
  # checkout's src/ (Python's re, as run-clang-tidy is Python). .clang-tidy has
  # WarningsAsErrors, so a finding fails the stage.
  local src_re
  src_re="^$(python3 -c 'import os, re; print(re.escape(os.getcwd()))')/src/"
  run-clang-tidy -quiet -p build/release -j "$jobs" "$src_re"
}
if [[ " $stages " == *" lint "* ]]; then
  lint
fi

# Each fuzz target for a bounded time over a copy of its corpus (libFuzzer adds the inputs
# it finds to the directory it reads, and CI must not write into the checkout). Any crash,
# sanitizer report, failed invariant, timeout or memory blow-up fails the stage; libFuzzer
# then writes the input as crash-*/timeout-*/oom-* into the work directory, printed below.
fuzz() {
  header "fuzz: build (clang-14, ASan+UBSan)"
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j"$jobs"
  local work target root=$PWD
  work=$(mktemp -d /tmp/pgjobd-fuzz.XXXXXX)
  for target in config duration retry_after log_line; do
    header "fuzz: $target (${PGJOBD_FUZZ_SECONDS:-30}s)"
    mkdir "$work/$target"
    cp tests/fuzz/corpus/"$target"/* "$work/$target/"
    local dict=()
    [[ -f tests/fuzz/$target.dict ]] && dict=(-dict="$root/tests/fuzz/$target.dict")
    if ! (cd "$work" && "$root/build/fuzz/tests/fuzz/${target}_fuzz" "${dict[@]}" \
      -max_total_time="${PGJOBD_FUZZ_SECONDS:-30}" -timeout=5 -rss_limit_mb=2048 \
      -max_len=4096 -print_final_stats=1 "$target" >"$target.log" 2>&1); then
      tail -n 60 "$work/$target.log" >&2
      echo "fuzz: $target failed; inputs kept in $work" >&2
      return 1
    fi
    grep -E '^stat::number_of_executed_units' "$work/$target.log" || true
  done
  rm -rf "$work"
}
if [[ " $stages " == *" fuzz "* ]]; then
  fuzz
fi
other_stages=${stages//lint/}
other_stages=${other_stages//fuzz/}
if [[ -z "${other_stages//[[:space:]]/}" ]]; then
  exit 0  # lint alone needs no database
fi

pgdir=$(mktemp -d /tmp/pgjobd-test.XXXXXX)
cleanup() { scripts/pg-cluster.sh stop "$pgdir"; rm -rf "$pgdir"; }
trap cleanup EXIT
PGJOBD_TEST_DATABASE_URL=$(scripts/pg-cluster.sh start "$pgdir" --fast)
export PGJOBD_TEST_DATABASE_URL PGJOBD_TEST_PG_DIR=$pgdir
echo "test database: $PGJOBD_TEST_DATABASE_URL"

build() {
  cmake --preset "$1" >/dev/null
  cmake --build --preset "$1" -j"$jobs"
}

for stage in $stages; do
  case "$stage" in
  lint | fuzz) ;;  # ran above, before the database starts
  release)
    header "release build: all tests"
    build release
    ctest --test-dir build/release --output-on-failure
    ;;
  asan)
    header "ASan+UBSan build: all tests but the browser's"
    build debug-asan
    # The daemons started by the end-to-end tests inherit these. The browser tests
    # (label `browser`, tests/browser) run in the release stage only.
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
      LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir build/debug-asan --output-on-failure -LE browser
    ;;
  tsan)
    header "TSan build: concurrency tests"
    build debug-tsan
    # The engine's threads (pool, fetcher, completer, listener) run in the integration
    # tests and in the exec handler's concurrent-jobs test.
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
      ctest --test-dir build/debug-tsan --output-on-failure -R 'pgjobd_(pg|unit)_tests'
    ;;
  *)
    echo "unknown stage: $stage" >&2
    exit 2
    ;;
  esac
done
header "all stages passed: $stages"
