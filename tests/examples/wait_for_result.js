#!/usr/bin/env node
// Enqueue a job and wait for its result without polling (README "Results and workflows").
//
//     node wait_for_result.js DATABASE_URL [SCHEMA [TYPE [PAYLOAD [TIMEOUT_SECONDS]]]]
//
// Prints the job's outcome as one line of JSON: {"id", "status", "result", "last_error"}.
// Exits 1 when the job has not ended within the timeout. Needs node-pg (Debian: node-pg).
// tests/e2e/examples_e2etest.cpp runs it against a daemon.
'use strict';
const { Client } = require('pg');

const ENDED = ['done', 'dead', 'cancelled'];
const RECHECK_MS = 5000; // a notification can be lost: re-read the job this often

// { status, result, last_error, finished_at }, or undefined for an unknown id.
async function jobResult(client, schema, id) {
  const q = `SELECT * FROM ${client.escapeIdentifier(schema)}.pgjobd_job_result($1)`;
  return (await client.query(q, [id])).rows[0];
}

// The job's row once it has ended (undefined once it is deleted); throws when it has not
// ended by the timeout. The caller LISTENed before it enqueued the job, so that no
// notification can fall between the first check and the wait.
async function waitForResult(client, schema, id, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let named = false; // a notification named the job since the last read
  let wake = () => {}; // ends the current wait
  const onNotification = (msg) => {
    const { schema: s, ids } = JSON.parse(msg.payload);
    if (s === schema && ids.map(String).includes(String(id))) {
      named = true;
      wake();
    }
  };
  client.on('notification', onNotification);
  try {
    for (;;) {
      named = false;
      const row = await jobResult(client, schema, id);
      if (row === undefined || ENDED.includes(row.status)) return row;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`job ${id} is still ${row.status}`);
      if (!named) { // until a notification names the job, or the next re-check
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, Math.min(left, RECHECK_MS));
          wake = () => { clearTimeout(timer); resolve(); };
        });
        wake = () => {};
      }
    }
  } finally {
    client.removeListener('notification', onNotification);
  }
}

async function main() {
  const [url, schema = 'public', type = 'add', payload = '{"a": 1, "b": 2}', timeout = '30'] =
    process.argv.slice(2);
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('LISTEN pgjobd_finished'); // first: then enqueue
    const q = `SELECT ${client.escapeIdentifier(schema)}.pgjobd_enqueue($1, $2::jsonb) AS id`;
    const id = (await client.query(q, [type, payload])).rows[0].id; // bigint: a string
    let row;
    try {
      row = await waitForResult(client, schema, id, Number(timeout) * 1000);  // throws at the timeout
    } catch (e) {
      console.log(JSON.stringify({ id: Number(id), status: 'timeout', error: e.message }));
      return 1;
    }
    if (row === undefined) { // deleted: retention.done 0 keeps no done job, nor its result
      console.log(JSON.stringify({ id: Number(id), status: 'deleted' }));
      return 1;
    }
    console.log(JSON.stringify({ id: Number(id), status: row.status, result: row.result,
                                 last_error: row.last_error }));
    return 0;
  } finally {
    await client.end();
  }
}

main().then((code) => { process.exitCode = code; },
            (e) => { console.error(e.message); process.exitCode = 2; });
