// The provider oracle suite: every provider whose official SDK can sign or verify offline sends
// to one real `gateway serve` as that provider would, and the SDK's verifier is asked about every
// request first. One test line per provider and case:
//
//   valid      the SDK accepts the request → the gateway answers 200 "delivered" and forwards it
//              once, with a forward both official Standard Webhooks verifiers (standardwebhooks,
//              svix) accept, carrying the original bytes
//   duplicate  the same request again → 200 "duplicate", nothing forwarded
//   tampered   one byte of the signed content changed → the SDK refuses it and the gateway
//              answers 401, logging a signature reason
//   stale      (timestamped schemes) signed an hour ago → 401, logged as stale
//   future     (timestamped schemes) signed an hour ahead → 401, logged as stale
//
// Run through scripts/oracles (which installs the pinned SDKs outside the checkout and builds the
// gateway); GATEWAY_BIN names the gateway binary, ORACLE_MODULES the installed node_modules.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startAgent, startGateway } from './gateway.mjs';
import { oracles } from './providers.mjs';

const bin = process.env.GATEWAY_BIN;
if (!bin) throw new Error('GATEWAY_BIN is not set: run scripts/oracles, which builds the gateway and sets it');

const version = (pkg) => JSON.parse(readFileSync(path.join(process.env.ORACLE_MODULES, pkg, 'package.json'), 'utf8')).version;
const forwardSecret = 'whsec_' + Buffer.from('replyonce-oracle-forward-secret!').toString('base64');
const hour = 3600 * 1000;

let agent;
let gw;
let run = 0;

before(async () => {
  agent = await startAgent(forwardSecret);
  gw = await startGateway({
    bin,
    agentURL: agent.url,
    forwardSecret,
    sources: oracles.map((o) => ({
      name: o.name, provider: o.provider, secrets: o.secrets, tolerance: o.tolerance, eventID: o.eventID,
      url: o.url ? `/hooks/${o.name}` : undefined,
    })),
  });
});

after(async () => {
  await gw?.stop();
  await agent?.close();
});

const ctxFor = (o, at) => ({ id: `evt_${o.name.replace(/\W/g, '_')}_${process.pid}_${++run}`, at, url: `${gw.base}/hooks/${o.name}` });

const tamper = (o, req) => {
  if (o.tamper) return o.tamper(req);
  // The first "original" that is a whole word: a value, never part of a key such as Adyen's
  // originalReference.
  const word = /original(?!\w)/;
  assert.match(req.body, word, `${o.name}: the body has no "original" to tamper with`);
  return { ...req, body: req.body.replace(word, 'originaL') };
};

// lastReason is the reason the gateway logged for the source's latest refused request.
const lastReason = (o) => gw.logOf(o.name).filter((l) => l.reason).at(-1)?.reason;

const refusedByGateway = async (o, req, want) => {
  const res = await gw.send(o.name, req);
  assert.equal(res.status, 401, `${o.name}: want 401, got ${res.status} ${res.text}`);
  const reason = lastReason(o);
  assert.match(reason ?? '', want, `${o.name}: logged reason ${reason}`);
  return res;
};

const label = (o) => `${o.name} [${o.pkg}@${version(o.pkg)}, signed by ${o.signer === 'sdk' ? 'the SDK' : 'recipe'}]`;

for (const o of oracles) {
  const state = {};

  test(`${label(o)}: valid → delivered once, forward verified by standardwebhooks and svix`, async () => {
    const ctx = ctxFor(o, new Date());
    const req = await o.sign(ctx);
    assert.equal(await o.verify(req, ctx), true, `${o.name}: the SDK's verifier refuses the request the suite signed`);
    const res = await gw.send(o.name, req);
    assert.equal(res.status, 200, `${o.name}: ${res.status} ${res.text}\n${gw.logOf(o.name).map(JSON.stringify).join('\n')}`);
    assert.equal(res.json?.status, 'delivered', res.text);
    const fwd = agent.forwardsOf(o.name);
    assert.equal(fwd.length, 1, `${o.name}: ${fwd.length} forwards`);
    assert.deepEqual(fwd[0].refused, [], `${o.name}: a verifier refused the forward`);
    assert.deepEqual(fwd[0].verified, ['standardwebhooks', 'svix']);
    assert.equal(fwd[0].body.toString(), req.body, `${o.name}: the forward's body differs from the bytes sent`);
    assert.equal(fwd[0].eventId, res.json.event_id);
    Object.assign(state, { ctx, req, eventId: res.json.event_id });
  });

  test(`${label(o)}: duplicate → duplicate, not forwarded again`, async () => {
    assert.ok(state.req, 'the valid case did not run');
    const res = await gw.send(o.name, state.req);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json?.status, 'duplicate', res.text);
    assert.equal(res.json?.event_id, state.eventId);
    assert.equal(agent.forwardsOf(o.name, state.eventId).length, 1);
  });

  test(`${label(o)}: tampered (one byte) → SDK refuses, gateway 401`, async () => {
    const ctx = ctxFor(o, new Date());
    const bad = tamper(o, await o.sign(ctx));
    assert.equal(await o.verify(bad, ctx), false, `${o.name}: the SDK's verifier accepts the tampered request`);
    const before = agent.forwardsOf(o.name).length;
    await refusedByGateway(o, bad, /^signature_/);
    assert.equal(agent.forwardsOf(o.name).length, before, 'a refused request was forwarded');
  });

  if (o.timestamp) {
    for (const [word, offset] of [['stale (1 h old)', -hour], ['future (1 h ahead)', hour]]) {
      const when = o.tolerance ? `${word}, tolerance ${o.tolerance} set` : word;
      test(`${label(o)}: ${when} → 401 stale`, async () => {
        const ctx = ctxFor(o, new Date(Date.now() + offset));
        const before = agent.forwardsOf(o.name).length;
        await refusedByGateway(o, await o.sign(ctx), /^signature_stale$/);
        assert.equal(agent.forwardsOf(o.name).length, before, 'a refused request was forwarded');
      });
    }
  }

  for (const c of o.cases ?? []) {
    test(`${label(o)}: ${c.title}`, async () => {
      await c.run({ o, gw, agent, ctx: ctxFor(o, new Date()), lastReason: () => lastReason(o) });
    });
  }
}

test('count: every provider with an SDK oracle, and the list in docs/provider-proofs.md', () => {
  const providers = [...new Set(oracles.map((o) => o.provider))].sort();
  const cases = oracles.reduce((n, o) => n + 3 + (o.timestamp ? 2 : 0) + (o.cases?.length ?? 0), 0);
  const bySDK = oracles.filter((o) => o.signer === 'sdk').length;
  console.log(`oracles: ${providers.length} providers, ${oracles.length} oracles (${bySDK} signed by the SDK, ${oracles.length - bySDK} by recipe), ${cases} cases`);
  // The page lists the providers with an SDK oracle between these markers, one `name` a line.
  const doc = readFileSync(new URL('../../docs/provider-proofs.md', import.meta.url), 'utf8');
  const listed = doc.split('<!-- oracles:begin -->')[1]?.split('<!-- oracles:end -->')[0];
  assert.ok(listed, 'docs/provider-proofs.md has no oracles:begin/end markers');
  const names = [...listed.matchAll(/^\| `([a-z0-9-]+)` \|/gm)].map((m) => m[1]).sort();
  assert.deepEqual(names, providers, 'docs/provider-proofs.md lists other providers than the suite proves');
});
