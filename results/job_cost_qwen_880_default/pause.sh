#!/usr/bin/env bash
# pause.sh stop|cont: SIGSTOP/SIGCONT the job's process group (go.sh's, in $R), logged in pauses.txt (experiments/stage_times.py).
R=${R:-/root/runs/s880}
pg=$(cat "$R/job.pgid")
kill -"${1^^}" -- -"$pg" && echo "$1 $(date +%s)" >> "$R/pauses.txt"
