// A TypeScript agent behind the real gateway: the gateway verifies the
// provider's signature, forwards with its own Standard Webhooks signature
// and the Replyonce headers, and the agent fences its reply on the run it
// was handed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';

import { LedgerClient, nodeForwardHandler, signWebhook, type Delivery } from '../src/index.js';
import { startGateway } from './gateway.js';

const providerSecret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const forwardSecret = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD';

test('a forward is verified, read and answered once; its duplicate never reaches the agent', async () => {
  const seen: Delivery[] = [];
  let replies = 0;
  let client: LedgerClient | undefined;
  const handler = nodeForwardHandler({ secret: forwardSecret }, async (d, body) => {
    seen.push(d);
    const event = JSON.parse(body.toString()) as { message_id: string };
    const run = client!.runRef(d.scope, d.runId, d.fencingToken);
    const r = await run.once('reply', { answers: [event.message_id] }, () => ({ message_id: `r${++replies}` }), { conflict: 'same-intent' });
    return { status: r.ok ? 200 : 503, body: { outcome: r.status } };
  });
  const agent = createServer((req, res) => void handler(req, res));
  await new Promise<void>((r) => agent.listen(0, '127.0.0.1', r));
  const agentUrl = `http://127.0.0.1:${(agent.address() as { port: number }).port}/events`;
  const gw = await startGateway(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
store: {kind: bolt, path: "{dir}/ledger.db"}
log: {level: info, format: json}
sources:
  demo:
    provider: standard-webhooks
    secrets: [${providerSecret}]
    scope: "{json:conversation_id}"
    runs: supersede
    forward: {url: "${agentUrl}", timeout: 5s, signing_secret: "${forwardSecret}", mode: inline}
`);
  try {
    client = new LedgerClient({ baseUrl: gw.adminUrl });
    const body = JSON.stringify({ conversation_id: 'c1', message_id: 'm1', text: 'Where is my order?' });
    const send = () =>
      fetch(`${gw.publicUrl}/hooks/demo`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...signWebhook(providerSecret, 'evt_1', Math.floor(Date.now() / 1000), body) },
        body,
      });
    const first = await send();
    assert.equal(first.status, 200);
    assert.equal(((await first.json()) as { status: string }).status, 'delivered');
    const dup = await send();
    assert.equal(dup.status, 200);
    assert.equal(((await dup.json()) as { status: string }).status, 'duplicate');
    assert.equal(seen.length, 1, 'the duplicate was not forwarded');
    assert.equal(replies, 1);
    const d = seen[0];
    assert.equal(d.scope, 'c1');
    assert.equal(d.source, 'demo');
    assert.equal(d.eventId, 'evt_1');
    assert.equal(d.runId, 'demo:evt_1');
    assert.equal(d.delivery, 1);
    assert.ok(d.fencingToken > 0);
    assert.ok(d.contextAt instanceof Date && !Number.isNaN(d.contextAt.getTime()));
    assert.equal(d.covers, 1);
    // The agent's reply is in the ledger, under the key every language computes.
    const hist = await client.history('c1');
    const reply = hist.find((e) => e.intent === 'reply');
    assert.equal(reply?.state, 'committed');
    assert.equal(reply?.runId, 'demo:evt_1');
  } finally {
    await gw.stop();
    agent.close();
  }
});

test('a forward signed with another secret is refused by the agent, and the gateway hears it', async () => {
  let called = 0;
  const handler = nodeForwardHandler({ secret: 'whsec_' + Buffer.from('another secret entirely').toString('base64') }, () => {
    called++;
    return { status: 200 };
  });
  const agent = createServer((req, res) => void handler(req, res));
  await new Promise<void>((r) => agent.listen(0, '127.0.0.1', r));
  const agentUrl = `http://127.0.0.1:${(agent.address() as { port: number }).port}/events`;
  const gw = await startGateway(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
store: {kind: bolt, path: "{dir}/ledger.db"}
log: {level: info, format: json}
sources:
  demo:
    provider: standard-webhooks
    secrets: [${providerSecret}]
    forward: {url: "${agentUrl}", timeout: 5s, signing_secret: "${forwardSecret}", mode: inline}
`);
  try {
    const body = '{"conversation_id":"c2"}';
    const r = await fetch(`${gw.publicUrl}/hooks/demo`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...signWebhook(providerSecret, 'evt_2', Math.floor(Date.now() / 1000), body) },
      body,
    });
    assert.equal(r.status, 503, 'an agent answering 401 is a configuration fault the provider should retry past');
    assert.equal(called, 0);
  } finally {
    await gw.stop();
    agent.close();
  }
});
