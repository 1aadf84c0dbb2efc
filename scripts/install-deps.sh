#!/usr/bin/env bash
# Installs the Debian 12 packages pgjobd needs to build, test and run. Quick when they are
# already there (one dpkg query), so every script can call it. --with-test adds what the
# test suite's operations checks use (promtool, PyYAML), the fuzz stage (clang-14 with
# libFuzzer), the PgBouncer end-to-end test (pgbouncer) and the dashboard's browser tests
# (tests/browser: headless chromium, chromium-driver, python3-selenium), the network
# blackhole test (iproute2's ip and tc, nftables where the kernel has no sch_netem);
# --with-tools the linters, --with-bench gnuplot for bench/run.sh's chart, --with-package
# what scripts/package.sh and the package stage use (debhelper, help2man, lintian).
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config git ca-certificates
  ccache  # the compiler launcher of every build (CMakeLists.txt): warm rebuilds in seconds
  libpqxx-dev libspdlog-dev prometheus-cpp-dev libcivetweb-dev nlohmann-json3-dev
  libyaml-cpp-dev libgtest-dev libgmock-dev libcli11-dev libcurl4-openssl-dev
  postgresql-15 postgresql-client-15 curl procps
  libhowardhinnant-date-dev tzdata  # IANA time zones for schedules (src/schedule)
  libcrypt-dev  # libxcrypt: crypt(3) for the dashboard's password hashes (src/ui/auth.cpp)
  libsystemd-dev  # sd_notify(3) and sd_watchdog_enabled(3) (src/systemd); libsystemd0 is on every Debian
)
for flag in "$@"; do
  case "$flag" in
    # promtool; compose file parsing; clang-14 for the fuzz stage, whose -fsanitize=fuzzer
    # runtime and sanitizers are in libclang-rt-14-dev (only recommended by clang-14).
    # chromium, chromium-driver and python3-selenium: tests/browser (Debian's /usr/bin/python3).
    # systemd: systemd-analyze verify of config/pgjobd.service (tests/ops/systemd_unit_test.sh).
    # iproute2, nftables: FaultsStallE2E's network namespace and blackhole (tests/support/netns.*).
    --with-test) packages+=(python3-yaml prometheus clang-14 libclang-rt-14-dev libfuzzer-14-dev pgbouncer
                            chromium chromium-driver python3-selenium systemd iproute2 nftables) ;;
    --with-tools) packages+=(clang-format clang-tidy) ;;
    # gnuplot: bench/run.sh's charts; nodejs: bench/http.sh's HTTP server and bench/peers.
    --with-bench) packages+=(gnuplot-nox nodejs) ;;
    # build-essential: dpkg-buildpackage checks for it besides debian/control's Build-Depends.
    --with-package) packages+=(build-essential debhelper help2man lintian) ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
