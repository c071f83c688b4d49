#!/bin/sh
# Build tokterm twice (plain, and with ASan+UBSan) in separate build trees and run every test
# in both; then valgrind memcheck over real runs of the plain build, and each libFuzzer target
# for FUZZ_SECONDS (default 30) in a clang tree (_build/fuzz). Ends with one line:
# "N passed, N failed". Exit status 0 only when nothing failed.
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

# valgrind: one test per run (tests/valgrind/run.py prints TAP); needs the plain build
if command -v valgrind >/dev/null 2>&1 && [ -x "$top/_build/plain/src/tokterm" ]; then
    echo "=== valgrind: memcheck over scripted mode, subcommands and a TUI session"
    out="$top/_build/plain/valgrind.out"
    TOKTERM="$top/_build/plain/src/tokterm" srcdir="$top/tests" \
        python3 "$top/tests/valgrind/run.py" >"$out" 2>&1 || status=1
    grep -E '^not ok' "$out" | grep -v '# TODO' | head -20
    p=$(grep -cE '^ok ' "$out") f=$(grep -E '^not ok' "$out" | grep -vc '# TODO')
    echo "=== valgrind: $p passed, $f failed"
    pass=$((pass + p)); fail=$((fail + f))
else
    echo "=== valgrind: skipped (valgrind or the plain build is missing)"
fi

# fuzzing: each libFuzzer target counts as one test
if command -v clang >/dev/null 2>&1; then
    dir="$top/_build/fuzz"
    mkdir -p "$dir"
    echo "=== fuzz build: ./configure CC=clang --enable-fuzzing; make fuzz-smoke"
    if (cd "$dir" && "$top/configure" -q CC=clang --enable-fuzzing >configure.out 2>&1); then
        (cd "$dir" && make -s -j"$jobs" fuzz-smoke FUZZ_SECONDS="${FUZZ_SECONDS:-30}" \
            >smoke.out 2>&1) || status=1
        grep -vE '^PASS:' "$dir/smoke.out" | grep -E '^(FAIL|  )' | head -30
        p=$(grep -c '^PASS: fuzz_' "$dir/smoke.out") f=$(grep -c '^FAIL: fuzz_' "$dir/smoke.out")
        if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
            tail -20 "$dir/smoke.out"
            f=1
        fi
        echo "=== fuzz: $p passed, $f failed"
        pass=$((pass + p)); fail=$((fail + f))
    else
        tail -20 "$dir/configure.out"
        echo "=== fuzz: configure FAILED"
        fail=$((fail + 1)); status=1
    fi
else
    echo "=== fuzz: clang is missing"
    fail=$((fail + 1)); status=1
fi
echo "$pass passed, $fail failed"
[ "$status" -eq 0 ] && [ "$fail" -eq 0 ]
