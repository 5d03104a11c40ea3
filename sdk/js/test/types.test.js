// index.d.ts against the SDK: `tsc --noEmit` over a file that makes every
// call the way the README and examples do (and over the example itself),
// and the declared members compared with the ones the code has, both ways.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';

import ts from 'typescript';

import * as sdk from '../src/index.js';
import { REPO_ROOT, SDK_DIR } from './support.js';

test('tsc --noEmit accepts the typed usage and the example, and refuses the misuses', { timeout: 120_000 }, async () => {
  const tsc = join(SDK_DIR, 'node_modules', 'typescript', 'bin', 'tsc');
  const { code, output } = await new Promise((resolveRun) => {
    execFile(process.execPath, [tsc, '--noEmit', '-p', join(SDK_DIR, 'tsconfig.json')], { cwd: SDK_DIR }, (error, stdout, stderr) =>
      resolveRun({ code: error ? error.code : 0, output: stdout + stderr }),
    );
  });
  assert.equal(code, 0, `tsc reported:\n${output}`);
});

/** The declarations of index.d.ts, read with the TypeScript checker. */
function declarations() {
  const file = join(SDK_DIR, 'index.d.ts');
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: [],
  });
  const diagnostics = ts.getPreEmitDiagnostics(program);
  assert.deepEqual(
    diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')),
    [],
    'index.d.ts checks on its own',
  );
  const checker = program.getTypeChecker();
  const exported = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(file)));
  const names = (type) => checker.getPropertiesOfType(type).map((p) => p.name).sort();
  const relayger = exported.find((s) => s.name === 'Relayger');
  const instance = checker.getDeclaredTypeOfSymbol(relayger);
  const namespaces = {};
  for (const property of checker.getPropertiesOfType(instance)) {
    const type = checker.getTypeOfSymbol(property);
    // The namespaces are typed by interfaces named `…Api` (ContactsApi, …).
    if (type.symbol?.name.endsWith('Api')) {
      namespaces[property.name] = names(type);
    }
  }
  const interfaces = exported
    .filter((s) => s.flags & ts.SymbolFlags.Interface)
    .map((s) => ({
      name: s.name,
      properties: checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(s)).map((p) => {
        const type = checker.getTypeOfSymbol(p);
        const parts = type.isUnion() ? type.types : [type];
        return {
          name: p.name,
          optional: Boolean(p.flags & ts.SymbolFlags.Optional),
          nullable: parts.some((t) => t.flags & ts.TypeFlags.Null),
        };
      }),
    }));
  return {
    interfaces,
    values: exported.filter((s) => s.flags & ts.SymbolFlags.Value).map((s) => s.name).sort(),
    statics: names(checker.getTypeOfSymbol(relayger)).filter((n) => n !== 'prototype'),
    members: names(instance),
    namespaces,
  };
}

test('index.d.ts declares every export, method and namespace call the SDK has, and nothing else', () => {
  const declared = declarations();
  assert.deepEqual(declared.values, Object.keys(sdk).sort(), 'module exports');

  const { Relayger } = sdk;
  const statics = Object.getOwnPropertyNames(Relayger).filter((n) => !['length', 'name', 'prototype'].includes(n));
  assert.deepEqual(declared.statics, statics.sort(), 'static methods');

  const client = new Relayger({ server: 'http://127.0.0.1:9', token: 'unused' });
  const members = [
    ...Object.getOwnPropertyNames(Relayger.prototype).filter((n) => n !== 'constructor'),
    ...Object.keys(client),
  ];
  assert.deepEqual(declared.members, members.sort(), 'client methods and properties');

  const runtimeNamespaces = Object.fromEntries(
    Object.entries(client)
      .filter(([, value]) => value !== null && typeof value === 'object')
      .map(([name, value]) => [name, Object.keys(value).sort()]),
  );
  assert.deepEqual(Object.keys(runtimeNamespaces).sort(), ['agents', 'contacts', 'runtimes', 'tokens']);
  assert.deepEqual(declared.namespaces, runtimeNamespaces, 'calls of client.contacts, .runtimes, .agents, .tokens');
  client.disconnect();
});

/** The d.ts names of wire objects whose OpenAPI schema is named otherwise. */
const SCHEMA_OF = { ThreadPage: 'ThreadResponse', Lease: 'LeaseRequest' };
/**
 * Fields the schema lists as optional only because the Rust type defaults
 * them when reading (`#[serde(default)]`); the server always writes them.
 */
const ALWAYS_WRITTEN = new Set(['RuntimeStats.budgetUsedLastHour']);

test('the wire interfaces of index.d.ts have the fields of the OpenAPI schemas of the same objects', async () => {
  const openapi = JSON.parse(await readFile(join(REPO_ROOT, 'docs', 'openapi.json'), 'utf8'));
  const schemas = openapi.components.schemas;
  const compared = [];
  for (const declared of declarations().interfaces) {
    const schema = schemas[SCHEMA_OF[declared.name] ?? declared.name];
    if (!schema?.properties) continue;
    compared.push(declared.name);
    const required = new Set(schema.required ?? []);
    assert.deepEqual(
      declared.properties.map((p) => p.name).sort(),
      Object.keys(schema.properties).sort(),
      `${declared.name}: the fields the server's schema has`,
    );
    for (const property of declared.properties) {
      // A field the server may leave out must not be promised.
      if (!required.has(property.name) && !ALWAYS_WRITTEN.has(`${declared.name}.${property.name}`)) {
        assert.ok(
          property.optional || property.nullable,
          `${declared.name}.${property.name} is optional in the schema, so it must be optional (or null) here`,
        );
      }
    }
  }
  // Most wire objects overlap; a rename on either side must not empty this check.
  assert.ok(compared.length >= 30, `compared only ${compared.join(', ')}`);
});
