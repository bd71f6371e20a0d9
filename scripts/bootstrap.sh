# Sourced by ./dscan and scripts/test: makes .venv with dscan and its dependencies installed.
# Re-installs only when pyproject.toml changes. Needs python3 (3.11+) with venv.
set -euo pipefail
DSCAN_HOME="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DSCAN_VENV:-$DSCAN_HOME/.venv}"
EXTRAS="${DSCAN_EXTRAS:-dev}"
PY="${PYTHON:-python3}"

if ! command -v "$PY" >/dev/null 2>&1; then
  echo "dscan: python3 (3.11 or newer) is needed and was not found on PATH" >&2
  exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "dscan: creating virtual environment in $VENV" >&2
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.dscan-installed"
digest="$(sha256sum < "$DSCAN_HOME/pyproject.toml" | cut -d' ' -f1)"
want="$digest-$EXTRAS"
have="$(cat "$stamp" 2>/dev/null || true)"
# dev includes service: a venv set up for the tests also serves ./dscan, without a reinstall.
if [ "$have" != "$want" ] && ! { [ "$EXTRAS" = service ] && [ "$have" = "$digest-dev" ]; }; then
  echo "dscan: installing dscan[$EXTRAS] and its dependencies (first run only)" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$DSCAN_HOME[$EXTRAS]" >&2
  echo "$want" > "$stamp"
fi
export PATH="$VENV/bin:$PATH"
