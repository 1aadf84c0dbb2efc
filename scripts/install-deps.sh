#!/usr/bin/env bash
# Installs the Debian 12 packages pgjobd needs to build, test and run. Quick when they are
# already there (one dpkg query), so every script can call it.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config git ca-certificates
  libpqxx-dev libspdlog-dev prometheus-cpp-dev libcivetweb-dev nlohmann-json3-dev
  libyaml-cpp-dev libgtest-dev libgmock-dev libcli11-dev libcurl4-openssl-dev
  postgresql-15 postgresql-client-15 curl procps
)
if [[ "${1:-}" == "--with-tools" ]]; then
  packages+=(clang-format clang-tidy)
fi

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
