# Shared by the bench/ scripts (sourced, not run). Everything runs on loopback and is stopped
# by `cleanup` (the scripts set `trap cleanup EXIT`).

BENCH_DIR=$(mktemp -d)
chmod 755 "$BENCH_DIR" # nginx workers run unprivileged and read files from here
BENCH_PIDS=()
BENCH_NGINX=()

# One build of everything the scripts run, in one cargo call: building the packages apart would
# unify features differently and rebuild the dependencies each time.
build_release() { cargo build -q --profile "${PROFILE:-release}" --workspace --bins --examples; }

need() {
  for tool in "$@"; do
    command -v "$tool" >/dev/null || {
      echo "bench: $tool is missing (apt-get install nginx-light wrk redis-server redis-tools)" >&2
      exit 2
    }
  done
}

cleanup() {
  for p in "${BENCH_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for c in "${BENCH_NGINX[@]}"; do nginx -c "$c" -s stop 2>/dev/null || true; done
  for p in "${BENCH_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -z "${BENCH_KEEP_LOGS:-}" ] || { mkdir -p "$BENCH_KEEP_LOGS"; cp "$BENCH_DIR"/*.log "$BENCH_KEEP_LOGS"/ 2>/dev/null || true; }
  rm -rf "$BENCH_DIR"
}

# A free loopback port (the kernel's pick; bound and released at once).
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Poll a condition (a command) every 50 ms until it holds or SECONDS pass.
wait_for() {
  local secs=$1; shift
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { echo "bench: timed out waiting for: $*" >&2; return 1; }
    sleep 0.05
  done
}

# start_redis PORT: a throwaway redis-server (no persistence).
start_redis() {
  local p=$1
  mkdir -p "$BENCH_DIR/redis-$p"
  redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --dir "$BENCH_DIR/redis-$p" >/dev/null &
  BENCH_PIDS+=($!)
  wait_for 10 redis-cli -p "$p" ping
}

# start_nginx NAME SERVER_BLOCK: an nginx of its own (own master, pid, workers), so its CPU time
# can be told apart; sets LAST_PID to its master.
start_nginx() {
  local name=$1 server=$2
  cat >"$BENCH_DIR/nginx-$name.conf" <<NGINX
worker_processes auto;
pid $BENCH_DIR/nginx-$name.pid;
error_log $BENCH_DIR/nginx-$name-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  $server
}
NGINX
  nginx -c "$BENCH_DIR/nginx-$name.conf"
  BENCH_NGINX+=("$BENCH_DIR/nginx-$name.conf")
  wait_for 10 test -s "$BENCH_DIR/nginx-$name.pid"
  LAST_PID=$(cat "$BENCH_DIR/nginx-$name.pid")
}

# start_origin PORT: nginx serving a 1 KiB page at every path (the fast origin).
start_origin() {
  head -c 1024 /dev/urandom | base64 -w0 | head -c 1024 >"$BENCH_DIR/page.html"
  chmod 644 "$BENCH_DIR/page.html"
  start_nginx origin "server { listen 127.0.0.1:$1; root $BENCH_DIR; location / { try_files /page.html =404; } }"
  wait_for 10 curl -fs -o /dev/null "http://127.0.0.1:$1/"
}

# start_nginx_proxy PORT ORIGIN_PORT: nginx proxy_pass with upstream keep-alive (the baseline).
start_nginx_proxy() {
  start_nginx proxy "upstream origin { server 127.0.0.1:$2; keepalive 128; }
  server { listen 127.0.0.1:$1;
    location / { proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection \"\"; } }"
  wait_for 10 curl -fs -o /dev/null "http://127.0.0.1:$1/"
}

# cpu_ticks PID...: user + system CPU ticks of these processes and their children (nginx workers).
cpu_ticks() {
  local p c
  for p in "$@"; do
    awk '{print $14 + $15}' "/proc/$p/stat"
    for c in $(pgrep -P "$p"); do awk '{print $14 + $15}' "/proc/$c/stat"; done
  done | awk '{s += $1} END {print s + 0}'
}

# measure PIDS WRK_ARGS...: one wrk run (one thread, CONNS connections, SECS seconds); prints
# "requests/s CPU-microseconds-per-request" where the CPU is that of PIDS ("" for none: 0).
measure() {
  local pids=$1; shift
  local before after out
  before=$(cpu_ticks $pids)
  # LOAD_CPU: a command prefix for the load generator (`taskset -c 1` in bench/ab's PIN mode).
  out=$(${LOAD_CPU[@]+"${LOAD_CPU[@]}"} wrk -t1 -c"${CONNS:-32}" -d"${SECS:-5}s" "$@")
  after=$(cpu_ticks $pids)
  awk -v b="$before" -v a="$after" -v hz="$(getconf CLK_TCK)" '
    /requests in/ { n = $1 } /Requests\/sec/ { r = $2 }
    END { printf "%s %.1f\n", r, n ? (a - b) / hz * 1e6 / n : 0 }' <<<"$out"
}

# anteroom_conf FILE LISTEN_PORT ADMIN_PORT UPSTREAM_PORT STORE [EXTRA_ROOM_TOML]
# STORE is `memory` or a redis URL. One room, `sale`, over every path.
anteroom_conf() {
  local file=$1 listen=$2 admin=$3 upstream=$4 store=$5 extra=${6:-}
  local store_toml='backend = "memory"'
  [ "$store" != memory ] && store_toml="backend = \"redis\"
redis-url = \"$store\""
  cat >"$file" <<TOML
[listen]
http = "127.0.0.1:$listen"
admin = "127.0.0.1:$admin"
[server]
grace-period = "0s"
$([ "${THREADS:-2}" = default ] || echo "threads = ${THREADS:-2}")
work-stealing = ${WORK_STEALING:-true}
[store]
$store_toml
[cookie]
keys = ["bench-key-0123456789-0123456789-0123456789"]
[admin]
token = "bench-admin-token-0123456789"
[[upstream]]
name = "origin"
addr = "127.0.0.1:$upstream"
[[room]]
name = "sale"
paths = ["/"]
session-ttl = "1h"
$extra
TOML
}
ADMIN_TOKEN="bench-admin-token-0123456789"

# start_anteroom CONFIG LISTEN_PORT: runs the release binary, waits until it answers.
start_anteroom() {
  ANTEROOM_LOG=${ANTEROOM_LOG:-info} target/release/anteroom run --config "$1" 2>>"$BENCH_DIR/anteroom-$2.log" &
  BENCH_PIDS+=($!)
  LAST_PID=$!
  # Any answer will do (a 404 under the reserved prefix): a status call would join the line.
  wait_for 20 curl -s -o /dev/null "http://127.0.0.1:$2/.anteroom/ready"
}

# admitted_cookie PORT: `anteroom_sale=...` of a fresh visitor let in on the fast path (the line
# must be empty), as a browser holds it after its first return: the fast-path cookie lives
# under half a session, so that return renews it to a whole session (one store call, once);
# the renewed cookie is the one every later request carries.
admitted_cookie() {
  local first renewed
  first=$(curl -s -D - -o /dev/null "http://127.0.0.1:$1/.anteroom/status?room=sale" | tr -d '\r' |
    awk -F': ' 'tolower($1)=="set-cookie" && $2 ~ /^anteroom_sale=/ {split($2,a,";"); print a[1]}')
  renewed=$(curl -s -D - -o /dev/null -H "Cookie: $first" "http://127.0.0.1:$1/page" | tr -d '\r' |
    awk -F': ' 'tolower($1)=="set-cookie" && $2 ~ /^anteroom_sale=/ {split($2,a,";"); print a[1]}')
  echo "${renewed:-$first}"
}

# rps ARGS...: wrk's requests per second (one thread, CONNS connections, SECS seconds).
rps() { wrk -t1 -c"${CONNS:-32}" -d"${SECS:-5}s" "$@" | awk '/Requests\/sec/ {print $2}'; }

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# admin_get PORT PATH: the admin API's JSON.
admin_get() { curl -fs -H "Authorization: Bearer $ADMIN_TOKEN" "http://127.0.0.1:$1$2"; }
