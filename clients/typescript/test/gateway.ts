// Starts the real gateway binary for the tests: REPLYONCE_GATEWAY_BIN, or
// one built from this repository with `go build` when that is unset (never
// in CI, where .ci/run builds it once for every suite).

import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));

let built: string | undefined;

export function gatewayBinary(): string {
  const env = process.env.REPLYONCE_GATEWAY_BIN;
  if (env) {
    if (!existsSync(env)) throw new Error(`REPLYONCE_GATEWAY_BIN=${env} does not exist`);
    return env;
  }
  if (process.env.CI) throw new Error('REPLYONCE_GATEWAY_BIN is not set: CI must build the gateway for the client suites');
  if (!built) {
    built = join(mkdtempSync(join(tmpdir(), 'gw-bin-')), 'gateway');
    execFileSync('go', ['build', '-o', built, './cmd/gateway'], { cwd: repoRoot, stdio: 'inherit' });
  }
  return built;
}

export interface Gateway {
  publicUrl: string;
  adminUrl: string;
  dir: string;
  logs: string[];
  stop(): Promise<void>;
}

/** A loopback port that was free a moment ago, for a process that must be told its address up front. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * startGateway writes config (YAML; "{dir}" is replaced by a fresh
 * directory) and runs `gateway serve` on it until stop. The config should
 * listen on 127.0.0.1:0 with JSON logs: the addresses are read from the
 * "gateway listening" line.
 */
export function startGateway(config: string): Promise<Gateway> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-'));
  const path = join(dir, 'gateway.yaml');
  writeFileSync(path, config.replaceAll('{dir}', dir));
  const child: ChildProcess = spawn(gatewayBinary(), ['serve', '--config', path], { stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: string[] = [];
  return new Promise((resolve, reject) => {
    let done = false;
    const onLine = (line: string) => {
      logs.push(line);
      if (done) return;
      try {
        const rec = JSON.parse(line) as { msg?: string; listen?: string; admin?: string };
        if (rec.msg === 'gateway listening') {
          done = true;
          resolve({
            publicUrl: `http://${rec.listen}`,
            adminUrl: `http://${rec.admin}`,
            dir,
            logs,
            stop: () =>
              new Promise<void>((res) => {
                if (child.exitCode !== null) {
                  rmSync(dir, { recursive: true, force: true });
                  res();
                  return;
                }
                child.once('exit', () => {
                  rmSync(dir, { recursive: true, force: true });
                  res();
                });
                child.kill('SIGTERM');
              }),
          });
        }
      } catch {
        // not a JSON line
      }
    };
    for (const stream of [child.stdout!, child.stderr!]) {
      let buf = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        buf += chunk;
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          onLine(buf.slice(0, i));
          buf = buf.slice(i + 1);
        }
      });
    }
    child.once('exit', (code) => {
      if (!done) {
        done = true;
        reject(new Error(`gateway serve exited ${code} before listening:\n${logs.join('\n')}`));
      }
    });
  });
}

/** A gateway whose ledger API is what the test uses (its one source forwards nowhere it will reach). */
export function ledgerConfig(token = ''): string {
  return `listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0${token ? `, token: ${token}` : ''}}
store: {kind: bolt, path: "{dir}/ledger.db"}
log: {level: info, format: json}
sources:
  unused:
    provider: standard-webhooks
    secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]
    forward: {url: "http://127.0.0.1:9/unused", mode: inline}
`;
}
