#!/usr/bin/env bash
# pause.sh stop|cont: SIGSTOP/SIGCONT the job's process group, logged in pauses.txt (experiments/stage_times.py).
pg=$(cat /root/runs/s880/job.pgid)
kill -"${1^^}" -- -"$pg" && echo "$1 $(date +%s)" >> /root/runs/s880/pauses.txt
