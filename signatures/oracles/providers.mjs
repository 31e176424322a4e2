// One oracle per provider whose official SDK can sign or verify offline. Each oracle says how the
// provider signs a delivery (with the SDK's own signer where it has one, `signer: 'sdk'`, or by
// the recipe its SDK and docs state, `signer: 'recipe'`) and how the SDK verifies one. The suite
// (oracles.test.mjs) first asks the SDK's verifier about the exact bytes it will send, so a
// recipe that drifted from the SDK fails there, before the gateway is asked anything.
//
// Every oracle has:
//   name      the source name in the gateway's config (the provider's name unless a provider
//             has several oracles)
//   provider  the gateway's provider name
//   pkg       the npm package whose code is the oracle
//   signer    'sdk' or 'recipe'
//   timestamp true when the scheme signs a timestamp: the suite then sends stale and future
//             copies and expects both refused
//   tolerance set on the source when the gateway checks the scheme's timestamp only on request
//   secrets   the source's secrets, as an operator would paste them
//   url       true when the source needs its public URL (the scheme signs it)
//   sign(ctx) returns {headers, body, query}; ctx = {id, at, url} where at is the signing time
//   verify(req, ctx) resolves true when the SDK accepts req, false (or throws) when it refuses
//   cases     optional: further cases, [{title, run({o, gw, agent, ctx, lastReason})}]
//   tamper(req) optional: a copy of req with one byte of the signed content changed (default:
//             "original" becomes "originaL" in the body)
import assert from 'node:assert/strict';
import crypto from 'node:crypto';

const hmac = (alg, key, data, enc) => crypto.createHmac(alg, key).update(data).digest(enc);
const secs = (at) => Math.floor(at.getTime() / 1000);
const whsec = (raw) => 'whsec_' + Buffer.from(raw).toString('base64');

// The JSON every body carries: the event id, and a field the tamper step changes.
const event = (id, at, extra = {}) => JSON.stringify({ id, type: 'oracle.test', created: secs(at), note: 'original', ...extra });

// form encodes params as a provider's form post does (application/x-www-form-urlencoded).
const form = (params) => new URLSearchParams(params).toString();
const formHeaders = { 'content-type': 'application/x-www-form-urlencoded' };
const jsonHeaders = { 'content-type': 'application/json' };

// lower returns the headers with lower-case names, as Node's http module hands them to an SDK.
const lower = (h) => Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));

const asBool = async (f) => {
  try {
    const r = await f();
    return r !== false;
  } catch {
    return false;
  }
};

// Standard Webhooks family: the recipe is the standardwebhooks signer; the provider's own SDK
// verifies. prefix names the headers (webhook-* or svix-*).
async function stdSign(secret, prefix, { id, at }, body) {
  const { Webhook } = await import('standardwebhooks');
  const w = new Webhook(secret);
  return {
    headers: { ...jsonHeaders, [`${prefix}-id`]: id, [`${prefix}-timestamp`]: String(secs(at)), [`${prefix}-signature`]: w.sign(id, at, body) },
    body,
  };
}

const ed25519 = () => {
  const { publicKey, privateKey } = crypto.generateKeyPairSync('ed25519');
  const raw = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
  return { privateKey, raw };
};

const keys = {
  discord: ed25519(),
  telnyx: ed25519(),
  sendgrid: crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' }),
};

export const oracles = [
  {
    name: 'standard-webhooks',
    provider: 'standard-webhooks',
    pkg: 'standardwebhooks',
    signer: 'sdk',
    timestamp: true,
    secrets: [whsec('standard-webhooks-oracle-key-32b')],
    async sign(ctx) {
      return stdSign(this.secrets[0], 'webhook', ctx, event(ctx.id, ctx.at));
    },
    async verify(req) {
      const { Webhook } = await import('standardwebhooks');
      return asBool(() => new Webhook(this.secrets[0]).verify(req.body, req.headers));
    },
  },
  {
    name: 'svix',
    provider: 'svix',
    pkg: 'svix',
    signer: 'sdk',
    timestamp: true,
    secrets: [whsec('svix-oracle-signing-key-32bytes!')],
    async sign({ id, at }) {
      const { Webhook } = await import('svix');
      const body = event(id, at);
      const sig = new Webhook(this.secrets[0]).sign(id, at, body);
      return { headers: { ...jsonHeaders, 'svix-id': id, 'svix-timestamp': String(secs(at)), 'svix-signature': sig }, body };
    },
    async verify(req) {
      const { Webhook } = await import('svix');
      return asBool(() => new Webhook(this.secrets[0]).verify(req.body, req.headers));
    },
  },
  {
    name: 'stripe',
    provider: 'stripe',
    pkg: 'stripe',
    signer: 'sdk',
    timestamp: true,
    secrets: ['whsec_stripe_oracle_0123456789abcdef'],
    async client() {
      const { default: Stripe } = await import('stripe');
      return new Stripe('sk_test_oracle');
    },
    async sign({ id, at }) {
      const stripe = await this.client();
      const body = JSON.stringify({ id, object: 'event', type: 'payment_intent.succeeded', created: secs(at), note: 'original' });
      const header = stripe.webhooks.generateTestHeaderString({ payload: body, secret: this.secrets[0], timestamp: secs(at) });
      return { headers: { ...jsonHeaders, 'stripe-signature': header }, body };
    },
    async verify(req) {
      const stripe = await this.client();
      return asBool(() => stripe.webhooks.constructEvent(req.body, req.headers['stripe-signature'], this.secrets[0]));
    },
  },
  {
    name: 'github',
    provider: 'github',
    pkg: '@octokit/webhooks-methods',
    signer: 'sdk',
    secrets: ['github-oracle-secret'],
    async sign({ id, at }) {
      const { sign } = await import('@octokit/webhooks-methods');
      const body = event(id, at, { action: 'opened' });
      return {
        headers: { ...jsonHeaders, 'x-github-event': 'issues', 'x-github-delivery': id, 'x-hub-signature-256': await sign(this.secrets[0], body) },
        body,
      };
    },
    async verify(req) {
      const { verify } = await import('@octokit/webhooks-methods');
      return asBool(() => verify(this.secrets[0], req.body, req.headers['x-hub-signature-256']));
    },
  },
  {
    name: 'slack',
    provider: 'slack',
    pkg: '@slack/bolt',
    signer: 'recipe',
    timestamp: true,
    secrets: ['slack-oracle-signing-secret'],
    async sign({ id, at }) {
      const body = JSON.stringify({ type: 'event_callback', event_id: id, event_time: secs(at), event: { type: 'app_mention', text: 'original' } });
      const ts = String(secs(at));
      return {
        headers: { ...jsonHeaders, 'x-slack-request-timestamp': ts, 'x-slack-signature': 'v0=' + hmac('sha256', this.secrets[0], `v0:${ts}:${body}`, 'hex') },
        body,
      };
    },
    async verify(req) {
      const { isValidSlackRequest } = await import('@slack/bolt');
      return isValidSlackRequest({ signingSecret: this.secrets[0], body: req.body, headers: req.headers });
    },
  },
  shopify('shopify', 'x-shopify-'),
  shopify('shopify-events', 'shopify-'),
  {
    name: 'zoom',
    provider: 'zoom',
    pkg: '@zoom/rivet',
    signer: 'recipe',
    timestamp: true,
    secrets: ['zoom-oracle-secret-token'],
    async sign({ id, at }) {
      const body = JSON.stringify({ event: 'meeting.started', event_ts: at.getTime(), payload: { account_id: 'a1', object: { id, topic: 'original' } } });
      const ts = String(secs(at));
      return { headers: { ...jsonHeaders, 'x-zm-request-timestamp': ts, 'x-zm-signature': 'v0=' + hmac('sha256', this.secrets[0], `v0:${ts}:${body}`, 'hex') }, body };
    },
    // Rivet's Lambda receiver is its one verifier that takes a request as data: 200 when the
    // event verified. It logs every event at debug, which the suite's output can do without.
    async verify(req) {
      const { AwsLambdaReceiver } = await import('@zoom/rivet/meetings');
      const debug = console.debug;
      console.debug = () => {};
      try {
        const res = await new AwsLambdaReceiver({ webhooksSecretToken: this.secrets[0] }).start()({ body: req.body, headers: req.headers }, {});
        return res.statusCode === 200;
      } finally {
        console.debug = debug;
      }
    },
  },
  twilio('twilio', 'HMAC_SHA1', 'twilio-oracle-auth-token'),
  twilio('twilio-sha256', 'HMAC_SHA256', 'twilio-oracle-shared-key-secret'),
  {
    name: 'braintree',
    provider: 'braintree',
    pkg: 'braintree',
    signer: 'sdk',
    secrets: ['oracle_public_key:oracle_private_key'],
    async gateway() {
      const { default: braintree } = await import('braintree');
      const [publicKey, privateKey] = this.secrets[0].split(':');
      return new braintree.BraintreeGateway({ environment: braintree.Environment.Sandbox, merchantId: 'oracle', publicKey, privateKey });
    },
    async sign({ id }) {
      const { default: braintree } = await import('braintree');
      const gw = await this.gateway();
      const n = gw.webhookTesting.sampleNotification(braintree.WebhookNotification.Kind.SubscriptionWentPastDue, id);
      return { headers: formHeaders, body: form(n) };
    },
    async verify(req) {
      const gw = await this.gateway();
      const p = new URLSearchParams(req.body);
      return asBool(() => gw.webhookNotification.parse(p.get('bt_signature'), p.get('bt_payload')));
    },
    // A character in the middle of the base64 payload, so the XML still starts as XML.
    tamper(req) {
      const p = new URLSearchParams(req.body);
      const payload = p.get('bt_payload');
      const i = Math.floor(payload.length / 2);
      const c = payload[i] === 'A' ? 'B' : 'A';
      p.set('bt_payload', payload.slice(0, i) + c + payload.slice(i + 1));
      return { ...req, body: p.toString() };
    },
  },
  {
    name: 'adyen',
    provider: 'adyen',
    pkg: '@adyen/api-library',
    signer: 'sdk',
    secrets: ['44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056'],
    async validator() {
      const { hmacValidator: HmacValidator } = await import('@adyen/api-library');
      return new HmacValidator();
    },
    async sign({ id }) {
      const v = await this.validator();
      const item = {
        pspReference: id, originalReference: '', merchantAccountCode: 'OracleMerchant', merchantReference: 'original',
        amount: { value: 1130, currency: 'EUR' }, eventCode: 'AUTHORISATION', success: 'true', eventDate: '2026-01-01T00:00:00+01:00',
        additionalData: {},
      };
      item.additionalData.hmacSignature = v.calculateHmac(item, this.secrets[0]);
      return { headers: jsonHeaders, body: JSON.stringify({ live: 'false', notificationItems: [{ NotificationRequestItem: item }] }) };
    },
    async verify(req) {
      const v = await this.validator();
      const items = JSON.parse(req.body).notificationItems;
      return asBool(() => items.every((it) => v.validateHMAC(it.NotificationRequestItem, this.secrets[0])));
    },
  },
  {
    name: 'adyen-banking',
    provider: 'adyen',
    pkg: '@adyen/api-library',
    signer: 'sdk',
    secrets: ['44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056'],
    async sign({ id, at }) {
      const { hmacValidator: HmacValidator } = await import('@adyen/api-library');
      const body = JSON.stringify({ type: 'balancePlatform.accountHolder.created', data: { id, note: 'original' }, notificationItems: null, created: secs(at) });
      return { headers: { ...jsonHeaders, hmacsignature: new HmacValidator().calculateHmacSignature(body, this.secrets[0]) }, body };
    },
    async verify(req) {
      const { hmacValidator: HmacValidator } = await import('@adyen/api-library');
      return new HmacValidator().validateHMACSignature(this.secrets[0], req.headers.hmacsignature, req.body);
    },
    eventID: '{json:data.id}',
  },
  {
    name: 'mux',
    provider: 'mux',
    pkg: '@mux/mux-node',
    signer: 'recipe',
    timestamp: true,
    secrets: ['mux-oracle-webhook-secret'],
    async client() {
      const { default: Mux } = await import('@mux/mux-node');
      return new Mux({ tokenId: 'oracle', tokenSecret: 'oracle', webhookSecret: this.secrets[0] });
    },
    async sign({ id, at }) {
      const mux = await this.client();
      const body = event(id, at, { created_at: new Date(at).toISOString() });
      // The SDK's own HMAC over the "{t}.{body}" its verifier rebuilds.
      const sig = await mux.webhooks.computeSignature(`${secs(at)}.${body}`, this.secrets[0]);
      return { headers: { ...jsonHeaders, 'mux-signature': `t=${secs(at)},v1=${sig}` }, body };
    },
    async verify(req) {
      const mux = await this.client();
      return asBool(() => mux.webhooks.verifySignature(req.body, req.headers, this.secrets[0]));
    },
  },
  {
    name: 'sanity',
    provider: 'sanity',
    pkg: '@sanity/webhook',
    signer: 'sdk',
    timestamp: true,
    // The toolkit checks no freshness and neither does the gateway by default; the window is
    // checked when the source sets one, as here.
    tolerance: '5m',
    secrets: ['sanity-oracle-secret'],
    async sign({ id, at }) {
      const { encodeSignatureHeader } = await import('@sanity/webhook');
      const body = event(id, at, { _id: 'doc-1' });
      return {
        headers: { ...jsonHeaders, 'idempotency-key': id, 'sanity-webhook-signature': await encodeSignatureHeader(body, at.getTime(), this.secrets[0]) },
        body,
      };
    },
    async verify(req) {
      const { isValidSignature } = await import('@sanity/webhook');
      return asBool(() => isValidSignature(req.body, req.headers['sanity-webhook-signature'], this.secrets[0]));
    },
  },
  {
    name: 'workos',
    provider: 'workos',
    pkg: '@workos-inc/node',
    signer: 'recipe',
    timestamp: true,
    secrets: ['workos-oracle-secret'],
    async client() {
      const { WorkOS } = await import('@workos-inc/node');
      return new WorkOS('sk_test_oracle');
    },
    async sign({ id, at }) {
      const workos = await this.client();
      const body = JSON.stringify({ id, event: 'user.created', data: { note: 'original' }, created_at: new Date(at).toISOString() });
      const sig = await workos.webhooks.computeSignature(String(at.getTime()), body, this.secrets[0]);
      return { headers: { ...jsonHeaders, 'workos-signature': `t=${at.getTime()}, v1=${sig}` }, body };
    },
    async verify(req) {
      const workos = await this.client();
      return asBool(() => workos.webhooks.constructEvent({ payload: req.body, sigHeader: req.headers['workos-signature'], secret: this.secrets[0] }));
    },
  },
  {
    name: 'orb',
    provider: 'orb',
    pkg: 'orb-billing',
    signer: 'sdk',
    timestamp: true,
    secrets: ['orb-oracle-secret'],
    async client() {
      const { default: Orb } = await import('orb-billing');
      return new Orb({ apiKey: 'oracle', webhookSecret: this.secrets[0] });
    },
    async sign({ id, at }) {
      const orb = await this.client();
      const body = JSON.stringify({ id, type: 'customer.created', created_at: at.toISOString(), note: 'original' });
      const ts = at.toISOString().replace('Z', '');
      return { headers: { ...jsonHeaders, 'x-orb-timestamp': ts, 'x-orb-signature': orb.webhooks.signPayload(body, { timestamp: ts, secret: this.secrets[0] }) }, body };
    },
    async verify(req) {
      const orb = await this.client();
      return asBool(() => orb.webhooks.verifySignature(req.body, req.headers, this.secrets[0]));
    },
  },
  {
    name: 'razorpay',
    provider: 'razorpay',
    pkg: 'razorpay',
    signer: 'recipe',
    secrets: ['razorpay-oracle-secret'],
    async sign({ id, at }) {
      const body = JSON.stringify({ entity: 'event', event: 'payment.captured', created_at: secs(at), payload: { note: 'original' } });
      return { headers: { ...jsonHeaders, 'x-razorpay-event-id': id, 'x-razorpay-signature': hmac('sha256', this.secrets[0], body, 'hex') }, body };
    },
    async verify(req) {
      const { default: Razorpay } = await import('razorpay');
      return asBool(() => Razorpay.validateWebhookSignature(req.body, req.headers['x-razorpay-signature'], this.secrets[0]));
    },
  },
  {
    name: 'paddle',
    provider: 'paddle',
    pkg: '@paddle/paddle-node-sdk',
    signer: 'recipe',
    timestamp: true,
    secrets: ['pdl_ntfset_oracle_secret'],
    async sign({ id, at }) {
      const body = JSON.stringify({ event_id: id, event_type: 'transaction.completed', occurred_at: at.toISOString(), data: { note: 'original' } });
      const ts = secs(at);
      return { headers: { ...jsonHeaders, 'paddle-signature': `ts=${ts};h1=${hmac('sha256', this.secrets[0], `${ts}:${body}`, 'hex')}` }, body };
    },
    async verify(req) {
      const { Paddle } = await import('@paddle/paddle-node-sdk');
      return asBool(() => new Paddle('pdl_sdbx_apikey_oracle').webhooks.isSignatureValid(req.body, this.secrets[0], req.headers['paddle-signature']));
    },
  },
  {
    name: 'linear',
    provider: 'linear',
    pkg: '@linear/sdk',
    signer: 'recipe',
    timestamp: true,
    secrets: ['linear-oracle-secret'],
    async sign({ id, at }) {
      const body = JSON.stringify({ action: 'create', type: 'Issue', data: { id, title: 'original' }, webhookTimestamp: at.getTime() });
      return { headers: { ...jsonHeaders, 'linear-delivery': id, 'linear-event': 'Issue', 'linear-signature': hmac('sha256', this.secrets[0], body, 'hex') }, body };
    },
    async verify(req) {
      const { LinearWebhookClient } = await import('@linear/sdk/webhooks');
      return asBool(() => new LinearWebhookClient(this.secrets[0]).verify(Buffer.from(req.body), req.headers['linear-signature']));
    },
  },
  {
    name: 'square',
    provider: 'square',
    pkg: 'square',
    signer: 'recipe',
    url: true,
    secrets: ['square-oracle-signature-key'],
    async sign({ id, at, url }) {
      const body = JSON.stringify({ merchant_id: 'oracle', type: 'payment.updated', event_id: id, created_at: at.toISOString(), data: { note: 'original' } });
      return { headers: { ...jsonHeaders, 'x-square-hmacsha256-signature': hmac('sha256', this.secrets[0], url + body, 'base64') }, body };
    },
    async verify(req, { url }) {
      const { WebhooksHelper } = await import('square');
      return asBool(() => WebhooksHelper.verifySignature({ requestBody: req.body, signatureHeader: req.headers['x-square-hmacsha256-signature'], signatureKey: this.secrets[0], notificationUrl: url }));
    },
  },
  {
    name: 'discord',
    provider: 'discord',
    pkg: 'discord-interactions',
    signer: 'recipe',
    timestamp: true,
    // Discord documents no window and discord-interactions checks none; the source sets one.
    tolerance: '5m',
    secrets: [keys.discord.raw.toString('hex')],
    async sign({ id, at }) {
      const body = JSON.stringify({ type: 2, id, application_id: 'oracle', data: { name: 'original' } });
      const ts = String(secs(at));
      const sig = crypto.sign(null, Buffer.from(ts + body), keys.discord.privateKey).toString('hex');
      return { headers: { ...jsonHeaders, 'x-signature-ed25519': sig, 'x-signature-timestamp': ts }, body };
    },
    async verify(req) {
      const { verifyKey } = await import('discord-interactions');
      return asBool(() => verifyKey(req.body, req.headers['x-signature-ed25519'], req.headers['x-signature-timestamp'], this.secrets[0]));
    },
  },
  {
    name: 'sendgrid',
    provider: 'sendgrid',
    pkg: '@sendgrid/eventwebhook',
    signer: 'recipe',
    timestamp: true,
    tolerance: '5m',
    secrets: [keys.sendgrid.publicKey.export({ format: 'der', type: 'spki' }).toString('base64')],
    async sign({ id, at }) {
      const body = JSON.stringify([{ email: 'oracle@example.com', event: 'delivered', sg_event_id: id, timestamp: secs(at), note: 'original' }]) + '\r\n';
      const ts = String(secs(at));
      const sig = crypto.sign('sha256', Buffer.from(ts + body), keys.sendgrid.privateKey).toString('base64');
      return { headers: { ...jsonHeaders, 'x-twilio-email-event-webhook-signature': sig, 'x-twilio-email-event-webhook-timestamp': ts }, body };
    },
    async verify(req) {
      const { EventWebhook } = await import('@sendgrid/eventwebhook');
      const ew = new EventWebhook();
      const pem = `-----BEGIN PUBLIC KEY-----\n${this.secrets[0]}\n-----END PUBLIC KEY-----`;
      return asBool(() => ew.verifySignature(ew.convertPublicKeyToECDSA(pem), req.body,
        req.headers['x-twilio-email-event-webhook-signature'], req.headers['x-twilio-email-event-webhook-timestamp']));
    },
  },
  {
    name: 'telnyx',
    provider: 'telnyx',
    pkg: 'telnyx',
    signer: 'recipe',
    timestamp: true,
    secrets: [keys.telnyx.raw.toString('base64')],
    async sign({ id, at }) {
      const body = JSON.stringify({ data: { id, event_type: 'message.received', occurred_at: at.toISOString(), payload: { text: 'original' } } });
      const ts = String(secs(at));
      const sig = crypto.sign(null, Buffer.from(`${ts}|${body}`), keys.telnyx.privateKey).toString('base64');
      return { headers: { ...jsonHeaders, 'telnyx-signature-ed25519': sig, 'telnyx-timestamp': ts }, body };
    },
    async verify(req) {
      const { default: Telnyx } = await import('telnyx');
      const client = new Telnyx({ apiKey: 'KEY_oracle', publicKey: this.secrets[0] });
      return asBool(() => client.webhooks.unwrap(req.body, { headers: req.headers, key: this.secrets[0] }));
    },
  },
  {
    name: 'clerk',
    provider: 'clerk',
    pkg: '@clerk/backend',
    signer: 'recipe',
    timestamp: true,
    secrets: [whsec('clerk-oracle-signing-key-32byte')],
    async sign(ctx) {
      return stdSign(this.secrets[0], 'svix', ctx, JSON.stringify({ type: 'user.created', object: 'event', data: { id: ctx.id, first_name: 'original' } }));
    },
    async verify(req) {
      const { verifyWebhook } = await import('@clerk/backend/webhooks');
      const r = new Request('http://oracle/clerk', { method: 'POST', headers: req.headers, body: req.body });
      return asBool(() => verifyWebhook(r, { signingSecret: this.secrets[0] }));
    },
  },
  {
    name: 'resend',
    provider: 'resend',
    pkg: 'resend',
    signer: 'recipe',
    timestamp: true,
    secrets: [whsec('resend-oracle-signing-key-32byt')],
    async sign(ctx) {
      return stdSign(this.secrets[0], 'svix', ctx, JSON.stringify({ type: 'email.delivered', created_at: ctx.at.toISOString(), data: { email_id: ctx.id, subject: 'original' } }));
    },
    async verify(req) {
      const { Resend } = await import('resend');
      return asBool(() => new Resend('re_oracle').webhooks.verify({
        payload: req.body,
        headers: { id: req.headers['svix-id'], timestamp: req.headers['svix-timestamp'], signature: req.headers['svix-signature'] },
        webhookSecret: this.secrets[0],
      }));
    },
  },
  {
    name: 'openai',
    provider: 'openai',
    pkg: 'openai',
    signer: 'recipe',
    timestamp: true,
    secrets: [whsec('openai-oracle-signing-key-32byt')],
    async sign(ctx) {
      return stdSign(this.secrets[0], 'webhook', ctx, JSON.stringify({ id: ctx.id, object: 'event', type: 'response.completed', created_at: secs(ctx.at), data: { id: 'resp_original' } }));
    },
    async verify(req) {
      const { default: OpenAI } = await import('openai');
      const client = new OpenAI({ apiKey: 'sk-oracle', webhookSecret: this.secrets[0] });
      return asBool(() => client.webhooks.unwrap(req.body, req.headers));
    },
  },
  {
    name: 'replicate',
    provider: 'replicate',
    pkg: 'replicate',
    signer: 'recipe',
    timestamp: true,
    secrets: [whsec('replicate-oracle-signing-key-32')],
    async sign(ctx) {
      return stdSign(this.secrets[0], 'webhook', ctx, JSON.stringify({ id: 'pred_1', status: 'succeeded', output: 'original' }));
    },
    async verify(req) {
      const { validateWebhook } = await import('replicate');
      return asBool(() => validateWebhook({ headers: req.headers, body: req.body }, this.secrets[0]));
    },
  },
  {
    name: 'polar',
    provider: 'polar',
    pkg: '@polar-sh/sdk',
    signer: 'recipe',
    timestamp: true,
    secrets: ['polar_whs_oracle_secret'],
    async sign(ctx) {
      // Polar's key is the secret's UTF-8 bytes: base64 of them is what the standard signer decodes.
      return stdSign(Buffer.from(this.secrets[0]).toString('base64'), 'webhook', ctx,
        JSON.stringify({ type: 'order.created', timestamp: ctx.at.toISOString(), data: { id: 'ord_1', note: 'original' } }));
    },
    async verify(req) {
      const { webhooks } = await import('@polar-sh/sdk/2027-01');
      return asBool(() => webhooks.validateEvent(req.body, req.headers, this.secrets[0]));
    },
  },
  {
    name: 'gocardless',
    provider: 'gocardless',
    pkg: 'gocardless-nodejs',
    signer: 'recipe',
    secrets: ['gocardless-oracle-secret'],
    async sign({ id, at }) {
      const body = JSON.stringify({ events: [{ id, created_at: at.toISOString(), resource_type: 'payments', action: 'created', details: { cause: 'original' } }], meta: { webhook_id: 'WB1' } });
      return { headers: { ...jsonHeaders, 'webhook-signature': hmac('sha256', this.secrets[0], body, 'hex') }, body };
    },
    async verify(req) {
      const webhooks = await import('gocardless-nodejs/webhooks');
      return asBool(() => webhooks.parse(req.body, this.secrets[0], req.headers['webhook-signature']));
    },
  },
  {
    name: 'modern-treasury',
    provider: 'modern-treasury',
    pkg: 'modern-treasury',
    signer: 'sdk',
    secrets: ['modern-treasury-oracle-key'],
    async client() {
      const { default: ModernTreasury } = await import('modern-treasury');
      return new ModernTreasury({ apiKey: 'oracle', organizationID: 'oracle', webhookKey: this.secrets[0] });
    },
    async sign({ id, at }) {
      const mt = await this.client();
      const body = event(id, at, { event: 'completed' });
      return { headers: { ...jsonHeaders, 'x-topic': 'payment_order', 'x-signature': mt.webhooks.getSignature(body, { key: this.secrets[0] }) }, body };
    },
    async verify(req) {
      const mt = await this.client();
      return asBool(() => mt.webhooks.validateSignature(req.body, req.headers, { key: this.secrets[0] }));
    },
  },
  {
    name: 'pusher',
    provider: 'pusher',
    pkg: 'pusher',
    signer: 'sdk',
    secrets: ['pusher-oracle-app-secret'],
    async sign({ id, at }) {
      const { default: Pusher } = await import('pusher');
      const body = JSON.stringify({ time_ms: at.getTime() + Number(id.replace(/\D/g, '').slice(-6)), events: [{ name: 'channel_occupied', channel: 'original' }] });
      const token = new Pusher.Token('oracle-key', this.secrets[0]);
      return { headers: { ...jsonHeaders, 'x-pusher-key': 'oracle-key', 'x-pusher-signature': token.sign(body) }, body };
    },
    async verify(req) {
      const { default: Pusher } = await import('pusher');
      const p = new Pusher({ appId: '1', key: 'oracle-key', secret: this.secrets[0], cluster: 'eu' });
      return p.webhook({ headers: req.headers, rawBody: req.body }).isValid();
    },
  },
  {
    name: 'box',
    provider: 'box',
    pkg: 'box-node-sdk',
    signer: 'recipe',
    timestamp: true,
    secrets: ['box-oracle-primary-key', 'box-oracle-secondary-key'],
    async sign({ id, at }) {
      const body = JSON.stringify({ type: 'webhook_event', id, created_at: at.toISOString(), trigger: 'FILE.UPLOADED', source: { id: '1', type: 'file', name: 'original' } });
      const ts = at.toISOString().replace(/\.\d+Z$/, '+00:00');
      const sign = (key) => crypto.createHmac('sha256', key).update(body).update(ts).digest('base64');
      return {
        headers: {
          ...jsonHeaders, 'box-delivery-id': `d-${id}`, 'box-delivery-timestamp': ts, 'box-signature-version': '1', 'box-signature-algorithm': 'HmacSHA256',
          'box-signature-primary': sign(this.secrets[0]), 'box-signature-secondary': sign(this.secrets[1]),
        },
        body,
      };
    },
    async verify(req) {
      const { WebhooksManager } = await import('box-node-sdk/managers');
      return asBool(() => WebhooksManager.validateMessage(req.body, req.headers, this.secrets[0], { secondaryKey: this.secrets[1] }));
    },
    cases: [{
      // box-node-sdk also accepts a signature of the body with non-ASCII characters and "/"
      // escaped, the form Box may sign.
      title: 'signed over the escaped form (non-ASCII and "/") → SDK accepts, gateway delivers once',
      async run({ o, gw, agent, ctx }) {
        const signed = await o.sign(ctx);
        const body = signed.body.replace('"name":"original"', '"name":"résumé/📄.pdf"');
        const escaped = body.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).replace(/(?<!\\)\//g, '\\/');
        assert.notEqual(escaped, body);
        const ts = signed.headers['box-delivery-timestamp'];
        const sign = (key) => crypto.createHmac('sha256', key).update(escaped).update(ts).digest('base64');
        const req = { headers: { ...signed.headers, 'box-signature-primary': sign(o.secrets[0]), 'box-signature-secondary': sign(o.secrets[1]) }, body };
        assert.equal(await o.verify(req), true, 'box-node-sdk refuses the escaped-form signature');
        const res = await gw.send(o.name, req);
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json?.status, 'delivered', res.text);
        assert.equal(agent.forwardsOf(o.name, res.json.event_id).length, 1);
      },
    }],
  },
  {
    name: 'contentful',
    provider: 'contentful',
    pkg: '@contentful/node-apps-toolkit',
    signer: 'sdk',
    timestamp: true,
    url: true,
    secrets: ['contentful-oracle-signing-secret-0123456789abcdef0123456789abcdefghi'.slice(0, 64)],
    async sign({ id, at, url }) {
      const { signRequest } = await import('@contentful/node-apps-toolkit');
      const body = JSON.stringify({ sys: { id, version: 1, type: 'Entry' }, fields: { title: { 'en-US': 'original' } } });
      const path = new URL(url).pathname;
      const headers = { 'content-type': 'application/vnd.contentful.management.v1+json', 'x-contentful-topic': 'ContentManagement.Entry.publish' };
      const signed = signRequest(this.secrets[0], { method: 'POST', path, headers, body }, at.getTime());
      return { headers: { ...headers, ...signed }, body };
    },
    async verify(req, { url }) {
      const { verifyRequest } = await import('@contentful/node-apps-toolkit');
      return asBool(() => verifyRequest(this.secrets[0], { method: 'POST', path: new URL(url).pathname, headers: req.headers, body: req.body }));
    },
  },
  {
    name: 'webflow',
    provider: 'webflow',
    pkg: 'webflow-api',
    signer: 'recipe',
    timestamp: true,
    secrets: ['webflow-oracle-client-secret'],
    async sign({ id, at }) {
      const body = JSON.stringify({ triggerType: 'form_submission', payload: { id, name: 'original' } });
      const ts = String(at.getTime());
      return { headers: { ...jsonHeaders, 'x-webflow-timestamp': ts, 'x-webflow-signature': hmac('sha256', this.secrets[0], `${ts}:${body}`, 'hex') }, body };
    },
    async verify(req) {
      const { WebflowClient } = await import('webflow-api');
      const client = new WebflowClient({ accessToken: 'oracle' });
      return asBool(() => client.webhooks.verifySignature({ headers: req.headers, body: req.body, secret: this.secrets[0] }));
    },
  },
  {
    name: 'notion',
    provider: 'notion',
    pkg: '@notionhq/client',
    signer: 'sdk',
    secrets: ['secret_notion_oracle_verification_token'],
    async sign({ id, at }) {
      const { signWebhookPayload } = await import('@notionhq/client');
      const body = JSON.stringify({ id, timestamp: at.toISOString(), type: 'page.created', entity: { id: 'page-1', type: 'page' }, data: { note: 'original' } });
      return { headers: { ...jsonHeaders, 'x-notion-signature': await signWebhookPayload({ body, verificationToken: this.secrets[0] }) }, body };
    },
    async verify(req) {
      const { verifyWebhookSignature } = await import('@notionhq/client');
      return verifyWebhookSignature({ body: req.body, signature: req.headers['x-notion-signature'], verificationToken: this.secrets[0] });
    },
  },
  {
    name: 'plivo',
    provider: 'plivo',
    pkg: 'plivo',
    signer: 'recipe',
    url: true,
    secrets: ['plivo-oracle-auth-token'],
    async sign({ id, url }) {
      const params = { MessageUUID: id, Status: 'delivered', From: '15550001111', To: '15550002222', Text: 'original' };
      const sorted = Object.keys(params).sort().map((k) => k + params[k]).join('');
      const nonce = `n${id.replace(/\W/g, '')}`;
      const sig = hmac('sha256', this.secrets[0], `${url}?${sorted}.${nonce}`, 'base64');
      return { headers: { ...formHeaders, 'x-plivo-signature-v3': sig, 'x-plivo-signature-v3-nonce': nonce }, body: form(params) };
    },
    async verify(req, { url }) {
      const { validateV3Signature } = await import('plivo');
      const params = Object.fromEntries(new URLSearchParams(req.body));
      return asBool(() => validateV3Signature('POST', url, req.headers['x-plivo-signature-v3-nonce'], this.secrets[0], req.headers['x-plivo-signature-v3'], params));
    },
  },
  {
    name: 'hubspot',
    provider: 'hubspot',
    pkg: '@hubspot/api-client',
    signer: 'sdk',
    timestamp: true,
    url: true,
    secrets: ['hubspot-oracle-client-secret'],
    async sign({ id, at, url }) {
      const { Signature } = await import('@hubspot/api-client');
      const n = Number(id.replace(/\D/g, '').slice(-9));
      const body = JSON.stringify([{ eventId: n, subscriptionType: 'contact.creation', occurredAt: at.getTime(), propertyValue: 'original' }]);
      const sig = Signature.getSignature('POST', 'v3', { clientSecret: this.secrets[0], requestBody: body, url, timestamp: at.getTime() });
      return { headers: { ...jsonHeaders, 'x-hubspot-signature-v3': sig, 'x-hubspot-request-timestamp': String(at.getTime()) }, body };
    },
    async verify(req, { url }) {
      const { Signature } = await import('@hubspot/api-client');
      return asBool(() => Signature.isValid({
        signatureVersion: 'v3', signature: req.headers['x-hubspot-signature-v3'], clientSecret: this.secrets[0],
        requestBody: req.body, url, method: 'POST', timestamp: Number(req.headers['x-hubspot-request-timestamp']),
      }));
    },
  },
  {
    name: 'coinbase',
    provider: 'coinbase',
    pkg: 'coinbase-commerce-node',
    signer: 'sdk',
    secrets: ['coinbase-oracle-shared-secret'],
    async sign({ id, at }) {
      const { default: { Webhook } } = await import('coinbase-commerce-node');
      const body = JSON.stringify({ id: 1, scheduled_for: at.toISOString(), event: { id, type: 'charge:confirmed', created_at: at.toISOString(), data: { name: 'original' } } });
      return { headers: { ...jsonHeaders, 'x-cc-webhook-signature': Webhook.computeSignature(body, this.secrets[0]) }, body };
    },
    async verify(req) {
      const { default: { Webhook } } = await import('coinbase-commerce-node');
      return asBool(() => Webhook.verifySigHeader(req.body, req.headers['x-cc-webhook-signature'], this.secrets[0]));
    },
  },
  {
    name: 'worldline',
    provider: 'worldline',
    pkg: 'connect-sdk-nodejs',
    signer: 'recipe',
    secrets: ['worldline-oracle-secret-key'],
    async sign({ id, at }) {
      const body = JSON.stringify({ apiVersion: 'v1', id, created: at.toISOString(), merchantId: '1', type: 'payment.paid', payment: { id: 'original' } });
      return { headers: { ...jsonHeaders, 'x-gcs-keyid': 'oracle-key-id', 'x-gcs-signature': hmac('sha256', this.secrets[0], body, 'base64') }, body };
    },
    async verify(req) {
      const { webhooks } = await import('connect-sdk-nodejs');
      const store = { getSecretKey: async (id) => (id === 'oracle-key-id' ? this.secrets[0] : Promise.reject(new Error('unknown key id'))) };
      return asBool(() => webhooks.v1.init(store).unmarshal(req.body, req.headers));
    },
  },
  {
    name: 'customerio',
    provider: 'customerio',
    pkg: 'customerio-node',
    signer: 'recipe',
    timestamp: true,
    secrets: ['customerio-oracle-signing-key'],
    async sign({ id, at }) {
      const body = JSON.stringify({ event_id: id, object_type: 'email', metric: 'sent', timestamp: secs(at), data: { subject: 'original' } });
      const ts = String(secs(at));
      return { headers: { ...jsonHeaders, 'x-cio-timestamp': ts, 'x-cio-signature': hmac('sha256', this.secrets[0], `v0:${ts}:${body}`, 'hex') }, body };
    },
    async verify(req) {
      const { verifyRequestSignature } = await import('customerio-node');
      return verifyRequestSignature({ signingSecret: this.secrets[0], timestamp: req.headers['x-cio-timestamp'], signature: req.headers['x-cio-signature'], body: req.body });
    },
  },
  {
    name: 'vonage',
    provider: 'vonage',
    pkg: '@vonage/jwt',
    signer: 'recipe',
    timestamp: true,
    secrets: ['vonage-oracle-signature-secret'],
    async sign({ id, at }) {
      const body = JSON.stringify({ message_uuid: id, status: 'delivered', timestamp: at.toISOString(), to: '15550002222', text: 'original' });
      const b64u = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
      const claims = { iat: secs(at), jti: crypto.randomUUID(), iss: 'Vonage', api_key: 'oracle', payload_hash: crypto.createHash('sha256').update(body).digest('hex') };
      const unsigned = `${b64u({ alg: 'HS256', typ: 'JWT' })}.${b64u(claims)}`;
      return { headers: { ...jsonHeaders, authorization: `Bearer ${unsigned}.${hmac('sha256', this.secrets[0], unsigned, 'base64url')}` }, body };
    },
    // The SDK checks the JWT's signature; the body is bound by payload_hash, which Vonage's docs
    // tell receivers to compare with the body's SHA-256, as done here.
    async verify(req) {
      const { verifySignature } = await import('@vonage/jwt');
      const token = req.headers.authorization.replace(/^Bearer /, '');
      const claims = JSON.parse(Buffer.from(token.split('.')[1], 'base64url'));
      return verifySignature(token, this.secrets[0]) && claims.payload_hash === crypto.createHash('sha256').update(req.body).digest('hex');
    },
  },
];

// twilio builds the Twilio oracles: twilio-node signs and validates with the algorithm named by
// X-Twilio-Webhooks-Signature-Settings (HMAC_SHA1, the Auth Token signature, when it is absent).
function twilio(name, algorithm, secret) {
  const settings = algorithm === 'HMAC_SHA1' ? {} : { 'x-twilio-webhooks-signature-settings': `key=webhooks_sharedkey_oracle,algorithm=${algorithm}` };
  return {
    name,
    provider: 'twilio',
    pkg: 'twilio',
    signer: 'sdk',
    url: true,
    algorithm,
    secrets: [secret],
    async sign({ id, url }) {
      const { default: tw } = await import('twilio');
      const params = { MessageSid: id, MessageStatus: 'delivered', AccountSid: 'AC1', From: '+15550001111', To: '+15550002222', Body: 'original' };
      const sig = tw.getExpectedTwilioSignature(secret, url, params, algorithm);
      return { headers: { ...formHeaders, ...settings, 'x-twilio-signature': sig, 'i-twilio-idempotency-token': `tok-${id}` }, body: form(params) };
    },
    async verify(req, { url }) {
      const { default: tw } = await import('twilio');
      const alg = tw.getSignatureAlgorithm?.(req.headers['x-twilio-webhooks-signature-settings']) ?? 'HMAC_SHA1';
      const params = Object.fromEntries(new URLSearchParams(req.body));
      return asBool(() => tw.validateRequest(secret, req.headers['x-twilio-signature'], url, params, alg));
    },
    cases: algorithm === 'HMAC_SHA1' ? [] : [
      {
        // twilio-node refuses an algorithm it does not know; the gateway says which reason.
        title: 'unsupported algorithm (HMAC_SHA512) → SDK refuses, gateway 401 unsupported_algorithm in the answer and the log',
        async run({ o, gw, agent, ctx, lastReason }) {
          const req = await o.sign(ctx);
          req.headers['x-twilio-webhooks-signature-settings'] = 'key=webhooks_sharedkey_oracle,algorithm=HMAC_SHA512';
          assert.equal(await o.verify(req, ctx), false, 'twilio-node accepts HMAC_SHA512');
          const before = agent.forwardsOf(o.name).length;
          const res = await gw.send(o.name, req);
          assert.equal(res.status, 401, res.text);
          assert.equal(res.json?.reason, 'unsupported_algorithm', res.text);
          assert.equal(lastReason(), 'signature_unsupported_algorithm');
          assert.equal(agent.forwardsOf(o.name).length, before);
        },
      },
      {
        // A JSON body is not parameters: its SHA-256 rides in the signed URL as bodySHA256.
        title: 'JSON body (bodySHA256 in the URL) → SDK accepts, gateway delivers once',
        async run({ o, gw, agent, ctx }) {
          const { default: tw } = await import('twilio');
          const body = JSON.stringify({ MessageSid: ctx.id, MessageStatus: 'delivered', note: 'original' });
          const query = `?bodySHA256=${tw.getExpectedBodyHash(body)}`;
          const url = ctx.url + query;
          const req = {
            query,
            headers: { ...jsonHeaders, ...settings, 'i-twilio-idempotency-token': `tok-${ctx.id}`, 'x-twilio-signature': tw.getExpectedTwilioSignature(secret, url, {}, algorithm) },
            body,
          };
          assert.equal(tw.validateRequestWithBody(secret, req.headers['x-twilio-signature'], url, body, algorithm), true, 'twilio-node refuses the JSON request');
          const res = await gw.send(o.name, req);
          assert.equal(res.status, 200, res.text);
          assert.equal(res.json?.status, 'delivered', res.text);
          assert.equal(agent.forwardsOf(o.name, res.json.event_id).length, 1);
          const bad = { ...req, body: body.replace('original', 'originaL') };
          assert.equal(tw.validateRequestWithBody(secret, req.headers['x-twilio-signature'], url, bad.body, algorithm), false);
          assert.equal((await gw.send(o.name, bad)).status, 401);
        },
      },
    ],
  };
}

// shopify builds the Shopify oracles: @shopify/shopify-api validates "webhooks" (X-Shopify-*
// headers) and "events" (Shopify-* headers, no event id header); both are the base64 HMAC of
// the body with the app's secret.
function shopify(name, prefix) {
  const secret = 'shpss_oracle_app_secret';
  const api = async () => {
    await import('@shopify/shopify-api/adapters/node');
    const { shopifyApi, ApiVersion, LogSeverity } = await import('@shopify/shopify-api');
    return shopifyApi({
      apiKey: 'oracle', apiSecretKey: secret, scopes: [], hostName: 'localhost', isEmbeddedApp: false,
      apiVersion: Object.values(ApiVersion).at(-1), logger: { level: LogSeverity.Error, log: async () => {} },
    });
  };
  return {
    name,
    provider: 'shopify',
    pkg: '@shopify/shopify-api',
    signer: 'recipe',
    secrets: [secret],
    async sign({ id, at }) {
      const body = JSON.stringify({ id: Number(id.replace(/\D/g, '').slice(-12)), email: 'jon@example.com', note: 'original' });
      const headers = {
        ...jsonHeaders, [`${prefix}hmac-sha256`]: hmac('sha256', secret, body, 'base64'), [`${prefix}topic`]: 'orders/create',
        [`${prefix}shop-domain`]: 'oracle.myshopify.com', [`${prefix}api-version`]: '2026-01', [`${prefix}webhook-id`]: `w-${id}`,
        [`${prefix}triggered-at`]: at.toISOString(),
      };
      if (prefix === 'x-shopify-') headers['x-shopify-event-id'] = id;
      else Object.assign(headers, { 'shopify-handle': 'orders', 'shopify-action': 'create' });
      return { headers, body };
    },
    async verify(req) {
      const shopify = await api();
      const res = await shopify.webhooks.validate({ rawBody: req.body, rawRequest: { headers: req.headers, method: 'POST', url: `/hooks/${name}` }, rawResponse: {} });
      return res.valid === true;
    },
  };
}
