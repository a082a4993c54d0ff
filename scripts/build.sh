#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Configures and builds smcrbd out of tree.
#   scripts/build.sh [BUILDDIR [configure options...]]   (default: build)
# The project's own builds turn warnings into errors (--enable-werror before
# the options given, so --disable-werror there still wins); configure alone
# does not.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
builddir=${1:-build}; shift || true
case $builddir in /*) ;; *) builddir=$top/$builddir ;; esac

if [ -f "$top/config.status" ]; then
    echo "build.sh: the source tree is configured in place; run 'make distclean' first" >&2
    exit 1
fi
cd "$top"
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi
mkdir -p "$builddir"
cd "$builddir"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
    "$top/configure" --enable-werror "$@"
fi
make -j"$(nproc)"
