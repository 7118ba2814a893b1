#!/bin/sh
# The store's figures side by side (benches/README.md "Compressed buffers"), one build after
# the other in one run: DATA the replay files (benches/store_replay_dump.py), then for each
# build LABEL, its `store_replay` and its `store` bench binary. One archive per process for
# the replay (pages are recycled process-wide), then the day of cc-metric-store's shape
# lossless and at precision 5, then the criterion read and append figures.
# usage: store_ab.sh DATA LABEL REPLAY STORE [LABEL REPLAY STORE ...]
set -e
data=$1; shift
while [ $# -ge 3 ]; do
  label=$1 r=$2 s=$3; shift 3
  echo "== $label: replay, one archive a process"
  for f in "$data"/*.tsv; do
    d=$(mktemp -d); ln -s "$f" "$d/"
    WASMON_REPLAY_SKIP_DAY=1 $r "$d" 2>&1 | grep '^replay [^a]' || true
    rm -r "$d"
  done
  echo "== $label: all archives, codec, day (lossless)"
  $r "$data" 2>&1 | grep -v '^replay [^a]' || true
  echo "== $label: day at precision 5"
  $r "$data" 5 2>&1 | grep '^day' || true
  echo "== $label: store bench reads and appends"
  $s --bench '^(read/|write/per_sample_append|write/background_pass)' --warm-up-time 1 --measurement-time 3 2>&1 \
    | grep -E '^(read|write)/|time:|bytes per sample' || true
done
