# Sourced by the set-up and build scripts: long jobs say what they do, how long they
# usually take and how far they are, while their full output goes to a log file.
#
#   job NAME LABEL USUAL LOG TOTAL -- COMMAND...   starts COMMAND in the background
#     NAME   short name for the progress line; LABEL  what it does; USUAL  its usual
#     time on a 2-core machine; LOG  its log file; TOTAL  roughly how many crates it
#     compiles (0: unknown).
#   wait_jobs   waits for every started job, printing a line every 20 s (elapsed, and
#     per job: crates compiled, the one being compiled); on a failure, that job's
#     log tail and path, and exits.
#   step ...     the same arguments as `job`: one job, waited for.

PROGRESS_EVERY=${PROGRESS_EVERY:-20}
declare -A JOB_PID JOB_LOG JOB_TOTAL JOB_LABEL JOB_START
JOBS=()

progress_say() { printf '\033[1m[%s]\033[0m %s\n' "${PROGRESS_TAG:-build}" "$*"; }

minutes() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

job() {
  local name=$1 label=$2 usual=$3 log=$4 total=$5
  shift 6 # the five fields and the `--`
  mkdir -p "$(dirname "$log")"
  progress_say "$label (usually $usual; full output in ${log#"$PWD"/})"
  "$@" >"$log" 2>&1 &
  JOB_PID[$name]=$!
  JOB_LOG[$name]=$log
  JOB_TOTAL[$name]=$total
  JOB_LABEL[$name]=$label
  JOB_START[$name]=$SECONDS
  JOBS+=("$name")
}

# One job's progress: "name: 120 of about 184 crates, now leptos".
job_progress() {
  local name=$1 log=${JOB_LOG[$1]} total=${JOB_TOTAL[$1]} count now of=""
  count=$(grep -c '^ *Compiling ' "$log" || true)
  now=$(grep '^ *Compiling ' "$log" | tail -n 1 | awk '{print $2}')
  ((total > 0)) && of=" of about $total"
  if ((count == 0 && total == 0)); then
    printf '%s: working' "$name"
  else
    printf '%s: %s%s crates%s' "$name" "$count" "$of" "${now:+, now $now}"
  fi
}

wait_jobs() {
  local start=$SECONDS last=$SECONDS name
  while ((${#JOBS[@]} > 0)); do
    sleep 1
    local running=()
    for name in "${JOBS[@]}"; do
      if kill -0 "${JOB_PID[$name]}" 2>/dev/null; then
        running+=("$name")
        continue
      fi
      if ! wait "${JOB_PID[$name]}"; then
        tail -n 40 "${JOB_LOG[$name]}"
        progress_say "FAILED: ${JOB_LABEL[$name]} (full output in ${JOB_LOG[$name]#"$PWD"/})"
        for other in "${JOBS[@]}"; do kill "${JOB_PID[$other]}" 2>/dev/null || true; done
        exit 1
      fi
      progress_say "  $name done in $(minutes $((SECONDS - JOB_START[$name])))"
    done
    JOBS=("${running[@]}")
    if ((${#JOBS[@]} > 0 && SECONDS - last >= PROGRESS_EVERY)); then
      last=$SECONDS
      local line=""
      for name in "${JOBS[@]}"; do line+="${line:+; }$(job_progress "$name")"; done
      progress_say "  … $(minutes $((SECONDS - start))): $line"
    fi
  done
}

step() {
  job "$@"
  wait_jobs
}

# How many crates a cargo build of these arguments compiles from scratch, roughly:
# the distinct packages in its dependency tree (build and proc-macro ones included).
crate_count() {
  cargo tree "$@" -e normal,build --prefix none 2>/dev/null | awk '{print $1, $2}' | sort -u | wc -l
}
