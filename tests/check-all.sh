#!/bin/sh
# Build tokterm twice (plain, and with ASan+UBSan) in separate build trees and run every test
# in both. Ends with one line: "N passed, N failed". Exit status 0 only when nothing failed.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
jobs=$(nproc 2>/dev/null || echo 2)
[ -x configure ] || ./autogen.sh || exit 1
pass=0 fail=0 status=0
run_tree() { # name, configure args...
    name=$1; shift
    dir="$top/_build/$name"
    mkdir -p "$dir"
    echo "=== $name build: ./configure $*"
    if ! (cd "$dir" && "$top/configure" -q "$@" >configure.out 2>&1 && make -s -j"$jobs" >make.out 2>&1); then
        cat "$dir/configure.out" "$dir/make.out" 2>/dev/null | tail -40
        echo "=== $name: build FAILED"
        fail=$((fail + 1)); status=1
        return
    fi
    (cd "$dir" && make -s -j"$jobs" check >check.out 2>&1) || status=1
    grep -E '^(PASS|FAIL|XPASS|ERROR):' "$dir/check.out" | grep -v '^PASS' || true
    [ -f "$dir/test-suite.log" ] && grep -E '^(not ok|# failed|#   )' "$dir"/tests/*/*.log 2>/dev/null | head -40
    p=$(sed -n 's/^# PASS: *//p' "$dir/check.out" | tail -1)
    f=$(sed -n 's/^# FAIL: *//p' "$dir/check.out" | tail -1)
    e=$(sed -n 's/^# ERROR: *//p' "$dir/check.out" | tail -1)
    s=$(sed -n 's/^# SKIP: *//p' "$dir/check.out" | tail -1)
    echo "=== $name: ${p:-0} passed, ${f:-0} failed, ${e:-0} errors, ${s:-0} skipped"
    pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0} + ${e:-0}))
}
run_tree plain
run_tree asan --enable-asan
echo "$pass passed, $fail failed"
[ "$status" -eq 0 ] && [ "$fail" -eq 0 ]
