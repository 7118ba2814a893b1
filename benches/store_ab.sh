#!/bin/sh
# The store's figures side by side (benches/README.md "Compressed buffers"): BEFORE and AFTER
# are the `store_replay` and `store` bench binaries of the two builds, DATA the replay files
# (benches/store_replay_dump.py). One archive per process for the replay (pages are recycled
# process-wide), then the day of cc-metric-store's shape lossless and at precision 5, then
# the criterion read and write figures.
# usage: store_ab.sh BEFORE_REPLAY BEFORE_STORE AFTER_REPLAY AFTER_STORE DATA
set -e
br=$1 bs=$2 ar=$3 as=$4 data=$5
for side in before after; do
  if [ $side = before ]; then r=$br s=$bs; else r=$ar s=$as; fi
  echo "== $side: replay, one archive a process"
  for f in "$data"/*.tsv; do
    d=$(mktemp -d); ln -s "$f" "$d/"
    WASMON_REPLAY_SKIP_DAY=1 $r "$d" 2>&1 | grep '^replay [^a]'
    rm -r "$d"
  done
  echo "== $side: all archives, codec, day (lossless)"
  $r "$data" 2>&1 | grep -v '^replay [^a]'
  echo "== $side: day at precision 5"
  $r "$data" 5 2>&1 | grep '^day'
  echo "== $side: store bench reads and appends"
  $s --bench '^(read/|write/per_sample_append)' --warm-up-time 1 --measurement-time 3 2>&1 | grep -E '^(read|write)/|time:'
done
