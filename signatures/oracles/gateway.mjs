// The real gateway and a recording agent for the oracle suite: one `gateway serve` process with
// one inline source per oracle, forwarding to an HTTP agent that checks every forward with the
// official Standard Webhooks and Svix verifiers.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';

// A free loopback port chosen by the kernel, for the gateway's listener.
export async function freePort() {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address();
  srv.close();
  await once(srv, 'close');
  return port;
}

// startAgent records every forward by source and event id; a forward that either official
// verifier refuses is recorded as a failure rather than answered with an error, so the test
// that sent it reports which verifier refused and why.
export async function startAgent(forwardSecret) {
  const standard = new StandardWebhook(forwardSecret);
  const svix = new SvixWebhook(forwardSecret);
  const forwards = [];
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const f = {
        source: req.headers['replyonce-source'],
        eventId: req.headers['replyonce-event-id'],
        body,
        headers: req.headers,
        verified: [],
        refused: [],
      };
      // svix's verify parses the body as JSON once the signature matched, and a form body
      // (Twilio, Braintree, Plivo) is not JSON: that SyntaxError comes after the signature was
      // accepted, so it is not a refusal.
      const checks = [
        ['standardwebhooks', () => standard.verify(body, req.headers, { jsonParse: false })],
        ['svix', () => svix.verify(body, req.headers)],
      ];
      for (const [name, verify] of checks) {
        try {
          verify();
          f.verified.push(name);
        } catch (err) {
          if (name === 'svix' && err instanceof SyntaxError) f.verified.push(name);
          else f.refused.push(`${name}: ${err.message}`);
        }
      }
      forwards.push(f);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
  });
  // Node closes an idle keep-alive connection after 5 s by default, and the gateway may reuse
  // it in that instant ("connection reset by peer", a 503 that no provider caused) when an SDK
  // takes that long to load: idle connections stay open for the whole run instead.
  srv.keepAliveTimeout = 10 * 60 * 1000;
  srv.headersTimeout = srv.keepAliveTimeout + 1000;
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  return {
    url: `http://127.0.0.1:${srv.address().port}/events`,
    forwardsOf: (source, eventId) => forwards.filter((f) => f.source === source && (eventId === undefined || f.eventId === eventId)),
    close: () => new Promise((resolve) => srv.close(resolve)),
  };
}

const yamlString = (s) => JSON.stringify(s); // a JSON string is a YAML double-quoted scalar

// startGateway runs `gateway serve` with one source per entry of sources ({name, provider,
// secrets, url, tolerance, eventID}). Secrets reach the config through the environment, as operators
// pass them, so no secret needs YAML quoting.
export async function startGateway({ bin, sources, agentURL, forwardSecret }) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = { ...process.env, ORACLE_FORWARD_SECRET: forwardSecret };
  let yaml = `listen: 127.0.0.1:${port}\nadmin: {listen: 127.0.0.1:0}\nstore: {kind: memory}\nlog: {level: info, format: json}\nsources:\n`;
  sources.forEach((s, i) => {
    const vars = s.secrets.map((secret, j) => {
      const v = `ORACLE_SECRET_${i}_${j}`;
      env[v] = secret;
      return '${' + v + '}';
    });
    yaml += `  ${s.name}:\n    provider: ${s.provider}\n    secrets: [${vars.join(', ')}]\n`;
    if (s.url) yaml += `    url: ${yamlString(base + s.url)}\n`;
    if (s.tolerance) yaml += `    tolerance: ${s.tolerance}\n`;
    if (s.eventID) yaml += `    event_id: ${yamlString(s.eventID)}\n`;
    yaml += `    forward: {mode: inline, url: ${yamlString(agentURL)}, signing_secret: \${ORACLE_FORWARD_SECRET}}\n`;
  });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'replyonce-oracles-'));
  const config = path.join(dir, 'gateway.yaml');
  writeFileSync(config, yaml, { mode: 0o600 });

  const proc = spawn(bin, ['serve', '--config', config], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = [];
  const partial = { stdout: '', stderr: '' };
  const keep = (stream) => (chunk) => {
    const lines = (partial[stream] + chunk.toString()).split('\n');
    partial[stream] = lines.pop();
    for (const line of lines) if (line) log.push(line);
  };
  proc.stdout.on('data', keep('stdout'));
  proc.stderr.on('data', keep('stderr'));
  let exited = null;
  proc.on('exit', (code, signal) => {
    exited = { code, signal };
  });

  for (let i = 0; ; i++) {
    if (exited) throw new Error(`gateway serve exited (${JSON.stringify(exited)}) before listening:\n${log.join('\n')}`);
    try {
      await fetch(`${base}/hooks/`, { signal: AbortSignal.timeout(1000) });
      break;
    } catch {
      if (i >= 300) throw new Error(`gateway serve did not listen on ${base} within 30 s:\n${log.join('\n')}`);
      await sleep(100);
    }
  }

  return {
    base,
    log,
    // The structured log lines about one source's requests, newest last.
    logOf: (source) => log.flatMap((l) => {
      try {
        const o = JSON.parse(l);
        return o.source === source ? [o] : [];
      } catch {
        return [];
      }
    }),
    // send posts req to the source and waits for the gateway's log line about it, so that
    // logOf sees it (the line is written as the answer is sent).
    async send(source, req) {
      const seen = this.logOf(source).length;
      const res = await fetch(`${base}/hooks/${source}${req.query ?? ''}`, {
        method: req.method ?? 'POST',
        headers: req.headers,
        body: req.body,
        signal: AbortSignal.timeout(10000),
      });
      const text = await res.text();
      let json = null;
      try {
        json = JSON.parse(text);
      } catch {
        // not JSON: handshakes and some errors answer in text
      }
      for (let i = 0; this.logOf(source).length === seen; i++) {
        if (i >= 100) throw new Error(`no log line about ${source} within 5 s of its answer ${res.status}`);
        await sleep(50);
      }
      return { status: res.status, text, json };
    },
    async stop() {
      if (exited) return;
      proc.kill('SIGTERM');
      await once(proc, 'exit');
    },
  };
}
