import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';

import {
  WebhookVerificationError,
  fastifyForwardHandler,
  fetchForwardHandler,
  nodeForwardHandler,
  parseCovers,
  parseDelivery,
  signWebhook,
  verifyWebhook,
  type Delivery,
} from '../src/index.js';

const secret = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD';
const now = 1_772_366_400_000;
const body = '{"conversation_id":"c1","message_id":"m1","text":"hi"}';

function forward(extra: Record<string, string> = {}, b = body, ts = now / 1000): Record<string, string> {
  return {
    ...signWebhook(secret, 'msg_1', ts, b),
    'replyonce-source': 'demo',
    'replyonce-event-id': 'evt_1',
    'replyonce-scope': 'c1',
    'replyonce-run-id': 'demo:evt_1',
    'replyonce-delivery': '2',
    'replyonce-fencing-token': '1772366400251',
    'replyonce-context-at': '2026-03-01T12:00:00.500Z',
    'idempotency-key': 'demo:evt_1',
    ...extra,
  };
}

test('a signed forward verifies; a changed byte, another secret or a stale timestamp does not', () => {
  verifyWebhook(secret, forward(), body, { now: () => now });
  verifyWebhook(secret, new Headers(forward()), Buffer.from(body), { now: () => now });
  assert.throws(() => verifyWebhook(secret, forward(), body + ' ', { now: () => now }), WebhookVerificationError);
  assert.throws(() => verifyWebhook('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', forward(), body, { now: () => now }), WebhookVerificationError);
  assert.throws(() => verifyWebhook(secret, forward(), body, { now: () => now + 301_000 }), /away from now/);
  assert.throws(() => verifyWebhook(secret, forward(), body, { now: () => now - 301_000 }), /away from now/);
  verifyWebhook(secret, forward(), body, { now: () => now + 290_000 });
  const h = forward();
  delete (h as Record<string, string>)['webhook-signature'];
  assert.throws(() => verifyWebhook(secret, h, body, { now: () => now }), /missing/);
  // One of several signatures (a secret being rotated) is enough.
  const several = forward();
  several['webhook-signature'] = `v1,${Buffer.alloc(32).toString('base64')} ${several['webhook-signature']}`;
  verifyWebhook(secret, several, body, { now: () => now });
});

test('the delivery is read from the Replyonce headers', () => {
  const d = parseDelivery(forward({ 'replyonce-covers': '3; ids=evt_a,evt%2Cb,evt+c' }));
  assert.equal(d.scope, 'c1');
  assert.equal(d.runId, 'demo:evt_1');
  assert.equal(d.fencingToken, 1772366400251);
  assert.equal(d.delivery, 2);
  assert.equal(d.source, 'demo');
  assert.equal(d.eventId, 'evt_1');
  assert.equal(d.idempotencyKey, 'demo:evt_1');
  assert.equal(d.contextAt?.toISOString(), '2026-03-01T12:00:00.500Z');
  assert.equal(d.covers, 3);
  assert.deepEqual(d.coveredIds, ['evt_a', 'evt,b', 'evt c']);
  assert.equal(d.notice, undefined);
  assert.equal(parseDelivery(forward({ 'replyonce-notice': 'cancel' })).notice, 'cancel');
  assert.deepEqual(parseCovers('5'), { count: 5, ids: [] });
  assert.throws(() => parseCovers('0'));
  assert.throws(() => parseDelivery(forward({ 'replyonce-fencing-token': 'x' })), /Fencing-Token/);
  assert.throws(() => parseDelivery(forward({ 'replyonce-scope': '' })), /Scope/);
});

async function serve(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

test('the Node handler verifies, reads the delivery and answers what the handler says', async () => {
  const seen: Delivery[] = [];
  const handler = nodeForwardHandler({ secret }, (d, b) => {
    seen.push(d);
    assert.equal(b.toString(), body);
    return { status: 200, body: { outcome: 'replied' } };
  });
  const server = createServer((req, res) => void handler(req, res));
  const url = await serve(server);
  try {
    const ts = Math.floor(Date.now() / 1000);
    let r = await fetch(url, { method: 'POST', headers: forward({}, body, ts), body });
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { outcome: 'replied' });
    r = await fetch(url, { method: 'POST', headers: forward({}, body, ts), body: body + 'x' });
    assert.equal(r.status, 401);
    r = await fetch(url, { method: 'POST', headers: forward({ 'replyonce-notice': 'cancel' }, body, ts), body });
    assert.equal(r.status, 204);
    r = await fetch(url, { method: 'POST', headers: forward({ 'replyonce-run-id': '' }, body, ts), body });
    assert.equal(r.status, 400);
    r = await fetch(url, { method: 'GET' });
    assert.equal(r.status, 405);
    assert.equal(seen.length, 1);
  } finally {
    server.close();
  }
});

test('an Express-style raw body is used as is; a parsed one is refused', async () => {
  const handler = nodeForwardHandler({ secret }, () => ({ status: 202 }));
  const ts = Math.floor(Date.now() / 1000);
  const server = createServer((req, res) => {
    const r = req as typeof req & { body?: unknown };
    r.body = req.headers['x-parsed'] ? { already: 'parsed' } : Buffer.from(body);
    void handler(r, res);
  });
  const url = await serve(server);
  try {
    assert.equal((await fetch(url, { method: 'POST', headers: forward({}, body, ts), body: 'ignored' })).status, 202);
    assert.equal((await fetch(url, { method: 'POST', headers: { ...forward({}, body, ts), 'x-parsed': '1' }, body })).status, 500);
  } finally {
    server.close();
  }
});

test('the fetch handler answers a Request with a Response', async () => {
  const h = fetchForwardHandler({ secret }, (d) => ({ status: 200, body: { run: d.runId } }));
  const ts = Math.floor(Date.now() / 1000);
  const ok = await h(new Request('http://agent/events', { method: 'POST', headers: forward({}, body, ts), body }));
  assert.equal(ok.status, 200);
  assert.deepEqual(await ok.json(), { run: 'demo:evt_1' });
  const bad = await h(new Request('http://agent/events', { method: 'POST', headers: forward({}, body, ts - 3600), body }));
  assert.equal(bad.status, 401);
  const thrown = await fetchForwardHandler({ secret }, () => {
    throw new Error('boom');
  })(new Request('http://agent/events', { method: 'POST', headers: forward({}, body, ts), body }));
  assert.equal(thrown.status, 503);
});

test('the Fastify handler takes the raw body and answers through the reply', async () => {
  const h = fastifyForwardHandler({ secret }, (d) => ({ status: 202, body: { run: d.runId } }));
  const ts = Math.floor(Date.now() / 1000);
  const reply = () => {
    const r = { status: 0, headers: {} as Record<string, string>, payload: undefined as unknown };
    const api = {
      code(s: number) {
        r.status = s;
        return api;
      },
      header(n: string, v: string) {
        r.headers[n] = v;
        return api;
      },
      send(p?: unknown) {
        r.payload = p;
        return api;
      },
    };
    return { r, api };
  };
  const ok = reply();
  await h({ headers: forward({}, body, ts), body: Buffer.from(body) }, ok.api);
  assert.equal(ok.r.status, 202);
  assert.deepEqual(JSON.parse(ok.r.payload as string), { run: 'demo:evt_1' });
  const raw = reply();
  await h({ headers: forward({}, body, ts), body: { parsed: true }, rawBody: body }, raw.api);
  assert.equal(raw.r.status, 202);
  const parsed = reply();
  await h({ headers: forward({}, body, ts), body: { parsed: true } }, parsed.api);
  assert.equal(parsed.r.status, 500);
  const forged = reply();
  await h({ headers: forward({}, body, ts), body: Buffer.from(body + ' ') }, forged.api);
  assert.equal(forged.r.status, 401);
});
