#!/bin/sh
# run-all.sh - run every benchmark and print one Markdown table of ratios against their targets
# (issue 14), so that a regression is visible in one command.
#
#   bench/run-all.sh [--build DIR] [--quick] [--no-fail] [--rounds N] [--only STEPS]
#                    [--skip STEPS] [--logs DIR] [--work DIR]
#
# DIR is a configured and built build tree (default _build/plain; $BENCH_BUILD): its
# src/tokterm, bench/store/store_bench, and bench/tokenizer/tokbench (made on demand). Steps, in
# order: stream (bench/stream/run.py), resume (bench/resume/run.py), tui (bench/tui/run.py),
# highlight (bench/highlight/run.py), tokenizer (bench/tokenizer/run.sh), store (store_bench,
# bench/store/search_e2e.py and bench/store/search_big.py), batch (bench/batch/run.py), mcp
# (bench/mcp/run.py), redis (bench/redis/run.py: what state = redis adds to a request). Each comparison
# runs its competitors interleaved in one run, 11 rounds (--quick: 3, smaller data, no
# tokenizer), and reports medians; the table's header gives the commit ("-dirty" when the tree
# differs from it), the load average at the start and the end, and the run time. Exit 1 when a
# target is missed or a measure could not be taken (--no-fail: exit 0). Every benchmark's whole
# output is kept in --logs (default $TMPDIR/tokterm-bench-DATE).
# Run time on the 2-core VM: 6 min 08-22 s quiet with the store's databases kept (412dc47), 6 min
# 57 s when they are made afresh (da31d99), 7-13 min at load 4-10; the first run ~2.5 min more
# (the databases' first build); --quick ~2 minutes
# (bench/README.md).
# Needs: python3, cc, curl, tmux, redis-server, node and npm (the SDK and JS tokenizers; their packages are
# installed into bench/*/node_modules on first use).
exec python3 "$(dirname "$0")/run_all.py" "$@"
