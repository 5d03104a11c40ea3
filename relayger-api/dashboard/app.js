// The Relayger dashboard: plain DOM, no framework, nothing fetched from
// anywhere but this server. Every value from the server is set as text,
// never parsed as HTML.
//
// Live updates: the identity's signal socket (the selected runtime's
// socket once one is chosen), opened with `runtimeChanges=true`, wakes the
// page on every new message or contact request and on every claim, finish,
// heartbeat, release, retry or configuration of the identity's runtimes.
// Each signal is one refresh; there is no polling loop and no timer.
//
// This module holds the page: sign-in, the runtimes table, contact
// requests, rooms and threads. The selected runtime's charts, jobs, job
// view, dead letters and log are `runtime.js`; charts are `chart.js`.

import { ApiError, api, everyPage, holdSocket, readDelivery, segment, session } from './api.js';
import { $, deliveryLine, el, personName, roomTitle as titleOf, showError, unchanged, when } from './dom.js';
import { loadRuntimeDetail, resetRuntimeDetail, setupRuntimeDetail } from './runtime.js';

const view = {
  me: null,
  runtimes: [],
  stats: new Map(),
  selected: null,
  rooms: [],
  inbox: new Map(),
  openRoom: null,
  openThread: null,
};

let socket = null;
let socketPath = null;
let refreshing = null;
let refreshAgain = false;

// ---- sign in ---------------------------------------------------------------

async function signIn(token) {
  session.save(token);
  try {
    view.me = await api('GET', '/v1/me');
  } catch (error) {
    session.clear();
    throw error;
  }
  $('who').textContent = `${view.me.displayName} · #${view.me.number} · ${view.me.kind}`;
  $('sign-in').hidden = true;
  $('dashboard').hidden = false;
  $('sign-out').hidden = false;
  $('live').hidden = false;
  await refresh();
  connectSocket();
}

function signOut() {
  session.clear();
  socket?.close();
  socket = null;
  socketPath = null;
  view.me = null;
  view.selected = null;
  resetRuntimeDetail();
  $('dashboard').hidden = true;
  $('sign-out').hidden = true;
  $('live').hidden = true;
  $('sign-in').hidden = false;
  $('who').textContent = '';
  showError(null);
}

// ---- live updates ------------------------------------------------------------

function connectSocket() {
  const socketOf = view.selected ? `/v1/runtimes/${segment(view.selected)}/socket` : '/v1/socket';
  const path = `${socketOf}?runtimeChanges=true`;
  if (path === socketPath) return;
  socket?.close();
  socketPath = path;
  socket = holdSocket(path, {
    onSignal: refresh,
    onState: (open) => {
      const live = $('live');
      live.textContent = open ? 'live' : 'reconnecting';
      live.classList.toggle('down', !open);
      live.dataset.open = String(open);
      // Whatever happened while the socket was down.
      if (open) refresh();
    },
  });
}

/** One refresh at a time; a request during one runs once more after it. */
function refresh() {
  if (!session.token) return Promise.resolve();
  if (refreshing) {
    refreshAgain = true;
    return refreshing;
  }
  refreshing = load()
    .then(() => showError(null), showError)
    .finally(() => {
      refreshing = null;
      if (refreshAgain) {
        refreshAgain = false;
        refresh();
      }
    });
  return refreshing;
}

// ---- loading -------------------------------------------------------------------

async function load() {
  // Every room (their members name the people in the lists) and every
  // pending request, page after page.
  const [runtimes, rooms, inbox, requests] = await Promise.all([
    api('GET', '/v1/runtimes'),
    everyPage('/v1/rooms?limit=100', ['rooms']),
    api('GET', '/v1/inbox'),
    everyPage('/v1/contacts/requests', ['incoming', 'outgoing']).catch((error) => error),
  ]);
  view.runtimes = runtimes.runtimes;
  view.rooms = rooms.rooms;
  view.inbox = new Map(inbox.rooms.map((room) => [room.roomId, room]));
  const stats = await Promise.all(
    view.runtimes.map((runtime) => api('GET', `/v1/runtimes/${segment(runtime.id)}/stats`)),
  );
  view.stats = new Map(view.runtimes.map((runtime, i) => [runtime.id, stats[i]]));
  if (view.selected && !view.runtimes.some((r) => r.id === view.selected)) view.selected = null;
  if (!view.selected && view.runtimes.length > 0) view.selected = view.runtimes[0].id;
  renderRuntimes();
  renderRequests(requests);
  renderRooms();
  if (view.selected) {
    await loadRuntimeDetail();
  } else {
    $('runtime-detail').hidden = true;
  }
  if (view.openThread) await loadThread(view.openThread.room, view.openThread.message);
  if (socketPath) connectSocket();
}

// ---- runtimes ------------------------------------------------------------------

function renderRuntimes() {
  const body = $('runtimes').querySelector('tbody');
  $('no-runtimes').hidden = view.runtimes.length > 0;
  if (unchanged('runtimes', view.runtimes, [...view.stats], view.selected)) return;
  body.replaceChildren(
    ...view.runtimes.map((runtime) => {
      const stats = view.stats.get(runtime.id);
      const jobs = runtime.jobs;
      const usage = stats.reported;
      const cell = (field, value, extra = '') =>
        el('td', { class: `${field} ${extra}`.trim(), dataset: { field, value: String(value) } }, value);
      return el(
        'tr',
        {
          class: runtime.id === view.selected ? 'selected' : '',
          dataset: { runtimeId: runtime.id, runtimeName: runtime.name },
          onclick: () => selectRuntime(runtime.id),
        },
        el('td', {}, el('strong', {}, runtime.name), el('div', { class: 'meta' }, `v${runtime.version} · from ${runtime.from}`)),
        cell('pending', jobs.pending),
        cell('claimed', jobs.claimed),
        cell('handled', jobs.handled),
        cell('skipped', jobs.skipped),
        cell('dead', jobs.dead),
        cell('activeLeases', runtime.activeLeases),
        cell('budget', `${stats.budgetUsedLastHour} / ${runtime.policy.maxCallsPerHour}`),
        cell(
          'usage',
          `${usage.modelCalls} calls · ${usage.inputTokens} in · ${usage.outputTokens} out`,
        ),
        cell('unreported', stats.unreportedAttempts),
        cell('unfinished', stats.unfinishedAttempts),
      );
    }),
  );
}

function selectRuntime(id) {
  if (id !== view.selected) resetRuntimeDetail();
  view.selected = id;
  connectSocket();
  refresh();
}

async function act(button, method, path) {
  button.disabled = true;
  try {
    await api(method, path);
    showError(null);
  } catch (error) {
    showError(error);
  } finally {
    button.disabled = false;
    refresh();
  }
}

// ---- contact requests ----------------------------------------------------------------

function renderRequests(requests) {
  const list = $('contact-requests');
  if (requests instanceof Error) {
    list.replaceChildren();
    $('no-contact-requests').hidden = false;
    $('no-contact-requests').textContent =
      requests instanceof ApiError && requests.status === 403
        ? 'This token cannot see contact requests (it needs the contacts scope).'
        : String(requests.message);
    return;
  }
  const incoming = requests.incoming.filter((r) => r.state === 'pending');
  const outgoing = requests.outgoing.filter((r) => r.state === 'pending');
  $('no-contact-requests').textContent = 'No pending requests.';
  $('no-contact-requests').hidden = incoming.length + outgoing.length > 0;
  list.replaceChildren(
    ...incoming.map((request) =>
      el(
        'li',
        { dataset: { number: String(request.number), direction: 'incoming' } },
        el('span', { class: 'who' }, el('strong', {}, request.displayName), ` #${request.number} (${request.kind}) asks to be a contact`),
        el('button', { type: 'button', class: 'primary accept', onclick: (e) => act(e.target, 'POST', `/v1/contacts/requests/${segment(request.number)}/accept`) }, 'Accept'),
        el('button', { type: 'button', class: 'danger decline', onclick: (e) => act(e.target, 'POST', `/v1/contacts/requests/${segment(request.number)}/decline`) }, 'Decline'),
      ),
    ),
    ...outgoing.map((request) =>
      el(
        'li',
        { dataset: { number: String(request.number), direction: 'outgoing' } },
        `Waiting for ${request.displayName} #${request.number} to answer`,
      ),
    ),
  );
}

// ---- rooms and threads (read-only) ------------------------------------------------------

const roomTitle = (room) => titleOf(view, room);

const senderName = (_room, sender) => personName(view, sender);

function renderRooms() {
  $('rooms').replaceChildren(
    ...view.rooms.map((room) =>
      el(
        'li',
        { dataset: { roomId: room.id } },
        el('button', { type: 'button', onclick: () => openRoom(room.id) }, roomTitle(room)),
        el('span', { class: 'meta' }, ` · ${room.kind} · ${room.members.length} members · ${room.lastSeq} messages`),
      ),
    ),
  );
  if (view.openRoom) renderRoom();
}

/** A message in a list; a question with its `delivery` when one was read. */
function messageItem(room, message, onclick, delivery) {
  const body = message.sealed
    ? el('span', { class: 'sealed' }, `sealed (end-to-end, ${message.sealed.recipients.length} recipients)`)
    : el('span', { class: 'text' }, message.text ?? '');
  const tags = [message.ask ? 'question' : null, message.byRuntime ? 'runtime reply' : null]
    .filter(Boolean)
    .join(', ');
  return el(
    'li',
    { dataset: { messageId: message.messageId, sealed: String(Boolean(message.sealed)) }, onclick },
    el('div', { class: 'meta' }, `#${message.seq} ${senderName(room, message.sender)} · ${when(message.createdAt)}${tags ? ` · ${tags}` : ''}`),
    body,
    delivery ? deliveryLine(view, delivery) : null,
  );
}

function openRoom(roomId) {
  view.openRoom = roomId;
  view.openThread = null;
  $('thread-view').hidden = true;
  renderRoom();
}

function renderRoom() {
  const room = view.rooms.find((r) => r.id === view.openRoom);
  if (!room) {
    $('room-view').hidden = true;
    return;
  }
  $('room-view').hidden = false;
  $('room-title').textContent = `${roomTitle(room)} — unread (not acknowledged by the dashboard)`;
  const messages = view.inbox.get(room.id)?.messages ?? [];
  $('messages').replaceChildren(
    ...messages.map((message) =>
      messageItem(room, message, () => loadThread(room.id, message.messageId).catch(showError)),
    ),
  );
}

async function loadThread(roomId, messageId) {
  view.openThread = { room: roomId, message: messageId };
  const room = view.rooms.find((r) => r.id === roomId);
  const thread = await api(
    'GET',
    `/v1/rooms/${segment(roomId)}/messages/${segment(messageId)}/thread`,
  );
  // Each question of the thread with what became of it.
  const deliveries = await Promise.all(
    thread.messages.map((message) => (message.ask ? readDelivery(roomId, message.messageId) : null)),
  );
  $('thread-view').hidden = false;
  $('thread').replaceChildren(
    ...thread.messages.map((message, i) => messageItem(room, message, undefined, deliveries[i])),
  );
}

// ---- start -------------------------------------------------------------------------

function start() {
  setupRuntimeDetail({ view, refresh, select: selectRuntime });
  $('sign-in-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const input = $('token');
    const token = input.value.trim();
    input.value = '';
    signIn(token).catch(showError);
  });
  $('sign-out').addEventListener('click', signOut);
  if (session.token) signIn(session.token).catch(showError);
}

start();
