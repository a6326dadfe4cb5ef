#!/usr/bin/env bash
# The real remote-cache servers kiln's tests run against, all on 127.0.0.1 only:
#   - Bazel 4.2.3's own REAPI worker (CAS, ByteStream, ActionCache, Execution over gRPC), compiled with javac from
#     Debian's bazel-bootstrap-source against bazel-bootstrap-data's A-server.jar and patched to bind 127.0.0.1:
#     one plaintext (grpc://) and one over TLS that requires a client certificate (grpcs://, mTLS), and two more
#     plaintext ones: "sandbox" runs every action under Bazel's linux-sandbox (--sandboxing --sandboxing_block_network:
#     the host file system read-only except the action's exec root, loopback only; the binary comes from Debian's
#     bazel-bootstrap), and "victim" is the one tests may kill and restart, so they never disturb the plain worker that
#     every test file shares (vitest runs test files in parallel);
#   - nginx with WebDAV PUT as Bazel's HTTP cache (GET/HEAD/PUT [/prefix]/ac/<sha256> and /cas/<sha256>), over
#     http:// and over https:// with a required client certificate, both on one data directory;
#   - BuildStream 1.6's bst-artifact-server (Debian's python3-buildstream), a strict CAS-only REAPI server: CAS and
#     ByteStream but no ActionCache service (Capabilities says action cache updates are disabled), a 1 MiB batch
#     limit, UUID-v4 upload names. Started through a launcher of our own that binds 127.0.0.1 (its CLI binds [::]).
# Background: shared/reference/distributed.md §1, §3 and §5, remote-clients.md §1.
#
#   servers.sh start            install what is missing (apt; Go too, for the suite), build the worker if its inputs changed, start what is
#                               not running, write $KILN_REMOTE_DIR/env (KILN_TEST_* lines, read by the tests)
#   servers.sh stop             stop, by pid, only the processes this instance started
#   servers.sh status           exit 0 when all are running
#   servers.sh evict HASH [WHERE]   delete a blob from the plain worker's on-disk CAS; WHERE: http (nginx's /cas/),
#                                   or a worker (plain, victim, sandbox, tls)
#   servers.sh corrupt HASH [WHERE] overwrite it with other bytes of the same size
#   servers.sh restart-worker [NAME]  start the victim worker (or NAME) again after a test killed it: same port, same
#                               CAS; a no-op when it runs
#
# Environment: KILN_REMOTE_DIR (/tmp/kiln-remote-servers), KILN_REMOTE_GRPC_PORT (50081), KILN_REMOTE_GRPCS_PORT
# (50082), KILN_REMOTE_HTTP_PORT (18091), KILN_REMOTE_HTTPS_PORT (18092), KILN_REMOTE_BST_PORT (50083),
# KILN_REMOTE_SANDBOX_PORT (50084), KILN_REMOTE_VICTIM_PORT (50085), KILN_REMOTE_JOBS (each worker's --jobs, 4).
set -euo pipefail

DIR=$(realpath -m "${KILN_REMOTE_DIR:-/tmp/kiln-remote-servers}")
GRPC_PORT=${KILN_REMOTE_GRPC_PORT:-50081}
GRPCS_PORT=${KILN_REMOTE_GRPCS_PORT:-50082}
HTTP_PORT=${KILN_REMOTE_HTTP_PORT:-18091}
HTTPS_PORT=${KILN_REMOTE_HTTPS_PORT:-18092}
BST_PORT=${KILN_REMOTE_BST_PORT:-50083}
SANDBOX_PORT=${KILN_REMOTE_SANDBOX_PORT:-50084}
VICTIM_PORT=${KILN_REMOTE_VICTIM_PORT:-50085}
WORKERS=(plain tls sandbox victim)
JOBS=${KILN_REMOTE_JOBS:-4}
JAR=/usr/share/bazel/A-server.jar
SRC=/usr/src/bazel-bootstrap/src/tools/remote/src/main/java
MAIN=com.google.devtools.build.remote.worker.RemoteWorker
# Debian's bazel-bootstrap ships Bazel's prebuilt linux-sandbox; the worker wants it as the class-path resource
# /main/tools/linux-sandbox (not in A-server.jar), extracts it into its --work_path and runs `true` under it as a
# self-check before it serves (it exits when that fails).
SANDBOX_BIN=/usr/libexec/x86_64-linux-gnu/bazel/linux-sandbox
# Upstream binds every interface (forPort); the copy compiled here binds loopback only.
BIND_FROM='NettyServerBuilder.forPort(workerOptions.listenPort)'
BIND_TO='NettyServerBuilder.forAddress(new java.net.InetSocketAddress("127.0.0.1", workerOptions.listenPort))'
export DEBIAN_FRONTEND=noninteractive

log() { printf '[servers.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# A process not yet dead: this machine's init reaps orphans late, and a JVM's main thread is a zombie while its other
# threads still hold its sockets, so a zombie whose threads are gone is dead.
alive() {
  local stat tasks
  stat=$(cat "/proc/$1/stat" 2>/dev/null) && stat=${stat##*) } && [ -n "$stat" ] || return 1
  [ "${stat:0:1}" != Z ] || { tasks=(/proc/"$1"/task/*) && [ ${#tasks[@]} -gt 1 ]; }
}
ours() { # PIDFILE MARKER -> prints the pid
  local pid cmdline
  pid=$(cat "$1" 2>/dev/null) && [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" &&
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) && [[ $cmdline == *"$2"* ]] && echo "$pid"
}
listening() { # PORT: something listens on it, and only on 127.0.0.1 (gRPC's C core: on [::ffff:127.0.0.1], the same)
  local addrs
  addrs=$(ss -Htln "sport = :$1" | awk '{print $4}')
  [ -n "$addrs" ] && ! grep -Eqv '^(127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]):' <<<"$addrs"
}
port_free() { [ -z "$(ss -Htln "sport = :$1")" ] || die "port $1 is taken: $(ss -Htlnp "sport = :$1" | head -1)"; }
wait_for() { # SECONDS COMMAND...: poll COMMAND until it succeeds (0) or the deadline passes (1)
  local end=$((SECONDS + $1))
  shift
  until "$@"; do ((SECONDS < end)) || return 1; sleep 0.1; done
}

install_packages() {
  local want=(bazel-bootstrap-data bazel-bootstrap-source nginx libnetty-tcnative-jni python3-buildstream)
  local missing=() p
  command -v javac >/dev/null || want+=(default-jdk-headless)
  command -v openssl >/dev/null || want+=(openssl)
  command -v ss >/dev/null || want+=(iproute2)
  [ -x "$SANDBOX_BIN" ] || want+=(bazel-bootstrap) # ~40 packages (a JDK's worth), for linux-sandbox only
  # Not a server: test/runner/GoModCache.test.ts runs a real `go mod download`. Installed here, with the servers,
  # so that the README's `npm test` installs everything the suite needs in one place.
  command -v go >/dev/null || want+=(golang-go)
  for p in "${want[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  [ "$(id -u)" = 0 ] || die "missing packages (${missing[*]}); as root: apt-get install ${missing[*]}"
  log "apt-get install ${missing[*]}"
  local t0=$SECONDS
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$DIR/apt.log" 2>&1 ||
    { tail -5 "$DIR/apt.log" >&2; die "apt-get install ${missing[*]} failed (log: $DIR/apt.log)"; }
  log "apt-get: $((SECONDS - t0)) s"
}

build_worker() { # into $DIR/build, again only when Debian's source, the jar, javac or the patch changed
  local b=$DIR/build stamp
  stamp=$({ dpkg-query -W bazel-bootstrap-data bazel-bootstrap-source; javac -version 2>&1; echo "$BIND_TO"; } |
    sha256sum)
  [ "$(cat "$b/stamp" 2>/dev/null)" = "$stamp" ] && [ -f "$b/classes/${MAIN//.//}.class" ] && return
  log "javac: building the remote worker"
  rm -rf "$b" && mkdir -p "$b/src" "$b/classes"
  cp -r "$SRC/." "$b/src/"
  local rw=$b/src/${MAIN//.//}.java
  sed -i "s|$BIND_FROM|$BIND_TO|" "$rw"
  grep -qF "$BIND_TO" "$rw" && ! grep -qF "$BIND_FROM" "$rw" || die "the loopback patch did not apply to $rw"
  # shellcheck disable=SC2046
  javac -nowarn -encoding UTF-8 -d "$b/classes" -cp "$JAR" $(find "$b/src" -name '*.java') 2>"$b/javac.log" ||
    { cat "$b/javac.log" >&2; die "javac failed"; }
  echo "$stamp" >"$b/stamp"
}

make_certs() { # a CA, a server certificate for localhost and 127.0.0.1, a client certificate; kept while valid
  local d=$DIR/certs
  [ -f "$d/client.pem" ] && openssl x509 -checkend 86400 -noout -in "$d/server.pem" >/dev/null 2>&1 && return
  rm -rf "$d" && mkdir -p "$d"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=kiln-test-ca -keyout ca.key -out ca.pem 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    for who in server client; do # keys in PKCS#8 (OpenSSL 3's default), which netty needs
      openssl req -newkey rsa:2048 -nodes -subj "/CN=kiln-test-$who" -keyout "$who.key" -out "$who.csr" 2>/dev/null
      openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 -extfile "$who.ext" \
        -out "$who.pem" 2>/dev/null
    done
  )
}

# Workers: plain (grpc://), tls (grpcs://, client certificate required), sandbox (grpc://, actions under
# linux-sandbox) and victim (grpc://, for tests that kill it). Each has its own CAS, work dir, log and port (NAME/port:
# the one it was started on, which restart-worker reuses).
worker_port() { # NAME -> its configured port
  case $1 in plain) echo "$GRPC_PORT" ;; tls) echo "$GRPCS_PORT" ;; sandbox) echo "$SANDBOX_PORT" ;;
    victim) echo "$VICTIM_PORT" ;; *) die "no worker '$1' (${WORKERS[*]})" ;; esac
}
worker_mark() { echo "--cas_path=$DIR/$1/cas"; }
launch_worker() { # NAME PORT
  local name=$1 port=$2 w=$DIR/$1
  ours "$w/pid" "$(worker_mark "$name")" >/dev/null && return
  port_free "$port"
  mkdir -p "$w/cas" "$w/work"
  rm -f "$w/ready"
  local jvm=(-Xmx512m -XX:+UseSerialGC -Djava.net.preferIPv4Stack=true) cp=$DIR/build/classes:$JAR
  local args=(--listen_port="$port" --work_path="$w/work" --cas_path="$w/cas" --pid_file="$w/ready" --jobs="$JOBS")
  # The two extra workers carry little load: C1 only starts them ~0.3 s sooner each (and the victim restarts sooner).
  [ "$name" = sandbox ] || [ "$name" = victim ] && jvm+=(-XX:TieredStopAtLevel=1)
  if [ "$name" = sandbox ]; then
    # linux-sandbox as a resource on this worker's class path only (the shared build stays as it is). No
    # --sandboxing_tmpfs_dir=/tmp: linux-sandbox refuses a tmpfs above its working directory, and this is under /tmp.
    [ -x "$SANDBOX_BIN" ] || die "$SANDBOX_BIN is missing (Debian package bazel-bootstrap)"
    mkdir -p "$w/classpath/main/tools" && cp -f "$SANDBOX_BIN" "$w/classpath/main/tools/linux-sandbox"
    cp=$w/classpath:$cp
    args+=(--sandboxing --sandboxing_block_network)
  fi
  if [ "$name" = tls ]; then
    # netty's OpenSSL provider: Debian's tcnative is the version in the jar. A copy, not a symlink: tcnative parses
    # its own file name. (The JDK provider fails on JDK 17: "JDK provider does not support ALPN protocol".)
    mkdir -p "$DIR/jni" && cp -f /usr/lib/*/jni/libnetty-tcnative.so "$DIR/jni/libnetty_tcnative.so"
    jvm+=(-Djava.library.path="$DIR/jni")
    args+=(--tls_certificate="$DIR/certs/server.pem" --tls_private_key="$DIR/certs/server.key"
      --tls_ca_certificate="$DIR/certs/ca.pem")
  fi
  echo "--- $(date -Is) start on 127.0.0.1:$port" >>"$w/log"
  setsid java "${jvm[@]}" -cp "$cp" "$MAIN" "${args[@]}" </dev/null >>"$w/log" 2>&1 9>&- &
  echo $! >"$w/pid"
  echo "$port" >"$w/port"
}
worker_up() { [ -s "$1/ready" ] && listening "$2"; }
await_worker() { # NAME PORT: its --pid_file is written once it serves (the sandbox worker's: after linux-sandbox's
  # self-check passed), and it listens on 127.0.0.1 only
  local w=$DIR/$1 pid
  pid=$(cat "$w/pid")
  wait_for 60 eval "worker_up $w $2 || ! alive $pid" || true
  alive "$pid" || { tail -20 "$w/log" >&2; die "the $1 worker exited while starting (log: $w/log)"; }
  worker_up "$w" "$2" || { tail -20 "$w/log" >&2; die "the $1 worker is not serving on 127.0.0.1:$2 after 60 s"; }
  [ "$(cat "$w/ready")" = "$pid" ] || die "the $1 worker's pid file says $(cat "$w/ready"), not $pid"
}

NGINX_MARK="$DIR/nginx/nginx.conf"
launch_nginx() {
  local n=$DIR/nginx
  ours "$n/pid" "$NGINX_MARK" >/dev/null && return
  port_free "$HTTP_PORT" && port_free "$HTTPS_PORT"
  mkdir -p "$n/data/ac" "$n/data/cas" "$n/tmp" "$n/logs"
  echo "$HTTP_PORT $HTTPS_PORT" >"$n/ports"
  local user=""
  if [ "$(id -u)" = 0 ]; then # its workers then run as nobody, and must write data/ and tmp/ (and reach them)
    user="user nobody nogroup;"
    chown -R nobody:nogroup "$n/data" "$n/tmp"
    chmod 755 "$DIR" "$n"
  fi
  local location='
    location ~ "^(/[A-Za-z0-9._-]+)*/(ac|cas)/[0-9a-f]{64}$" {
      dav_methods PUT;
      dav_access user:rw group:r all:r;
      create_full_put_path on;
      limit_except GET HEAD PUT { deny all; }
    }
    location / { return 404; }'
  cat >"$n/nginx.conf" <<EOF
worker_processes 1;
$user
daemon off;
pid $n/nginx.pid;
error_log $n/logs/error.log warn;
events { worker_connections 256; }
http {
  access_log $n/logs/access.log;
  client_body_temp_path $n/tmp;
  proxy_temp_path $n/tmp; fastcgi_temp_path $n/tmp; uwsgi_temp_path $n/tmp; scgi_temp_path $n/tmp;
  root $n/data;
  client_max_body_size 0;
  server {
    listen 127.0.0.1:$HTTP_PORT;$location
  }
  server {
    listen 127.0.0.1:$HTTPS_PORT ssl;
    ssl_certificate $DIR/certs/server.pem;
    ssl_certificate_key $DIR/certs/server.key;
    ssl_client_certificate $DIR/certs/ca.pem;
    ssl_verify_client on;$location
  }
}
EOF
  local nginx=(/usr/sbin/nginx -p "$n" -e "$n/logs/error.log" -c "$n/nginx.conf")
  "${nginx[@]}" -t -q 2>"$n/start.log" || { cat "$n/start.log" >&2; die "nginx rejected $n/nginx.conf"; }
  setsid "${nginx[@]}" </dev/null >>"$n/start.log" 2>&1 9>&- &
  echo $! >"$n/pid"
}
nginx_up() { [ "$(cat "$DIR/nginx/nginx.pid" 2>/dev/null)" = "$1" ] && listening "$2" && listening "$3"; }
await_nginx() { # nginx writes its pid file once it listens
  local pid ports
  pid=$(cat "$DIR/nginx/pid") ports=$(cat "$DIR/nginx/ports")
  wait_for 10 eval "nginx_up $pid $ports || ! alive $pid" || true
  nginx_up "$pid" $ports || { cat "$DIR/nginx/start.log" "$DIR/nginx/logs/error.log" >&2; die "nginx did not come up"; }
}

# bst-artifact-server. Debian installs no bst-artifact-server command, and its CLI binds [::]:PORT: this launcher
# calls the packaged create_server and binds 127.0.0.1 only. Head room lowered from 2 GB/10 GB to 100 MB/200 MB (the
# free disk it keeps by evicting), so it never evicts on a small disk. Debian's python, not a pyenv shim (which lacks
# Debian's grpc and protobuf); -I ignores PYTHON* variables and the user's site-packages.
BST_PY=/usr/bin/python3
BST_MARK="$DIR/bst/launcher.py"
launch_bst() {
  local b=$DIR/bst
  ours "$b/pid" "$BST_MARK" >/dev/null && return
  port_free "$BST_PORT"
  mkdir -p "$b/repo"
  cat >"$b/launcher.py.tmp" <<'EOF'
# /usr/bin/python3 -I launcher.py REPO_DIR PORT: bst-artifact-server on 127.0.0.1:PORT; prints the port once it serves
import signal, sys
from buildstream._artifactcache.casserver import create_server
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})  # the server's threads inherit this mask
server = create_server(sys.argv[1], enable_push=True, max_head_size=int(2e8), min_head_size=int(1e8))
port = server.add_insecure_port('127.0.0.1:%d' % int(sys.argv[2]))
server.start(); print(port, flush=True)
signal.sigwait({signal.SIGTERM, signal.SIGINT}); server.stop(0)
EOF
  mv "$b/launcher.py.tmp" "$b/launcher.py"
  rm -f "$b/out"
  echo "$BST_PORT" >"$b/port"
  echo "--- $(date -Is) start on 127.0.0.1:$BST_PORT" >>"$b/log"
  setsid "$BST_PY" -I "$b/launcher.py" "$b/repo" "$BST_PORT" </dev/null >"$b/out" 2>>"$b/log" 9>&- &
  echo $! >"$b/pid"
}
bst_up() { [ "$(cat "$DIR/bst/out" 2>/dev/null)" = "$1" ] && listening "$1"; }
await_bst() { # the launcher prints the port once the server has started; it listens on 127.0.0.1 only
  local pid port
  pid=$(cat "$DIR/bst/pid") port=$(cat "$DIR/bst/port")
  wait_for 30 eval "bst_up $port || ! alive $pid" || true
  alive "$pid" || { tail -20 "$DIR/bst/log" >&2; die "bst-artifact-server exited while starting (log: $DIR/bst/log)"; }
  bst_up "$port" ||
    { tail -20 "$DIR/bst/log" >&2; die "bst-artifact-server is not serving on 127.0.0.1:$port after 30 s"; }
}

write_env() {
  local http https
  read -r http https <"$DIR/nginx/ports"
  {
    echo "KILN_REMOTE_DIR=$DIR"
    echo "KILN_TEST_REAPI_URL=grpc://127.0.0.1:$(cat "$DIR/plain/port")"
    echo "KILN_TEST_REAPI_PID=$(cat "$DIR/plain/pid")"
    echo "KILN_TEST_REAPI_CAS=$DIR/plain/cas"
    echo "KILN_TEST_REAPI_TLS_URL=grpcs://localhost:$(cat "$DIR/tls/port")"
    echo "KILN_TEST_REAPI_TLS_PID=$(cat "$DIR/tls/pid")"
    echo "KILN_TEST_REAPI_SANDBOX_URL=grpc://127.0.0.1:$(cat "$DIR/sandbox/port")"
    echo "KILN_TEST_REAPI_SANDBOX_PID=$(cat "$DIR/sandbox/pid")"
    echo "KILN_TEST_REAPI_VICTIM_URL=grpc://127.0.0.1:$(cat "$DIR/victim/port")"
    echo "KILN_TEST_REAPI_VICTIM_PID=$(cat "$DIR/victim/pid")"
    echo "KILN_TEST_REAPI_VICTIM_CAS=$DIR/victim/cas"
    echo "KILN_TEST_TLS_CA=$DIR/certs/ca.pem"
    echo "KILN_TEST_TLS_CLIENT_CERT=$DIR/certs/client.pem"
    echo "KILN_TEST_TLS_CLIENT_KEY=$DIR/certs/client.key"
    echo "KILN_TEST_HTTP_URL=http://127.0.0.1:$http"
    echo "KILN_TEST_HTTP_PID=$(cat "$DIR/nginx/pid")"
    echo "KILN_TEST_HTTP_DIR=$DIR/nginx/data"
    echo "KILN_TEST_HTTPS_URL=https://localhost:$https"
    echo "KILN_TEST_HTTPS_PID=$(cat "$DIR/nginx/pid")"
    echo "KILN_TEST_BST_URL=grpc://127.0.0.1:$(cat "$DIR/bst/port")"
    echo "KILN_TEST_BST_PID=$(cat "$DIR/bst/pid")"
  } >"$DIR/env.tmp"
  mv "$DIR/env.tmp" "$DIR/env"
}

stop_one() { # NAME PIDFILE MARKER
  local pid
  if pid=$(ours "$2" "$3"); then
    kill -TERM "$pid" 2>/dev/null || true
    wait_for 10 eval "! alive $pid" ||
      { log "$1 (pid $pid) ignored SIGTERM for 10 s: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; }
    wait_for 5 eval "! alive $pid" || die "$1 (pid $pid) survived SIGKILL"
    log "$1: stopped (pid $pid)"
  fi
  rm -f "$2"
}
stop_all() {
  rm -f "$DIR/env"
  local w
  for w in "${WORKERS[@]}"; do stop_one "$w worker" "$DIR/$w/pid" "$(worker_mark "$w")"; done
  stop_one nginx "$DIR/nginx/pid" "$NGINX_MARK"
  stop_one bst-artifact-server "$DIR/bst/pid" "$BST_MARK"
}

cmd_start() {
  if cmd_status 2>/dev/null; then write_env && cat "$DIR/env" && return; fi
  # A start that fails leaves nothing of this instance running.
  trap 'rc=$?; trap - EXIT; [ $rc = 0 ] || { log "start failed: stopping this instance"; stop_all; }; exit $rc' EXIT
  install_packages
  build_worker
  make_certs
  local w
  for w in "${WORKERS[@]}"; do launch_worker "$w" "$(worker_port "$w")"; done
  launch_nginx
  launch_bst
  for w in "${WORKERS[@]}"; do await_worker "$w" "$(cat "$DIR/$w/port")"; done
  await_nginx
  await_bst
  write_env
  trap - EXIT
  log "ready after ${SECONDS} s; $DIR/env:"
  cat "$DIR/env"
}

cmd_status() {
  local ok=0 pid w
  for w in "${WORKERS[@]}"; do
    if pid=$(ours "$DIR/$w/pid" "$(worker_mark $w)"); then log "$w worker: pid $pid, port $(cat "$DIR/$w/port")"
    else log "$w worker: not running"; ok=1; fi
  done
  if pid=$(ours "$DIR/nginx/pid" "$NGINX_MARK"); then log "nginx: pid $pid, ports $(cat "$DIR/nginx/ports")"
  else log "nginx: not running"; ok=1; fi
  if pid=$(ours "$DIR/bst/pid" "$BST_MARK"); then log "bst-artifact-server: pid $pid, port $(cat "$DIR/bst/port")"
  else log "bst-artifact-server: not running"; ok=1; fi
  return $ok
}

blob() { # HASH [WHERE] -> the file that holds it; WHERE: a worker (plain, the default; reapi means plain too) or http
  [[ ${1:-} =~ ^[0-9a-f]{64}$ ]] || die "expected a sha256 in lowercase hex, got '${1:-}'"
  local f where=${2:-plain}
  [ "$where" = reapi ] && where=plain
  case " ${WORKERS[*]} http " in *" $where "*) ;; *) die "no blob store '$where' (${WORKERS[*]} http)" ;; esac
  f=$DIR/$where/cas/cas/${1:0:2}/$1
  [ "$where" = http ] && f=$DIR/nginx/data/cas/$1
  [ -f "$f" ] || die "no blob $1 at $f"
  echo "$f"
}

mkdir -p "$DIR"
exec 9>"$DIR/lock"
flock -w 120 9 || die "another servers.sh holds $DIR/lock"
case "${1:-}" in
  start) cmd_start ;;
  stop) stop_all ;;
  status) cmd_status ;;
  restart-worker)
    [ -f "$DIR/env" ] || die "not started (no $DIR/env)"
    w=${2:-victim}
    port=$(worker_port "$w") # and NAME is a worker
    [ -s "$DIR/$w/port" ] && port=$(cat "$DIR/$w/port")
    launch_worker "$w" "$port"
    await_worker "$w" "$port"
    write_env
    ;;
  evict) f=$(blob "${2:-}" "${3:-}") && rm -f "$f" ;;
  corrupt) # every byte replaced by the next byte value: other bytes, same size
    f=$(blob "${2:-}" "${3:-}")
    LC_ALL=C tr '\000-\377' '\001-\377\000' <"$f" >"$f.corrupt" && mv -f "$f.corrupt" "$f"
    ;;
  *)
    echo "usage: $0 start|stop|status|evict HASH [WHERE]|corrupt HASH [WHERE]|restart-worker [NAME]" >&2
    exit 2
    ;;
esac
