#!/usr/bin/python3
"""The dashboard (README "Dashboard", issue 14) in a real browser.

    /usr/bin/python3 tests/browser/dashboard_test.py --pgjobd build/release/pgjobd [-v] [-k NAME]

Needs PGJOBD_TEST_DATABASE_URL (scripts/test.sh sets it); without it the suite exits 77,
which ctest reports as skipped. Works in a fresh schema of its own, runs `pgjobd migrate`,
writes a config with `ui.listen` on a free loopback port and two users (alice, operator;
bob, read_only; hashes from `pgjobd ui-passwd --password-stdin`), starts `pgjobd run` with
exec handlers and drives headless Chromium (chromium-driver, python3-selenium) through the
pages and actions. Selects elements only by the ids, classes and data attributes that
the web layer promises for its pages (#job-status, tr[data-job-id], .pause-button, ...).
Every wait is a condition with a deadline (harness.wait_until), never a sleep.

PGJOBD_SCREENSHOTS_DIR=tests/browser/screenshots also writes overview.png and job.png (1280x900).
"""

import argparse
import json
import os
import re
import shutil
import sys
import time
import unittest
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import wait_until  # noqa: E402

SKIP = 77  # ctest SKIP_RETURN_CODE
PAGE_BUDGET = 150 * 1000  # bytes: a page with its CSS and script (contract: under 150 KB)
PASSWORDS = {"alice": "alice-Secret-1", "bob": "bob-Secret-2"}
QUEUES = ("default", "mail", "reports", "q_pause", "q_bulk", "q_cancel")

BINARY = None
ENV = None  # the module's shared state: Env


def flaky_script():
    # Dead at the first attempt (exit 3 is permanent), done at any later one: a retried
    # job visibly runs again and succeeds.
    return '[ "$PGJOBD_JOB_ATTEMPT" -ge 2 ] || { echo "first attempt fails" >&2; exit 3; }'


def base_config(url, schema, ui):
    queues = ", ".join(f"{q}: {{}}" for q in QUEUES)
    return "\n".join([
        f"database: {{url: {harness.yq(url)}, schema: {schema}}}",
        f"worker: {{concurrency: 6, queues: {{{queues}}}}}",
        "poll: {min_interval: 10ms, max_interval: 100ms}",
        "retry: {base: 10ms, max_delay: 100ms, jitter: 0}",
        "shutdown: {timeout: 10s}",
        'metrics: {listen: ""}',
        "log: {level: info}",
        f"ui: {ui}",
        "handlers:",
        "  quick: {exec: [/bin/true]}",
        "  fail: {exec: [/bin/false], permanent_exit_codes: [1]}",
        "  sleep: {exec: [/bin/sleep, \"60\"], kill_grace: 1s}",
        f"  flaky: {{exec: [/bin/sh, -c, {harness.yq(flaky_script())}], "
        "permanent_exit_codes: [3]}",
        "schedules:",
        '  nightly_report: {cron: "30 2 * * *", type: quick, queue: reports}',
        "",
    ])


class Env:
    """The shared fixture: schema, daemon, browser."""

    def __init__(self):
        self.workdir = harness.make_workdir()
        self.url = os.environ["PGJOBD_TEST_DATABASE_URL"]
        self.schema = f"browser_{os.getpid()}"
        self.db = harness.Database(self.url, self.schema)
        self.daemon = None
        self.driver = None
        try:
            self._start()
        except BaseException:
            self.close(failed=True)
            raise

    def _start(self):
        migrate_cfg = os.path.join(self.workdir, "migrate.yaml")
        with open(migrate_cfg, "w") as f:
            f.write(base_config(self.url, self.schema, '{listen: ""}'))
        harness.pgjobd_cli(BINARY, ["migrate", "-c", migrate_cfg])
        self.hashes = {u: harness.password_hash(BINARY, p) for u, p in PASSWORDS.items()}
        users = (f"{{alice: {{password_hash: {harness.yq(self.hashes['alice'])}, "
                 f"role: operator}}, bob: {{password_hash: {harness.yq(self.hashes['bob'])}, "
                 "role: read_only}}")
        for attempt in range(3):
            self.port = harness.free_port()
            ui = (f'{{listen: "127.0.0.1:{self.port}", show_payloads: true, refresh: 10m, '
                  f"session_ttl: 1h, users: {users}}}")
            self.daemon = harness.Daemon(BINARY, base_config(self.url, self.schema, ui),
                                         self.workdir, name=f"run{attempt}")
            try:
                self.daemon.wait_http(self.port)
                break
            except AssertionError:
                # A port taken between the check and the bind: try another one.
                if "in use" not in self.daemon.log() or attempt == 2:
                    raise
                self.daemon.stop()
        self.base = f"http://127.0.0.1:{self.port}"
        self.client = harness.Client(self.port)
        self.driver = harness.start_chromium(self.workdir)
        self.seed()

    def seed(self):
        """Some history for the overview, the pagination and the screenshots."""
        self.db.value("SELECT count(*) FROM (SELECT pgjobd_enqueue('quick', "
                      "jsonb_build_object('report', g), 'reports') "
                      "FROM generate_series(1, 60) g) s")
        self.db.value("SELECT count(*) FROM (SELECT pgjobd_enqueue('quick', "
                      "jsonb_build_object('to', 'user' || g || '@example.com'), 'mail') "
                      "FROM generate_series(1, 25) g) s")
        self.seed_dead = [self.db.enqueue("fail", "mail", {"to": f"bounce{i}@example.com"})
                          for i in range(3)]
        wait_until(lambda: self.db.value("SELECT count(*) FROM jobs WHERE status IN "
                                         "('pending', 'running', 'failed')") == "0",
                   30, "the seed jobs to finish")

    def close(self, failed):
        if self.driver is not None:
            try:
                self.driver.quit()
            except Exception as e:  # the browser may be gone already
                print(f"chromedriver quit: {e}", file=sys.stderr)
        if self.daemon is not None:
            code = self.daemon.stop()
            if failed or code != 0:
                print(f"---- pgjobd exited {code}; its log ends ----\n"
                      f"{self.daemon.log()[-6000:]}\n---- end of pgjobd log ----",
                      file=sys.stderr)
            if code != 0:
                failed = True
        try:
            self.db.drop()
        except Exception as e:
            print(f"dropping schema {self.schema}: {e}", file=sys.stderr)
        if failed:
            print(f"kept {self.workdir} (config, logs, chromedriver.log)", file=sys.stderr)
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return not failed


class BrowserCase(unittest.TestCase):
    """Browser helpers over the shared Env; each test ends with no SEVERE console entry."""

    # Console messages a test expects (regular expressions), e.g. the 401 of a bad login.
    expected_console = ()

    def setUp(self):
        self.env = ENV
        self.driver = ENV.driver
        self.db = ENV.db
        self.client = ENV.client
        self.console = []
        self.drain_console()  # what earlier tests left is theirs
        self.console = []

    def tearDown(self):
        severe = [e for e in self.severe_now()
                  if not any(re.search(p, e.get("message", "")) for p in self.expected_console)]
        self.assertEqual(severe, [], "console errors in the browser")

    # ---- browser ----
    def drain_console(self):
        entries = self.driver.get_log("browser")
        self.console.extend(entries)
        return self.console

    def severe_now(self):
        return [e for e in self.drain_console() if e.get("level") == "SEVERE"]

    def open(self, path):
        self.driver.get(self.env.base + path)
        self.wait_loaded()
        return self.page()

    def wait_loaded(self):
        wait_until(lambda: self.driver.execute_script("return document.readyState")
                   == "complete", 15, "the page to load")

    def page(self):
        return self.driver.execute_script(
            "return document.body ? document.body.getAttribute('data-page') : null")

    def css(self, selector):
        from selenium.webdriver.common.by import By
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def one(self, selector):
        found = self.css(selector)
        self.assertTrue(found, f"no {selector} on {self.driver.current_url}")
        return found[0]

    def text(self, selector):
        return self.one(selector).text.strip()

    def submit_and_wait(self, element):
        """Clicks a submit button (or link) and waits for the page it leads to: a mark set
        on the old page's window is gone and the new one has loaded. (Selenium's
        staleness_of can meet chromedriver's "Node ... does not belong to the document"
        mid-navigation; a script call then is simply tried again.)"""
        from selenium.common.exceptions import WebDriverException
        self.driver.execute_script("window.__pgjobdOldPage = true")
        element.click()

        def arrived():
            try:
                return self.driver.execute_script(
                    "return window.__pgjobdOldPage !== true && document.readyState === 'complete'")
            except WebDriverException:
                return False
        wait_until(arrived, 15, "the page a click leads to")

    def login(self, user):
        self.driver.delete_all_cookies()
        self.assertEqual(self.open("/login"), "login")
        self.one('#login-form input[name="user"]').send_keys(user)
        self.one('#login-form input[name="password"]').send_keys(PASSWORDS[user])
        self.submit_and_wait(self.one("#login-submit"))
        self.assertEqual(self.page(), "overview", f"after logging in as {user}")
        self.assertEqual(self.text("#whoami"), user)

    def session_cookie(self):
        cookie = self.driver.get_cookie(harness.session_cookie_name(self.env.port))
        self.assertIsNotNone(cookie, "no session cookie in the browser")
        return cookie["value"]

    def page_csrf(self):
        token = harness.csrf_from_html(self.driver.page_source)
        self.assertTrue(token, f"no csrf input on {self.driver.current_url}")
        return token

    def flash(self):
        found = self.css("#flash")
        return found[0].text.strip() if found else None

    def reload_until(self, path, selector, expected, timeout=15):
        """Reloads `path` until `selector`'s text is `expected`."""
        def check():
            self.open(path)
            found = self.css(selector)
            return found and found[0].text.strip() == expected
        wait_until(check, timeout, f"{selector} on {path} to read {expected!r}", interval=0.2)

    # ---- database ----
    def audit(self):
        """The audit table's rows as dicts, oldest first."""
        return [json.loads(r[0]) for r in self.db.rows(
            "SELECT row_to_json(a) FROM pgjobd_audit a ORDER BY id")]

    def audit_entries(self, action, since=0):
        return [a for a in self.audit() if a["id"] > since and action in a["action"]]

    def last_audit_id(self):
        return int(self.db.value("SELECT coalesce(max(id), 0) FROM pgjobd_audit"))

    def dead_job(self, queue="default", payload=None):
        job = self.db.enqueue("flaky", queue, payload)
        self.db.wait_status(job, "dead")
        return job


def audit_user(entry):
    return entry.get("user", entry.get("user_name", entry.get("username")))


class DashboardTest(BrowserCase):

    def test_every_page_loads_without_console_errors(self):
        self.login("alice")
        job = self.env.seed_dead[0]
        pages = [("/", "overview"), ("/jobs", "jobs"), ("/jobs?status=done", "jobs"),
                 (f"/jobs/{job}", "job"), ("/queues", "queues"), ("/schedules", "schedules"),
                 ("/audit", "audit")]
        for path, kind in pages:
            with self.subTest(path=path):
                self.assertEqual(self.open(path), kind, path)
                self.assertEqual(self.severe_now(), [], f"console errors on {path}")
                for link in ("#nav-overview", "#nav-jobs", "#nav-queues", "#nav-schedules",
                             "#nav-audit"):
                    self.assertTrue(self.css(f"nav#nav {link}"), f"{link} on {path}")
                self.assertEqual(self.text("#whoami"), "alice")
        # The overview's parts.
        self.open("/")
        for queue in ("reports", "mail"):
            row = self.one(f'#queues-table tr[data-queue="{queue}"]')
            for cell in ("count-pending", "count-running", "count-failed", "count-done",
                         "count-dead", "count-cancelled", "paused", "oldest-due"):
                self.assertTrue(row.find_elements("css selector", f".{cell}"),
                                f".{cell} in the overview's {queue} row")
        # The counts are the table's (cached for ~2 s by the store: reload until they agree).
        for queue, status in (("reports", "done"), ("mail", "dead"), ("mail", "done")):
            want = self.db.value("SELECT count(*) FROM jobs WHERE queue = "
                                 f"{harness.lit(queue)} AND status = {harness.lit(status)}")
            self.reload_until("/", f'#queues-table tr[data-queue="{queue}"] .count-{status}',
                              want, timeout=6)
        self.one("svg#throughput-chart")
        # One daemon runs, and leads once its maintenance has taken the lease.
        def leader_shown():
            self.open("/")
            rows = self.css("#daemons-table tr[data-daemon-id]")
            self.assertEqual(len(rows), 1, "one daemon runs")
            return "leader" in (rows[0].get_attribute("class") or "").split()
        wait_until(leader_shown, 15, "the daemon's row to be marked leader", interval=0.2)
        # The job page.
        self.open(f"/jobs/{job}")
        self.assertEqual(self.text("#job-status"), "dead")
        self.assertIn("bounce0@example.com", self.text("pre#job-payload"))
        self.assertEqual(len(self.css("#attempts-table tr td:first-child")), 1)
        # The schedule.
        self.open("/schedules")
        self.one('#schedules-table tr[data-schedule="nightly_report"]')

    def test_favicon_is_no_console_error(self):
        # Chromium asks every origin for /favicon.ico by itself and logs a 404 as a console
        # error. The browser here has asked already (and keeps the answer), so ask as it
        # does, with the session (logged out, the answer is a 303 to /login).
        cookie = self.client.login("alice", PASSWORDS["alice"])
        resp = self.client.get("/favicon.ico", cookie=cookie)
        self.assertNotEqual(resp.status, 404, "GET /favicon.ico with a session")

    def test_login_and_logout(self):
        self.driver.delete_all_cookies()
        # Unauthenticated: every page leads to the login form.
        self.assertEqual(self.open("/jobs?status=dead"), "login")
        # A bad password: 401 with #login-error.
        self.expected_console = (r"status of 401",)
        self.one('#login-form input[name="user"]').send_keys("alice")
        self.one('#login-form input[name="password"]').send_keys("wrong password")
        self.submit_and_wait(self.one("#login-submit"))
        self.assertEqual(self.page(), "login")
        self.assertTrue(self.text("#login-error"))
        self.assertIsNone(self.driver.get_cookie(harness.session_cookie_name(self.env.port)))
        resp = self.client.post("/login", [("user", "alice"), ("password", "nope")])
        self.assertEqual(resp.status, 401)
        resp = self.client.post("/login", [("user", "mallory"), ("password", "nope")])
        self.assertEqual(resp.status, 401)
        # The right one: the overview, an HttpOnly, SameSite=Strict cookie.
        self.login("alice")
        cookie = self.driver.get_cookie(harness.session_cookie_name(self.env.port))
        self.assertTrue(cookie["httpOnly"])
        self.assertEqual(cookie.get("sameSite"), "Strict")
        session = cookie["value"]
        self.assertEqual(self.client.get("/", cookie=session).status, 200)
        # Logout: back to the login form, and the old session is gone on the server too.
        logout = self.one('form[action="/logout"] [type="submit"], form[action="/logout"] button')
        self.submit_and_wait(logout)
        self.assertEqual(self.page(), "login")
        self.assertEqual(self.open("/"), "login")
        resp = self.client.get("/", cookie=session)
        self.assertEqual(resp.status, 303, "the logged-out session still works")
        self.assertTrue(resp.header("location").endswith("/login"))

    def test_unauthenticated_requests_redirect_to_login(self):
        job = self.env.seed_dead[1]
        for path in ("/", "/jobs", "/jobs?status=dead", f"/jobs/{job}", "/queues",
                     "/schedules", "/audit"):
            with self.subTest(path=path):
                resp = self.client.get(path)
                self.assertEqual(resp.status, 303)
                self.assertEqual(urllib.parse.urlsplit(resp.header("location")).path, "/login")
        before = self.last_audit_id()
        resp = self.client.post(f"/jobs/{job}/retry", [("csrf", "x")])
        self.assertIn(resp.status, (303, 403), "an action without a session")
        self.assertEqual(self.db.status(job), "dead")
        self.assertEqual(self.last_audit_id(), before)

    def test_retry_dead_job_from_its_page(self):
        job = self.dead_job(payload={"to": "ada@example.com"})
        before = self.last_audit_id()
        self.login("alice")
        self.open(f"/jobs/{job}")
        self.assertEqual(self.text("#job-status"), "dead")
        self.assertFalse(self.css("#cancel-button"), "cancel offered for a dead job")
        self.submit_and_wait(self.one("#retry-form #retry-button"))
        self.assertEqual(self.page(), "job")
        self.assertEqual(urllib.parse.urlsplit(self.driver.current_url).path, f"/jobs/{job}")
        self.assertTrue(self.flash(), "no #flash after the retry")
        # It became pending and ran again: the second attempt succeeds.
        self.db.wait_status(job, "done")
        self.assertEqual(self.db.job(job)["attempts"], 2)
        self.reload_until(f"/jobs/{job}", "#job-status", "done")
        self.assertEqual(len(self.css("#attempts-table tr td:first-child")), 2)
        self.assertFalse(self.css("#retry-button"), "retry offered for a done job")
        entries = self.audit_entries("retry", since=before)
        self.assertEqual(len(entries), 1, entries)
        self.assertEqual(audit_user(entries[0]), "alice")
        self.assertEqual(entries[0]["job_ids"], [job])

    def test_cancel_running_job(self):
        job = self.db.enqueue("sleep", "q_cancel")
        self.db.wait_status(job, "running")
        before = self.last_audit_id()
        self.login("alice")
        self.open(f"/jobs/{job}")
        self.assertEqual(self.text("#job-status"), "running")
        self.assertFalse(self.css("#retry-button"), "retry offered for a running job")
        reason = self.css('#cancel-form input[name="reason"], #cancel-form textarea[name="reason"]')
        if reason:
            reason[0].send_keys("stopped from the browser test")
        self.submit_and_wait(self.one("#cancel-form #cancel-button"))
        self.assertEqual(self.page(), "job")
        self.assertTrue(self.flash(), "no #flash after the cancel")
        # The handler (sleep 60) is stopped and the job ends cancelled, long before 60 s.
        self.db.wait_status(job, "cancelled", timeout=15)
        self.assertEqual(self.db.job(job)["last_error"],
                         "cancelled: stopped from the browser test" if reason else "cancelled")
        self.reload_until(f"/jobs/{job}", "#job-status", "cancelled")
        self.one("#retry-button")  # a cancelled job may be retried
        self.assertFalse(self.css("#cancel-button"))
        entries = self.audit_entries("cancel", since=before)
        self.assertEqual(len(entries), 1, entries)
        self.assertEqual(audit_user(entries[0]), "alice")
        self.assertEqual(entries[0]["job_ids"], [job])

    def test_pause_queue_stops_claims(self):
        first = self.db.enqueue("quick", "q_pause")
        self.db.wait_status(first, "done")
        before = self.last_audit_id()
        self.login("alice")
        self.open("/queues")
        row = '#queues-list tr[data-queue="q_pause"]'
        self.one(row)
        self.assertFalse(self.css(f"{row} .resume-button"), "resume offered, not paused")
        self.submit_and_wait(self.one(f"{row} .pause-form .pause-button"))
        self.assertEqual(self.page(), "queues")
        self.assertTrue(self.flash(), "no #flash after the pause")
        self.assertEqual(self.db.value(
            "SELECT paused FROM pgjobd_queues WHERE queue = 'q_pause'"), "t")
        self.one(f"{row} .resume-button")
        self.assertFalse(self.css(f"{row} .pause-button"))
        # Enqueued after the pause: stays pending while a later job of another queue runs.
        held = self.db.enqueue("quick", "q_pause")
        control = self.db.enqueue("quick", "default")
        self.db.wait_status(control, "done")
        # The daemon has claimed since `held` was enqueued; give it a few more polls of its
        # own (max_interval 100ms) by waiting for a second, later control job too.
        control2 = self.db.enqueue("quick", "default")
        self.db.wait_status(control2, "done")
        self.assertEqual(self.db.status(held), "pending", "a job of a paused queue ran")
        # Resume: it runs.
        self.open("/queues")
        self.submit_and_wait(self.one(f"{row} .resume-form .resume-button"))
        self.assertEqual(self.page(), "queues")
        self.db.wait_status(held, "done")
        self.assertEqual(self.db.value(
            "SELECT paused FROM pgjobd_queues WHERE queue = 'q_pause'"), "f")
        actions = [a["action"] for a in self.audit() if a["id"] > before]
        self.assertEqual(len(actions), 2, actions)
        self.assertIn("pause", actions[0])
        self.assertIn("resume", actions[1])
        for a in self.audit():
            if a["id"] > before:
                self.assertEqual(audit_user(a), "alice")
                self.assertIn("q_pause", a["target"])

    def test_schedule_pause_and_resume(self):
        self.login("alice")
        self.open("/schedules")
        row = '#schedules-table tr[data-schedule="nightly_report"]'
        self.submit_and_wait(self.one(f"{row} .pause-button"))
        self.assertEqual(self.db.value(
            "SELECT paused FROM pgjobd_schedules WHERE name = 'nightly_report'"), "t")
        self.assertTrue(self.flash())
        self.open("/schedules")
        self.submit_and_wait(self.one(f"{row} .resume-button"))
        self.assertEqual(self.db.value(
            "SELECT paused FROM pgjobd_schedules WHERE name = 'nightly_report'"), "f")

    def test_bulk_retry_from_filtered_list(self):
        jobs = sorted(self.dead_job("q_bulk", {"n": i}) for i in range(3))
        other = self.dead_job("q_bulk", {"n": "left alone"})
        before = self.last_audit_id()
        self.login("alice")
        path = "/jobs?status=dead&queue=q_bulk"
        self.assertEqual(self.open(path), "jobs")
        rows = self.css("#jobs-table tr[data-job-id]")
        self.assertEqual(sorted(int(r.get_attribute("data-job-id")) for r in rows),
                         sorted(jobs + [other]))
        for job in jobs:
            box = self.one(f'#jobs-table tr[data-job-id="{job}"] input[name="id"]')
            self.assertEqual(self.driver.execute_script(
                "return arguments[0].form && arguments[0].form.getAttribute('id')", box),
                "bulk-form")  # not form.id: the form has inputs named id
            box.click()
        self.submit_and_wait(self.one("#bulk-retry"))
        # Back to the list with its filters.
        back = urllib.parse.urlsplit(self.driver.current_url)
        self.assertEqual(back.path, "/jobs")
        self.assertEqual(urllib.parse.parse_qs(back.query),
                         {"status": ["dead"], "queue": ["q_bulk"]})
        self.assertTrue(self.flash(), "no #flash after the bulk retry")
        for job in jobs:
            self.db.wait_status(job, "done")
        self.assertEqual(self.db.status(other), "dead", "an unticked job was retried")
        entries = self.audit_entries("retry", since=before)
        self.assertEqual(len(entries), 1, entries)
        self.assertEqual(audit_user(entries[0]), "alice")
        self.assertEqual(sorted(entries[0]["job_ids"]), jobs)
        # The audit page shows it.
        self.open("/audit")
        users = [c.text.strip() for c in self.css("#audit-table .audit-user")]
        self.assertIn("alice", users)
        # A row of alice's retry naming the jobs (the target of a bulk action may be empty:
        # its ids are in the row).
        rows = [r.text for r in self.css("#audit-table tr")
                if r.find_elements("css selector", ".audit-user")
                and r.find_element("css selector", ".audit-user").text.strip() == "alice"
                and "retry" in r.find_element("css selector", ".audit-action").text]
        self.assertTrue(any(all(str(j) in re.findall(r"\d+", t) for j in jobs) for t in rows),
                        f"no audit row of alice's bulk retry of {jobs}: {rows}")

    def test_filters_are_shareable_and_paginate(self):
        # A fresh browser session loads a filtered list directly.
        self.login("alice")
        self.assertEqual(self.open("/jobs?status=dead"), "jobs")
        ids = {int(r.get_attribute("data-job-id")) for r in self.css("#jobs-table tr[data-job-id]")}
        dead = {int(r[0]) for r in self.db.rows("SELECT id FROM jobs WHERE status = 'dead'")}
        self.assertEqual(ids, dead)
        # id and type filters, loaded directly too.
        one = self.env.seed_dead[0]
        self.open(f"/jobs?id={one}")
        self.assertEqual([r.get_attribute("data-job-id")
                          for r in self.css("#jobs-table tr[data-job-id]")], [str(one)])
        self.open("/jobs?type=fail&status=dead")
        fails = {int(r[0]) for r in self.db.rows(
            "SELECT id FROM jobs WHERE type = 'fail' AND status = 'dead'")}
        self.assertEqual({int(r.get_attribute("data-job-id"))
                          for r in self.css("#jobs-table tr[data-job-id]")}, fails)
        self.open("/jobs?status=dead")
        status_field = self.one('#jobs-filter [name="status"]')
        self.assertEqual(status_field.get_attribute("value"), "dead")
        self.assertEqual(self.one("#jobs-filter").get_attribute("method").lower(), "get")
        # Filtering by the form lands on a URL with the filters in its query.
        self.open("/jobs")
        query = self.one('#jobs-filter [name="queue"]')
        query.clear()
        query.send_keys("reports")
        self.submit_and_wait(self.one('#jobs-filter [type="submit"], #jobs-filter button'))
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.driver.current_url).query)
        self.assertEqual(q.get("queue"), ["reports"])
        # Keyset pagination over the 60 seeded jobs of `reports`.
        seen = []
        for _ in range(10):
            seen += [int(r.get_attribute("data-job-id"))
                     for r in self.css("#jobs-table tr[data-job-id]")]
            nxt = self.css("a#next-page")
            if not nxt:
                break
            self.assertIn("before=", nxt[0].get_attribute("href"))
            self.assertIn("queue=reports", nxt[0].get_attribute("href"))
            self.submit_and_wait(nxt[0])
        reports = [int(r[0]) for r in self.db.rows(
            "SELECT id FROM jobs WHERE queue = 'reports' ORDER BY id DESC")]
        self.assertEqual(seen, reports, "the pages together list every job once, newest first")
        self.assertGreater(len(reports), 50)

    def test_read_only_user_sees_no_actions_and_is_refused(self):
        dead = self.dead_job()
        running = self.db.enqueue("sleep", "q_cancel")
        self.db.wait_status(running, "running")
        try:
            self.login("bob")
            for path in (f"/jobs/{dead}", f"/jobs/{running}", "/jobs", "/jobs?status=dead",
                         "/queues", "/schedules", "/"):
                with self.subTest(path=path):
                    self.open(path)
                    for button in ("#retry-button", "#cancel-button", "#bulk-retry",
                                   "#bulk-cancel", ".pause-button", ".resume-button"):
                        self.assertFalse(self.css(button), f"{button} shown to bob on {path}")
            self.open(f"/jobs/{dead}")
            cookie = self.session_cookie()
            token = self.page_csrf()
            before = self.last_audit_id()
            forged = [(f"/jobs/{dead}/retry", [("csrf", token)]),
                      (f"/jobs/{running}/cancel", [("csrf", token), ("reason", "forged")]),
                      ("/jobs/bulk", [("csrf", token), ("action", "retry"), ("id", str(dead))]),
                      ("/queues/default/pause", [("csrf", token)]),
                      ("/schedules/nightly_report/pause", [("csrf", token)])]
            for path, fields in forged:
                with self.subTest(post=path):
                    resp = self.client.post(path, fields, cookie=cookie,
                                            referer=f"{self.env.base}/jobs/{dead}")
                    self.assertEqual(resp.status, 403, f"bob's POST {path}")
            self.assertEqual(self.db.status(dead), "dead")
            self.assertEqual(self.db.status(running), "running")
            self.assertEqual(self.db.value("SELECT count(*) FROM pgjobd_queues WHERE paused"),
                             "0")
            self.assertEqual(self.db.value(
                "SELECT paused FROM pgjobd_schedules WHERE name = 'nightly_report'"), "f")
            self.assertEqual(self.last_audit_id(), before, "a refused action was audited")
            # bob's session itself is fine: he reads.
            self.assertEqual(self.client.get(f"/jobs/{dead}", cookie=cookie).status, 200)
        finally:
            self.db.value(f"SELECT pgjobd_cancel({running})")

    def test_cross_site_and_tokenless_posts_are_refused(self):
        job = self.dead_job()
        cookie = self.client.login("alice", PASSWORDS["alice"])
        page = self.client.get(f"/jobs/{job}", cookie=cookie)
        self.assertEqual(page.status, 200)
        token = harness.csrf_from_html(page.text)
        self.assertTrue(token, "no csrf input on alice's job page")
        before = self.last_audit_id()
        path = f"/jobs/{job}/retry"
        refused = {
            "Origin: http://evil.example": dict(fields=[("csrf", token)],
                                                origin="http://evil.example"),
            "Referer from evil.example, no Origin": dict(
                fields=[("csrf", token)], origin=None,
                referer="http://evil.example/jobs/1"),
            "Origin of another port": dict(fields=[("csrf", token)],
                                           origin="http://127.0.0.1:1"),
            "no Origin, no Referer": dict(fields=[("csrf", token)], origin=None),
            "no csrf field": dict(fields=[]),
            "empty csrf": dict(fields=[("csrf", "")]),
            "wrong csrf": dict(fields=[("csrf", token[:-1] + ("A" if token[-1] != "A" else "B"))]),
        }
        for name, request in refused.items():
            with self.subTest(request=name):
                resp = self.client.post(path, cookie=cookie, **request)
                self.assertEqual(resp.status, 403, name)
        self.assertEqual(self.db.status(job), "dead")
        self.assertEqual(self.last_audit_id(), before, "a refused action was audited")
        # The same request from this origin with the token is accepted: the refusals above
        # were for the reasons tested. No Origin here, so the Referer is what is checked
        # (the browser's own clicks in the other tests send an Origin).
        resp = self.client.post(path, [("csrf", token)], cookie=cookie, origin=None,
                                referer=f"{self.env.base}/jobs/{job}")
        self.assertEqual(resp.status, 303)
        self.assertEqual(urllib.parse.urlsplit(resp.header("location")).path, f"/jobs/{job}")
        self.db.wait_status(job, "done")
        self.assertEqual(len(self.audit_entries("retry", since=before)), 1)

    def test_page_weight_and_no_external_urls(self):
        cookie = self.client.login("alice", PASSWORDS["alice"])
        job = self.env.seed_dead[2]
        own = self.env.base
        # A job that holds a lot: a 600 KB payload (no handler has its type: it stays
        # pending) and a long error. Its page stays within the budget all the same.
        heavy = self.db.enqueue("unhandled", "q_heavy", {"blob": "x" * 600_000})
        self.db.value(f"UPDATE jobs SET last_error = repeat('e', 8000) WHERE id = {heavy}")
        for path in ("/login", "/", "/jobs", f"/jobs/{job}", "/queues", "/schedules", "/audit",
                     f"/jobs/{heavy}", "/jobs?queue=q_heavy"):
            with self.subTest(path=path):
                resp = self.client.get(path, cookie=None if path == "/login" else cookie)
                self.assertEqual(resp.status, 200)
                html = resp.text
                assets = re.findall(r"<link\b[^>]*\bhref=[\"']([^\"']+)[\"'][^>]*>", html, re.I)
                assets = [a for a in assets if not a.startswith("data:")]
                assets += re.findall(r"<script\b[^>]*\bsrc=[\"']([^\"']+)[\"']", html, re.I)
                self.assertIn("/ui/app.css", assets, f"{path} links no /ui/app.css")
                self.assertIn("/ui/app.js", assets, f"{path} loads no /ui/app.js")
                total = len(resp.body)
                texts = [html]
                for asset in set(assets):
                    self.assertFalse(re.match(r"(https?:)?//", asset) and
                                     not asset.startswith(own), f"external asset {asset}")
                    got = self.client.get(asset, cookie=cookie)
                    self.assertEqual(got.status, 200, asset)
                    total += len(got.body)
                    texts.append(got.text)
                self.assertLess(total, PAGE_BUDGET, f"{path} weighs {total} bytes")
                print(f"\n  {path}: {total} bytes with its CSS and script",
                      file=sys.stderr)
                for text in texts:
                    # Absolute URLs anywhere (but SVG's namespace), and protocol-relative
                    # ones where a URL goes (attributes, CSS url()).
                    urls = re.findall(r"https?://[^\s\"'<>)]+", text)
                    urls += re.findall(
                        r"(?:\b(?:src|href|action)=[\"']?|url\([\"']?)(//[^\s\"'<>)]+)",
                        text, re.I)
                    for url in urls:
                        self.assertTrue(url.startswith(("http://www.w3.org/", own)),
                                        f"external URL {url} in {path} or its assets")


class AnonymousUiTest(BrowserCase):
    """`pgjobd ui` (the dashboard alone) on loopback with no users: no login, everyone is
    the operator "anonymous"; its script refreshes the page every ui.refresh (1s here);
    payloads hidden (ui.show_payloads: false)."""

    @classmethod
    def setUpClass(cls):
        cls.port = harness.free_port()
        ui = f'{{listen: "127.0.0.1:{cls.port}", refresh: 1s, show_payloads: false}}'
        cls.ui = harness.Daemon(BINARY, base_config(ENV.url, ENV.schema, ui), ENV.workdir,
                                command="ui", name="ui-anonymous")
        try:
            cls.ui.wait_http(cls.port)
        except BaseException:
            cls.ui.stop()
            raise

    def tearDown(self):
        try:
            super().tearDown()
        finally:
            # Leave the page before its server stops: its refresh would fail to connect,
            # a console error in whichever test runs next.
            self.driver.get("about:blank")

    @classmethod
    def tearDownClass(cls):
        code = cls.ui.stop()
        if code != 0:
            print(f"---- pgjobd ui exited {code}; its log ends ----\n{cls.ui.log()[-4000:]}",
                  file=sys.stderr)
        assert code == 0, f"pgjobd ui exited {code} after SIGTERM"

    def test_anonymous_operator_and_live_refresh(self):
        base = f"http://127.0.0.1:{self.port}"
        self.driver.delete_all_cookies()
        self.driver.get(base + "/")
        self.wait_loaded()
        self.assertEqual(self.page(), "overview", "no login without users on loopback")
        self.assertEqual(self.text("#whoami"), "anonymous")
        self.assertFalse(self.css('#queues-table tr[data-queue="q_refresh"]'))
        # No daemon serves q_refresh: the job stays pending, and the open page shows it
        # by itself (no navigation here) within a few refreshes.
        self.db.enqueue("quick", "q_refresh")
        row = '#queues-table tr[data-queue="q_refresh"] .count-pending'
        wait_until(lambda: [e.text.strip() for e in self.css(row)] == ["1"], 15,
                   "the overview to refresh itself and show queue q_refresh", interval=0.2)
        self.assertEqual(self.driver.current_url, base + "/")
        self.assertEqual(self.severe_now(), [], "console errors while refreshing")
        # An operator: the actions are there and work.
        job = self.dead_job(payload={"secret": "do-not-show"})
        self.driver.get(f"{base}/jobs/{job}")
        self.wait_loaded()
        # ui.show_payloads: false.
        self.assertFalse(self.css("#job-payload"))
        self.assertTrue(self.text("#payload-hidden"))
        self.assertNotIn("do-not-show", self.driver.page_source)
        self.submit_and_wait(self.one("#retry-button"))
        self.db.wait_status(job, "done")
        entries = self.audit_entries("retry")
        self.assertTrue(any(job in e["job_ids"] and audit_user(e) == "anonymous"
                            for e in entries), entries)


class ScreenshotTest(BrowserCase):
    """tests/browser/screenshots/overview.png and job.png, written only when asked."""

    @unittest.skipUnless(os.environ.get("PGJOBD_SCREENSHOTS_DIR"), "PGJOBD_SCREENSHOTS_DIR unset")
    def test_screenshots(self):
        out = os.environ["PGJOBD_SCREENSHOTS_DIR"]
        os.makedirs(out, exist_ok=True)
        job = self.db.enqueue("flaky", "mail", {"to": "ada@example.com", "template": "welcome",
                                                "locale": "en-GB"})
        self.db.wait_status(job, "dead")
        self.db.value(f"SELECT pgjobd_retry({job})")
        self.db.wait_status(job, "done")
        self.db.enqueue("quick", "mail", {"to": "grace@example.com"})
        for n in range(12):
            self.db.enqueue("quick", "default", {"n": n})
        self.db.enqueue("fail", "default", {"n": "broken"})
        running = self.db.enqueue("sleep", "reports", {"report": "quarterly"})
        self.db.wait_status(running, "running")
        try:
            self.login("alice")
            # A 1280x900 viewport: the window is that much larger than its page.
            self.driver.set_window_size(1280, 900)
            inner = self.driver.execute_script("return [window.innerWidth, window.innerHeight]")
            self.driver.set_window_size(1280 + 1280 - inner[0], 900 + 900 - inner[1])
            self.assertEqual(self.driver.execute_script(
                "return [window.innerWidth, window.innerHeight]"), [1280, 900])
            wait_until(lambda: self.db.value("SELECT count(*) FROM jobs WHERE queue = "
                                             "'default' AND status = 'pending'") == "0",
                       15, "the default queue's jobs to run")
            self.open("/")
            self.assertTrue(self.driver.save_screenshot(os.path.join(out, "overview.png")))
            self.open(f"/jobs/{job}")
            self.assertTrue(self.driver.save_screenshot(os.path.join(out, "job.png")))
        finally:
            self.driver.set_window_size(1280, 900)
            self.db.value(f"SELECT pgjobd_cancel({running})")


def main():
    global BINARY, ENV
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pgjobd", required=True, help="the pgjobd binary under test")
    args, rest = parser.parse_known_args()
    BINARY = os.path.abspath(args.pgjobd)
    if not os.environ.get("PGJOBD_TEST_DATABASE_URL"):
        print("SKIP: PGJOBD_TEST_DATABASE_URL is not set (scripts/test.sh sets it)")
        return SKIP
    missing = harness.missing_tools()
    if missing:
        print(f"FAIL: not installed: {', '.join(missing)}; run "
              "scripts/install-deps.sh --with-test", file=sys.stderr)
        return 1
    started = time.monotonic()
    ENV = Env()
    program = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    ok = program.result.wasSuccessful()
    ok = ENV.close(failed=not ok) and ok
    print(f"browser suite: {time.monotonic() - started:.1f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
