#!/usr/bin/env bash
# The one step that changes the system: installs, with apt-get, the Debian packages
# Treeline's tests need and this machine lacks. Nothing else in scripts/ or the
# Makefile runs apt-get. Idempotent: everything is checked first, and when all is
# present nothing is installed and the package lists are not even updated.
#
#   WANT   space-separated subset of (default: all of them)
#            chromium  the browser the Playwright tests drive: Debian's chromium at
#                      $CHROMIUM (default /usr/bin/chromium, as in end2end/playwright.config.ts)
#            postgres  a PostgreSQL server for scripts/with-postgres.sh, unless one is
#                      already where that script looks (PG_BIN, /usr/local/bin,
#                      /usr/lib/postgresql/*/bin)
#            pyvenv    python3 whose `python3 -m venv` works (Debian ships ensurepip
#                      apart, in python3-venv): the Python tests run in a venv
# Runs apt-get as root, or through sudo when not root.
set -euo pipefail

WANT=${WANT:-"chromium postgres pyvenv"}
say() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*"; }
wants() { [[ " $WANT " == *" $1 "* ]]; }

has_chromium() { [ -x "${CHROMIUM:-/usr/bin/chromium}" ]; }
# The places scripts/with-postgres.sh looks, in its order.
has_postgres() {
  local dir
  for dir in ${PG_BIN:-} /usr/local/bin /usr/lib/postgresql/*/bin; do
    if [ -x "$dir/pg_ctl" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_basebackup" ]; then return 0; fi
  done
  return 1
}
has_pyvenv() { command -v python3 >/dev/null && python3 -c 'import ensurepip, venv' 2>/dev/null; }

for item in $WANT; do
  case $item in
    chromium | postgres | pyvenv) ;;
    *) say "unknown WANT item '$item' (known: chromium postgres pyvenv)"; exit 2 ;;
  esac
done

packages=() reasons=() present=()
if wants chromium; then
  if has_chromium; then present+=(chromium); else
    packages+=(chromium); reasons+=("chromium (the browser the Playwright tests drive)")
  fi
fi
if wants postgres; then
  if has_postgres; then present+=(postgres); else
    packages+=(postgresql); reasons+=("postgresql (the server behind the PostgreSQL test runs)")
  fi
fi
if wants pyvenv; then
  if has_pyvenv; then present+=(pyvenv); else
    command -v python3 >/dev/null || packages+=(python3)
    packages+=(python3-venv); reasons+=("python3-venv (the Python tests' virtual environment needs it)")
  fi
fi

if [ ${#packages[@]} -eq 0 ]; then
  say "system packages present: ${present[*]} (nothing to install)"
  exit 0
fi

why=$(printf '%s, ' "${reasons[@]}")
say "about to install with apt-get: ${why%, }"
if ! command -v apt-get >/dev/null; then
  say "no apt-get on this machine: install ${packages[*]} by hand, then run this again"
  exit 1
fi
sudo=()
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null; then
    say "not root and no sudo: run as root: apt-get install ${packages[*]}"
    exit 1
  fi
  sudo=(sudo)
fi
say "updating the package lists (apt-get update)"
"${sudo[@]}" apt-get update -qq
say "installing ${packages[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null

# Installed is not enough: what the tests look for must now be there.
missing=()
if wants chromium && ! has_chromium; then missing+=("chromium at ${CHROMIUM:-/usr/bin/chromium}"); fi
if wants postgres && ! has_postgres; then missing+=("pg_ctl, initdb and pg_basebackup"); fi
if wants pyvenv && ! has_pyvenv; then missing+=("python3 -m venv (is python3 Debian's?)"); fi
if [ ${#missing[@]} -gt 0 ]; then
  gone=$(printf '%s, ' "${missing[@]}")
  say "still missing after the install: ${gone%, }"
  exit 1
fi
say "installed ${packages[*]}"
