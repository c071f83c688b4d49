#!/bin/sh
# Regenerate the build system: configure, Makefile.in, aux files.
set -e
cd "$(dirname "$0")"
autoreconf --install --force >/dev/null
echo "autogen: now run ./configure && make"
