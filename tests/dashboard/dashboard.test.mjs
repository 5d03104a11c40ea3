// The dashboard in headless Chromium against the real server and worker
// that tests/tests/dashboard.rs sets up (it passes everything through the
// environment). Each wait is for something the page shows, with a bound.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';

import puppeteer from 'puppeteer-core';

const WAIT_MS = 20_000;

function env(name) {
  const value = process.env[name];
  assert.ok(value, `${name} is set by tests/tests/dashboard.rs`);
  return value;
}

const base = env('RELAYGER_URL');
const dashboardToken = env('DASHBOARD_TOKEN');

const workers = [];

/** `relayger worker run …` (the command in `commandVariable`) with its NDJSON events. */
function startWorker(commandVariable = 'WORKER_COMMAND') {
  const child = spawn('sh', ['-c', `exec ${env(commandVariable)}`], {
    cwd: env('WORKER_CWD'),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const events = [];
  const waiters = new Set();
  createInterface({ input: child.stdout }).on('line', (line) => {
    let event;
    try {
      event = JSON.parse(line);
    } catch {
      return;
    }
    events.push(event);
    for (const waiter of waiters) waiter();
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const worker = {
    waitFor(what, predicate) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = events.find(predicate);
          if (found) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(found);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no worker event ${what} within ${WAIT_MS} ms: ${JSON.stringify(events)}`));
        }, WAIT_MS);
        waiters.add(check);
        check();
      });
    },
    async stop() {
      if (child.exitCode === null) child.kill('SIGINT');
      await exited;
    },
  };
  workers.push(worker);
  return worker;
}

async function http(method, path, token, body) {
  const response = await fetch(base + path, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await response.json();
  assert.ok(response.ok, `${method} ${path}: ${response.status} ${JSON.stringify(json)}`);
  return json;
}

let browser;
let userDataDir;

before(async () => {
  userDataDir = await mkdtemp(join(tmpdir(), 'relayger-dashboard-chromium-'));
  browser = await puppeteer.launch({
    executablePath: env('CHROMIUM'),
    headless: true,
    userDataDir,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
});

after(async () => {
  for (const worker of workers) await worker.stop();
  await browser?.close();
  if (userDataDir) await rm(userDataDir, { recursive: true, force: true });
});

/** A real mouse click; the locator retries while a refresh re-renders. */
const click = (page, selector) =>
  page
    .locator(selector)
    .setTimeout(WAIT_MS)
    .click()
    .catch((error) => {
      throw new Error(`click on ${selector}: ${error.message}`);
    });

/**
 * A real mouse click on a button that must send `method` to a path ending
 * in `pathEnd` (or matching it, a RegExp). The mouse goes to where the
 * locator last saw the button; a refresh that shifts the page in between
 * lands the click beside it, so the click is made again (at most three
 * times) until the browser sends the request.
 */
async function clickSending(page, selector, method, pathEnd) {
  for (let attempt = 1; attempt <= 3; attempt++) {
    const sent = page
      .waitForRequest(
        (request) => {
          const path = new URL(request.url()).pathname;
          return request.method() === method && (pathEnd instanceof RegExp ? pathEnd.test(path) : path.endsWith(pathEnd));
        },
        { timeout: 3000 },
      )
      .then(
        () => true,
        () => false,
      );
    await click(page, selector);
    if (await sent) return;
  }
  throw new Error(`three clicks on ${selector} sent no ${method} …${pathEnd}`);
}

const cell = (page, field) =>
  page.$eval(`#runtimes tbody tr[data-runtime-name="dash-worker"] td.${field}`, (td) => td.dataset.value);

function waitForCell(page, field, value) {
  return page.waitForFunction(
    (f, v) =>
      document.querySelector(`#runtimes tbody tr[data-runtime-name="dash-worker"] td.${f}`)?.dataset
        .value === v,
    { timeout: WAIT_MS },
    field,
    value,
  );
}

test('sign in, watch a question become a dead letter, retry it, answer requests, read rooms, sign out', async () => {
  const worker = startWorker();
  const started = await worker.waitFor('started', (e) => e.event === 'started');
  const runtimeId = started.runtimeId;

  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  const requests = [];
  const problems = [];
  page.on('request', (request) => requests.push(request.url()));
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });

  const response = await page.goto(`${base}/`, { waitUntil: 'load' });
  assert.equal(response.status(), 200);
  const csp = response.headers()['content-security-policy'];
  assert.match(csp, /script-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline/);

  // A wrong token is refused with the server's error and not kept.
  await page.type('#token', 'rlg_not_a_token');
  await click(page, '#sign-in-form button[type="submit"]');
  await page.waitForSelector('#error:not([hidden])', { timeout: WAIT_MS });
  assert.match(await page.$eval('#error', (n) => n.textContent), /^unauthorized: /);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('relayger.dashboard.token')), null);
  assert.equal(await page.$eval('#dashboard', (n) => n.hidden), true);
  // The page's own 401 is the one expected console error.
  problems.length = 0;

  // Sign in.
  await page.type('#token', dashboardToken);
  await click(page, '#sign-in-form button[type="submit"]');
  await page.waitForSelector('#runtimes tbody tr[data-runtime-name="dash-worker"]', { timeout: WAIT_MS });
  await page.waitForSelector('#live[data-open="true"]', { timeout: WAIT_MS });
  assert.match(await page.$eval('#who', (n) => n.textContent), /Assistant/);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('relayger.dashboard.token')), dashboardToken);
  assert.equal(await page.$eval('#token', (n) => n.value), '', 'the field is cleared');
  assert.equal(await cell(page, 'dead'), '0');
  assert.equal(await cell(page, 'unfinished'), '0');
  assert.equal(await cell(page, 'budget'), '0 / 60');

  // A question: the worker fails it once (maxAttempts 1), the page follows.
  const question = await http('POST', '/v1/messages', env('ASKER_TOKEN'), {
    roomId: env('ROOM_ID'),
    text: 'will it rain tomorrow?',
    ask: true,
  });
  await worker.waitFor('dead_letter', (e) => e.event === 'dead_letter' && e.messageId === question.messageId);
  await waitForCell(page, 'dead', '1');
  assert.equal(await cell(page, 'budget'), '1 / 60');
  assert.equal(await cell(page, 'unreported'), '1');
  await page.waitForSelector('#log li[data-kind="dead_letter"]', { timeout: WAIT_MS });
  const reason = await page.$eval('#dead-letters li .reason', (n) => n.textContent);
  assert.match(reason, /the model is unavailable/);

  // The requests and the sealed message are on screen for the README.
  await click(page, `#rooms li[data-room-id="${env('ROOM_ID')}"] button`);
  const sealedItem = `#messages li[data-message-id="${env('SEALED_MESSAGE_ID')}"]`;
  await page.waitForSelector(sealedItem, { timeout: WAIT_MS });
  assert.equal(await page.$eval(sealedItem, (n) => n.dataset.sealed), 'true');
  const sealedText = await page.$eval(sealedItem, (n) => n.textContent);
  assert.match(sealedText, /sealed/);
  assert.doesNotMatch(sealedText, /the sealed plan/);
  await click(page, `#messages li[data-message-id="${question.messageId}"]`);
  await page.waitForFunction(
    (id) => document.querySelector(`#thread li[data-message-id="${id}"]`) !== null,
    { timeout: WAIT_MS },
    question.messageId,
  );
  // Beside the question, what became of it: a dead letter, as a code only.
  const delivery = `#thread li[data-message-id="${question.messageId}"] .delivery`;
  await page.waitForSelector(`${delivery}[data-state="failed"]`, { timeout: WAIT_MS });
  const deliveryText = await textOf(page, delivery);
  assert.equal(deliveryText, 'delivery: failed · Assistant failed (attempts_exhausted)');
  await page.waitForSelector(`#contact-requests li[data-number="${env('STRANGER_NUMBER')}"]`, { timeout: WAIT_MS });
  await page.screenshot({ path: join(env('SCREENSHOT_DIR'), 'dashboard.png') });

  // Retry the dead letter with the worker stopped, so the job stays pending.
  await worker.stop();
  await clickSending(page, '#dead-letters li button.retry', 'POST', '/retry');
  await waitForCell(page, 'dead', '0');
  await waitForCell(page, 'pending', '1');
  await page.waitForSelector('#no-dead-letters:not([hidden])', { timeout: WAIT_MS });
  const dead = await http('GET', `/v1/runtimes/${runtimeId}/dead-letters`, dashboardToken);
  assert.deepEqual(dead.jobs, []);

  // Accept the pending contact request.
  const requestItem = `#contact-requests li[data-number="${env('STRANGER_NUMBER')}"]`;
  await clickSending(page, `${requestItem} button.accept`, 'POST', '/accept');
  await page.waitForFunction((sel) => document.querySelector(sel) === null, { timeout: WAIT_MS }, requestItem);
  const contacts = await http('GET', '/v1/contacts', dashboardToken);
  assert.ok(
    JSON.stringify(contacts).includes(env('STRANGER_NUMBER')),
    `the stranger is a contact now: ${JSON.stringify(contacts)}`,
  );

  // Decline the other one.
  const declineItem = `#contact-requests li[data-number="${env('PEST_NUMBER')}"]`;
  await clickSending(page, `${declineItem} button.decline`, 'POST', '/decline');
  await page.waitForFunction((sel) => document.querySelector(sel) === null, { timeout: WAIT_MS }, declineItem);
  const pending = await http('GET', '/v1/contacts/requests', dashboardToken);
  assert.deepEqual(pending.incoming, [], JSON.stringify(pending));

  // Sign out forgets the token.
  await click(page, '#sign-out');
  await page.waitForSelector('#sign-in:not([hidden])', { timeout: WAIT_MS });
  assert.equal(await page.evaluate(() => sessionStorage.getItem('relayger.dashboard.token')), null);

  // Nothing came from elsewhere and the token never went into a URL.
  const origin = new URL(base).origin;
  for (const url of requests) {
    assert.ok(url.startsWith(origin) || url.startsWith('data:'), `request to ${url}`);
    assert.ok(!url.includes(dashboardToken), `token in ${url}`);
  }
  assert.deepEqual(problems, []);
  await page.close();
});

/** The text of the first element `selector` matches. */
const textOf = (page, selector) => page.$eval(selector, (n) => n.textContent);

/** Waits until the element `selector` matches has `attribute` (a data-*) at least `least`. */
function waitForAtLeast(page, selector, attribute, least) {
  return page.waitForFunction(
    (sel, attr, n) => Number(document.querySelector(sel)?.dataset[attr] ?? -1) >= n,
    { timeout: WAIT_MS },
    selector,
    attribute,
    least,
  );
}

/**
 * Selects the runtime `name` in the runtimes table and waits until the
 * page has read it and gone quiet (the refreshes a new socket brings are
 * over), so a click that follows does not race a re-render.
 */
async function selectRuntime(page, name) {
  await click(page, `#runtimes tbody tr[data-runtime-name="${name}"]`);
  await page.waitForSelector(`#runtimes tbody tr.selected[data-runtime-name="${name}"]`, { timeout: WAIT_MS });
  await page.waitForFunction((n) => document.querySelector('#log-section .runtime-name')?.textContent === n, { timeout: WAIT_MS }, name);
  await page.waitForSelector('#live[data-open="true"]', { timeout: WAIT_MS });
  await page.waitForNetworkIdle({ idleTime: 300, timeout: WAIT_MS });
}

/** Ticks the checkbox `selector` (clicking again if a re-render ate the click). */
async function tick(page, selector) {
  for (let attempt = 1; attempt <= 3; attempt++) {
    await click(page, selector);
    const ticked = await page
      .waitForFunction((sel) => document.querySelector(sel)?.checked === true, { timeout: 3000 }, selector)
      .then(
        () => true,
        () => false,
      );
    if (ticked) return;
  }
  throw new Error(`three clicks did not tick ${selector}`);
}

test('charts, a search by sender, a job view with the failed attempt, and two dead letters retried together', async () => {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  const problems = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  const shot = (name) => page.screenshot({ path: join(env('SCREENSHOT_DIR'), name) });

  // The sign-in page says how to get a token.
  await page.goto(`${base}/`, { waitUntil: 'load' });
  const help = await textOf(page, '#token-help');
  assert.match(help, /relayger --profile AGENT tokens create --scopes read,write,contacts/);
  await shot('dashboard-signin.png');
  await page.type('#token', dashboardToken);
  await click(page, '#sign-in-form button[type="submit"]');
  await page.waitForSelector('#live[data-open="true"]', { timeout: WAIT_MS });

  // A worker that answers; two questions from two people.
  const answering = startWorker('ANSWER_WORKER_COMMAND');
  const answerStarted = await answering.waitFor('started', (e) => e.event === 'started');
  const fromAsker = await http('POST', '/v1/messages', env('ASKER_TOKEN'), {
    roomId: env('ROOM_ID'),
    text: 'what should I pack for the trip?',
    ask: true,
  });
  const fromStranger = await http('POST', '/v1/messages', env('STRANGER_TOKEN'), {
    to: env('ASSISTANT_NUMBER'),
    text: 'is the shop open on Sunday?',
    ask: true,
  });
  for (const question of [fromAsker, fromStranger]) {
    await answering.waitFor('replied', (e) => e.event === 'replied' && e.messageId === question.messageId);
  }

  // Its charts show the answers and their question → reply times.
  await selectRuntime(page, 'answer-worker');
  await waitForAtLeast(page, '#throughput-chart .legend [data-series="answered"]', 'total', 2);
  await waitForAtLeast(page, '#throughput-chart .legend [data-series="claimed"]', 'total', 2);
  await waitForAtLeast(page, '#latency-chart .legend [data-series="median"]', 'points', 1);
  assert.ok(Number(await page.$eval('#throughput-chart', (n) => n.dataset.points)) >= 1);
  assert.match(await textOf(page, '#latency-chart .legend'), /longest \d+(\.\d)? (ms|s) \(2 replies\)/);
  assert.match(await textOf(page, '#backlog'), /Backlog now: 0 waiting/);
  await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 2, { timeout: WAIT_MS });
  await page.$eval('#charts-section', (n) => n.scrollIntoView());
  await shot('dashboard-charts.png');

  // A search by sender (typed by name) finds the stranger's job and no other.
  await page.type('#filter-sender', 'Stranger');
  await click(page, '#job-filters button[type="submit"]');
  const strangerRow = `#jobs tbody tr[data-sender="${env('STRANGER_NUMBER')}"]`;
  await page.waitForFunction(
    (sel) => document.querySelectorAll('#jobs tbody tr').length === 1 && document.querySelector(sel) !== null,
    { timeout: WAIT_MS },
    strangerRow,
  );
  assert.match(await textOf(page, `${strangerRow} td.question`), /is the shop open on Sunday\?/);
  assert.equal(await textOf(page, `${strangerRow} td.sender`), 'Stranger');
  assert.equal(await textOf(page, `${strangerRow} td.state`), 'handled');
  // Its job view has the reply.
  const strangerAnswered = await page.$eval(strangerRow, (n) => n.dataset.jobId);
  await clickSending(page, `${strangerRow} td.question`, 'GET', `/jobs/${strangerAnswered}`);
  await page.waitForSelector(`#job-view[data-job-id="${strangerAnswered}"]`, { timeout: WAIT_MS });
  assert.match(await textOf(page, '#job-reply'), /Take an umbrella\./);
  // The question's delivery, for everyone asked, beside the job.
  await page.waitForSelector('#job-delivery .delivery[data-state="answered"]', { timeout: WAIT_MS });
  assert.equal(await textOf(page, '#job-delivery'), 'delivery: answered · Assistant answered');
  await click(page, '#filter-clear');
  await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 2, { timeout: WAIT_MS });
  await answering.stop();

  // The failing worker again: the retried job and both new questions die.
  const failing = startWorker();
  const failingStarted = await failing.waitFor('started', (e) => e.event === 'started');
  for (const question of [fromAsker, fromStranger]) {
    await failing.waitFor('dead_letter', (e) => e.event === 'dead_letter' && e.messageId === question.messageId);
  }
  await failing.waitFor('dead_letter (the retried one)', (e) => e.event === 'dead_letter' && e.messageId !== fromAsker.messageId && e.messageId !== fromStranger.messageId);
  await failing.stop();
  const deadNow = await http('GET', `/v1/runtimes/${failingStarted.runtimeId}/jobs?state=dead`, dashboardToken);
  assert.equal(deadNow.jobs.length, 3, JSON.stringify(deadNow));
  const jobOf = (question) => deadNow.jobs.find((j) => j.question.messageId === question.messageId).job.jobId;
  const strangerJob = jobOf(fromStranger);
  const askerJob = jobOf(fromAsker);

  await selectRuntime(page, 'dash-worker');
  await page.waitForFunction(() => document.querySelectorAll('#dead-letters li').length === 3, { timeout: WAIT_MS });

  // A job view from the dead letters: the question's text and the error.
  await clickSending(page, `#dead-letters li[data-job-id="${strangerJob}"] button.open-job`, 'GET', `/jobs/${strangerJob}`);
  await page.waitForSelector(`#job-view[data-job-id="${strangerJob}"]`, { timeout: WAIT_MS });
  assert.match(await textOf(page, '#job-question'), /is the shop open on Sunday\?/);
  assert.match(await textOf(page, '#job-attempts li[data-outcome="failed"] .error-text'), /the model is unavailable/);
  assert.match(await textOf(page, '#job-attempts li .duration'), /took \d/);
  assert.match(await textOf(page, '#job-state'), /^dead/);
  assert.match(await textOf(page, '#job-title'), /Question from Stranger/);
  await page.$eval('#job-view', (n) => n.scrollIntoView());
  await shot('dashboard-job.png');
  // … from the log …
  await click(page, '#job-close');
  await page.waitForSelector('#job-view[hidden]', { timeout: WAIT_MS });
  await clickSending(page, '#log li[data-kind="dead_letter"] button.open-job', 'GET', /\/jobs\/[0-9a-f-]{36}$/);
  await page.waitForFunction(
    (ids) => ids.includes(document.querySelector('#job-view')?.dataset.jobId),
    { timeout: WAIT_MS },
    deadNow.jobs.map((j) => j.job.jobId),
  );
  // … and from a search by its key.
  const keyOf = deadNow.jobs.find((j) => j.job.jobId === askerJob).job.jobKey;
  await page.type('#find-job', keyOf);
  await clickSending(page, '#job-find button[type="submit"]', 'GET', `/jobs/${encodeURIComponent(keyOf)}`);
  await page.waitForSelector(`#job-view[data-job-id="${askerJob}"]`, { timeout: WAIT_MS });
  assert.match(await textOf(page, '#job-question'), /what should I pack for the trip\?/);

  // Two dead letters ticked and retried together.
  await tick(page, `#dead-letters li[data-job-id="${strangerJob}"] input.pick`);
  await tick(page, `#dead-letters li[data-job-id="${askerJob}"] input.pick`);
  await page.waitForFunction(() => !document.querySelector('#dead-retry-selected').disabled, { timeout: WAIT_MS });
  assert.equal(await textOf(page, '#dead-retry-selected'), 'Retry selected (2)');
  await clickSending(page, '#dead-retry-selected', 'POST', '/retry');
  await page.waitForSelector('#dead-status[data-retried="2"]', { timeout: WAIT_MS });
  await page.waitForFunction(() => document.querySelectorAll('#dead-letters li').length === 1, { timeout: WAIT_MS });
  const deadAfter = await http('GET', `/v1/runtimes/${failingStarted.runtimeId}/dead-letters`, dashboardToken);
  assert.equal(deadAfter.jobs.length, 1, JSON.stringify(deadAfter));
  assert.ok(![strangerJob, askerJob].includes(deadAfter.jobs[0].jobId));
  for (const id of [strangerJob, askerJob]) {
    const revived = await http('GET', `/v1/runtimes/${failingStarted.runtimeId}/jobs/${id}`, dashboardToken);
    assert.equal(revived.job.state, 'pending', JSON.stringify(revived.job));
  }
  assert.equal(answerStarted.runtimeId !== failingStarted.runtimeId, true);
  assert.deepEqual(problems, []);
  await page.close();
});
