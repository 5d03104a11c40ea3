// Local profiles: the same files the `relayger` CLI writes (docs/profiles.md).

import { readFileSync } from 'node:fs';
import { access, link, mkdir, open, readFile, unlink } from 'node:fs/promises';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';

import { RelaygerError } from './errors.js';
import { keyPairFromBase64 } from './sealed.js';
import { isUuid } from './util.js';

export const DEFAULT_PROFILE = 'default';
const FORMAT_VERSION = 1;
const NAME = /^[A-Za-z0-9._-]{1,64}$/;
const NUMBER = /^[1-9][0-9]{5,14}$/;

/**
 * The profile directory: `$RELAYGER_HOME` when set and non-empty, else the
 * user's config directory + `/relayger` (`$XDG_CONFIG_HOME` or `~/.config`
 * on Linux, `~/Library/Application Support` on macOS, `%APPDATA%` on
 * Windows).
 */
export function profileDir(env = process.env) {
  if (env.RELAYGER_HOME) return env.RELAYGER_HOME;
  return join(userConfigDir(env), 'relayger');
}

function userConfigDir(env) {
  if (process.platform === 'win32') {
    if (env.APPDATA) return env.APPDATA;
    return join(homedir(), 'AppData', 'Roaming');
  }
  if (process.platform === 'darwin') return join(homedir(), 'Library', 'Application Support');
  const xdg = env.XDG_CONFIG_HOME;
  if (xdg && isAbsolute(xdg)) return xdg;
  return join(homedir(), '.config');
}

/**
 * The profile used when none is named: `$RELAYGER_PROFILE`, else the one
 * `relayger profiles use NAME` chose (the `current` file in `dir`), else
 * `default`.
 */
export function defaultProfileName(env = process.env, dir = profileDir(env)) {
  if (env.RELAYGER_PROFILE) return env.RELAYGER_PROFILE;
  let current;
  try {
    current = readFileSync(join(dir, 'current'), 'utf8').trim();
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
  }
  return current || DEFAULT_PROFILE;
}

function invalid(message) {
  return new RelaygerError('invalid_argument', message);
}

function checkName(name) {
  if (typeof name !== 'string' || !NAME.test(name) || name === '.' || name === '..') {
    throw invalid(`\`${name}\` is not a valid profile name: use 1 to 64 of A-Z a-z 0-9 . _ -`);
  }
}

/**
 * Refuses (`invalid_argument`) when profile `name` cannot be created in
 * `dir`: a bad name or one already taken. Checked before an identity is
 * created, so its key always has a place to go.
 */
export async function checkProfileFree(name, dir) {
  checkName(name);
  const path = join(dir, `${name}.json`);
  try {
    await access(path);
  } catch (error) {
    if (error.code === 'ENOENT') return;
    throw invalid(`cannot check ${path}: ${error.message}`);
  }
  throw invalid(`profile \`${name}\` already exists in ${dir}; profiles are never overwritten`);
}

let saved = 0;

/**
 * Writes profile `name` into `dir` the way the CLI does (docs/profiles.md):
 * the directory made with mode 0700, the file with 0600, written to a
 * temporary file, flushed, then hard-linked into place so a profile saved
 * under the same name meanwhile is never replaced (that save fails).
 * `profile` holds the format's fields; `keyPair` gives `secretKey`.
 */
export async function saveProfile(name, dir, profile) {
  checkName(name);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const file = {
    version: FORMAT_VERSION,
    server: profile.server.replace(/\/+$/, ''),
    tokenId: profile.tokenId,
    token: profile.token,
    identityId: profile.identityId,
    number: profile.number,
    kind: profile.kind,
    displayName: profile.displayName,
    ...(profile.ownerNumber === undefined ? {} : { ownerNumber: profile.ownerNumber }),
    publicKey: Buffer.from(profile.keyPair.public).toString('base64'),
    secretKey: Buffer.from(profile.keyPair.secret).toString('base64'),
  };
  const path = join(dir, `${name}.json`);
  saved += 1;
  const temporary = join(dir, `.${name}.json.${process.pid}.${saved}.tmp`);
  const handle = await open(temporary, 'wx', 0o600);
  try {
    await handle.writeFile(`${JSON.stringify(file, null, 2)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await link(temporary, path);
  } catch (error) {
    if (error.code === 'EEXIST') {
      throw invalid(`profile \`${name}\` already exists in ${dir}; profiles are never overwritten`);
    }
    throw invalid(`cannot save ${path}: ${error.message}`);
  } finally {
    await unlink(temporary).catch(() => {});
  }
  return path;
}

/**
 * Reads and checks profile `name` from `dir`. The result keeps the secret
 * key as raw bytes for sealing; nothing here prints the token.
 */
export async function loadProfile(name, dir) {
  checkName(name);
  const path = join(dir, `${name}.json`);
  let text;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (error.code === 'ENOENT') {
      const flag = name === DEFAULT_PROFILE ? '' : ` --profile ${name}`;
      throw invalid(
        `profile \`${name}\` does not exist in ${dir}; create it with \`relayger${flag} register --server URL --name NAME\` ` +
          `(or, from a person's profile, \`relayger agents create --name NAME --save-as ${name}\`)`,
      );
    }
    throw invalid(`cannot read ${path}: ${error.message}`);
  }
  const bad = (message) => invalid(`profile file ${path} is not valid: ${message}`);
  let raw;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw bad(error.message);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw bad('not a JSON object');
  if (raw.version !== FORMAT_VERSION) {
    throw bad(`format version ${raw.version} is not ${FORMAT_VERSION}, the one this SDK reads`);
  }
  for (const key of ['server', 'token', 'displayName', 'publicKey', 'secretKey']) {
    if (typeof raw[key] !== 'string') throw bad(`\`${key}\` must be a string`);
  }
  for (const key of ['tokenId', 'identityId']) {
    if (!isUuid(raw[key])) throw bad(`\`${key}\` must be a UUID`);
  }
  if (typeof raw.number !== 'string' || !NUMBER.test(raw.number)) throw bad('`number` must be 6-15 digits');
  if (raw.kind !== 'person' && raw.kind !== 'agent') throw bad('`kind` must be `person` or `agent`');
  let keyPair;
  try {
    keyPair = keyPairFromBase64(raw.secretKey, raw.publicKey);
  } catch (error) {
    throw bad(`the key pair of the profile for ${raw.number} is not valid: ${error.message}`);
  }
  const profile = {
    name,
    server: raw.server.replace(/\/+$/, ''),
    tokenId: raw.tokenId.toLowerCase(),
    token: raw.token,
    identityId: raw.identityId.toLowerCase(),
    number: raw.number,
    kind: raw.kind,
    displayName: raw.displayName,
    publicKey: raw.publicKey,
    keyPair,
  };
  if (typeof raw.ownerNumber === 'string') profile.ownerNumber = raw.ownerNumber;
  return profile;
}
