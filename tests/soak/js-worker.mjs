// The network soak's JavaScript worker: the SDK's runWorker for the
// runtime `soak`, every event printed as one NDJSON line (the shape of
// `relayger --json worker run`), each job answered by the soak's handler
// process (`relayger-soak handle`, the Rust workers' --process handler),
// which is killed when the callback's signal aborts. SIGINT stops the
// worker (in-flight jobs are released).
//
//   node js-worker.mjs POLICY.json HANDLER.json   (profiles in $RELAYGER_HOME)
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Relayger, runWorker } from '../../sdk/js/src/index.js';

const [policyPath, handlerPath] = process.argv.slice(2);
const policy = JSON.parse(readFileSync(policyPath, 'utf8'));
const handler = JSON.parse(readFileSync(handlerPath, 'utf8'));
const print = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);

/** One run of the handler process: the job on stdin, its answer on stdout. */
function handle({ message, attempt, jobKey, signal }) {
  return new Promise((resolve, reject) => {
    const child = spawn(handler.executable, handler.argv, { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    const onAbort = () => child.kill('SIGKILL');
    signal.addEventListener('abort', onAbort, { once: true });
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      signal.removeEventListener('abort', onAbort);
      if (signal.aborted) return reject(signal.reason);
      if (code !== 0) return reject(new Error(`the handler exited with ${code}`));
      try {
        resolve(JSON.parse(out));
      } catch (error) {
        reject(error);
      }
    });
    child.stdin.end(`${JSON.stringify({ jobKey, attempt, message })}\n`);
  });
}

const client = await Relayger.fromProfile({ profile: 'agent' });
const cancel = new AbortController();
process.once('SIGINT', () => cancel.abort());
try {
  await runWorker(client, { name: 'soak', from: 'now', policy, signal: cancel.signal, onEvent: print, handler: handle });
} catch (error) {
  process.stderr.write(`js-worker: ${error.stack ?? error}\n`);
  process.exitCode = 1;
} finally {
  client.disconnect();
}
