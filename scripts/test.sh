#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what it needs, builds, starts a throwaway
# PostgreSQL 15 as an unprivileged user, and runs
#   lint:    clang-format and clang-tidy (.clang-format, .clang-tidy), first because it fails
#            fastest; clang-tidy checks again only the files whose inputs changed
#            (scripts/tidy.py);
#   fuzz:    builds the libFuzzer targets of tests/fuzz (clang-14) and runs each briefly over
#            its corpus, two at a time; like lint it needs no database;
#   release: every test (unit, pg, e2e, ops, the dashboard in headless Chromium) on the
#            release build;
#   asan:    under AddressSanitizer + UndefinedBehaviorSanitizer, every test but those
#            labelled release-only (tests/CMakeLists.txt says which and why), and the chaos
#            smoke;
#   tsan:    the unit and database tests under ThreadSanitizer (only those are built);
#   package: the Debian package (scripts/package.sh) built from HEAD, lintian, installed
#            over a previous version on this machine, jobs run through the installed
#            binary, its unit verified, then purged; needs root (skipped otherwise).
# Each test case is a ctest test of its own, run PGJOBD_TEST_JOBS at a time (default: twice
# the cores, as most of a case's time is spent waiting). Builds go through ccache
# (CMakeLists.txt), so a second run, or one after a developer's own builds, compiles little.
# The server is stopped however the tests end. PGJOBD_TEST_STAGES limits the stages, e.g.
# PGJOBD_TEST_STAGES=release while iterating (README "The test loop").
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's header says when it began, from the script's start, so that CI's log shows
# where the minutes go (README "The test loop" has the budget; CI cuts it at 90 minutes).
header() { printf '== %s (at %d:%02d)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }
# Each stage's minutes, printed at the end (the README's table is made of these).
timings=()
timed() {
  local name=$1 from=$SECONDS
  shift
  "$@"
  timings+=("$(printf '%-8s %d:%02d' "$name" $(((SECONDS - from) / 60)) $(((SECONDS - from) % 60)))")
}

scripts/install-deps.sh --with-test --with-tools --with-package
stages=${PGJOBD_TEST_STAGES:-lint fuzz release asan tsan package}
jobs=$(nproc)
test_jobs=${PGJOBD_TEST_JOBS:-$((jobs * 2))}

# Style and static analysis; needs no database and no build, only a configured tree for
# compile_commands.json (the lint preset: one command per file, no unity batches;
# configuring also generates the sources clang-tidy reads).
lint() {
  header "lint: clang-format"
  find src include tests -type f \( -name '*.cpp' -o -name '*.hpp' \) -print0 |
    xargs -0 clang-format --dry-run --Werror
  header "lint: clang-tidy over src/"
  cmake --preset lint >/dev/null
  scripts/tidy.py build/lint -j "$jobs"
}
if [[ " $stages " == *" lint "* ]]; then
  timed lint lint
fi

# Each fuzz target for a bounded time over a copy of its corpus (libFuzzer adds the inputs
# it finds to the directory it reads, and CI must not write into the checkout). Any crash,
# sanitizer report, failed invariant, timeout or memory blow-up fails the stage; libFuzzer
# then writes the input as <target>-crash-*/timeout-*/oom-* into the work directory,
# printed below.
fuzz_one() {
  local target=$1 dict=()
  mkdir "$work/$target"
  cp tests/fuzz/corpus/"$target"/* "$work/$target/"
  [[ -f tests/fuzz/$target.dict ]] && dict=(-dict="$root/tests/fuzz/$target.dict")
  # A crash, timeout or memory blow-up leaves its input as $work/<target>-crash-* etc.
  if ! "$root/build/fuzz/tests/fuzz/${target}_fuzz" "${dict[@]}" \
    -max_total_time="${PGJOBD_FUZZ_SECONDS:-30}" -timeout=5 -rss_limit_mb=2048 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$work/$target-" "$work/$target" \
    >"$work/$target.log" 2>&1; then
    tail -n 60 "$work/$target.log" >&2
    echo "fuzz: $target failed; inputs kept in $work" >&2
    return 1
  fi
  echo "fuzz: $target: $(grep -E '^stat::number_of_executed_units' "$work/$target.log")"
}
fuzz() {
  header "fuzz: build (clang-14, ASan+UBSan)"
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j"$jobs"
  local work target root=$PWD pids=() failed=0
  work=$(mktemp -d /tmp/pgjobd-fuzz.XXXXXX)
  local targets="config duration retry_after log_line http_response"  # tests/fuzz/CMakeLists.txt's
  header "fuzz: $targets, ${PGJOBD_FUZZ_SECONDS:-30}s each, $jobs at a time"
  for target in $targets; do
    if ((${#pids[@]} >= jobs)); then
      wait "${pids[0]}" || failed=1
      pids=("${pids[@]:1}")
    fi
    fuzz_one "$target" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  ((failed == 0)) || return 1
  rm -rf "$work"
}
if [[ " $stages " == *" fuzz "* ]]; then
  timed fuzz fuzz
fi
other_stages=${stages//lint/}
other_stages=${other_stages//fuzz/}
if [[ -z "${other_stages//[[:space:]]/}" ]]; then
  header "all stages passed: $stages"
  printf '   %s\n' "${timings[@]}"
  exit 0  # lint and fuzz need no database
fi

pgdir=$(mktemp -d /tmp/pgjobd-test.XXXXXX)
cleanup() { scripts/pg-cluster.sh stop "$pgdir"; rm -rf "$pgdir"; }
trap cleanup EXIT
PGJOBD_TEST_DATABASE_URL=$(scripts/pg-cluster.sh start "$pgdir" --fast)
export PGJOBD_TEST_DATABASE_URL PGJOBD_TEST_PG_DIR=$pgdir
echo "test database: $PGJOBD_TEST_DATABASE_URL"

build() {
  cmake --preset "$1" >/dev/null
  shift
  cmake --build --preset "$@" -j"$jobs"
}
# ctest's own summary lists the tests that failed, timed out or were skipped (exit code 77:
# a check that cannot run here), so a skip is never a silent pass.
run_tests() {
  ctest --test-dir "$1" --output-on-failure -j"$test_jobs" "${@:2}"
}
release() {
  header "release build"
  build release release
  header "release: all tests but the asan-only ones (-j$test_jobs)"
  run_tests build/release -LE asan-only
}
asan() {
  header "ASan+UBSan build"
  build debug-asan debug-asan
  header "ASan+UBSan: all tests but the release-only ones (-j$test_jobs)"
  # The daemons started by the end-to-end tests inherit these.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_tests build/debug-asan -LE release-only
}
tsan() {
  # The engine's threads (pool, fetcher, completer, listener, maintenance) run in the unit
  # tests against the fake store and in the database tests; nothing else is built.
  header "TSan build: unit and database tests"
  build debug-tsan debug-tsan --target pgjobd_unit_tests pgjobd_pg_tests
  header "TSan: unit and database tests (-j$test_jobs)"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
    run_tests build/debug-tsan -L '^(unit|pg)$' -LE release-only
}

# The package as an administrator meets it (issue 43): what `apt install ./pgjobd_*.deb`
# and `apt purge pgjobd` do to this machine. The "previous version" is this build repacked
# with a lower version (dpkg-deb): an upgrade's conffile and maintainer-script path at the
# cost of seconds, not a second build. The daemon runs as the package's pgjobd user against
# the test database, in a schema of its own. systemd is not PID 1 here, so the unit is
# checked with systemd-analyze verify, not started.
package_fail() {
  echo "package: $*" >&2
  return 1
}
package_apt() { DEBIAN_FRONTEND=noninteractive apt-get -y -qq -o Dpkg::Use-Pty=0 "$@"; }
package_stage() {
  if ((EUID != 0)); then
    echo "package: SKIPPED, not root: the stage installs and purges a .deb on this machine"
    return 0
  fi
  local out=build/package conf=/etc/pgjobd/pgjobd.yaml work deb version pid path
  # An array, not a function: `pgjobd run &` must leave $! the daemon's own pid.
  local as_pgjobd=(setpriv --reuid=pgjobd --regid=pgjobd --init-groups --)
  header "package: scripts/package.sh (from HEAD)"
  scripts/package.sh "$out"
  deb=$(echo "$out"/pgjobd_*_"$(dpkg --print-architecture)".deb)
  version=$(dpkg-deb -f "$deb" Version)

  header "package: lintian"
  # Every override says why, in a comment above it.
  local overrides=(scripts/debian/*lintian-overrides)
  if [[ -e ${overrides[0]} ]]; then
    awk '/^#/ { why = 1; next }
      NF && !why { print FILENAME ":" FNR ": an override without a reason above it"; bad = 1 }
      { why = 0 } END { exit bad }' "${overrides[@]}" || return 1
  fi
  lintian --fail-on error,warning "$out/pgjobd_${version}_$(dpkg --print-architecture).changes"

  header "package: install $version~prev, change the config, upgrade to $version"
  work=$(mktemp -d /tmp/pgjobd-package.XXXXXX)
  dpkg-deb -R "$deb" "$work/prev"
  sed -i "s/^Version: .*/Version: $version~prev/" "$work/prev/DEBIAN/control"
  dpkg-deb --root-owner-group -b "$work/prev" "$work/pgjobd_prev.deb" >/dev/null
  if dpkg -s pgjobd >/dev/null 2>&1; then
    echo "package: pgjobd was installed here already; purging it first"
    package_apt purge pgjobd
  fi
  package_apt install "$work/pgjobd_prev.deb"
  getent passwd pgjobd >/dev/null || package_fail "no pgjobd user after install" || return 1
  [[ $(stat -c '%U:%G %a' "$conf") == "root:pgjobd 640" ]] ||
    package_fail "$conf is $(stat -c '%U:%G %a' "$conf"), expected root:pgjobd 640" || return 1
  [[ -z $(find /etc/systemd/system -name pgjobd.service) ]] ||
    package_fail "the unit is enabled after install (it must wait for the config)" || return 1
  # The administrator's change: the test database, a schema of its own, any free port.
  sed -i -e "s|^  url: .*|  url: $PGJOBD_TEST_DATABASE_URL|" \
    -e 's|^  schema: public$|  schema: pgjobd_package|' \
    -e 's|^  listen: 127.0.0.1:9464$|  listen: 127.0.0.1:0|' "$conf"
  cp "$conf" "$work/admin.yaml"
  package_apt install "$PWD/$deb"
  [[ $(dpkg-query -W -f='${Version}' pgjobd) == "$version" ]] ||
    package_fail "not upgraded" || return 1
  cmp "$conf" "$work/admin.yaml" ||
    package_fail "the upgrade changed the administrator's $conf" || return 1
  [[ $(stat -c '%U:%G %a' "$conf") == "root:pgjobd 640" ]] ||
    package_fail "$conf lost its mode" || return 1

  header "package: the installed binary, as the pgjobd user, against the test database"
  [[ $(pgjobd --version) == "pgjobd $version" ]] ||
    package_fail "pgjobd --version: $(pgjobd --version)" || return 1
  zgrep -qF '.SS "pgjobd check-config"' /usr/share/man/man1/pgjobd.1.gz ||
    package_fail "pgjobd(1) lacks the subcommands" || return 1
  "${as_pgjobd[@]}" pgjobd check-config -c "$conf"
  PGOPTIONS=--client-min-messages=warning psql "$PGJOBD_TEST_DATABASE_URL" -qc \
    'drop schema if exists pgjobd_package cascade'
  "${as_pgjobd[@]}" pgjobd migrate -c "$conf"
  "${as_pgjobd[@]}" pgjobd run -c "$conf" >"$work/run.log" 2>&1 &
  pid=$!
  local i
  for i in 1 2 3; do
    "${as_pgjobd[@]}" pgjobd enqueue -c "$conf" echo_job "{\"n\": $i}" >/dev/null
  done
  "${as_pgjobd[@]}" pgjobd enqueue -c "$conf" ping >/dev/null
  local done_jobs=0 deadline=$((SECONDS + 60))
  while ((SECONDS < deadline)); do
    done_jobs=$(psql "$PGJOBD_TEST_DATABASE_URL" -Atc \
      "select count(*) from pgjobd_package.jobs where status = 'done'")
    ((done_jobs == 4)) && break
    sleep 0.2  # the jobs' own progress, polled: nothing to wait on from outside
  done
  kill -TERM "$pid"
  wait "$pid" || package_fail "pgjobd run exited $? after SIGTERM; its log:" ||
    { cat "$work/run.log" >&2; return 1; }
  ((done_jobs == 4)) || package_fail "$done_jobs of 4 jobs done in 60 s; the daemon's log:" ||
    { cat "$work/run.log" >&2; return 1; }

  header "package: systemd-analyze verify, purge"
  local verify
  verify=$(systemd-analyze verify /lib/systemd/system/pgjobd.service 2>&1) && [[ -z $verify ]] ||
    package_fail "systemd-analyze verify: $verify" || return 1
  dpkg -L pgjobd >"$work/files"
  package_apt purge pgjobd
  local left=()
  while read -r path; do
    [[ $path == /. ]] && continue
    if [[ -e $path || -L $path ]] && ! dpkg -S "$path" >/dev/null 2>&1; then left+=("$path"); fi
  done <"$work/files"
  [[ ! -e /etc/pgjobd ]] || left+=(/etc/pgjobd)
  dpkg-statoverride --list "$conf" >/dev/null && left+=("statoverride $conf")
  # Whatever a maintainer script made outside the package's own list (unit symlinks,
  # deb-systemd-helper's state, files of its own) has pgjobd in its name.
  while read -r path; do
    left+=("$path")
  done < <(find /etc /var/lib /var/log /usr /run -name '*pgjobd*' 2>/dev/null)
  ((${#left[@]} == 0)) || package_fail "left after purge: ${left[*]}" || return 1
  # Debian keeps system users on purge (a later user must not inherit files of the uid).
  echo "package: purged, nothing left; the pgjobd user stays, as Debian keeps system users"
  rm -rf "$work"
}

for stage in $stages; do
  case "$stage" in
  lint | fuzz) ;;  # ran above, before the database starts
  release | asan | tsan) timed "$stage" "$stage" ;;
  package) timed package package_stage ;;
  *)
    echo "unknown stage: $stage" >&2
    exit 2
    ;;
  esac
done
header "all stages passed: $stages"
printf '   %s\n' "${timings[@]}"
