# Shared by the test server scripts in this folder (sourced, not run).

# stop_server DIR PIDFILE: stops the server whose pid is in DIR/PIDFILE and removes DIR. The
# server writes into DIR until it has exited, so its exit is awaited (bounded) first.
stop_server() {
  local dir=$1 pidfile=$2 pid
  if [ -f "$dir/$pidfile" ]; then
    pid=$(cat "$dir/$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; sleep 0.2; fi
  fi
  rm -rf "$dir" 2>/dev/null || { sleep 0.2; rm -rf "$dir"; }
}
