#!/usr/bin/env bash
# Builds the Debian package (scripts/debian/, debhelper) from the committed tree, HEAD:
#
#   scripts/package.sh [OUT-DIR]     (default build/package)
#
# git archive HEAD goes to OUT-DIR/src, with scripts/debian as its debian/ and a changelog
# for the version of CMakeLists.txt's project() (PGJOBD_PACKAGE_VERSION overrides it);
# dpkg-buildpackage -b then leaves pgjobd_<version>_<arch>.deb (and its -dbgsym, the debug
# symbols for the watchdog's core dumps) in OUT-DIR, whose path it prints last. Uncommitted
# changes are not in the package: commit first. Compiles through ccache like every build
# here, PGJOBD_PACKAGE_JOBS (default 2) at a time.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-build/package}
scripts/install-deps.sh --with-package
version=${PGJOBD_PACKAGE_VERSION:-$(sed -nE 's/^project\(pgjobd VERSION ([^ )]+).*/\1/p' \
  CMakeLists.txt)}
if [[ -z $version ]]; then
  echo "package.sh: no project(pgjobd VERSION ...) in CMakeLists.txt" >&2
  exit 1
fi

# A fresh copy each time. ccache still hits: CMakeLists.txt's CCACHE_BASEDIR makes the
# compile's paths relative and debian/rules keeps the build path out of the flags.
mkdir -p "$out"
out=$(realpath "$out")
src=$out/src
rm -rf "$src" "$out"/pgjobd_* "$out"/pgjobd-dbgsym_*
mkdir "$src"
git archive HEAD | tar -x -C "$src"
cp -a "$src/scripts/debian" "$src/debian"

# debian/changelog: one entry for this version, dated by the commit, so that two builds of
# one commit are the same package.
maintainer=$(sed -n 's/^Maintainer: //p' "$src/debian/control")
commit=$(git rev-parse --short=12 HEAD)
cat >"$src/debian/changelog" <<CHANGELOG
pgjobd ($version) unstable; urgency=medium

  * Built from commit $commit.

 -- $maintainer  $(date -R -u -d "@$(git log -1 --format=%ct HEAD)")
CHANGELOG

# debhelper (compat 13) gives the build a HOME of its own: name the cache the other
# builds use, or a package build would compile everything again.
export CCACHE_DIR=${CCACHE_DIR:-$(ccache -k cache_dir)}
export DEB_BUILD_OPTIONS="parallel=${PGJOBD_PACKAGE_JOBS:-2} ${DEB_BUILD_OPTIONS:-}"
(cd "$src" && dpkg-buildpackage -us -uc -b)
ls "$out"/pgjobd_"${version}"_*.deb
