#!/bin/sh
# smoke.sh - `make fuzz-smoke`: run each libFuzzer target for FUZZ_SECONDS (default 30), after
# replaying its regression inputs. Called from the build directory of a tree configured with
# CC=clang --enable-fuzzing:   sh smoke.sh TOP_SRCDIR NAME...
# Prints one line per target, "PASS: fuzz_NAME ..." or "FAIL: fuzz_NAME ..." (with what to do),
# then "fuzz-smoke: N passed, N failed". Targets run FUZZ_JOBS at a time (default: nproc).
# Work corpora grow in fuzz-work/NAME (kept between runs), crashes land in fuzz-artifacts/.
set -u
top=$1
shift
secs=${FUZZ_SECONDS:-30}
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
t=$top/tests
mkdir -p fuzz-work fuzz-artifacts fuzz-logs

seeds() { # the seed directories of a target (as in tests/fuzz/replay.c)
    case $1 in
    sse | api) echo "$t/fixtures $t/fuzz/corpus/$1" ;;
    theme) echo "$top/themes $t/theme $t/fuzz/corpus/theme" ;;
    tokenizer) echo "$t/tokenizer/corpus $t/fuzz/corpus/tokenizer" ;;
    *) echo "$t/fuzz/corpus/$1" ;;
    esac
}

run_one() { # name -> writes fuzz-logs/NAME.result
    name=$1
    bin=./tests/fuzz/fuzz_$name
    log=fuzz-logs/$name.log
    res=fuzz-logs/$name.result
    : >"$log"
    if [ ! -x "$bin" ]; then
        echo "FAIL: fuzz_$name: $bin was not built" >"$res"
        return
    fi
    dict=
    [ -f "$t/fuzz/$name.dict" ] && dict=-dict=$t/fuzz/$name.dict
    regress=$(find "$t/fuzz/regress/$name" -type f ! -name 'README*' 2>/dev/null | sort)
    if [ -n "$regress" ]; then
        # shellcheck disable=SC2086
        if ! "$bin" $regress >>"$log" 2>&1; then
            echo "FAIL: fuzz_$name: a regression input of tests/fuzz/regress/$name fails again" \
                "(see $log)" >"$res"
            return
        fi
    fi
    mkdir -p "fuzz-work/$name"
    # shellcheck disable=SC2046,SC2086
    TOKTERM_DATADIR=$top/data "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
        -max_len=4096 \
        -print_final_stats=1 -artifact_prefix="fuzz-artifacts/$name-" $dict \
        "fuzz-work/$name" $(seeds "$name") >>"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
    if [ "$rc" -eq 0 ]; then
        echo "PASS: fuzz_$name (${secs} s, ${runs:-?} inputs, coverage ${cov:-?} edges," \
            "$(ls "fuzz-work/$name" | wc -l) in the work corpus)" >"$res"
    else
        crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
        {
            echo "FAIL: fuzz_$name exited with $rc; input: ${crash:-none saved} (log: $log)"
            echo "  reproduce: $bin ${crash:-}"
            echo "  then fix the bug and keep the input: cp ${crash:-INPUT} $t/fuzz/regress/$name/"
            grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz: invariant|    #[0-9]+ .* (src|tests)/)' \
                "$log" | head -12 | sed 's/^/  /'
        } >"$res"
    fi
}

running=0
for name in "$@"; do
    run_one "$name" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait
        running=0
    fi
done
wait

pass=0 fail=0
for name in "$@"; do
    cat "fuzz-logs/$name.result"
    if grep -q '^PASS' "fuzz-logs/$name.result"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
echo "fuzz-smoke: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
