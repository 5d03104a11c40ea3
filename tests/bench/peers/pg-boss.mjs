// pg-boss through its own API in its LISTEN/NOTIFY mode (useListenNotify on
// the instance, notify on the queue): send / insert to add, work() with a
// no-op handler to work.
import { PgBoss } from "pg-boss";

const QUEUE = "noop";

// Batches of 500, fetched again at once while they come back full. A worker
// that fetches one job at a time (batchSize 1) waits for the next NOTIFY or
// poll after each job, so it cannot drain a backlog: the docs' burst options
// need batchSize > 1 or the cached ready count (refreshed every minute).
const WORK = {
  batched: { batchSize: 500, burstWhenBatchFull: true },
};

export const modes = Object.keys(WORK);

async function started(url, options = {}) {
  const boss = new PgBoss({ connectionString: url, ...options });
  boss.on("error", (error) => console.error("pg-boss:", error));
  await boss.start();
  return boss;
}

export async function install(url) {
  const boss = await started(url, { supervise: false, schedule: false });
  if (!(await boss.getQueue(QUEUE))) {
    await boss.createQueue(QUEUE, { notify: true });
  }
  await boss.stop();
}

export async function producer(url) {
  const boss = await started(url, { supervise: false, schedule: false });
  return {
    add: (i) => boss.send(QUEUE, { i }),
    // On the caller's connection (in its transaction), through the `db` option.
    addMany: (n, client) =>
      boss.insert(
        QUEUE,
        Array.from({ length: n }, (_, i) => ({ data: { i } })),
        { db: { executeSql: (text, values) => client.query(text, values) } },
      ),
    close: () => boss.stop(),
  };
}

/** Starts a worker; resolves once it is fetching. */
export async function work(url, mode) {
  const boss = await started(url, { useListenNotify: true });
  await boss.work(QUEUE, WORK[mode], async () => {});
  return () => boss.stop();
}

/** The completion statement and how many jobs it completed. */
export function completed(text, result) {
  return /^\s*WITH results AS \(\s*UPDATE .*SET completed_on/s.test(text)
    ? Number(result.rows[0].count)
    : 0;
}
