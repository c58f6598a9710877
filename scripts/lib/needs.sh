# What the scripts in scripts/ and bench/ share (sourced; issue 52: every script works from a
# fresh clone and installs what it needs, or names the one command that does).
#
#   usage_if_asked "$@"    -h/--help: the calling script's header comment, then (when .venv
#                          exists and HELP_MODULE names the Python module the script runs) that
#                          module's own --help; exit 0. Nothing is installed or started.
#   needs CMD=PKG[,PKG]... the Debian packages of every missing command, installed with apt-get
#                          when running as root; otherwise exit 1 with one line naming them.
#   NEEDS_SPARK, NEEDS_KAFKA, NEEDS_PROMETHEUS: the commands of a local Spark (Java 17), of the
#                          real-Kafka test bed (testbed/bed: a JDK for its Java members, Maven for
#                          the Kafka jars, openssl for its TLS listeners) and of the pager's
#                          Prometheus and Alertmanager.

NEEDS_SPARK=(java=openjdk-17-jre-headless)
NEEDS_KAFKA=("${NEEDS_SPARK[@]}" javac=openjdk-17-jdk-headless mvn=maven openssl=openssl)
NEEDS_PROMETHEUS=(promtool=prometheus prometheus=prometheus prometheus-alertmanager=prometheus-alertmanager)

_needs_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
_needs_name="$(basename "$(dirname "$0")")/$(basename "$0")"     # scripts/NAME or bench/NAME

usage_if_asked() {
  case "${1:-}" in -h|--help) ;; *) return 0 ;; esac
  sed -n '2,/^[^#]/p' "$_needs_repo/$_needs_name" | sed -n '/^#/s/^# \{0,1\}//p'
  if [ -n "${HELP_MODULE:-}" ]; then
    if [ -x "$_needs_repo/.venv/bin/python" ]; then
      echo
      (cd "$_needs_repo" && exec .venv/bin/python -m "$HELP_MODULE" --help)
    else
      echo
      echo "Its options: $_needs_name --help once .venv exists (the first run of $_needs_name makes it)."
    fi
  fi
  exit 0
}

needs() {
  local spec packages missing=()
  for spec in "$@"; do
    command -v "${spec%%=*}" >/dev/null 2>&1 && continue
    packages=${spec#*=}
    read -r -a packages <<<"${packages//,/ }"
    missing+=("${packages[@]}")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "$_needs_name: installing ${missing[*]}" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "$_needs_name: missing Debian packages ${missing[*]}: run 'sudo apt-get install ${missing[*]}' (or $_needs_name as root)" >&2
    exit 1
  fi
}
