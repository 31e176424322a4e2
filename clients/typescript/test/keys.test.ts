import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { canonicalize, entryId, idempotencyKey } from '../src/index.js';

interface Vector {
  name: string;
  scope: string;
  intent: string;
  payload: string;
  canonical: string;
  entry_id: string;
  idempotency_key: string;
}

const vectors: Vector[] = JSON.parse(readFileSync(new URL('../../../../ledger/testdata/keys.json', import.meta.url), 'utf8')).vectors;

test('the shared RFC 8785 vectors hash as in Go', () => {
  assert.ok(vectors.length >= 10);
  for (const v of vectors) {
    const payload = JSON.parse(v.payload);
    assert.equal(canonicalize(payload), v.canonical, v.name);
    assert.equal(entryId(v.scope, v.intent, payload), v.entry_id, v.name);
    assert.equal(idempotencyKey(v.scope, v.intent, payload), v.idempotency_key, v.name);
  }
});

test('a payload built in code hashes as its JSON text does', () => {
  const fromCode = { order: 'A-1001', cents: 2500 };
  const v = vectors.find((x) => x.name === 'flat object')!;
  assert.equal(entryId(v.scope, v.intent, fromCode), v.entry_id);
  assert.equal(entryId('s', 'x', { b: undefined, a: 1n }), entryId('s', 'x', { a: 1 }));
  assert.equal(entryId('s', 'x', undefined), entryId('s', 'x', null));
  assert.equal(canonicalize({ when: new Date('2026-03-01T12:00:00Z') }), '{"when":"2026-03-01T12:00:00.000Z"}');
});

test('what is not JSON is refused', () => {
  for (const bad of [NaN, Infinity, -Infinity, { n: NaN }]) {
    assert.throws(() => canonicalize(bad), TypeError);
  }
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  assert.throws(() => canonicalize(cyclic), TypeError);
  assert.throws(() => canonicalize(undefined), TypeError);
});
