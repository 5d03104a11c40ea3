// What a callback may return (no server needed).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { runWorker } from '../src/index.js';
import { checkResult, failureOf } from '../src/result.js';

const usage = { modelCalls: 1, inputTokens: 10, outputTokens: 3 };

test('valid results pass through unchanged', () => {
  assert.deepEqual(checkResult(undefined), { result: {} });
  assert.deepEqual(checkResult({ reply: 'hi', usage }), { result: { reply: 'hi', usage } });
  assert.deepEqual(checkResult({ skip: 'sealed' }), { result: { skip: 'sealed' } });
  const note = { key: 'k', text: 't', version: 0, sourceMessageIds: [] };
  assert.deepEqual(checkResult({ reply: 'r', note }), { result: { reply: 'r', note } });
  assert.deepEqual(checkResult({ error: 'model_unavailable', usage }), { result: { error: 'model_unavailable', usage } });
  assert.deepEqual(checkResult({ reply: 'r', usage: undefined }), { result: { reply: 'r' } }, 'absent usage stays absent');
});

test('invalid results are refused, keeping valid usage', () => {
  for (const bad of [
    'text',
    [],
    { reply: 'a', skip: 'b' },
    { reply: '' },
    { reply: 3 },
    { error: 'x', reply: 'y' },
    { answer: 'typo' },
    { reply: 'r', usage: { modelCalls: -1, inputTokens: 0, outputTokens: 0 } },
    { reply: 'r', usage: { modelCalls: 1 } },
    { reply: 'r', usage: { ...usage, costUsd: 1 } },
  ]) {
    assert.ok(checkResult(bad).invalid, JSON.stringify(bad));
  }
  assert.deepEqual(checkResult({ reply: 'a', skip: 'b', usage }).usage, usage);
});

test('a thrown error becomes {error} with the usage it carries', () => {
  assert.deepEqual(failureOf(new Error('boom')), { error: 'handler_error: boom' });
  const coded = Object.assign(new Error('quota'), { code: 'model_unavailable', usage });
  assert.deepEqual(failureOf(coded), { error: 'model_unavailable: quota', usage });
  assert.ok(failureOf('x'.repeat(2000)).error.length <= 500);
});

test('runWorker checks its options before any request', async () => {
  const client = {};
  await assert.rejects(runWorker(client, { handler() {} }), (e) => e.code === 'invalid_argument');
  await assert.rejects(runWorker(client, { name: 'x' }), (e) => e.code === 'invalid_argument');
  await assert.rejects(runWorker(client, { name: 'x', handler() {}, from: 'later' }), (e) => e.code === 'invalid_argument');
  await assert.rejects(
    runWorker(client, { name: 'x', handler() {}, handlerTimeoutMs: 120_001 }),
    (e) => e.code === 'invalid_argument',
  );
  await assert.rejects(runWorker(client, { name: 'x', handler() {} }), /Relayger client/);
});
