"""Support for the dashboard's browser tests (tests/browser/dashboard_test.py).

A fresh schema on the server named by PGJOBD_TEST_DATABASE_URL, the real pgjobd binary
(`migrate`, `ui-passwd`, `run`, `ui`) with a generated config, headless Chromium driven by
chromedriver (python3-selenium), a plain HTTP client for the requests a browser would not
send (forged and cross-site POSTs), and waits on conditions with a deadline.

Everything here comes from Debian 12 packages that `scripts/install-deps.sh --with-test`
installs: chromium, chromium-driver, python3-selenium, postgresql-client-15 (psql). The
tests run with /usr/bin/python3, the interpreter those packages serve.
"""

import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

# Variables that would override the config under test if pgjobd inherited them.
SCRUBBED = ("PGJOBD_DATABASE_URL", "DATABASE_URL", "PGJOBD_CONFIG", "SPDLOG_LEVEL")


class Timeout(AssertionError):
    pass


def wait_until(condition, timeout, what, interval=0.05):
    """Polls `condition` until it returns a true value (returned) or `timeout` seconds
    pass: then fails with `what` and the last value seen."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise Timeout(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def child_env(extra=None):
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(extra or {})
    return env


def free_port():
    """A free loopback port below Linux's ephemeral range (as scripts/pg-cluster.sh picks
    one): a port there can be the local end of some outgoing connection."""
    for _ in range(100):
        port = random.randint(20000, 32700)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found")


class Database:
    """A fresh schema on the test server, queried with psql; dropped by drop()."""

    def __init__(self, url, schema):
        self.url = url
        self.schema = schema
        self.admin("DROP SCHEMA IF EXISTS %s CASCADE" % schema)

    def _psql(self, sql, search_path):
        env = child_env({"PGOPTIONS": f"-c search_path={search_path}"} if search_path else {})
        # The statement on stdin: a command-line argument is limited to 128 KiB.
        done = subprocess.run(
            ["psql", "-X", "-v", "ON_ERROR_STOP=1", "-qAt", "-F", "\t", "-d", self.url,
             "-f", "-"],
            input=sql, env=env, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"psql failed ({done.returncode}) on {sql!r}: {done.stderr}")
        return done.stdout

    def admin(self, sql):
        return self._psql(sql, None)

    def rows(self, sql):
        """Rows as lists of text (NULL is "")."""
        out = self._psql(sql, self.schema)
        return [line.split("\t") for line in out.splitlines() if line != ""]

    def value(self, sql):
        rows = self.rows(sql)
        return rows[0][0] if rows else None

    def enqueue(self, type_, queue="default", payload=None, max_attempts=5):
        return int(self.value(
            "SELECT pgjobd_enqueue(%s, %s::jsonb, %s, max_attempts => %d)" % (
                lit(type_), lit(json.dumps(payload or {})), lit(queue), max_attempts)))

    def status(self, job_id):
        return self.value(f"SELECT status FROM jobs WHERE id = {int(job_id)}")

    def job(self, job_id):
        row = self.rows("SELECT status, attempts, coalesce(last_error, '') FROM jobs "
                        f"WHERE id = {int(job_id)}")
        return {"status": row[0][0], "attempts": int(row[0][1]), "last_error": row[0][2]}

    def wait_status(self, job_id, status, timeout=15):
        wanted = (status,) if isinstance(status, str) else tuple(status)
        return wait_until(lambda: self.status(job_id) in wanted and self.status(job_id),
                          timeout, f"job {job_id} to be {'/'.join(wanted)} "
                                   f"(is {self.status(job_id)})")

    def drop(self):
        self.admin("DROP SCHEMA IF EXISTS %s CASCADE" % self.schema)


def lit(text):
    """A SQL string literal."""
    return "'" + str(text).replace("'", "''") + "'"


def yq(text):
    """A YAML double-quoted scalar (JSON string syntax, which YAML accepts)."""
    return json.dumps(text)


def pgjobd_cli(binary, args, stdin=None, timeout=60):
    done = subprocess.run([binary] + args, input=stdin, capture_output=True, text=True,
                          env=child_env(), timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"pgjobd {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done.stdout


def password_hash(binary, password):
    out = pgjobd_cli(binary, ["ui-passwd", "--password-stdin"], stdin=password + "\n").strip()
    if not out.startswith("$y$"):
        raise AssertionError(f"ui-passwd printed {out!r}, not a yescrypt ($y$) hash")
    return out


def _die_with_parent():
    """In the child before exec: SIGTERM when the test process dies (a ctest timeout kills
    it), so no daemon outlives the suite."""
    import ctypes
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Daemon:
    """`pgjobd <command> -c <file>` with its output in files; stop() drains it."""

    def __init__(self, binary, config_text, workdir, command="run", name="pgjobd"):
        self.config_path = os.path.join(workdir, f"{name}.yaml")
        with open(self.config_path, "w") as f:
            f.write(config_text)
        self.log_path = os.path.join(workdir, f"{name}.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([binary, command, "-c", self.config_path],
                                     stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, env=child_env(),
                                     preexec_fn=_die_with_parent)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def running(self):
        return self.proc.poll() is None

    def wait_http(self, port, timeout=20):
        """Until GET /login answers (any status): the dashboard listens."""
        def up():
            if not self.running():
                raise AssertionError(f"pgjobd exited {self.proc.returncode} before serving "
                                     f"the dashboard; its log:\n{self.log()[-4000:]}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/login")
                conn.getresponse().read()
                conn.close()
                return True
            except OSError:
                return False
        wait_until(up, timeout, f"the dashboard on port {port}")

    def stop(self, timeout=20):
        """SIGTERM (drain); a second SIGTERM and then SIGKILL if it does not exit."""
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        self._log.close()
        return self.proc.returncode


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # list of (name, value), names lower-case
        self.body = body  # bytes

    def header(self, name):
        for key, value in self.headers:
            if key == name.lower():
                return value
        return None

    def all_headers(self, name):
        return [value for key, value in self.headers if key == name.lower()]

    @property
    def text(self):
        return self.body.decode("utf-8", errors="replace")


def session_cookie_name(port):
    """The dashboard's session cookie on `port` (its name carries the port)."""
    return f"pgjobd_session_{port}"


class Client:
    """Plain HTTP to the dashboard (http.client, no redirects followed): the requests a
    browser would not make, and byte counts."""

    def __init__(self, port):
        self.port = port
        self.origin = f"http://127.0.0.1:{port}"
        self.cookie_name = session_cookie_name(port)

    def request(self, method, path, cookie=None, fields=None, headers=None):
        all_headers = dict(headers or {})
        body = None
        if cookie:
            all_headers["Cookie"] = f"{self.cookie_name}={cookie}"
        if fields is not None:
            body = urllib.parse.urlencode(fields)
            all_headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=all_headers)
            resp = conn.getresponse()
            return Response(resp.status, [(k.lower(), v) for k, v in resp.getheaders()],
                            resp.read())
        finally:
            conn.close()

    def get(self, path, cookie=None):
        return self.request("GET", path, cookie=cookie)

    def post(self, path, fields, cookie=None, origin="own", referer=None):
        """POST a form. origin: "own" (this server's), None (no Origin header) or a URL."""
        headers = {}
        if origin == "own":
            headers["Origin"] = self.origin
        elif origin is not None:
            headers["Origin"] = origin
        if referer is not None:
            headers["Referer"] = referer
        return self.request("POST", path, cookie=cookie, fields=fields, headers=headers)

    def login(self, user, password):
        """The session cookie's value after POST /login (asserts the 303)."""
        resp = self.post("/login", [("user", user), ("password", password)])
        if resp.status != 303:
            raise AssertionError(f"POST /login as {user}: {resp.status}, not 303")
        if urllib.parse.urlsplit(resp.header("location") or "").path != "/":
            raise AssertionError(f"POST /login as {user}: 303 to {resp.header('location')!r}, "
                                 "not to /")
        for value in resp.all_headers("set-cookie"):
            m = re.match(r"\s*" + self.cookie_name + r"=([^;]*)", value)
            if m:
                return m.group(1)
        raise AssertionError(f"POST /login as {user}: no {self.cookie_name} cookie set")


CSRF_INPUT = re.compile(r"<input\b[^>]*\bname=[\"']?csrf[\"']?[^>]*>", re.I)
VALUE_ATTR = re.compile(r"\bvalue=(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+))", re.I)


def csrf_from_html(html):
    """The value of the first `<input name="csrf">` of a page; None if there is none."""
    m = CSRF_INPUT.search(html)
    if not m:
        return None
    v = VALUE_ATTR.search(m.group(0))
    return next(g for g in v.groups() if g is not None) if v else None


def start_chromium(workdir):
    """Headless Chromium at 1280x900 with the console log kept (goog:loggingPrefs)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new",
                "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
                "--disable-dev-shm-usage",
                "--window-size=1280,900",
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--user-data-dir=" + os.path.join(workdir, "chromium-profile")):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(CHROMEDRIVER, log_path=os.path.join(workdir, "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(20)
    driver.set_window_size(1280, 900)
    return driver


def missing_tools():
    """What the suite needs and does not find, with the hint to install it."""
    missing = []
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            missing.append(path)
    if shutil.which("psql") is None:
        missing.append("psql")
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("python3-selenium (for this interpreter)")
    return missing


def make_workdir():
    return tempfile.mkdtemp(prefix="pgjobd-browser-")
