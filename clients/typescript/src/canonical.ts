// Effect keys, computed as the gateway's ledger computes them (ledger/key.go
// in the repository), so that a TypeScript, Python and Go worker name one
// effect by one entry id.

import { createHash } from 'node:crypto';

/** Any JSON value: what a payload or an effect's stored value may be. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * The gateway reads JSON with Go, which turns a lone UTF-16 surrogate into
 * U+FFFD; doing the same here keeps the key equal to the gateway's.
 */
function wellFormed(s: string): string {
  return s.replace(loneSurrogate, '\uFFFD');
}

/**
 * canonicalize renders value in the JSON Canonicalization Scheme (RFC 8785):
 * object keys sorted by UTF-16 code units, no whitespace, strings escaped
 * only where JSON requires it, numbers as ECMAScript writes the double they
 * denote (so 2500, 2500.0 and 2.5e3 are one value). Values JSON.stringify
 * leaves out (undefined, functions) are left out the same way; NaN and the
 * infinities are not JSON and throw.
 */
export function canonicalize(value: unknown): string {
  const out = write(value, 0);
  if (out === undefined) {
    throw new TypeError('canonicalize: the value is not JSON (undefined or a function)');
  }
  return out;
}

const maxDepth = 1000;

function write(v: unknown, depth: number): string | undefined {
  if (depth > maxDepth) {
    throw new TypeError('canonicalize: the value nests too deep (or contains itself)');
  }
  if (v === null) return 'null';
  switch (typeof v) {
    case 'boolean':
      return v ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(v)) throw new TypeError(`canonicalize: ${v} is not a JSON number`);
      // ECMAScript's Number-to-String is RFC 8785's number format; -0 is 0.
      return JSON.stringify(v);
    case 'bigint':
      // Like every number, a big integer is the nearest double (the Go
      // ledger reads numbers the same way).
      return write(Number(v), depth);
    case 'string':
      return JSON.stringify(wellFormed(v));
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  const obj = v as { toJSON?: () => unknown };
  if (typeof obj.toJSON === 'function') {
    return write(obj.toJSON(), depth + 1);
  }
  if (Array.isArray(v)) {
    return '[' + v.map((e) => write(e, depth + 1) ?? 'null').join(',') + ']';
  }
  const fields = new Map<string, string>();
  for (const [k, val] of Object.entries(v as Record<string, unknown>)) {
    const s = write(val, depth + 1);
    if (s !== undefined) fields.set(wellFormed(k), s);
  }
  // The default sort compares UTF-16 code units, which is RFC 8785's order.
  const keys = [...fields.keys()].sort();
  return '{' + keys.map((k) => JSON.stringify(k) + ':' + fields.get(k)).join(',') + '}';
}

const entryIdDomain = 'replyonce/entry/v2';

function uvarint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

/**
 * entryId is the ledger's id of the effect (scope, intent, payload): the
 * first 16 bytes of SHA-256 over a domain tag and the three fields, each
 * after its length, in hex. A missing payload is JSON null.
 */
export function entryId(scope: string, intent: string, payload: unknown = null): string {
  const enc = new TextEncoder();
  const h = createHash('sha256');
  h.update(entryIdDomain);
  for (const field of [scope, intent, canonicalize(payload === undefined ? null : payload)]) {
    const bytes = enc.encode(field);
    h.update(Uint8Array.from(uvarint(bytes.length)));
    h.update(bytes);
  }
  return h.digest('hex').slice(0, 32);
}

/**
 * idempotencyKey is the key the ledger gives the effect for providers that
 * accept one: the same for every attempt, worker, process and language.
 */
export function idempotencyKey(scope: string, intent: string, payload: unknown = null): string {
  return 'ro_' + entryId(scope, intent, payload);
}
