'use strict'
// One peer of pgjobd's benchmark (bench/peers/run.sh runs it; nothing here is timed by itself).
//
//   node peer.js graphile-worker|pg-boss setup|load|work DATABASE_URL [JOBS]
//
// setup  installs the peer's schema (its own migrations), empty
// load   preloads JOBS pending noop jobs through the peer's own API (untimed)
// work   runs the peer's worker with its fastest documented settings and a noop handler
//        until SIGTERM; run.sh times it from outside (process start to the last completion
//        recorded in the peer's tables)
const [system, action, url, jobsArg] = process.argv.slice(2)
const jobs = Number(jobsArg || 0)
const env = (name, dflt) => Number(process.env[name] || dflt)

async function graphile () {
  const gw = require('graphile-worker')
  const quiet = new gw.Logger(() => (level, message) => {
    if (level === 'error') process.stderr.write(`graphile-worker: ${message}\n`)
  })
  const preset = {
    worker: {
      connectionString: url,
      // The fastest configuration graphile-worker publishes (its performance docs):
      concurrentJobs: env('GW_CONCURRENCY', 24),
      maxPoolSize: env('GW_POOL', 25),
      localQueue: { size: env('GW_LOCAL_QUEUE', 500) },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
      pollInterval: 2000
    }
  }
  if (action === 'setup') {
    await gw.runMigrations({ connectionString: url, logger: quiet })
  } else if (action === 'load') {
    const utils = await gw.makeWorkerUtils({ connectionString: url, logger: quiet })
    for (let i = 0; i < jobs; i += 5000) {
      const batch = []
      for (let j = i; j < Math.min(jobs, i + 5000); j++) batch.push({ identifier: 'noop', payload: { n: j } })
      await utils.addJobs(batch)
    }
    await utils.release()
  } else if (action === 'work') {
    const runner = await gw.run({
      preset,
      logger: quiet,
      noHandleSignals: true,
      taskList: { noop: async () => {} }
    })
    const stop = () => runner.stop().then(() => process.exit(0), () => process.exit(1))
    process.on('SIGTERM', stop)
    process.on('SIGINT', stop)
    await runner.promise
  }
}

async function pgboss () {
  const PgBoss = require('pg-boss')
  const boss = new PgBoss({
    connectionString: url,
    max: env('PGBOSS_POOL', 25),
    supervise: false, // no maintenance or monitoring during the timed part
    schedule: false,
    migrate: action === 'setup'
  })
  boss.on('error', (err) => process.stderr.write(`pg-boss: ${err.message}\n`))
  await boss.start()
  if (action === 'setup') {
    await boss.createQueue('noop')
  } else if (action === 'load') {
    for (let i = 0; i < jobs; i += 5000) {
      const batch = []
      for (let j = i; j < Math.min(jobs, i + 5000); j++) batch.push({ name: 'noop', data: { n: j } })
      await boss.insert(batch)
    }
  } else if (action === 'work') {
    // pg-boss 10 has no teamSize any more: concurrency is one polling loop per work() call,
    // each fetching batchSize jobs with one statement and completing them with one more.
    const workers = env('PGBOSS_WORKERS', 8)
    const options = { batchSize: env('PGBOSS_BATCH', 500), pollingIntervalSeconds: 0.5 }
    for (let i = 0; i < workers; i++) await boss.work('noop', options, async () => {})
    const stop = () => boss.stop({ graceful: false, wait: false }).then(() => process.exit(0), () => process.exit(1))
    process.on('SIGTERM', stop)
    process.on('SIGINT', stop)
    return
  }
  await boss.stop({ graceful: false })
}

const main = { 'graphile-worker': graphile, 'pg-boss': pgboss }[system]
if (!main || !['setup', 'load', 'work'].includes(action) || !url) {
  process.stderr.write('usage: node peer.js graphile-worker|pg-boss setup|load|work DATABASE_URL [JOBS]\n')
  process.exit(2)
}
main().catch((err) => { process.stderr.write(`${system} ${action}: ${err.stack || err}\n`); process.exit(1) })
