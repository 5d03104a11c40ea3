// The shared wire fixtures (relayger-core/fixtures), read by
// fixtures.test.js and by the tests that pin one of them in detail.

import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const FIXTURES_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'relayger-core', 'fixtures');

export function readFixture(file) {
  return JSON.parse(readFileSync(join(FIXTURES_DIR, file), 'utf8'));
}
