#!/usr/bin/env bash
# scripts/fuzz.sh --recover: a campaign leg whose fuzz.sh went away gets one ledger row
# from its log (the fork parent's last status line, the inputs saved since the leg began,
# exit "lost"), once; a leg whose fuzz.sh still runs, or that has its row, gets none.
# The legs are of targets no real campaign has (zz_*): a campaign running on the machine at the
# same time (its fork parent is what --recover looks for) must not change the outcome.
# Usage: fuzz_ledger_test.sh SOURCE_DIR
set -euo pipefail
fuzz="$1/scripts/fuzz.sh"
tmp=$(mktemp -d)
sleeper=""
trap '[[ -n "$sleeper" ]] && kill "$sleeper" 2>/dev/null; rm -rf "$tmp"' EXIT
export POCKET_FUZZ_WORK="$tmp/fuzz" POCKET_FUZZ_LOGS="$tmp/logs"
mkdir -p "$tmp/fuzz/artifacts/zz_a" "$tmp/logs"
ledger="$tmp/fuzz/ledger.tsv"
fail() { echo "FAIL: $*" >&2; [[ -f "$ledger" ]] && cat "$ledger" >&2; exit 1; }
rows() { [[ -f "$ledger" ]] && awk -F'\t' -v t="$1" 'NR > 1 && $3 == t' "$ledger" | wc -l || echo 0; }

# A lost leg: 100 s long, two jobs' status lines (NUL bytes between, as fork mode's logs have),
# one input saved before it began and one during it, a pid that is not a fuzz.sh.
log="$tmp/logs/fuzz-zz_a-campaign-20261207T100000.log"
printf 'INFO: -fork=2\n#5000: cov: 90 ft: 150 corp: 3 exec/s 70 oom/timeout/crash: 0/0/0 time: 5s job: 1 dft_time: 0\n\0\0' >"$log"
printf '#12345: cov: 100 ft: 200 corp: 4 exec/s 50 oom/timeout/crash: 0/0/0 time: 99s job: 2 dft_time: 0\n' >>"$log"
echo "abc1234 $$" >"$log.leg"   # this test's own pid: alive, but not a fuzz.sh
touch -d '2026-12-07 09:00:00 UTC' "$tmp/fuzz/artifacts/zz_a/crash-old"
touch -d '2026-12-07 10:00:00 UTC' "$log.start"
touch -d '2026-12-07 10:00:30 UTC' "$tmp/fuzz/artifacts/zz_a/timeout-new"
touch -d '2026-12-07 10:01:40 UTC' "$log"
bash "$fuzz" --recover tokenize >/dev/null  # another target's legs only: none here
[[ $(rows zz_a) == 0 ]] || fail "--recover tokenize recorded another target's leg"
out=$(bash "$fuzz" --recover)
[[ "$out" == *"12345 executions, 1 inputs saved"* ]] || fail "unexpected message: $out"
[[ $(rows zz_a) == 1 ]] || fail "expected one row"
row=$(awk -F'\t' 'NR == 2 { print $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 }' "$ledger")
[[ "$row" == "2026-12-07T10:00:00Z 2026-12-07T10:01:40Z zz_a 12345 123 100 200 1 lost abc1234" ]] ||
  fail "row: $row"
[[ ! -e "$log.leg" ]] || fail "the .leg file stays after its row is written"
bash "$fuzz" --recover >/dev/null
[[ $(rows zz_a) == 1 ]] || fail "a second --recover wrote the leg again"

# A leg whose fuzz.sh still runs: no row, its .leg file kept.
log2="$tmp/logs/fuzz-zz_b-campaign-20261207T110000.log"
echo '#777: cov: 1 ft: 1 corp: 1 exec/s 7 oom/timeout/crash: 0/0/0 time: 1s job: 1 dft_time: 0' >"$log2"
touch "$log2.start"
(exec -a "bash scripts/fuzz.sh --campaign zz_b" sleep 60) &
sleeper=$!
echo "def5678 $sleeper" >"$log2.leg"
bash "$fuzz" --recover >/dev/null
[[ $(rows zz_b) == 0 && -e "$log2.leg" ]] || fail "a running leg was recorded"
kill "$sleeper"; wait "$sleeper" 2>/dev/null || true; sleeper=""
bash "$fuzz" --recover >/dev/null
[[ $(rows zz_b) == 1 ]] || fail "the leg was not recorded once its fuzz.sh had gone"

# A leg with its row already written (by a fuzz.sh that did not remove .leg): no second row.
log3="$tmp/logs/fuzz-zz_b-campaign-20261207T120000.log"
echo '#888: cov: 1 ft: 1 corp: 1 exec/s 8 oom/timeout/crash: 0/0/0 time: 1s job: 1 dft_time: 0' >"$log3"
touch -d '2026-12-07 12:00:00 UTC' "$log3.start"
printf '2026-12-07T12:00:00Z\t2026-12-07T12:10:00Z\tzz_b\t888\t1\t1\t1\t0\t0\tdef5678\tcpu\t0\n' >>"$ledger"
echo "def5678 1" >"$log3.leg"
bash "$fuzz" --recover >/dev/null
[[ $(rows zz_b) == 2 && ! -e "$log3.leg" ]] || fail "a recorded leg was recorded again"

# Bad target: exit 2.
rc=0; bash "$fuzz" --recover no_such_target 2>/dev/null || rc=$?
[[ $rc == 2 ]] || fail "--recover no_such_target exited $rc"
echo "fuzz ledger: lost legs recorded once, running and recorded legs left alone"
