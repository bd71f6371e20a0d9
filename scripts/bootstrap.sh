# Sourced by ./dscan and scripts/test: makes .venv with dscan and its dependencies installed.
# Re-installs only when pyproject.toml changes. Needs Python 3.11+ with venv (scripts/choose-python picks it).
set -euo pipefail
DSCAN_HOME="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DSCAN_VENV:-$DSCAN_HOME/.venv}"
EXTRAS="${DSCAN_EXTRAS:-dev}"

if [ ! -x "$VENV/bin/python" ]; then
  PY="$("$DSCAN_HOME/scripts/choose-python")"  # ($PYTHON, or the system's optimised python3: see there)
  echo "dscan: creating virtual environment in $VENV ($("$PY" -c 'import platform; print("Python", platform.python_version())') from $PY)" >&2
  existed="$([ -e "$VENV" ] && echo yes || true)"
  if ! "$PY" -m venv "$VENV"; then
    [ -n "$existed" ] || rm -rf "$VENV"  # (half made: the next run starts over)
    exit 2
  fi
fi
stamp="$VENV/.dscan-installed"
digest="$(sha256sum < "$DSCAN_HOME/pyproject.toml" | cut -d' ' -f1)"
want="$digest-$EXTRAS"
have="$(cat "$stamp" 2>/dev/null || true)"
# dev includes service: a venv set up for the tests also serves ./dscan, without a reinstall.
if [ "$have" != "$want" ] && ! { [ "$EXTRAS" = service ] && [ "$have" = "$digest-dev" ]; }; then
  echo "dscan: installing dscan[$EXTRAS] and its dependencies (first run only)" >&2
  # pip warns once per package about each configured index or find-links folder that does not exist (a
  # machine's pip.conf naming local mirrors): dozens of lines that say nothing about this install; its other
  # messages, and its exit status, pass through.
  pip_install() {
    { "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 1>&3 \
      | { grep -v "^WARNING: Location '.*' is ignored: it is neither a file nor a directory\.$" || true; } >&2; } 3>&2
  }
  pip_install --upgrade pip
  pip_install -e "$DSCAN_HOME[$EXTRAS]"
  echo "$want" > "$stamp"
fi
export PATH="$VENV/bin:$PATH"
