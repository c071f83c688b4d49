#!/bin/sh
# run.sh - benchmark tokterm's tokenizer against tiktoken and gpt-tokenizer (npm).
#
#   bench/tokenizer/run.sh [BUILDDIR]
#
# BUILDDIR is a configured build tree (default: _build/bench, configured on first use); the
# script builds bench/tokenizer/tokbench there, installs the npm packages of package.json into
# bench/tokenizer/node_modules (needs the npm registry once; never committed), builds a 10 MB
# mixed corpus under $TMPDIR/tokterm-tokbench and prints a Markdown report (also written to
# $TMPDIR/tokterm-tokbench/report.md). Environment: BENCH_REPS (default 3), BENCH_JS_RUN (length
# of the one-character runs given to the JS tokenizers, which are quadratic; default 30000).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${1:-$top/_build/bench}
work=${TMPDIR:-/tmp}/tokterm-tokbench

if [ ! -f "$build/Makefile" ]; then
    mkdir -p "$build"
    (cd "$build" && "$top/configure" -q)
fi
make -C "$build" -s bench/tokenizer/tokbench
(cd "$here" && npm install --no-audit --no-fund --no-package-lock --silent)
TOKTERM_DATADIR="$top/data" NODE_PATH="$here/node_modules" \
    node "$here/bench.js" "$build/bench/tokenizer/tokbench" "$work"
