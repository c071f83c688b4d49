#!/bin/sh
# Build the store benchmark in its own optimised build tree and run it.
# usage: bench/store/run.sh [store_bench options: --cache N --messages M --conversation K --dir D]
# Results belong in bench/store/RESULTS.md (with this command line and the machine).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build="$top/_build/store-bench"
[ -x "$top/configure" ] || (cd "$top" && ./autogen.sh)
mkdir -p "$build"
if [ ! -f "$build/Makefile" ]; then
    (cd "$build" && "$top/configure" -q CFLAGS="-O2 -g" >/dev/null)
fi
make -C "$build" bench/store/store_bench >"$build/store-bench-make.log" 2>&1 || {
    tail -30 "$build/store-bench-make.log"
    exit 1
}
echo "# $(uname -sm), $(nproc 2>/dev/null || echo '?') cores, $(date -u +%Y-%m-%d)"
exec "$build/bench/store/store_bench" "$@"
