#!/usr/bin/env bash
# Installs the Debian 12 packages pgjobd needs to build, test and run. Quick when they are
# already there (one dpkg query), so every script can call it. --with-test adds what the
# test suite's operations checks use (promtool, PyYAML), the fuzz stage (clang-14 with
# libFuzzer), the PgBouncer end-to-end test (pgbouncer) and the dashboard's browser tests
# (tests/browser: headless chromium, chromium-driver, python3-selenium), the network
# blackhole test (iproute2's ip and tc, nftables where the kernel has no sch_netem), the
# README's examples of waiting for a result (tests/examples: python3-psycopg, node-pg);
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
    # python3-psycopg, node-pg: tests/examples, run by ExamplesE2E (node-pg: see below).
    # wrk: bench/http.sh's anchor, which tests/ops/http_smoke_test.sh runs.
    --with-test) packages+=(python3-yaml prometheus clang-14 libclang-rt-14-dev libfuzzer-14-dev pgbouncer
                            chromium chromium-driver python3-selenium systemd iproute2 nftables
                            python3-psycopg wrk)
                 with_node_pg=1 ;;
    --with-tools) packages+=(clang-format clang-tidy) ;;
    # gnuplot: bench/run.sh's charts; nodejs: bench/http.sh's HTTP server and bench/peers;
    # wrk: bench/http.sh's anchor.
    --with-bench) packages+=(gnuplot-nox nodejs wrk) ;;
    # build-essential: dpkg-buildpackage checks for it besides debian/control's Build-Depends.
    --with-package) packages+=(build-essential debhelper help2man lintian) ;;
  esac
done

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# node-pg depends on Debian's nodejs: next to another build of node (NodeSource's, which does
# not satisfy Debian's node modules) apt cannot install it; its modules are then unpacked
# into node_pg_dir, which ExamplesE2E adds to NODE_PATH.
node_pg_dir=/usr/local/lib/debian-node-pg
if [[ -n "${with_node_pg:-}" ]] && ! installed node-pg; then
  export DEBIAN_FRONTEND=noninteractive
  if ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null; then apt-get update -qq; fi
  if apt-get install -s -qq --no-install-recommends node-pg >/dev/null 2>&1; then
    echo "installing: node-pg" >&2
    apt-get install -y -qq --no-install-recommends node-pg >/dev/null
  elif [[ ! -e "$node_pg_dir/usr/share/nodejs/pg/package.json" ]]; then
    # Debian's pure-JavaScript modules, unpacked where ExamplesE2E looks (NODE_PATH): the
    # same code as the package, without its dependency on Debian's nodejs.
    echo "unpacking node-pg into $node_pg_dir: apt cannot install it next to this nodejs" >&2
    debs=$(mktemp -d)
    chmod 755 "$debs"  # apt downloads as its own user, _apt
    (cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root node-pg node-split2 node-readable-stream \
      node-inherits node-safe-buffer node-string-decoder node-util-deprecate \
      node-core-util-is node-isarray node-process-nextick-args node-through2 node-xtend)
    mkdir -p "$node_pg_dir"
    for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$node_pg_dir"; done
    rm -rf "$debs"
  fi
fi
