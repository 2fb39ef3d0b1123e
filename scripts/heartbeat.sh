# Sourced by scripts/build, scripts/fuzz-smoke and scripts/test.
#
# heartbeat LABEL CMD...: runs CMD and, for as long as it runs, prints a line
# every 20 s with the time it has taken so far and the sources the compiler is
# working on, so a long step (a unity batch compiles for a minute or more, and
# Ninja prints a line only when one finishes) is never silent for long.
# Returns CMD's exit status.

# The sources compilers are busy with now: a unity batch by its target
# ("nvdra_kube[unity 0]"), any other source by its file name. The last -c of
# a command line names the source (the shell and launchers that run the
# compiler carry the same line after a -c of their own).
heartbeat_compiling() {
  ps -eo args= 2>/dev/null | awk '
    / -c [^ ]+\.(cc|cxx|c)( |$)/ {
      for (i = 1; i < NF; i++) if ($i == "-c") src = $(i + 1)
      n = split(src, part, "/")
      name = part[n]
      if (part[n - 1] == "Unity") {
        target = part[n - 2]; sub(/\.dir$/, "", target)
        batch = name; sub(/^unity_/, "", batch); sub(/_cxx\.cxx$/, "", batch)
        name = target "[unity " batch "]"
      }
      if (!(name in seen)) { seen[name] = 1; out = out (out == "" ? "" : ", ") name }
    }
    END { print out }'
}

heartbeat() {
  local label=$1
  shift
  local began
  began=$(date +%s)
  "$@" &
  local pid=$!
  (
    while sleep 20; do
      kill -0 "$pid" 2>/dev/null || exit 0
      busy=$(heartbeat_compiling)
      echo "== $label: $(($(date +%s) - began)) s${busy:+; compiling $busy}"
    done
  ) &
  local beat=$!
  local rc=0
  wait "$pid" || rc=$?
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  return "$rc"
}
