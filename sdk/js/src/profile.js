// Local profiles: the same files the `relayger` CLI writes (docs/profiles.md).

import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
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

/**
 * Reads and checks profile `name` from `dir`. The result keeps the secret
 * key as raw bytes for sealing; nothing here prints the token.
 */
export async function loadProfile(name, dir) {
  if (typeof name !== 'string' || !NAME.test(name) || name === '.' || name === '..') {
    throw invalid(`\`${name}\` is not a valid profile name: use 1 to 64 of A-Z a-z 0-9 . _ -`);
  }
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
