// Small DOM helpers shared by the dashboard's modules. Every value from the
// server is set as text, never parsed as HTML.

import { ApiError } from './api.js';

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null) continue;
    if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function showError(error) {
  const box = $('error');
  if (!error) {
    box.hidden = true;
    box.textContent = '';
    return;
  }
  box.hidden = false;
  box.textContent = error instanceof ApiError ? `${error.code}: ${error.message}` : String(error);
}

/** An RFC 3339 time as `2026-12-07 10:15:02Z`. */
export const when = (at) => (at ? at.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '');

/** Milliseconds as a person reads them: `840 ms`, `2.4 s`, `3 min 5 s`. */
export function duration(ms) {
  if (ms === undefined || ms === null) return '';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** At most `max` characters of `text`, with an ellipsis when cut. */
export const cut = (text, max = 120) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

// ---- names instead of ids --------------------------------------------------------

/** A room's name, or the other members' names for a direct room. */
export function roomTitle(view, room) {
  if (!room) return 'a room this identity is not in';
  if (room.name) return room.name;
  const others = room.members.filter((m) => m.id !== view.me?.id).map((m) => m.displayName);
  return others.length > 0 ? others.join(', ') : 'direct room';
}

export const roomById = (view, roomId) => view.rooms.find((r) => r.id === roomId);

/** The display name of an identity seen in any of the rooms, else its number. */
export function personName(view, identity) {
  for (const room of view.rooms) {
    const member = room.members.find((m) => m.id === identity.id);
    if (member) return member.displayName;
  }
  return identity.number ? `#${identity.number}` : 'someone';
}

/**
 * The identity number a person typed: a number as is, a display name
 * looked up among the rooms' members (ambiguity is an error naming them).
 */
export function senderNumber(view, typed) {
  const text = typed.trim();
  if (text === '' || /^#?\d+$/.test(text)) return text.replace(/^#/, '');
  const found = new Map();
  for (const room of view.rooms) {
    for (const member of room.members) {
      if (member.displayName.toLowerCase() === text.toLowerCase()) found.set(member.number, member);
    }
  }
  if (found.size === 1) return [...found.keys()][0];
  if (found.size === 0) throw new Error(`no member of your rooms is called ${text}: type their number`);
  const candidates = [...found.values()].map((m) => `${m.displayName} #${m.number}`).join(', ');
  throw new Error(`${text} names several people (${candidates}): type a number`);
}

// ---- a question's delivery ---------------------------------------------------------

/**
 * A question's delivery beside it: the summed-up state, then each
 * recipient's (with its reason code, and whether anybody listens yet).
 */
export function deliveryLine(view, delivery) {
  const recipients = delivery.recipients.map((r) => {
    const notes = [r.reason, r.state === 'queued' && r.listeners === 0 ? 'nobody listening yet' : null].filter(Boolean);
    const name = personName(view, { id: r.identityId, number: r.number });
    return `${name} ${r.state}${notes.length > 0 ? ` (${notes.join(', ')})` : ''}`;
  });
  return el(
    'div',
    { class: 'delivery', dataset: { state: delivery.state } },
    'delivery: ',
    el('strong', { class: `state ${delivery.state}` }, delivery.state),
    recipients.length > 0 ? ` · ${recipients.join(' · ')}` : '',
  );
}

// ---- re-render only what changed ----------------------------------------------------

const rendered = new Map();

/**
 * Whether `data` is what the part `key` last showed. A refresh that
 * brings nothing new leaves that part's elements alone, so a click (or a
 * tick) in progress is not lost to a re-render.
 */
export function unchanged(key, ...data) {
  const text = JSON.stringify(data);
  if (rendered.get(key) === text) return true;
  rendered.set(key, text);
  return false;
}
