// graphile-worker through its own API: workerUtils.addJob (its SQL add_jobs
// for many) to add, run() with a no-op task to work.
import { EventEmitter } from "node:events";
import { makeWorkerUtils, run, runMigrations } from "graphile-worker";

const TASK = "noop";
const CONCURRENCY = 24;

// The settings of https://worker.graphile.org/docs/performance: 24 jobs at a
// time per process; "batched" adds the batching it recommends (a local queue
// fetched in batches, completions released together).
const PRESETS = {
  unbatched: {},
  batched: {
    localQueue: { size: 500 },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
  },
};

export const modes = Object.keys(PRESETS);

export async function install(url) {
  await runMigrations({ connectionString: url });
}

export async function producer(url) {
  const utils = await makeWorkerUtils({ connectionString: url });
  return {
    add: (i) => utils.addJob(TASK, { i }),
    // What utils.addJobs runs, on the caller's connection (in its transaction).
    addMany: (n, client) =>
      client.query(
        `SELECT graphile_worker.add_jobs(array(
           SELECT json_populate_recordset(null::graphile_worker.job_spec, $1::json)))`,
        [JSON.stringify(Array.from({ length: n }, (_, i) => ({ identifier: TASK, payload: { i } })))],
      ),
    close: () => utils.release(),
  };
}

/** Starts a worker; resolves once it listens for new jobs. */
export async function work(url, mode) {
  const events = new EventEmitter();
  const listening = new Promise((resolve) => events.once("pool:listen:success", resolve));
  const runner = await run({
    connectionString: url,
    concurrency: CONCURRENCY,
    maxPoolSize: CONCURRENCY + 1,
    noHandleSignals: true,
    events,
    taskList: { [TASK]: async () => {} },
    parsedCronItems: [],
    preset: { worker: PRESETS[mode] },
  });
  await listening;
  return () => runner.stop();
}

/** The completion statement (one job or a batch; a DELETE without a named
 * queue) and how many jobs it completed. */
export function completed(text, result) {
  return /^delete from .*\._private_jobs/.test(text) ? result.rowCount : 0;
}
