// Hosts one Relayger handler job: imports the operator's module in a fresh
// worker thread, calls its `handle`, and reports the outcome once.
//
// The Rust side (node.rs) runs this with `node --input-type=module --eval`,
// one process per job, and speaks this protocol:
//   stdin line 1  {"nonce", "modulePath", "graceMs", "maxRssBytes",
//                  "request": {message, opened?, attempt, jobKey, runtimeId,
//                  deadline?, timeoutMs}}
//   stdin later   {"stop": "timeout" | "cancelled"}; end of file means
//                 "cancelled", so the host never outlives its worker
//   stdout        "<nonce> <report JSON>" exactly once, then exit 0; the nonce
//                 keeps a module that writes to fd 1 from faking a report
//   stderr        everything the module prints (console.*, process.stdout,
//                 process.stderr), which the worker prefixes and forwards
import { Worker } from 'node:worker_threads';
import { finished } from 'node:stream/promises';

const HEAP_LIMIT_MB = 128;
const DRAIN_MS = 500;
// How often the whole process's resident memory is compared with its limit:
// the heap limit does not cover Buffers, typed arrays or native memory.
const RSS_CHECK_MS = 10;

// Runs inside the thread. It is sent as source text (`eval: true`), so it is
// CommonJS and must not use anything from the enclosing module.
function threadMain() {
  const { parentPort, workerData } = require('node:worker_threads');
  const { pathToFileURL } = require('node:url');
  const controller = new AbortController();
  const onStop = ({ reason }) => {
    const name = reason === 'timeout' ? 'TimeoutError' : 'AbortError';
    controller.abort(new DOMException(`the job was stopped: ${reason}`, name));
  };
  parentPort.on('message', onStop);
  const describe = (error) =>
    error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  const report = (outcome) => {
    parentPort.postMessage(outcome);
    // Let the thread end by itself once the module's own work is done.
    parentPort.off('message', onStop);
    parentPort.unref();
  };
  (async () => {
    let module;
    try {
      module = await import(pathToFileURL(workerData.modulePath).href);
    } catch (error) {
      return report({ kind: 'threw', phase: 'import', message: describe(error) });
    }
    const handle = typeof module.handle === 'function' ? module.handle : module.default?.handle;
    if (typeof handle !== 'function') {
      const message = 'the module does not export a function `handle`';
      return report({ kind: 'threw', phase: 'import', message });
    }
    let value;
    try {
      value = await handle({ ...workerData.input, signal: controller.signal });
    } catch (error) {
      return report({ kind: 'threw', phase: 'handle', message: describe(error) });
    }
    try {
      report({ kind: 'returned', json: JSON.stringify(value) });
    } catch (error) {
      report({ kind: 'unserializable', message: describe(error) });
    }
  })();
}

let nonce = null;
let graceMs = 1000;
let worker = null;
let outcome = null;
let stopReason = null;
let reported = false;

function send(report) {
  if (reported) return;
  reported = true;
  process.stdout.write(`${nonce} ${JSON.stringify(report)}\n`, () => process.exit(0));
}

// `json` is what JSON.stringify gave in the thread: undefined when `handle`
// returned undefined (or a function), which the worker refuses.
function fromThread(message) {
  if (message.kind !== 'returned') return message;
  return message.json === undefined
    ? { kind: 'returned' }
    : { kind: 'returned', value: JSON.parse(message.json) };
}

// The whole process (this thread, the module's, Buffers and native memory)
// stays under `maxRssBytes`: past it the module's thread is terminated at
// once and the job fails with `memory_limit`.
function watchMemory(maxRssBytes) {
  const timer = setInterval(() => {
    const rssBytes = process.memoryUsage.rss();
    if (rssBytes <= maxRssBytes || outcome || stopReason) return;
    clearInterval(timer);
    outcome = { kind: 'memory_limit', rssBytes, limitBytes: maxRssBytes };
    worker.terminate();
  }, RSS_CHECK_MS);
  timer.unref();
}

function start(command) {
  ({ nonce, graceMs } = command);
  const { modulePath, request } = command;
  const { message, opened, attempt, jobKey, runtimeId } = request;
  const input = { message, attempt, jobKey, runtimeId };
  if (opened !== undefined) input.opened = opened;
  worker = new Worker(`(${threadMain})()`, {
    eval: true,
    workerData: { modulePath, input },
    // The worker already removed credential variables from this process.
    env: { ...process.env },
    resourceLimits: { maxOldGenerationSizeMb: HEAP_LIMIT_MB },
    execArgv: [],
    stdout: true,
    stderr: true,
  });
  watchMemory(command.maxRssBytes);
  worker.stdout.pipe(process.stderr, { end: false });
  worker.stderr.pipe(process.stderr, { end: false });
  worker.on('message', (message) => {
    if (outcome) return;
    outcome = fromThread(message);
    // Timers or sockets the module left open must not keep the job alive.
    if (!stopReason) setTimeout(() => worker.terminate(), graceMs);
  });
  worker.on('error', (error) => {
    if (outcome) return;
    outcome =
      error?.code === 'ERR_WORKER_OUT_OF_MEMORY'
        ? { kind: 'out_of_memory' }
        : { kind: 'threw', phase: 'handle', message: String(error?.stack ?? error) };
  });
  worker.on('exit', async (code) => {
    // Deliver what the module printed last before the report.
    const drained = Promise.all([finished(worker.stdout), finished(worker.stderr)]);
    const timeout = new Promise((resolve) => setTimeout(resolve, DRAIN_MS));
    await Promise.race([drained.catch(() => {}), timeout]);
    if (stopReason) {
      const late = outcome?.kind === 'returned' ? outcome.value : undefined;
      send({ kind: 'stopped', reason: stopReason, late });
    } else {
      send(outcome ?? { kind: 'exited', code });
    }
  });
}

// Abort the module's signal; a thread that does not end within the grace
// (a synchronous loop never sees the signal) is terminated.
function stop(reason) {
  if (stopReason || reported) return;
  stopReason = reason;
  if (!worker) return send({ kind: 'stopped', reason });
  worker.postMessage({ reason });
  setTimeout(() => worker.terminate(), graceMs);
}

let pending = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  pending += chunk;
  let end;
  while ((end = pending.indexOf('\n')) >= 0) {
    const command = JSON.parse(pending.slice(0, end));
    pending = pending.slice(end + 1);
    if (nonce === null) start(command);
    else if (command.stop) stop(command.stop);
  }
});
process.stdin.on('end', () => stop('cancelled'));
