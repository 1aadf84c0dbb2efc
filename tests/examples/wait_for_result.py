#!/usr/bin/env python3
"""Enqueue a job and wait for its result without polling (README "Results and workflows").

    wait_for_result.py DATABASE_URL [SCHEMA [TYPE [PAYLOAD [TIMEOUT_SECONDS]]]]

Prints the job's outcome as one line of JSON: {"id", "status", "result", "last_error"}.
Exits 1 when the job has not ended within the timeout. Needs psycopg 3 (Debian:
python3-psycopg). tests/e2e/examples_e2etest.cpp runs it against a daemon.
"""
import json
import select
import sys
import time

import psycopg
from psycopg import sql

ENDED = ("done", "dead", "cancelled")
RECHECK_SECONDS = 5.0  # a notification can be lost: re-read the job this often


def job_result(conn, schema, job_id):
    """(status, result, last_error, finished_at), or None for an unknown id."""
    return conn.execute(
        sql.SQL("SELECT * FROM {}.pgjobd_job_result(%s)").format(sql.Identifier(schema)),
        [job_id]).fetchone()


def names_job(payload, schema, job_id):
    message = json.loads(payload)
    return message["schema"] == schema and job_id in message["ids"]


def wait_for_result(conn, schema, job_id, timeout):
    """The job's row once it has ended (None once it is deleted); TimeoutError when it has
    not ended by the timeout. The caller LISTENed before it enqueued the job, so that no
    notification can fall between the first check and the wait."""
    heard = []  # notifications psycopg read during a query
    conn.add_notify_handler(lambda n: heard.append(n.payload))
    deadline = time.monotonic() + timeout
    while True:
        row = job_result(conn, schema, job_id)
        if row is None or row[0] in ENDED:
            return row
        # Wait for a notification naming the job, at most until the next re-check.
        recheck = min(deadline, time.monotonic() + RECHECK_SECONDS)
        while not any(names_job(p, schema, job_id) for p in heard):
            left = recheck - time.monotonic()
            if left <= 0:
                break
            if select.select([conn.fileno()], [], [], left)[0]:
                conn.pgconn.consume_input()
                while (n := conn.pgconn.notifies()) is not None:
                    heard.append(n.extra.decode())
        heard.clear()
        if time.monotonic() >= deadline:
            row = job_result(conn, schema, job_id)
            if row is None or row[0] in ENDED:
                return row
            raise TimeoutError(f"job {job_id} is still {row[0]}")


def main():
    url = sys.argv[1]
    schema = sys.argv[2] if len(sys.argv) > 2 else "public"
    job_type = sys.argv[3] if len(sys.argv) > 3 else "add"
    payload = sys.argv[4] if len(sys.argv) > 4 else '{"a": 1, "b": 2}'
    timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 30.0
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("LISTEN pgjobd_finished")  # first: then enqueue
        job_id = conn.execute(
            sql.SQL("SELECT {}.pgjobd_enqueue(%s, %s::jsonb)").format(sql.Identifier(schema)),
            [job_type, payload]).fetchone()[0]
        try:
            row = wait_for_result(conn, schema, job_id, timeout)
        except TimeoutError as e:
            print(json.dumps({"id": job_id, "status": "timeout", "error": str(e)}))
            return 1
        if row is None:  # deleted: retention.done 0 keeps no done job, nor its result
            print(json.dumps({"id": job_id, "status": "deleted"}))
            return 1
        status, result, last_error, _finished_at = row
        print(json.dumps({"id": job_id, "status": status, "result": result,
                          "last_error": last_error}))
        return 0


if __name__ == "__main__":
    sys.exit(main())
