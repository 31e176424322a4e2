// The example agent (examples/agent.ts) against the quickstart: the same
// configs/quickstart.yaml the README runs, on free ports, with the real
// `gateway send`. The customer's message is answered once; its duplicate
// never reaches the agent.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { freePort, gatewayBinary, repoRoot, startGateway } from './gateway.js';

const run = promisify(execFile);

/** configs/quickstart.yaml with its addresses and paths moved; each replacement must apply. */
export function quickstartOn(gwPort: number, adminPort: number, agentPort: number): { config: string; secret: string } {
  let cfg = readFileSync(join(repoRoot, 'configs', 'quickstart.yaml'), 'utf8');
  const swaps: [string | RegExp, string][] = [
    [/^listen: 127\.0\.0\.1:8080/m, `listen: 127.0.0.1:${gwPort}`],
    ['admin: {listen: 127.0.0.1:8081}', `admin: {listen: 127.0.0.1:${adminPort}}`],
    ['path: data/ledger.db', 'path: "{dir}/ledger.db"'],
    ['format: console', 'format: json'],
    ['url: http://127.0.0.1:9000/events', `url: http://127.0.0.1:${agentPort}/events`],
  ];
  for (const [from, to] of swaps) {
    const next = cfg.replace(from, to);
    assert.notEqual(next, cfg, `configs/quickstart.yaml no longer has ${from}`);
    cfg = next;
  }
  const secret = /signing_secret: (whsec_\S+)/.exec(cfg)?.[1];
  assert.ok(secret, 'configs/quickstart.yaml names no forward.signing_secret');
  return { config: cfg, secret };
}

test('the TypeScript example agent answers the quickstart\'s gateway send once, and its duplicate not at all', async () => {
  const [gwPort, adminPort, agentPort] = [await freePort(), await freePort(), await freePort()];
  const { config, secret } = quickstartOn(gwPort, adminPort, agentPort);
  const agentJs = fileURLToPath(new URL('../examples/agent.js', import.meta.url));
  const agent = spawn(process.execPath, [agentJs, '--listen', `127.0.0.1:${agentPort}`, '--ledger', `http://127.0.0.1:${adminPort}`, '--signing-secret', secret], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: Record<string, unknown>[] = [];
  const exited = new Promise<void>((resolve) => agent.stdout!.once('end', resolve));
  const listening = new Promise<void>((resolve, reject) => {
    let buf = '';
    agent.stdout!.setEncoding('utf8').on('data', (c: string) => {
      buf += c;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const rec = JSON.parse(buf.slice(0, i)) as Record<string, unknown>;
        buf = buf.slice(i + 1);
        lines.push(rec);
        if (rec.msg === 'agent listening') resolve();
      }
    });
    agent.once('exit', (code) => reject(new Error(`the agent exited ${code}`)));
  });
  await listening;
  const gw = await startGateway(config);
  try {
    const send = (id: string, text: string) =>
      run(gatewayBinary(), ['send', '--config', join(gw.dir, 'gateway.yaml'), '--source', 'demo', '--conversation', 'c1', '--message', text, '--event-id', id]);
    const first = await send('evt_1', 'Where is my order?');
    assert.match(first.stdout, /"status":"delivered"/);
    const dup = await send('evt_1', 'Where is my order?');
    assert.match(dup.stdout, /"status":"duplicate"/);
    const second = await send('evt_2', 'It was due yesterday.');
    assert.match(second.stdout, /"status":"delivered"/);
    // Stop the agent and read its output to the end before counting.
    agent.kill('SIGTERM');
    await exited;
    const replies = lines.filter((l) => l.msg === 'demo chat: reply received').map((l) => l.answers);
    assert.deepEqual(replies, [['evt_1'], ['evt_2']], 'one reply per customer message');
    assert.equal(lines.filter((l) => l.msg === 'event handled').length, 2, 'the duplicate never reached the agent');
  } finally {
    await gw.stop();
    agent.kill('SIGTERM');
  }
});
