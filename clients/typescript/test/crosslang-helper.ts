// One ledger action by the TypeScript client, for the cross-language test
// (clients/crosslang): node crosslang-helper.js ACTION JSON prints a JSON
// answer. The Python side drives it, so a TypeScript run and a Python run
// meet on one scope of one gateway.

import { LedgerClient, entryId } from '../src/index.js';

interface Args {
  admin: string;
  scope: string;
  run_id?: string;
  token?: number;
  mode?: 'supersede' | 'exclusive' | 'independent';
  context_at?: string;
  intent?: string;
  payload?: unknown;
  summary?: string;
  conflict?: 'any' | 'same-intent' | 'none';
}

async function main(): Promise<unknown> {
  const [action, raw] = process.argv.slice(2);
  const a = JSON.parse(raw ?? '{}') as Args;
  const client = new LedgerClient({ baseUrl: a.admin });
  switch (action) {
    case 'begin': {
      const run = await client.begin(a.scope, { runId: a.run_id, mode: a.mode, contextAt: a.context_at });
      return { run_id: run.id, token: run.token, delivery: run.delivery, can_write: run.canWrite };
    }
    case 'once': {
      let ran = false;
      const run = client.runRef(a.scope, a.run_id!, a.token!);
      const r = await run.once(a.intent!, a.payload, () => {
        ran = true;
        return { by: 'typescript' };
      }, { summary: a.summary, conflict: a.conflict });
      return { status: r.status, reason: r.reason, ran, entry_id: r.entry?.id, conflicts: (r.conflicts ?? []).map((c) => ({ id: c.id, summary: c.summary, state: c.state })) };
    }
    case 'entry_id':
      return { entry_id: entryId(a.scope, a.intent!, a.payload) };
  }
  throw new Error(`unknown action ${action}`);
}

main().then(
  (out) => process.stdout.write(JSON.stringify(out) + '\n'),
  (err) => {
    process.stderr.write(`crosslang-helper: ${err instanceof Error ? err.stack : err}\n`);
    process.exit(1);
  },
);
