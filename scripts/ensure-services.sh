# Sourced by scripts/test: makes sure a Redis server answers (starting a private one when none does)
# and exports DSCAN_TEST_REDIS_URL for the service tests; installs the Debian packages some tests drive (chromium, cjpeg) when missing.
redis_answers() { "$VENV/bin/python" - "$1" <<'PY' 2>/dev/null
import sys, redis
redis.Redis.from_url(sys.argv[1], socket_connect_timeout=1).ping()
PY
}
if [ -z "${DSCAN_TEST_REDIS_URL:-}" ]; then
  if redis_answers "redis://127.0.0.1:6379/15"; then
    export DSCAN_TEST_REDIS_URL="redis://127.0.0.1:6379/15"
  else
    if ! command -v redis-server >/dev/null 2>&1; then
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "dscan: installing redis-server (apt-get)" >&2
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >&2
      else
        echo "dscan: no Redis answers on 127.0.0.1:6379 and redis-server is not installed; install it or set DSCAN_TEST_REDIS_URL" >&2
        exit 2
      fi
    fi
    port="$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    rdir="$(mktemp -d)"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$rdir" --daemonize yes \
      --pidfile "$rdir/redis.pid" --logfile "$rdir/redis.log" >&2
    trap 'kill "$(cat "'"$rdir"'/redis.pid")" 2>/dev/null || true' EXIT
    export DSCAN_TEST_REDIS_URL="redis://127.0.0.1:$port/15"
    echo "dscan: started a private Redis on port $port" >&2
  fi
fi
# Debian packages some tests drive: chromium for the browser tests (tests/web, driven by Playwright; never a
# downloaded browser build), cjpeg (libjpeg-turbo-progs) to write JPEG layouts Pillow cannot, and ImageMagick for
# the BMP variants it writes.
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v cjpeg >/dev/null 2>&1 || missing+=(libjpeg-turbo-progs)
command -v convert-im6.q16 >/dev/null 2>&1 || missing+=(imagemagick)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "dscan: installing ${missing[*]} for the tests (apt-get)" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >&2 \
      || echo "dscan: could not install ${missing[*]}; the tests that need them will be skipped" >&2
  else
    echo "dscan: ${missing[*]} missing (apt-get install ${missing[*]}); the tests that need them will be skipped" >&2
  fi
fi
