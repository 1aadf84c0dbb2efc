#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what it needs, builds, starts a throwaway
# PostgreSQL 15 as an unprivileged user, and runs
#   1. every test (unit, integration, end-to-end) on the release build;
#   2. every test again under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the concurrency tests under ThreadSanitizer.
# The server is stopped however the tests end. PGJOBD_TEST_STAGES=release limits the stages
# (e.g. "release asan") for a quicker local loop.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --with-test
stages=${PGJOBD_TEST_STAGES:-release asan tsan}
jobs=$(nproc)

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
  release)
    echo "== release build: all tests"
    build release
    ctest --test-dir build/release --output-on-failure
    ;;
  asan)
    echo "== ASan+UBSan build: all tests"
    build debug-asan
    # The daemons started by the end-to-end tests inherit these.
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
      LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir build/debug-asan --output-on-failure
    ;;
  tsan)
    echo "== TSan build: concurrency tests"
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
