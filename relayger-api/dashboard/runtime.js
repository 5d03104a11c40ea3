// The selected runtime: its last hour as charts, its jobs (searched and
// filtered, in pages), one job in full, its dead letters (retried one by
// one or together) and its log. Everything is read again on each refresh;
// the page a list is on and the open job are kept.

import { api, readDelivery, segment } from './api.js';
import { drawChart } from './chart.js';
import {
  $,
  cut,
  deliveryLine,
  duration,
  el,
  personName,
  roomById,
  roomTitle,
  senderNumber,
  showError,
  unchanged,
  when,
} from './dom.js';

const JOBS_PAGE = 10;
const DEAD_PAGE = 10;
const LOG_STEP = 25;
const LOG_MAX = 100;
const STATES = ['pending', 'claimed', 'handled', 'skipped', 'dead'];

const detail = {
  /** The filters of the jobs list, as the server takes them. */
  filters: {},
  /** The `after` of each page shown so far (the first page's is null). */
  jobPages: [null],
  deadPages: [null],
  logLimit: LOG_STEP,
  /** The job open in the job view (its id, message id or key). */
  openJob: null,
  /** Dead letters ticked for a bulk retry, by job id. */
  ticked: new Set(),
};

let context = null;

const base = () => `/v1/runtimes/${segment(context.view.selected)}`;

function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

/** Forget pages, filters and the open job: another runtime was chosen. */
export function resetRuntimeDetail() {
  detail.filters = {};
  detail.jobPages = [null];
  detail.deadPages = [null];
  detail.logLimit = LOG_STEP;
  detail.openJob = null;
  detail.ticked.clear();
  $('job-view').hidden = true;
  $('job-filters').reset();
}

/** Reads and shows everything about the selected runtime. */
export async function loadRuntimeDetail() {
  const runtime = context.view.runtimes.find((r) => r.id === context.view.selected);
  $('runtime-detail').hidden = false;
  for (const node of document.querySelectorAll('.runtime-name')) node.textContent = runtime?.name ?? '';
  renderFilterChoices();
  const jobsAfter = detail.jobPages.at(-1);
  const deadAfter = detail.deadPages.at(-1);
  const [activity, jobs, dead, log] = await Promise.all([
    api('GET', `${base()}/activity`),
    api('GET', `${base()}/jobs${query({ ...detail.filters, limit: JOBS_PAGE, after: jobsAfter })}`),
    api('GET', `${base()}/jobs${query({ state: 'dead', limit: DEAD_PAGE, after: deadAfter })}`),
    api('GET', `${base()}/log?limit=${detail.logLimit}`),
  ]);
  renderBacklog(runtime);
  renderCharts(activity.minutes);
  renderJobs(jobs);
  renderDeadLetters(dead);
  renderLog(log.records);
  if (detail.openJob) await openJob(detail.openJob, { scroll: false });
}

// ---- charts ------------------------------------------------------------------------

function renderBacklog(runtime) {
  const jobs = runtime?.jobs ?? { pending: 0, claimed: 0 };
  const backlog = $('backlog');
  backlog.dataset.pending = String(jobs.pending);
  backlog.dataset.claimed = String(jobs.claimed);
  backlog.textContent = `Backlog now: ${jobs.pending} waiting · ${jobs.claimed} being handled · ${runtime?.activeLeases ?? 0} active leases`;
}

function renderCharts(minutes) {
  const times = minutes.map((m) => m.at);
  drawChart($('throughput-chart'), {
    times,
    series: ['claimed', 'answered', 'failed', 'skipped'].map((name) => ({
      name,
      values: minutes.map((m) => m[name]),
    })),
    integers: true,
    summary: (s, values) => `${s.name} ${values.reduce((a, b) => a + b, 0)} in the hour`,
  });
  const replies = minutes.reduce((n, m) => n + m.replies, 0);
  drawChart($('latency-chart'), {
    times,
    unit: ' ms',
    series: [
      { name: 'median', values: minutes.map((m) => m.latencyMedianMs ?? null) },
      { name: 'longest', values: minutes.map((m) => m.latencyMaxMs ?? null) },
    ],
    summary: (s, values) => {
      if (values.length === 0) return `${s.name}: no replies in the hour`;
      const figure = s.name === 'longest' ? Math.max(...values) : values[values.length - 1];
      return s.name === 'longest'
        ? `longest ${duration(figure)} (${replies} replies)`
        : `median ${duration(figure)} in the latest minute with replies`;
    },
  });
}

// ---- jobs: search, filters, pages ------------------------------------------------------

function renderFilterChoices() {
  const runtimeSelect = $('filter-runtime');
  runtimeSelect.replaceChildren(
    ...context.view.runtimes.map((r) =>
      el('option', { value: r.id, ...(r.id === context.view.selected ? { selected: '' } : {}) }, r.name),
    ),
  );
  const roomSelect = $('filter-room');
  // What is chosen but not searched yet survives a refresh.
  const chosen = roomSelect.options.length > 0 ? roomSelect.value : (detail.filters.room ?? '');
  roomSelect.replaceChildren(
    el('option', { value: '' }, 'any room'),
    ...context.view.rooms.map((room) =>
      el('option', { value: room.id, ...(room.id === chosen ? { selected: '' } : {}) }, roomTitle(context.view, room)),
    ),
  );
  const stateSelect = $('filter-state');
  if (stateSelect.options.length === 0) {
    stateSelect.append(el('option', { value: '' }, 'any state'), ...STATES.map((s) => el('option', { value: s }, s)));
  }
}

/** A `datetime-local` value (read as UTC) as RFC 3339 with Z. */
const utc = (local) => (local ? `${local.length === 16 ? `${local}:00` : local}Z` : undefined);

function readFilters() {
  return {
    state: $('filter-state').value || undefined,
    room: $('filter-room').value || undefined,
    sender: senderNumber(context.view, $('filter-sender').value) || undefined,
    since: utc($('filter-since').value),
    until: utc($('filter-until').value),
  };
}

function jobRow(summary) {
  const { job, question } = summary;
  const text = question.sealed ? 'sealed (end-to-end)' : cut(question.text ?? '');
  return el(
    'tr',
    {
      dataset: { jobId: job.jobId, state: job.state, sender: question.sender.number },
      onclick: () => openJob(job.jobId).catch(showError),
    },
    el('td', { class: 'at' }, when(question.createdAt)),
    el('td', { class: 'sender' }, personName(context.view, question.sender)),
    el('td', { class: 'room' }, roomTitle(context.view, roomById(context.view, job.conversationId))),
    el('td', { class: question.sealed ? 'question sealed' : 'question' }, text),
    el('td', { class: `state ${job.state}` }, job.state),
    el('td', { class: 'attempts' }, job.attempts),
  );
}

function renderJobs(page) {
  pager('jobs', detail.jobPages, page.next);
  if (unchanged('jobs', page.jobs, context.view.rooms)) return;
  $('jobs').querySelector('tbody').replaceChildren(...page.jobs.map(jobRow));
  $('no-jobs').hidden = page.jobs.length > 0;
}

/** The newer/older buttons of a list paged by `after` cursors. */
function pager(name, pages, next) {
  const newer = $(`${name}-newer`);
  const older = $(`${name}-older`);
  newer.disabled = pages.length <= 1;
  older.disabled = !next;
  older.dataset.next = next ?? '';
  $(`${name}-page`).textContent = `page ${pages.length}`;
}

function turnPage(pages, direction, next) {
  if (direction === 'older' && next) pages.push(next);
  if (direction === 'newer' && pages.length > 1) pages.pop();
  return context.refresh();
}

// ---- one job ------------------------------------------------------------------------------

async function openJob(ref, { scroll = true } = {}) {
  detail.openJob = ref;
  let job;
  try {
    job = await api('GET', `${base()}/jobs/${segment(ref)}`);
  } catch (error) {
    detail.openJob = null;
    $('job-view').hidden = true;
    throw error;
  }
  // What became of the question for everyone asked, not only this runtime.
  const delivery = await readDelivery(job.job.conversationId, job.job.messageId);
  renderJob(job, delivery);
  if (scroll) $('job-view').scrollIntoView({ block: 'nearest' });
}

function messageText(message, { question }) {
  if (message.sealed) {
    return el(
      'p',
      { class: 'sealed' },
      `Sealed end to end for ${message.sealed.recipients.length} recipients: the dashboard holds no private key, so it cannot open ${question ? 'the question' : 'it'}. `,
      'Read it with the CLI (relayger message ROOM ID) or the SDK of an identity that can.',
    );
  }
  return el('p', { class: 'text' }, message.text ?? '');
}

function renderJob(detailed, delivery) {
  const { job, question, attempts, reply } = detailed;
  const view = context.view;
  const section = $('job-view');
  section.hidden = false;
  if (unchanged('job', detailed, delivery, view.rooms)) return;
  section.dataset.jobId = job.jobId;
  section.dataset.state = job.state;
  $('job-title').textContent = `Question from ${personName(view, question.sender)} in ${roomTitle(view, roomById(view, job.conversationId))}`;
  $('job-state').textContent = job.state;
  $('job-reason').textContent = job.reason ? `— ${job.reason}` : '';
  $('job-meta').textContent = `${job.attempts} attempt(s) since it was made or last retried · updated ${when(job.updatedAt)}`;
  $('job-state').dataset.state = job.state;
  $('job-delivery').replaceChildren(...(delivery ? [deliveryLine(view, delivery)] : []));
  $('job-question').replaceChildren(
    el('div', { class: 'meta' }, `asked ${when(question.createdAt)}${question.deadline ? ` · deadline ${when(question.deadline)}` : ''}`),
    messageText(question, { question: true }),
  );
  $('job-attempts').replaceChildren(
    ...attempts.map((a) =>
      el(
        'li',
        { dataset: { attempt: String(a.attempt), outcome: a.outcome ?? a.ended ?? 'running' } },
        el('strong', {}, `Attempt ${a.attempt}`),
        ` · ${when(a.claimedAt)} · `,
        el('span', { class: 'outcome' }, a.outcome ?? (a.ended === 'expired' ? 'lease expired' : a.ended ?? 'running')),
        a.durationMs !== undefined ? el('span', { class: 'duration' }, ` · took ${duration(a.durationMs)}`) : null,
        a.usage ? el('span', { class: 'meta' }, ` · ${a.usage.modelCalls} calls, ${a.usage.inputTokens} in, ${a.usage.outputTokens} out`) : null,
        a.error ? el('div', { class: 'error-text' }, a.error) : null,
      ),
    ),
  );
  $('no-attempts').hidden = attempts.length > 0;
  $('job-reply').replaceChildren(
    reply
      ? el('div', {}, el('div', { class: 'meta' }, `replied ${when(reply.createdAt)}`), messageText(reply, { question: false }))
      : el('p', { class: 'hint' }, job.state === 'handled' ? 'Completed without a reply message.' : 'No reply yet.'),
  );
  const retry = $('job-retry');
  retry.hidden = job.state !== 'dead';
  retry.dataset.jobId = job.jobId;
}

// ---- dead letters --------------------------------------------------------------------------

function renderDeadLetters(page) {
  const shown = new Set(page.jobs.map((s) => s.job.jobId));
  for (const id of detail.ticked) if (!shown.has(id)) detail.ticked.delete(id);
  $('no-dead-letters').hidden = page.jobs.length > 0;
  $('dead-bulk').hidden = page.jobs.length === 0;
  pager('dead', detail.deadPages, page.next);
  if (unchanged('dead', page.jobs, context.view.rooms)) {
    renderTicks();
    return;
  }
  $('dead-letters').replaceChildren(
    ...page.jobs.map(({ job, question }) =>
      el(
        'li',
        { dataset: { jobId: job.jobId } },
        el(
          'label',
          { class: 'tick' },
          el('input', {
            type: 'checkbox',
            class: 'pick',
            value: job.jobId,
            ...(detail.ticked.has(job.jobId) ? { checked: '' } : {}),
            onchange: (event) => {
              if (event.target.checked) detail.ticked.add(job.jobId);
              else detail.ticked.delete(job.jobId);
              renderTicks();
            },
          }),
        ),
        el(
          'div',
          { class: 'body' },
          el(
            'button',
            { type: 'button', class: 'link open-job', onclick: () => openJob(job.jobId).catch(showError) },
            question.sealed ? 'sealed question' : cut(question.text ?? '', 90),
          ),
          el('div', { class: 'meta' }, `${personName(context.view, question.sender)} · ${roomTitle(context.view, roomById(context.view, job.conversationId))} · ${job.attempts} attempt(s) · died ${when(job.updatedAt)}`),
          el('div', { class: 'reason' }, job.reason ?? 'no reason recorded'),
        ),
        el('button', { type: 'button', class: 'primary retry', onclick: (event) => retryOne(event.target, job.jobId) }, 'Retry'),
      ),
    ),
  );
  renderTicks();
}

function renderTicks() {
  const boxes = [...document.querySelectorAll('#dead-letters input.pick')];
  const all = $('dead-all');
  all.checked = boxes.length > 0 && boxes.every((b) => b.checked);
  all.indeterminate = !all.checked && boxes.some((b) => b.checked);
  const button = $('dead-retry-selected');
  button.disabled = detail.ticked.size === 0;
  button.textContent = `Retry selected (${detail.ticked.size})`;
}

const retryPath = (jobId) => `${base()}/jobs/${segment(jobId)}/retry`;

async function retryOne(button, jobId) {
  button.disabled = true;
  try {
    await api('POST', retryPath(jobId));
    detail.ticked.delete(jobId);
    showError(null);
  } catch (error) {
    showError(error);
  } finally {
    button.disabled = false;
    context.refresh();
  }
}

/** Retries every ticked dead letter through the retry route, one by one. */
async function retrySelected(button) {
  const ids = [...detail.ticked];
  button.disabled = true;
  const failures = [];
  for (const id of ids) {
    try {
      await api('POST', retryPath(id));
      detail.ticked.delete(id);
    } catch (error) {
      failures.push(`${id}: ${error.message}`);
    }
  }
  const status = $('dead-status');
  status.textContent = `Retried ${ids.length - failures.length} of ${ids.length}.`;
  status.dataset.retried = String(ids.length - failures.length);
  showError(failures.length > 0 ? `Some retries were refused: ${failures.join('; ')}` : null);
  detail.deadPages = [null];
  await context.refresh();
}

// ---- log ------------------------------------------------------------------------------------

/** A log record's detail in words (no raw keys). */
function recordDetail(record) {
  const d = record.detail ?? {};
  const parts = [];
  if (d.attempt !== undefined) parts.push(`attempt ${d.attempt}`);
  if (d.error) parts.push(`error: ${d.error}`);
  if (d.reason) parts.push(d.reason === 'lease_expired' ? 'the lease ran out' : `reason: ${d.reason}`);
  if (d.skip) parts.push(`skipped: ${d.skip}`);
  if (d.replyMessageId) parts.push('replied');
  for (const [key, value] of Object.entries(d)) {
    if (['attempt', 'error', 'reason', 'skip', 'replyMessageId', 'version'].includes(key)) continue;
    if (value === null || value === undefined) continue;
    parts.push(`${key}: ${typeof value === 'object' ? JSON.stringify(value) : value}`);
  }
  return parts.join(' · ');
}

function renderLog(records) {
  const more = $('log-more');
  more.hidden = records.length < detail.logLimit || detail.logLimit >= LOG_MAX;
  $('log-end').hidden = !(records.length >= LOG_MAX);
  if (unchanged('log', records, context.view.rooms)) return;
  $('log').replaceChildren(
    ...records.map((record) =>
      el(
        'li',
        { dataset: { kind: record.kind } },
        el('span', { class: 'kind' }, record.kind.replace('_', ' ')),
        el('span', { class: 'at' }, when(record.at)),
        record.messageId
          ? el(
              'button',
              { type: 'button', class: 'link open-job', onclick: () => openJob(record.messageId).catch(showError) },
              ` question in ${roomTitle(context.view, roomById(context.view, record.conversationId))}`,
            )
          : null,
        el('div', { class: 'meta' }, recordDetail(record)),
      ),
    ),
  );
}

// ---- wiring --------------------------------------------------------------------------------

/** `view`: the page's state; `refresh()`: read everything again; `select(id)`. */
export function setupRuntimeDetail({ view, refresh, select }) {
  context = { view, refresh };
  $('job-filters').addEventListener('submit', (event) => {
    event.preventDefault();
    try {
      detail.filters = readFilters();
    } catch (error) {
      showError(error);
      return;
    }
    detail.jobPages = [null];
    refresh();
  });
  // Another runtime is another page of jobs: chosen at once.
  $('filter-runtime').addEventListener('change', (event) => select(event.target.value));
  $('filter-clear').addEventListener('click', () => {
    $('job-filters').reset();
    if (view.selected) $('filter-runtime').value = view.selected;
    detail.filters = {};
    detail.jobPages = [null];
    showError(null);
    refresh();
  });
  $('job-find').addEventListener('submit', (event) => {
    event.preventDefault();
    const ref = $('find-job').value.trim();
    if (ref) openJob(ref).then(() => showError(null), showError);
  });
  $('jobs-older').addEventListener('click', (e) => turnPage(detail.jobPages, 'older', e.target.dataset.next));
  $('jobs-newer').addEventListener('click', () => turnPage(detail.jobPages, 'newer'));
  $('dead-older').addEventListener('click', (e) => turnPage(detail.deadPages, 'older', e.target.dataset.next));
  $('dead-newer').addEventListener('click', () => turnPage(detail.deadPages, 'newer'));
  $('dead-all').addEventListener('change', (event) => {
    for (const box of document.querySelectorAll('#dead-letters input.pick')) {
      box.checked = event.target.checked;
      if (box.checked) detail.ticked.add(box.value);
      else detail.ticked.delete(box.value);
    }
    renderTicks();
  });
  $('dead-retry-selected').addEventListener('click', (event) => retrySelected(event.target).catch(showError));
  $('job-retry').addEventListener('click', (event) => retryOne(event.target, event.target.dataset.jobId));
  $('job-close').addEventListener('click', () => {
    detail.openJob = null;
    $('job-view').hidden = true;
  });
  $('log-more').addEventListener('click', () => {
    detail.logLimit = Math.min(LOG_MAX, detail.logLimit + LOG_STEP);
    refresh();
  });
}
