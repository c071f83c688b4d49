#!/bin/sh
# Build tokterm twice (plain, and with ASan+UBSan) in separate build trees and run every test
# in both; then valgrind memcheck over real runs of the plain build, and each libFuzzer target
# for FUZZ_SECONDS (default 30) in a clang tree (_build/fuzz). Ends with one line:
# "N passed, N failed". Exit status 0 only when nothing failed.
#
# The three trees (_build/plain, _build/asan, _build/fuzz) are VPATH builds of a copy of the
# source, _build/src: the tracked files and new files git does not ignore, refreshed at every
# run (timestamps kept, so rebuilds stay incremental; autogen.sh runs there when configure.ac,
# Makefile.am or m4/ changed). The checkout itself is left alone, so an in-tree build
# (./configure && make, the README's quick start) and these builds live side by side; automake
# refuses a VPATH build of a source directory that is configured in-tree. Outside a git
# checkout (a release tarball) the trees build from the source directory itself, which must
# then not be configured in-tree.
#
# Tests skipped for a missing program are listed. Under CI (CI set, and not 0/false/no) or with
# TOKTERM_REQUIRE_TOOLS=1 they fail instead, and so does any other skip and each missing
# program itself: CI installs every package in .ci/packages, so nothing has a reason to be
# skipped there. A stage that fails without a failed test to show for it (make check dying
# before or after its summary, run.py or fuzz-smoke exiting non-zero) counts as a failure, so
# the last line never says "0 failed" when the exit status is not 0
# (tests/e2e/test_check_all.py checks this with stand-ins for make and the tools).
set -u
top=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$top" || exit 1
jobs=$(nproc 2>/dev/null || echo 2)
pass=0 fail=0 skip=0 status=0

yes_var() { # true when $1 is set to something other than "", 0, false or no
    case $(printf '%s' "$1" | tr '[:upper:]' '[:lower:]') in
    "" | 0 | false | no) return 1 ;;
    esac
    return 0
}
if yes_var "${CI:-}" || yes_var "${TOKTERM_REQUIRE_TOOLS:-}"; then
    TOKTERM_REQUIRE_TOOLS=1 # read by tests/e2e/ttlib.py too
    echo "=== CI: a missing tool or a skipped test counts as a failure"
else
    TOKTERM_REQUIRE_TOOLS=
fi
export TOKTERM_REQUIRE_TOOLS

give_up() { # message: print it and the summary line, exit 1
    echo "check-all: $*"
    echo "0 passed, 1 failed"
    exit 1
}

missing=
for tool in python3 tmux valgrind clang curl openssl nginx zsh fish node npm redis-server; do
    command -v "$tool" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$tool" \
        >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ] && [ -n "$TOKTERM_REQUIRE_TOOLS" ]; then
    # Under CI each missing program is a failure of its own, whether or not a test notices.
    n=0
    for tool in $missing; do n=$((n + 1)); done
    echo "=== FAILED: missing programs:$missing ($n failure(s); sudo apt-get install -y" \
        "\$(cat .ci/packages) installs them)"
    fail=$((fail + n)); status=1
elif [ -n "$missing" ]; then
    echo "=== missing programs:$missing (tests that need them are skipped;" \
        "sudo apt-get install -y \$(cat .ci/packages) installs them)"
fi

# snapshot: refresh _build/src from the working tree (tracked files and untracked ones git does
# not ignore, without deleted ones) and regenerate its build system when needed.
snapshot() {
    s=$top/_build/src
    mkdir -p "$top/_build" || return 1
    list=$top/_build/src.files
    {
        git -C "$top" ls-files -z -c -o --exclude-standard -- . ':(exclude)_build' &&
            printf '\0deleted:\0' && git -C "$top" ls-files -z -d
    } >"$list.new" || return 1
    # A file added, removed or renamed: start from an empty copy, so nothing stale is left.
    if ! cmp -s "$list.new" "$list" || [ ! -d "$s" ]; then
        rm -rf "$s" && mkdir -p "$s" || return 1
    fi
    git -C "$top" ls-files -z -c -o --exclude-standard -- . ':(exclude)_build' |
        tar -c -f - --null --verbatim-files-from -T - --ignore-failed-read \
            --warning=no-failed-read | tar -x -f - -C "$s" --no-same-owner || return 1
    mv "$list.new" "$list" || return 1
    stamp=$s/.check-all-autogen
    if [ ! -f "$stamp" ] || [ ! -x "$s/configure" ] || [ -n "$(find "$s" -path "$s/autom4te.cache" \
        -prune -o \( -name '*.ac' -o -name '*.am' -o -name '*.mk' -o -name '*.m4' \
        -o -name autogen.sh \) -newer "$stamp" -print | head -1)" ]; then
        echo "=== source copy: _build/src/autogen.sh"
        (cd "$s" && ./autogen.sh >autogen.out 2>&1) || { cat "$s/autogen.out"; return 1; }
        touch "$stamp"
    fi
}

# The real MCP servers of tests/e2e/test_mcp.py and bench/mcp (tests/mcp/package.json): npm ci
# when node_modules is missing or older than the lock file. The tests find them through
# TOKTERM_MCP_MODULES (node_modules is not copied into _build/src).
mcp=$top/tests/mcp
if [ -f "$mcp/package-lock.json" ] && command -v npm >/dev/null 2>&1 &&
    { [ ! -f "$mcp/node_modules/.package-lock.json" ] ||
        [ "$mcp/package-lock.json" -nt "$mcp/node_modules/.package-lock.json" ]; }; then
    echo "=== tests/mcp: npm ci (the MCP servers the tests run)"
    mkdir -p "$top/_build"
    if ! (cd "$mcp" && npm ci --no-audit --no-fund >"$top/_build/npm-ci.out" 2>&1); then
        tail -20 "$top/_build/npm-ci.out"
        echo "=== tests/mcp: npm ci FAILED (the MCP tests skip, or fail under CI)"
        fail=$((fail + 1)); status=1
    fi
fi
TOKTERM_MCP_MODULES=$mcp/node_modules
export TOKTERM_MCP_MODULES

gittop=$(git -C "$top" rev-parse --show-toplevel 2>/dev/null) &&
    gittop=$(cd "$gittop" && pwd -P) || gittop=
if [ "$gittop" = "$top" ]; then
    snapshot || give_up "could not prepare the source copy _build/src (see above)"
    src=$top/_build/src
elif [ -f "$top/config.status" ]; then
    give_up "$top is configured in-tree (config.status) and is not a git checkout (or git is" \
        "missing), so there is no pristine copy to build out of tree. Run 'make distclean'" \
        "there first, or run this script in a git clone."
else
    src=$top
    [ -x configure ] || ./autogen.sh || give_up "autogen.sh failed"
fi

prepare_tree() { # dir: create it; empty it (but the fuzz corpora) if built from another source
    mkdir -p "$1" || return 1
    if [ "$(cat "$1/.check-all-srcdir" 2>/dev/null)" != "$src" ]; then
        find "$1" -mindepth 1 -maxdepth 1 ! -name fuzz-work ! -name fuzz-artifacts \
            -exec rm -rf {} + || return 1
        printf '%s\n' "$src" >"$1/.check-all-srcdir"
    fi
}

run_tree() { # name, configure args...
    name=$1; shift
    dir="$top/_build/$name"
    echo "=== $name build: ./configure $*"
    if ! prepare_tree "$dir" || ! (cd "$dir" && "$src/configure" -q "$@" >configure.out 2>&1 &&
        make -s -j"$jobs" >make.out 2>&1); then
        cat "$dir/configure.out" "$dir/make.out" 2>/dev/null | tail -40
        echo "=== $name: build FAILED"
        fail=$((fail + 1)); status=1
        return
    fi
    (cd "$dir" && make -s -j"$jobs" check >check.out 2>&1)
    rc=$?
    [ "$rc" -eq 0 ] || status=1
    grep -E '^(FAIL|XPASS|ERROR|SKIP):' "$dir/check.out"
    # each failed point with its whole diagnostic (a screen capture is ~35 lines), so that a
    # failure seen only on another machine can be read from this output alone
    [ -f "$dir/test-suite.log" ] && awk '
        FNR == 1 { keep = 0 }
        /^not ok/ && !/# TODO/ { keep = 1; n = 0; print FILENAME ":" $0; next }
        keep && /^(PASS|FAIL|ERROR|XFAIL|XPASS|SKIP):/ { next } # lines of the test driver
        keep && /^#/ && n < 60 { n++; print FILENAME ":" $0; next }
        { keep = 0 }' "$dir"/tests/*/*.log 2>/dev/null | head -200
    p=$(sed -n 's/^# PASS: *//p' "$dir/check.out" | tail -1)
    f=$(sed -n 's/^# FAIL: *//p' "$dir/check.out" | tail -1)
    e=$(sed -n 's/^# ERROR: *//p' "$dir/check.out" | tail -1)
    x=$(sed -n 's/^# XPASS: *//p' "$dir/check.out" | tail -1)
    s=$(sed -n 's/^# SKIP: *//p' "$dir/check.out" | tail -1)
    if [ -z "$p$f$e" ]; then # no summary: make check stopped before running the tests
        tail -40 "$dir/check.out"
        echo "=== $name: make check exited $rc before its summary: counted as a failure"
        e=1
    elif [ "$rc" -ne 0 ] && [ "$((${f:-0} + ${e:-0} + ${x:-0}))" -eq 0 ]; then
        tail -20 "$dir/check.out" # it failed after (or outside) the tests it counted
        echo "=== $name: make check exited $rc with no failure in its summary: counted as one"
        e=1
    fi
    echo "=== $name: ${p:-0} passed, ${f:-0} failed, ${e:-0} errors, ${s:-0} skipped"
    pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0} + ${e:-0} + ${x:-0})); skip=$((skip + ${s:-0}))
    if [ -n "$TOKTERM_REQUIRE_TOOLS" ] && [ "${s:-0}" -gt 0 ]; then
        fail=$((fail + s)); status=1
    fi
}
run_tree plain
run_tree asan --enable-asan

# valgrind: one test per run (tests/valgrind/run.py prints TAP); needs the plain build
if command -v valgrind >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1 &&
    [ -x "$top/_build/plain/src/tokterm" ]; then
    echo "=== valgrind: memcheck over scripted mode, subcommands and a TUI session"
    out="$top/_build/plain/valgrind.out"
    TOKTERM="$top/_build/plain/src/tokterm" srcdir="$src/tests" \
        python3 "$src/tests/valgrind/run.py" >"$out" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || status=1
    grep -E '^not ok' "$out" | grep -v '# TODO' | head -20
    grep -E '^ok .*# SKIP' "$out"
    p=$(grep -E '^ok ' "$out" | grep -vc '# SKIP') s=$(grep -cE '^ok .*# SKIP' "$out")
    f=$(grep -E '^not ok' "$out" | grep -vc '# TODO')
    if ! grep -qE '^1\.\.[0-9]' "$out"; then # no plan: run.py died
        tail -20 "$out"
        f=$((f + 1))
    elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        tail -20 "$out"
        echo "=== valgrind: run.py exited $rc with no failed test: counted as a failure"
        f=1
    fi
    echo "=== valgrind: $p passed, $f failed, $s skipped"
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    if [ -n "$TOKTERM_REQUIRE_TOOLS" ] && [ "$s" -gt 0 ]; then
        fail=$((fail + s)); status=1
    fi
else
    why="valgrind or python3 is missing"
    [ -x "$top/_build/plain/src/tokterm" ] || why="the plain build is missing"
    if [ -n "$TOKTERM_REQUIRE_TOOLS" ]; then
        echo "=== valgrind: FAILED ($why)"
        fail=$((fail + 1)); status=1
    else
        echo "=== valgrind: SKIP ($why)"
        skip=$((skip + 1))
    fi
fi

# fuzzing: each libFuzzer target counts as one test
if command -v clang >/dev/null 2>&1; then
    dir="$top/_build/fuzz"
    echo "=== fuzz build: ./configure CC=clang --enable-fuzzing; make fuzz-smoke"
    if prepare_tree "$dir" &&
        (cd "$dir" && "$src/configure" -q CC=clang --enable-fuzzing >configure.out 2>&1); then
        (cd "$dir" && make -s -j"$jobs" fuzz-smoke FUZZ_SECONDS="${FUZZ_SECONDS:-30}" \
            >smoke.out 2>&1)
        rc=$?
        # size stress (tests/fuzz/smoke.sh): sse, api, dialect, tokenizer on 16 MiB inputs
        (cd "$dir" && make -s fuzz-smoke FUZZ_SIZE=1 FUZZ_SECONDS=20 >>smoke.out 2>&1) || rc=1
        [ "$rc" -eq 0 ] || status=1
        grep -E '^(FAIL|  )' "$dir/smoke.out" | grep -vE '^  (CC|CCLD|AR) ' | head -30
        p=$(grep -c '^PASS: fuzz_' "$dir/smoke.out") f=$(grep -c '^FAIL: fuzz_' "$dir/smoke.out")
        if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
            tail -20 "$dir/smoke.out"
            f=1
        elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
            tail -20 "$dir/smoke.out"
            echo "=== fuzz: make fuzz-smoke exited $rc with no FAIL line: counted as a failure"
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
[ "$skip" -eq 0 ] || echo "=== $skip skipped (the SKIP lines above say why)"
# The last line and the exit status agree: a failed stage is never "0 failed".
[ "$status" -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
