#!/bin/sh
# smoke.sh - `make fuzz-smoke`: run each libFuzzer target for FUZZ_SECONDS (default 30), after
# replaying its regression inputs. Called from the build directory of a tree configured with
# CC=clang --enable-fuzzing:   sh smoke.sh TOP_SRCDIR NAME...
# Prints one line per target, "PASS: fuzz_NAME ..." or "FAIL: fuzz_NAME ..." (with what to do),
# then "fuzz-smoke: N passed, N failed". Targets run FUZZ_JOBS at a time (default: nproc).
# Work corpora grow in fuzz-work/NAME (kept between runs), crashes land in fuzz-artifacts/.
#
# Size-stress mode, FUZZ_SIZE=1 (`make fuzz-smoke FUZZ_SIZE=1`): finds what grows with the
# size of an input (memory per byte, quadratic time). Only the targets that take unbounded
# input from outside run (sse, api, dialect, tokenizer; others given are left out), on inputs up to
# FUZZ_MAX_MB (default 16) MiB with -len_control=0, under a memory limit of FUZZ_RSS_MB
# (default 512) MiB (-rss_limit_mb and -malloc_limit_mb; ASan's quarantine cut to 16 MiB so
# that freed memory does not count) and a per-input timeout of 120 s, leak checks off (they
# run each input twice). Besides the usual seeds, each target starts from inputs of
# FUZZ_MAX_MB generated here into fuzz-size/NAME (see size_seeds: one 16 MiB word for the
# tokenizer, which the old merge took 43 bytes a byte for: 700 MiB; a 16 MiB SSE line and
# event; a 16 MiB chunk; a 16 MiB text event of each dialect), so a blowup shows in the first
# seconds. Work corpora: fuzz-work-size/NAME. Takes about FUZZ_SECONDS + 20 s per target.
set -u
top=$1
shift
secs=${FUZZ_SECONDS:-30}
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
t=$top/tests
size=${FUZZ_SIZE:-0}
[ "$size" = 0 ] || size=1
max_mb=${FUZZ_MAX_MB:-16}
rss_mb=${FUZZ_RSS_MB:-512}
work=fuzz-work
[ "$size" -eq 0 ] || work=fuzz-work-size
mkdir -p "$work" fuzz-artifacts fuzz-logs

if [ "$size" -eq 1 ]; then # keep the targets that take unbounded input
    keep=
    for name in "$@"; do
        case $name in sse | api | dialect | tokenizer) keep="$keep $name" ;; esac
    done
    # shellcheck disable=SC2086
    set -- $keep
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
    export ASAN_OPTIONS
fi

# big FILE BYTES PREFIX CHAR SUFFIX: PREFIX, BYTES times CHAR, SUFFIX (printf formats)
big() {
    { printf "$3"; head -c "$2" /dev/zero | tr '\0' "$4"; printf "$5"; } >"$1"
}

size_seeds() { # name -> the directory of its generated inputs of max_mb MiB (made once)
    dir=fuzz-size/$1
    n=$((max_mb * 1048576 - 64))
    if [ ! -f "$dir/.made-$n" ]; then
        rm -rf "$dir"
        mkdir -p "$dir"
        case $1 in
        tokenizer)
            big "$dir/one-word" "$n" '' a ''
            big "$dir/space-run" "$n" 'x' ' ' 'y\n'
            ;;
        sse)
            big "$dir/line-without-newline" "$n" 'data: ' x ''
            big "$dir/one-event" "$n" 'data: ' x '\n\n'
            ;;
        api)
            big "$dir/chunk-content" "$n" '{"choices":[{"delta":{"content":"' a '"}}]}'
            big "$dir/sse-chunk" "$n" 'data: {"choices":[{"delta":{"content":"' a '"}}]}\n\n'
            ;;
        dialect) # one text event of each dialect (Gemini's with CRLF)
            a='event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            big "$dir/anthropic-text-delta" "$n" "$a"'"delta":{"type":"text_delta","text":"' \
                a '"}}\n\n'
            big "$dir/gemini-chunk" "$n" 'data: {"candidates":[{"content":{"parts":[{"text":"' a \
                '"}]}}]}\r\n\r\n'
            r='event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
            big "$dir/responses-text-delta" "$n" "$r"'"delta":"' a '"}\n\n'
            ;;
        esac
        : >"$dir/.made-$n"
    fi
    echo "$dir"
}

seeds() { # the seed directories of a target (as in tests/fuzz/replay.c)
    case $1 in
    sse | api | dialect) echo "$t/fixtures $t/fuzz/corpus/$1" ;;
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
    mkdir -p "$work/$name"
    if [ "$size" -eq 1 ]; then
        opts="-timeout=120 -report_slow_units=120 -rss_limit_mb=$rss_mb"
        opts="$opts -malloc_limit_mb=$rss_mb -detect_leaks=0"
        opts="$opts -max_len=$((max_mb * 1048576)) -len_control=0"
        extra=$(size_seeds "$name")
    else
        opts="-timeout=20 -rss_limit_mb=2048 -max_len=4096"
        extra=
    fi
    # shellcheck disable=SC2046,SC2086
    TOKTERM_DATADIR=$top/data "$bin" -max_total_time="$secs" $opts \
        -print_final_stats=1 -artifact_prefix="fuzz-artifacts/$name-" $dict \
        "$work/$name" $extra $(seeds "$name") >>"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
    mode=
    [ "$size" -eq 0 ] || mode="size-stress: inputs up to $max_mb MiB, memory limit $rss_mb MiB; "
    if [ "$rc" -eq 0 ]; then
        echo "PASS: fuzz_$name (${mode}${secs} s, ${runs:-?} inputs, coverage ${cov:-?} edges," \
            "$(ls "$work/$name" | wc -l) in the work corpus)" >"$res"
    else
        crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
        {
            echo "FAIL: fuzz_$name exited with $rc; input: ${crash:-none saved} (log: $log)"
            echo "  reproduce: $bin ${crash:-}"
            echo "  then fix the bug and keep the input: cp ${crash:-INPUT} $t/fuzz/regress/$name/"
            grep -E '^(==[0-9]+==( |)ERROR|SUMMARY|fuzz: invariant|    #[0-9]+ .* (src|tests)/)' \
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
if [ "$size" -eq 1 ]; then
    echo "fuzz-smoke (size-stress): $pass passed, $fail failed"
else
    echo "fuzz-smoke: $pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
