#!/usr/bin/env bash
# Checks the container and monitoring files against each other and against the code,
# without a Docker engine:
#
#   bash tests/ops/docker_consistency_test.sh PATH/TO/pgjobd      (from anywhere)
#
# - docker/pgjobd.yaml passes `pgjobd check-config`, listens on all interfaces, and its
#   port is the one the Dockerfile EXPOSEs and health-checks, compose publishes and
#   Prometheus scrapes; its exec handlers are installed by the Dockerfile;
# - the Dockerfile builds with CI's commands, COPYs only files that exist, runs as a
#   non-root user, and its runtime packages provide every shared library the built binary
#   needs (ldd + dpkg) and the one it loads itself (libcurl, for http handlers);
# - docker-compose.yml has the services and dependencies the docs promise, and every file
#   it mounts exists;
# - every metric and label that alerts.yml and the Grafana dashboard use exists in
#   src/metrics/metrics.cpp; every alert has a severity, summary and description; the
#   dashboard parses and uses the provisioned datasource uid.
# Exit 0 when all hold; otherwise each broken check is printed and the exit is 1.
set -euo pipefail

if [[ $# -ne 1 || ! -x "$1" ]]; then
  echo "usage: $0 PATH/TO/pgjobd (the built binary)" >&2
  exit 2
fi
binary=$(realpath -- "$1")
cd "$(dirname "$0")/../.."

# Debian's python3 has PyYAML (python3-yaml, from scripts/install-deps.sh); a python3
# earlier in PATH (pyenv, a venv) may not.
python=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import yaml' 2>/dev/null; then
    python=$candidate
    break
  fi
done
if [[ -z "$python" ]]; then
  echo "FAIL: no python3 with PyYAML (apt-get install python3-yaml; scripts/install-deps.sh does)" >&2
  exit 1
fi

exec "$python" - "$binary" <<'PYTHON'
import json
import os
import re
import shlex
import subprocess
import sys

import yaml

binary = sys.argv[1]
failures = []
passed = 0


def check(ok, what):
    global passed
    if ok:
        passed += 1
    else:
        failures.append(what)
        print(f"FAIL: {what}")
    return ok


def load_yaml(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def host_port(address):
    """'0.0.0.0:9464' -> ('0.0.0.0', 9464); '[::]:9464' -> ('::', 9464)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


# ---- the Dockerfile: instructions with their continuation lines joined -------------------
DOCKERFILE = "docker/Dockerfile"
instructions = []  # (KEYWORD, arguments)
with open(DOCKERFILE, encoding="utf-8") as f:
    pending = ""
    for line in f:
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, args = full.partition(" ")
        instructions.append((keyword.upper(), args.strip()))


def exec_form(args):
    """JSON exec form ["a", "b"] -> list, shell form -> ['/bin/sh', '-c', args]."""
    if args.startswith("["):
        return json.loads(args)
    return ["/bin/sh", "-c", args]


stages = [args for kw, args in instructions if kw == "FROM"]
check(len(stages) == 2 and stages[0].startswith("debian:12 ") and stages[1] == "debian:12-slim",
      f"{DOCKERFILE}: expected a debian:12 build stage and a debian:12-slim runtime, got {stages}")
runtime_start = max(i for i, (kw, _) in enumerate(instructions) if kw == "FROM")
build_part, runtime_part = instructions[:runtime_start], instructions[runtime_start:]

run_commands = " ; ".join(args for kw, args in build_part if kw == "RUN")
check(re.search(r"cmake --preset release\s*&&\s*cmake --build --preset release(\s|$|;|&)", run_commands),
      f"{DOCKERFILE}: the build stage must run CI's build commands "
      "`cmake --preset release && cmake --build --preset release` (scripts/test.sh)")
check("cmake --install build/release" in run_commands,
      f"{DOCKERFILE}: the build stage must install with `cmake --install build/release`")

copied_to = {}  # destination -> repository source, for COPYs from the build context
copied_sources = set()
for kw, args in instructions:
    if kw != "COPY":
        continue
    words = shlex.split(args)
    flags = [w for w in words if w.startswith("--")]
    paths = [w for w in words if not w.startswith("--")]
    if any(flag.startswith("--from") for flag in flags):
        continue
    *sources, destination = paths
    for source in sources:
        check(os.path.exists(source), f"{DOCKERFILE}: COPY source {source} does not exist")
        copied_to[destination] = source
        copied_sources.add(os.path.normpath(source))
# The build stage COPYs the sources one by one, so a directory that CMakeLists.txt starts
# to use (add_subdirectory, a glob, an include path) must be added there too. A word after
# "word/" is a subdirectory (src/bench), not a top-level one (bench/).
with open("CMakeLists.txt", encoding="utf-8") as f:
    cmake_words = set(re.findall(r"(?<![A-Za-z0-9_.-]/)(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]+",
                                 re.sub(r"#.*", "", f.read())))
for entry in sorted(os.listdir(".")):
    if os.path.isdir(entry) and not entry.startswith(".") and entry != "build" and entry in cmake_words:
        check(entry in copied_sources,
              f"{DOCKERFILE}: CMakeLists.txt uses {entry}/, which the build stage does not COPY")
for entry in ("CMakeLists.txt", "CMakePresets.json"):
    check(entry in copied_sources, f"{DOCKERFILE}: the build stage must COPY {entry}")
check(copied_to.get("/etc/pgjobd/pgjobd.yaml") == "docker/pgjobd.yaml",
      f"{DOCKERFILE}: must COPY docker/pgjobd.yaml to /etc/pgjobd/pgjobd.yaml (the default -c path)")

entrypoint = [exec_form(a) for kw, a in runtime_part if kw == "ENTRYPOINT"]
cmd = [exec_form(a) for kw, a in runtime_part if kw == "CMD"]
check(len(entrypoint) == 1 and os.path.basename(entrypoint[0][-1]) == "pgjobd",
      f"{DOCKERFILE}: ENTRYPOINT must end in pgjobd (got {entrypoint})")
check(cmd == [["run", "-c", "/etc/pgjobd/pgjobd.yaml"]],
      f"{DOCKERFILE}: CMD must be [\"run\", \"-c\", \"/etc/pgjobd/pgjobd.yaml\"] (got {cmd})")
users = [a for kw, a in runtime_part if kw == "USER"]
check(users and users[-1] not in ("root", "0"), f"{DOCKERFILE}: the runtime must run as a non-root USER")
check(("STOPSIGNAL", "SIGTERM") in runtime_part, f"{DOCKERFILE}: STOPSIGNAL SIGTERM missing")

# ---- docker/pgjobd.yaml ---------------------------------------------------------------
CONFIG = "docker/pgjobd.yaml"
config = load_yaml(CONFIG)
listen_host, listen_port = host_port(config["metrics"]["listen"])
check(listen_host in ("0.0.0.0", "::"),
      f"{CONFIG}: metrics.listen must bind all interfaces inside a container (is {listen_host})")
env = {k: v for k, v in os.environ.items() if k not in ("PGJOBD_CONFIG",)}
result = subprocess.run([binary, "check-config", "-c", CONFIG], env=env,
                        capture_output=True, text=True)
check(result.returncode == 0,
      f"pgjobd check-config -c {CONFIG} exited {result.returncode}: {result.stderr.strip()}")
check(config["database"].get("migrate_on_start") is False,
      f"{CONFIG}: database.migrate_on_start must be false (the compose `migrate` service migrates)")
for name, handler in (config.get("handlers") or {}).items():
    if "exec" in handler:
        program = handler["exec"][0]
        if program in copied_to:
            source = copied_to[program]
            check(os.access(source, os.X_OK),
                  f"{source} (handler {name}, COPYed to {program}) must be executable in git")
        else:
            check(program.startswith(("/bin/", "/usr/bin/")),
                  f"{CONFIG}: handler {name} runs {program}, which the Dockerfile does not install")

exposed = [a for kw, a in runtime_part if kw == "EXPOSE"]
check(exposed == [str(listen_port)],
      f"{DOCKERFILE}: EXPOSE {exposed} must be metrics.listen's port {listen_port}")
healthchecks = [a for kw, a in runtime_part if kw == "HEALTHCHECK"]
urls = re.findall(r"https?://[^\s\"']+", " ".join(healthchecks))
check(len(healthchecks) == 1 and len(urls) == 1, f"{DOCKERFILE}: expected one HEALTHCHECK with one URL")
for url in urls:
    match = re.fullmatch(r"http://(127\.0\.0\.1|localhost):(\d+)(/\S*)", url)
    check(match and int(match.group(2)) == listen_port and match.group(3) == "/healthz",
          f"{DOCKERFILE}: HEALTHCHECK URL {url} must be http://127.0.0.1:{listen_port}/healthz")

# ---- runtime packages against the binary's shared libraries ----------------------------
runtime_packages = []
for kw, args in runtime_part:
    if kw == "RUN" and "apt-get install" in args:
        after = args.split("apt-get install", 1)[1].split("&&", 1)[0]
        runtime_packages += [w for w in after.split() if not w.startswith("-")]
check(runtime_packages, f"{DOCKERFILE}: no apt-get install in the runtime stage")


def package_exists(name):
    return subprocess.run(["apt-cache", "show", name], capture_output=True).returncode == 0


def installed_depends(name):
    """The packages an installed package depends on (first of each alternative), or None."""
    result = subprocess.run(["dpkg-query", "-W", "-f=${Status}|${Depends},${Pre-Depends}", name],
                            capture_output=True, text=True)
    if result.returncode != 0 or not result.stdout.startswith("install ok installed"):
        return None
    deps = result.stdout.split("|", 1)[1]
    return {re.split(r"[\s(:]", d.strip().split("|")[0].strip())[0]
            for d in deps.split(",") if d.strip()}


def owner(library):
    candidates = [library, os.path.realpath(library)]
    candidates += ["/usr" + p for p in list(candidates) if not p.startswith("/usr/")]
    candidates += [p[4:] for p in list(candidates) if p.startswith("/usr/")]
    for path in candidates:
        result = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
        if result.returncode == 0:
            return result.stdout.split(":", 1)[0].split(",")[0].strip()
    return None


for name in runtime_packages:
    check(installed_depends(name) is not None or package_exists(name),
          f"{DOCKERFILE}: runtime package {name} is neither installed here nor known to "
          "apt-cache (not a Debian 12 package, or run apt-get update)")
closure, todo = set(), list(runtime_packages)
while todo:
    name = todo.pop()
    if name in closure:
        continue
    closure.add(name)
    todo += sorted(installed_depends(name) or ())
ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
libraries = re.findall(r"=>\s+(/\S+)", ldd)
check(libraries, f"ldd {binary} listed no libraries")
# Loaded with dlopen, so not in ldd's list: libcurl, by the first http handler made.
CURL_LOADER = "src/handlers/curl_library.cpp"
with open(CURL_LOADER, encoding="utf-8") as f:
    dlopened = re.findall(r'kSoname = "([^"]+)"', f.read())
check(dlopened, f"{CURL_LOADER}: no kSoname (the library the http handler loads)")
for soname in dlopened:
    found = [line.split("=>")[-1].strip()
             for line in subprocess.run(["ldconfig", "-p"], capture_output=True,
                                        text=True).stdout.splitlines()
             if line.strip().startswith(soname + " ")]
    if check(found, f"{soname} (loaded by the http handler) is not installed here"):
        libraries.append(found[0])
for library in libraries:
    if re.search(r"/lib(a|ub|t|l|hwa)san\.so", library):
        continue  # a sanitizer build's runtime: the image builds the release preset
    package = owner(library)
    if check(package, f"{library} (needed by pgjobd) belongs to no Debian package"):
        check(package in closure,
              f"{DOCKERFILE}: {library} comes from {package}, which the runtime packages "
              f"{runtime_packages} do not install")

# ---- docker-compose.yml -----------------------------------------------------------------
COMPOSE = "docker-compose.yml"
compose = load_yaml(COMPOSE)
services = compose.get("services", {})
for name in ("postgres", "migrate", "pgjobd", "prometheus", "grafana"):
    check(name in services, f"{COMPOSE}: service {name} missing")
for name in ("migrate", "pgjobd"):
    service = services.get(name, {})
    build = service.get("build", {})
    check(build.get("dockerfile") == DOCKERFILE and build.get("context") == ".",
          f"{COMPOSE}: {name} must build {DOCKERFILE} with the repository root as context")
    check("/etc/pgjobd/pgjobd.yaml" in (service.get("command") or []),
          f"{COMPOSE}: {name}'s command must name /etc/pgjobd/pgjobd.yaml")
    url = (service.get("environment") or {}).get("DATABASE_URL", "")
    check(re.match(r"postgres(ql)?://[^@/]*@postgres(:5432)?/", url),
          f"{COMPOSE}: {name} needs DATABASE_URL pointing at the postgres service (is {url!r})")
check(services.get("migrate", {}).get("command", [None])[0] == "migrate",
      f"{COMPOSE}: the migrate service must run `migrate`")


def depends(service, on):
    deps = services.get(service, {}).get("depends_on", {})
    return deps.get(on, {}).get("condition") if isinstance(deps, dict) else None


check(depends("migrate", "postgres") == "service_healthy",
      f"{COMPOSE}: migrate must wait for postgres to be healthy")
check(depends("pgjobd", "postgres") == "service_healthy",
      f"{COMPOSE}: pgjobd must wait for postgres to be healthy")
check(depends("pgjobd", "migrate") == "service_completed_successfully",
      f"{COMPOSE}: pgjobd must wait for migrate to complete successfully")
check("pg_isready" in json.dumps(services.get("postgres", {}).get("healthcheck", {})),
      f"{COMPOSE}: postgres needs a pg_isready healthcheck")

published = [str(p) for p in services.get("pgjobd", {}).get("ports", [])]
check(published, f"{COMPOSE}: pgjobd publishes no port")
for mapping in published:
    container_port = int(mapping.split("/")[0].rsplit(":", 1)[-1])
    check(container_port == listen_port,
          f"{COMPOSE}: pgjobd port {mapping} must map container port {listen_port} (metrics.listen)")
grace = str(services.get("pgjobd", {}).get("stop_grace_period", "10s"))
shutdown = str(config.get("shutdown", {}).get("timeout", "30s"))


def seconds(duration):
    """'30s' -> 30, '1m' -> 60; None for anything else."""
    match = re.fullmatch(r"(\d+)(s|m)", str(duration))
    return int(match.group(1)) * (60 if match.group(2) == "m" else 1) if match else None


# A drain waits shutdown.timeout, then stops exec children (TERM, kill_grace, KILL).
kill_grace = max([seconds(h.get("kill_grace", "5s")) or 0
                  for h in (config.get("handlers") or {}).values() if "exec" in h] or [0])
check(seconds(grace) is not None and seconds(shutdown) is not None
      and seconds(grace) > seconds(shutdown) + kill_grace,
      f"{COMPOSE}: pgjobd stop_grace_period {grace} must exceed {CONFIG} shutdown.timeout "
      f"{shutdown} plus the largest kill_grace ({kill_grace}s)")

mounts = {}  # container path -> repository path
for name, service in services.items():
    for volume in service.get("volumes", []) or []:
        source, _, rest = str(volume).partition(":")
        if source.startswith("./"):
            target = rest.split(":")[0]
            check(os.path.exists(source), f"{COMPOSE}: {name} mounts {source}, which does not exist")
            mounts[target] = os.path.normpath(source)

# ---- Prometheus -----------------------------------------------------------------------
PROMETHEUS = "docker/prometheus/prometheus.yml"
prometheus = load_yaml(PROMETHEUS)
check(mounts.get("/etc/prometheus/prometheus.yml") == PROMETHEUS,
      f"{COMPOSE}: prometheus must mount {PROMETHEUS} at /etc/prometheus/prometheus.yml")
for rule_file in prometheus.get("rule_files", []):
    in_repo = os.path.normpath(os.path.join(os.path.dirname(PROMETHEUS), rule_file))
    check(os.path.exists(in_repo), f"{PROMETHEUS}: rule file {in_repo} does not exist")
    check(mounts.get(os.path.join("/etc/prometheus", rule_file)) == in_repo,
          f"{COMPOSE}: prometheus must mount {in_repo} at /etc/prometheus/{rule_file}")
jobs = {job["job_name"]: job for job in prometheus.get("scrape_configs", [])}
targets = [t for sc in jobs.get("pgjobd", {}).get("static_configs", []) for t in sc.get("targets", [])]
check(targets, f"{PROMETHEUS}: no static targets for job pgjobd (alerts.yml matches up{{job=\"pgjobd\"}})")
for target in targets:
    host, port = host_port(target)
    check(host in services and port == listen_port,
          f"{PROMETHEUS}: target {target} must be a compose service on port {listen_port}")

# ---- metric and label names against src/metrics/metrics.cpp ---------------------------
with open("src/metrics/metrics.cpp", encoding="utf-8") as f:
    metrics_source = f.read()
families = {}
for kind, name in re.findall(r"Build(Counter|Gauge|Histogram|Summary)\(\)\s*\.Name\(\"([a-z_:][a-z0-9_:]*)\"\)",
                             metrics_source):
    families[name] = kind
check("pgjobd_jobs_total" in families, "could not read the metric families from src/metrics/metrics.cpp")
known_series = set(families)
for name, kind in families.items():
    if kind == "Histogram":
        known_series |= {name + "_bucket", name + "_sum", name + "_count"}
    if kind == "Summary":
        known_series |= {name + "_sum", name + "_count"}
# Series Prometheus itself makes.
known_series |= {"up", "ALERTS", "ALERTS_FOR_STATE", "scrape_duration_seconds"}
known_labels = set(re.findall(r"\{\"([a-z_]+)\",\s", metrics_source))
known_labels |= {"le", "instance", "job", "alertname", "alertstate", "__name__"}
check({"queue", "type", "outcome"} <= known_labels, "could not read the label names from metrics.cpp")

PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
                "unless", "bool", "offset", "inf", "nan"}


def check_expression(where, expr):
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values may hold any word
    names = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?=\{|\[)", expr))
    names |= set(re.findall(r"\b(pgjobd_[a-z0-9_]+)", expr))
    for name in sorted(names - PROMQL_WORDS):
        check(name in known_series, f"{where}: metric {name} is not exported (src/metrics/metrics.cpp)")
    labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"", expr))
    for grouping in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr):
        labels |= {l.strip() for l in grouping.split(",") if l.strip()}
    for label in sorted(labels):
        check(label in known_labels, f"{where}: label {label} is not one pgjobd exports")


ALERTS = "docker/prometheus/alerts.yml"
rules = [rule for group in load_yaml(ALERTS)["groups"] for rule in group["rules"]]
check(len(rules) >= 6, f"{ALERTS}: expected at least 6 rules")
for rule in rules:
    name = rule.get("alert") or rule.get("record")
    check_expression(f"{ALERTS} {name}", rule["expr"])
    if "alert" in rule:
        check(rule.get("labels", {}).get("severity") in ("info", "warning", "critical"),
              f"{ALERTS} {name}: needs a severity label (info, warning or critical)")
        for annotation in ("summary", "description"):
            check(rule.get("annotations", {}).get(annotation),
                  f"{ALERTS} {name}: needs a {annotation} annotation")

# ---- Grafana ----------------------------------------------------------------------------
DASHBOARD = "docker/grafana/dashboards/pgjobd.json"
DATASOURCES = "docker/grafana/provisioning/datasources/prometheus.yml"
PROVIDERS = "docker/grafana/provisioning/dashboards/pgjobd.yml"
try:
    with open(DASHBOARD, encoding="utf-8") as f:
        text = f.read()
    dashboard = json.loads(text)
except ValueError as e:
    dashboard, text = {}, ""
    check(False, f"{DASHBOARD}: not valid JSON: {e}")
check("${DS_" not in text, f"{DASHBOARD}: uses an import-time ${{DS_...}} datasource input")
datasource_uids = {d.get("uid") for d in load_yaml(DATASOURCES).get("datasources", [])}
check(mounts.get("/etc/grafana/provisioning") == "docker/grafana/provisioning",
      f"{COMPOSE}: grafana must mount docker/grafana/provisioning at /etc/grafana/provisioning")
provider_paths = {p["options"]["path"] for p in load_yaml(PROVIDERS).get("providers", [])}
check(any(mounts.get(path) == os.path.dirname(DASHBOARD) for path in provider_paths),
      f"{COMPOSE}: no grafana mount puts {os.path.dirname(DASHBOARD)} at a provider path {provider_paths}")


def panels_of(container):
    for panel in container.get("panels", []):
        yield panel
        yield from panels_of(panel)


expressions = 0
for panel in panels_of(dashboard):
    title = panel.get("title", "?")
    for ref in [panel.get("datasource")] + [t.get("datasource") for t in panel.get("targets", [])]:
        if isinstance(ref, dict) and ref.get("type") == "prometheus":
            check(ref.get("uid") in datasource_uids,
                  f"{DASHBOARD} panel {title!r}: datasource uid {ref.get('uid')!r} is not provisioned {datasource_uids}")
    for t in panel.get("targets", []):
        if "expr" in t:
            expressions += 1
            check_expression(f"{DASHBOARD} panel {title!r}", t["expr"])
for variable in dashboard.get("templating", {}).get("list", []):
    ref = variable.get("datasource")
    if isinstance(ref, dict) and ref.get("type") == "prometheus":
        check(ref.get("uid") in datasource_uids,
              f"{DASHBOARD} variable {variable.get('name')}: datasource uid {ref.get('uid')!r} is not provisioned")
    query = variable.get("query")
    query = query.get("query", "") if isinstance(query, dict) else str(query or "")
    check_expression(f"{DASHBOARD} variable {variable.get('name')}", query)
check(expressions >= 10, f"{DASHBOARD}: expected panels with queries (found {expressions})")

print(f"docker consistency: {len(failures)} of {passed + len(failures)} checks failed" if failures else f"docker consistency: all {passed} checks hold")
sys.exit(1 if failures else 0)
PYTHON
