#!/usr/bin/env bash
# Checks config/pgjobd.service against the daemon: Type=notify, reload, stop timeout, hardening,
# and that ExecStart names the installed binary, the `run` subcommand and the default config.
#
#   bash tests/ops/systemd_unit_test.sh [PATH-TO-PGJOBD-BINARY]     (from the repository root)
#
# With a binary it also checks the binary's name and that it accepts `run -c`, and runs
# `systemd-analyze verify` (when installed) on the unit with ExecStart pointing at it.
# Exit 0 when every check passes, 1 otherwise (each failure is printed), 77 (ctest: skipped)
# when all that ran passed but some could not run.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
unit=config/pgjobd.service
yaml=config/pgjobd.yaml
cli=src/cli/cli_main.cpp
binary=${1:-}

failures=0
skipped=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
pass() { echo "ok: $*"; }

[[ -r $unit ]] || { echo "FAIL: $unit not found" >&2; exit 1; }

# The last value assigned to KEY in [SECTION] (systemd: a later assignment wins; for list
# settings an empty one resets, which this simple reader treats the same way). Prints
# nothing and returns 1 when the key is absent.
unit_value() {
  local section=$1 key=$2
  awk -v section="[$section]" -v key="$key" '
    /^[ \t]*[#;]/ || /^[ \t]*$/ { next }
    /^[ \t]*\[/ { in_section = ($0 ~ "^[ \t]*\\[" substr(section, 2, length(section) - 2) "\\][ \t]*$"); next }
    in_section {
      eq = index($0, "=")
      if (eq == 0) next
      name = substr($0, 1, eq - 1); gsub(/^[ \t]+|[ \t]+$/, "", name)
      if (name != key) next
      value = substr($0, eq + 1); gsub(/^[ \t]+|[ \t]+$/, "", value)
      found = 1; last = value
    }
    END { if (found) { print last; exit 0 } exit 1 }
  ' "$unit"
}

expect_value() {
  local key=$1 want=$2 got
  if ! got=$(unit_value Service "$key"); then
    fail "$key= is missing from [Service]"
  elif [[ $got != "$want" ]]; then
    fail "$key=$got, expected $key=$want"
  else
    pass "$key=$want"
  fi
}

# Seconds in a systemd time span (TimeoutStopSec=45, 1min 30s, 2m, 500ms; bare = seconds),
# rounded up; "infinity" prints a huge number. Returns 1 when it cannot parse it.
systemd_seconds() {
  local span=$1
  [[ $span == infinity ]] && { echo 999999999; return 0; }
  awk -v span="$span" 'BEGIN {
    total = 0; rest = span; gsub(/[ \t]/, "", rest)
    if (rest == "") exit 1
    while (rest != "") {
      if (!match(rest, /^[0-9]+(\.[0-9]+)?/)) exit 1
      number = substr(rest, 1, RLENGTH) + 0; rest = substr(rest, RLENGTH + 1)
      match(rest, /^[a-z]*/); unit = substr(rest, 1, RLENGTH); rest = substr(rest, RLENGTH + 1)
      if (unit == "" || unit ~ /^(s|sec|second|seconds)$/) factor = 1
      else if (unit ~ /^(ms|msec)$/) factor = 0.001
      else if (unit ~ /^(us|usec)$/) factor = 0.000001
      else if (unit ~ /^(m|min|minute|minutes)$/) factor = 60
      else if (unit ~ /^(h|hr|hour|hours)$/) factor = 3600
      else if (unit ~ /^(d|day|days)$/) factor = 86400
      else exit 1
      total += number * factor
    }
    printf "%d\n", (total == int(total)) ? total : int(total) + 1
  }'
}

# Seconds in a pgjobd duration (250ms, 5s, 10m, 1h, 7d, 0), rounded up.
pgjobd_seconds() {
  local text=$1
  [[ $text =~ ^([0-9]+)(ms|s|m|h|d)?$ ]] || return 1
  local n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
  case $unit in
    ms) echo $(((n + 999) / 1000)) ;;
    s) echo "$n" ;;
    m) echo $((n * 60)) ;;
    h) echo $((n * 3600)) ;;
    d) echo $((n * 86400)) ;;
    "") [[ $n == 0 ]] && echo 0 || return 1 ;;
  esac
}

# shutdown.timeout from the example config (block or flow style), else the built-in 30s.
shutdown_timeout=30
if [[ -r $yaml ]]; then
  value=$(awk '
    /^shutdown:[ \t]*\{/ { if (match($0, /timeout:[ \t]*[0-9a-z]+/)) { v = substr($0, RSTART, RLENGTH); sub(/timeout:[ \t]*/, "", v); print v; exit } }
    /^shutdown:[ \t]*(#.*)?$/ { block = 1; next }
    block && /^[^ \t#]/ { block = 0 }
    block && /^[ \t]+timeout:/ { v = $0; sub(/^[ \t]+timeout:[ \t]*/, "", v); sub(/[ \t]*#.*$/, "", v); print v; exit }
  ' "$yaml")
  if [[ -n $value ]]; then
    if seconds=$(pgjobd_seconds "$value"); then
      shutdown_timeout=$seconds
    else
      fail "cannot parse shutdown.timeout '$value' in $yaml"
    fi
  fi
fi

# --- Start-up notification and reload -------------------------------------------------------
expect_value Type notify
expect_value NotifyAccess main
expect_value KillSignal SIGTERM
expect_value KillMode mixed # SIGTERM the daemon only, so running handlers can finish
expect_value Restart on-failure

if reload=$(unit_value Service ExecReload) &&
  [[ $reload =~ kill[[:space:]]+(-HUP|-SIGHUP|-s[[:space:]]*(SIG)?HUP|-1)[[:space:]]+\$MAINPID$ ]]; then
  pass "ExecReload sends SIGHUP to \$MAINPID ($reload)"
else
  fail "ExecReload must send SIGHUP to \$MAINPID, got '${reload:-<missing>}'"
fi

# --- Stop timeout -----------------------------------------------------------------------------
if ! stop=$(unit_value Service TimeoutStopSec); then
  fail "TimeoutStopSec= is missing (systemd's default 90s would hide a mismatch)"
elif ! stop_seconds=$(systemd_seconds "$stop"); then
  fail "cannot parse TimeoutStopSec=$stop"
elif ((stop_seconds <= shutdown_timeout + 5)); then
  fail "TimeoutStopSec=$stop (${stop_seconds}s) must exceed shutdown.timeout (${shutdown_timeout}s) + 5s kill grace"
else
  pass "TimeoutStopSec=$stop (${stop_seconds}s) > shutdown.timeout ${shutdown_timeout}s + 5s"
fi

if ! watchdog=$(unit_value Service WatchdogSec) || ! watchdog_seconds=$(systemd_seconds "$watchdog") ||
  ((watchdog_seconds <= 0)); then
  fail "WatchdogSec= must be set to a positive time span, got '${watchdog:-<missing>}'"
else
  pass "WatchdogSec=$watchdog"
fi

# --- Identity and secrets ---------------------------------------------------------------------
if [[ $(unit_value Service DynamicUser) == yes ]] || unit_value Service User >/dev/null; then
  pass "runs as an unprivileged user ($(unit_value Service User || echo dynamic))"
else
  fail "neither User= nor DynamicUser=yes is set: the daemon would run as root"
fi
if [[ $(unit_value Service User) == root ]]; then fail "User=root"; fi
env_file=$(unit_value Service EnvironmentFile) || true
if [[ $env_file == -/etc/default/pgjobd ]]; then
  pass "EnvironmentFile=$env_file"
else
  fail "EnvironmentFile=-/etc/default/pgjobd expected, got '${env_file:-<missing>}'"
fi
if grep -Eiq '^[[:space:]]*Environment=.*(DATABASE_URL|PGPASSWORD)' "$unit"; then
  fail "a database URL or password is set with Environment= in the unit (use EnvironmentFile)"
fi

# --- Hardening --------------------------------------------------------------------------------
for setting in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes \
  PrivateDevices=yes ProtectKernelTunables=yes ProtectKernelModules=yes ProtectControlGroups=yes \
  LockPersonality=yes RestrictRealtime=yes SystemCallArchitectures=native; do
  expect_value "${setting%%=*}" "${setting#*=}"
done
expect_value CapabilityBoundingSet ""
families=$(unit_value Service RestrictAddressFamilies | tr -s ' \t' '\n' | sort | tr '\n' ' ')
if [[ $families == "AF_INET AF_INET6 AF_UNIX " ]]; then
  pass "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"
else
  fail "RestrictAddressFamilies must be exactly AF_UNIX AF_INET AF_INET6, got '$families'"
fi

# --- ExecStart matches the installed binary and the daemon's command line ---------------------
exec_start=$(unit_value Service ExecStart) || exec_start=""
read -r -a argv <<<"$exec_start"
exec_path=${argv[0]:-}
exec_path=${exec_path#[-@:+!]} # systemd's ExecStart prefixes
# `cmake --install` puts the binary in CMAKE_INSTALL_PREFIX (default /usr/local) / DESTINATION.
install_dir=$(sed -nE 's/^[[:space:]]*install\(TARGETS pgjobd RUNTIME DESTINATION ([^ )]+).*/\1/p' CMakeLists.txt)
expected_path=/usr/local/${install_dir:-bin}/pgjobd
if [[ $exec_path == "$expected_path" ]]; then
  pass "ExecStart runs $expected_path"
else
  fail "ExecStart runs '$exec_path', but cmake --install puts the binary at $expected_path"
fi
if [[ ${argv[1]:-} == run ]]; then
  pass "ExecStart uses the run subcommand"
else
  fail "ExecStart should say 'pgjobd run ...', got '$exec_start'"
fi
unit_config=""
for ((i = 1; i < ${#argv[@]}; i++)); do
  case ${argv[i]} in
    -c | --config) unit_config=${argv[i + 1]:-} ;;
    --config=*) unit_config=${argv[i]#--config=} ;;
  esac
done
default_config=$(grep -oE '"/[^"]+\.ya?ml"' "$cli" | head -n 1 | tr -d '"')
if [[ -z $default_config ]]; then
  fail "cannot find the default config path in $cli"
elif [[ $unit_config == "$default_config" ]]; then
  pass "ExecStart passes -c $unit_config, the daemon's default config path"
else
  fail "ExecStart config '${unit_config:-<none>}' differs from the daemon's default '$default_config'"
fi

if [[ -n $binary ]]; then
  if [[ ! -x $binary ]]; then
    fail "binary '$binary' is not executable"
  else
    if [[ $(basename -- "$binary") == "$(basename -- "$exec_path")" ]]; then
      pass "binary name $(basename -- "$binary") matches ExecStart"
    else
      fail "binary '$(basename -- "$binary")' is not what ExecStart runs ('$(basename -- "$exec_path")')"
    fi
    if help=$("$binary" run --help 2>&1) && grep -q -- '-c,--config' <<<"$help"; then
      pass "the binary accepts 'run -c FILE'"
    else
      fail "'$binary run --help' does not list -c,--config"
    fi
    if command -v systemd-analyze >/dev/null; then
      # verify with ExecStart pointing at the real binary (absolute), which need not be installed.
      scratch=$(mktemp -d)
      trap 'rm -rf "$scratch"' EXIT
      real_binary=$(realpath -- "$binary")
      sed "s|^ExecStart=$exec_path |ExecStart=$real_binary |" "$unit" >"$scratch/pgjobd.service"
      if output=$(systemd-analyze verify "$scratch/pgjobd.service" 2>&1) && [[ -z $output ]]; then
        pass "systemd-analyze verify"
      else
        fail "systemd-analyze verify: ${output:-exit status $?}"
      fi
    else
      echo "skip: systemd-analyze not installed"
      skipped=1
    fi
  fi
else
  echo "skip: no binary given, binary checks and systemd-analyze verify not run"
  skipped=1
fi

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
if ((skipped)); then
  echo "the other systemd unit checks passed; some were skipped (above)"
  exit 77  # ctest: skipped, so the summary shows what did not run
fi
echo "all systemd unit checks passed"
