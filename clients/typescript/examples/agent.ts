// The example agent in TypeScript: the same agent as examples/agent in Go.
// It takes the gateway's forwarded chat events and answers every customer
// message exactly once, however often an event is delivered and whatever
// else the customer writes meanwhile.
//
//   npm --prefix clients/typescript run agent -- --signing-secret whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD
//
// Flags: --listen (127.0.0.1:9000), --ledger (http://127.0.0.1:8081),
// --token ($GATEWAY_ADMIN_TOKEN), --signing-secret ($FORWARD_SIGNING_SECRET),
// --chat (a chat API, or "builtin": a demo chat in this process that learns
// each customer message from the signed event, for local trials), --budget
// (seconds per event, 5; keep it below the gateway's forward timeout).

import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import { LedgerClient, LedgerError, NotApplied, nodeForwardHandler, verifyWebhook, type Delivery, type ForwardAnswer } from '../src/index.js';

interface Message {
  id: string;
  from: 'customer' | 'agent';
  text: string;
  answers?: string[];
}

/** The chat provider the agent reads and writes. */
interface Chat {
  conversation(id: string): Promise<Message[]>;
  /** Posts a reply; throws NotApplied when the provider certainly did not post it. */
  reply(conversation: string, answers: string[], text: string, idempotencyKey: string): Promise<string>;
}

function log(msg: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(JSON.stringify({ ts: new Date().toISOString(), msg, ...fields }) + '\n');
}

/** The built-in demo chat: in memory, for local trials only. */
class DemoChat implements Chat {
  #convs = new Map<string, Message[]>();
  #seq = 0;
  customerSaid(conversation: string, id: string, text: string): boolean {
    const msgs = this.#convs.get(conversation) ?? [];
    this.#convs.set(conversation, msgs);
    if (msgs.some((m) => m.id === id)) return false;
    msgs.push({ id, from: 'customer', text });
    return true;
  }
  async conversation(id: string): Promise<Message[]> {
    return [...(this.#convs.get(id) ?? [])];
  }
  async reply(conversation: string, answers: string[], text: string): Promise<string> {
    const id = `r${++this.#seq}`;
    const msgs = this.#convs.get(conversation) ?? [];
    this.#convs.set(conversation, msgs);
    msgs.push({ id, from: 'agent', text, answers });
    log('demo chat: reply received', { conversation, answers, text });
    return id;
  }
}

/** A chat over the fake provider's HTTP API (examples/agent/fakechat). */
class HTTPChat implements Chat {
  constructor(readonly base: string) {}
  async conversation(id: string): Promise<Message[]> {
    const r = await fetch(`${this.base}/conversations/${encodeURIComponent(id)}`, { signal: AbortSignal.timeout(5000) });
    if (r.status !== 200) throw new Error(`chat: read conversation: status ${r.status}`);
    return ((await r.json()) as { messages: Message[] }).messages ?? [];
  }
  async reply(conversation: string, answers: string[], text: string, idempotencyKey: string): Promise<string> {
    const r = await fetch(`${this.base}/conversations/${encodeURIComponent(conversation)}/replies`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': idempotencyKey },
      body: JSON.stringify({ answers, text }),
      signal: AbortSignal.timeout(5000),
    });
    if (r.status >= 400 && r.status < 500) throw new NotApplied(`chat: post reply: status ${r.status}`);
    if (r.status >= 300) throw new Error(`chat: post reply: status ${r.status}`);
    return ((await r.json()) as Message).id;
  }
}

/** The customer messages no agent reply answers yet, in order. */
function unanswered(msgs: Message[]): string[] {
  const answered = new Set(msgs.flatMap((m) => m.answers ?? []));
  return msgs.filter((m) => m.from === 'customer' && !answered.has(m.id)).map((m) => m.id);
}

/** The reply; a real agent would ask a model. */
function compose(msgs: Message[], answers: string[]): string {
  const quoted = msgs.filter((m) => answers.includes(m.id)).map((m) => JSON.stringify(m.text));
  return `Thanks, we got ${quoted.join(' and ')}; a person will follow up.`;
}

const maxRounds = 5;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * handle does the work for one delivery, as the Go agent's Handle does:
 * take a handle on the run the gateway began (never begin it again: that
 * would fence the gateway's own delivery), read the conversation, and send
 * one reply for the unanswered messages through the ledger.
 */
async function handle(ledger: LedgerClient, chat: Chat, d: Delivery, conversationId: string, budgetMs: number): Promise<ForwardAnswer> {
  const until = Date.now() + budgetMs;
  const run = ledger.runRef(d.scope, d.runId, d.fencingToken);
  try {
    if (!(await run.heartbeat())) return { status: 200, body: { outcome: 'run no longer writable (superseded, ended or cancelled): nothing for this delivery to do' } };
  } catch (err) {
    if (err instanceof LedgerError && err.code === 'unknown_run') return { status: 400, body: { outcome: 'unknown run: not begun by the gateway' } };
    return { status: 503, body: { outcome: `ledger: ${(err as Error).message}` } };
  }
  for (let round = 0; round < maxRounds; round++) {
    const msgs = await chat.conversation(conversationId);
    const answers = unanswered(msgs);
    if (answers.length === 0) return { status: 200, body: { outcome: 'nothing to answer' } };
    const text = compose(msgs, answers);
    const res = await run.once('reply', { answers }, async (ctx) => ({ message_id: await chat.reply(conversationId, answers, text, ctx.idempotencyKey) }), {
      summary: text,
      // Replies conflict with replies: the gateway's own deliver records
      // on the scope are not conversation content.
      conflict: 'same-intent',
      waitMs: Math.max(0, until - Date.now() - 100),
    });
    if (res.ok) {
      await run.end('answered').catch((err) => log('could not end the run', { error: String(err) }));
      const covers = d.covers > 1 ? ` (one delivery for a burst of ${d.covers} events)` : '';
      return { status: 200, body: { outcome: `${res.status} reply to ${answers.join(',')}${covers}` } };
    }
    if (res.status === 'refused' && res.reason === 'conversation_changed') {
      // Another run's reply is pending or landed since this run's context:
      // let pending ones finish, then read again and decide again.
      const pending = new Set((res.conflicts ?? []).filter((e) => e.state === 'pending').map((e) => e.id));
      while (pending.size > 0) {
        if (Date.now() > until) return { status: 503, body: { outcome: "another run's reply is still pending" } };
        await sleep(50);
        const hist = await ledger.history(d.scope);
        for (const id of [...pending]) if (!hist.some((e) => e.id === id && e.state === 'pending')) pending.delete(id);
      }
      continue;
    }
    if (res.status === 'refused' && ['superseded', 'run_ended', 'run_cancelled'].includes(res.reason ?? '')) {
      return { status: 200, body: { outcome: `refused ${res.reason}: not this delivery's to answer` } };
    }
    if (res.status === 'ambiguous') return { status: 200, body: { outcome: 'reply outcome unknown; left for an operator' } };
    if (res.status === 'refused' && res.reason === 'exhausted') return { status: 200, body: { outcome: 'reply failed too often; giving up' } };
    // in_flight past the wait, or failed (known not sent): deliver again later.
    return { status: 503, body: { outcome: `reply ${res.status}` } };
  }
  return { status: 503, body: { outcome: 'the conversation kept changing; try again later' } };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      listen: { type: 'string', default: '127.0.0.1:9000' },
      ledger: { type: 'string', default: 'http://127.0.0.1:8081' },
      token: { type: 'string', default: process.env.GATEWAY_ADMIN_TOKEN ?? '' },
      'signing-secret': { type: 'string', default: process.env.FORWARD_SIGNING_SECRET ?? '' },
      chat: { type: 'string', default: 'builtin' },
      budget: { type: 'string', default: '5' },
    },
  });
  const secret = values['signing-secret'] as string;
  if (!secret) throw new Error("a signing secret is required (--signing-secret: the gateway's forward.signing_secret)");
  const ledger = new LedgerClient({ baseUrl: values.ledger as string, token: values.token as string, timeoutMs: 10_000 });
  const demo = values.chat === 'builtin' ? new DemoChat() : undefined;
  const chat: Chat = demo ?? new HTTPChat(values.chat as string);
  const budgetMs = Number(values.budget) * 1000;
  const agent = nodeForwardHandler(
    {
      secret,
      onRefused: (status, reason) => log('forwarded event refused', { status, reason }),
      // forward.cancel: notify. The ledger refuses the superseded run's
      // reply anyway; a busier agent would stop its model call here.
      onCancel: (d) => {
        log('cancellation notice', { scope: d.scope, run_id: d.runId });
        return { status: 204 };
      },
    },
    async (d, body) => {
      let event: { conversation_id?: string; message_id?: string; text?: string };
      try {
        event = JSON.parse(body.toString('utf8'));
      } catch {
        event = {};
      }
      if (!event.conversation_id) return { status: 400, body: { outcome: 'body is not a chat event with a conversation_id' } };
      const out = await handle(ledger, chat, d, event.conversation_id, budgetMs);
      log('event handled', { scope: d.scope, run_id: d.runId, delivery: d.delivery, covers: d.covers, status: out.status, ...(out.body as object) });
      return out;
    },
  );
  const server = createServer((req, res) => {
    if (demo && req.method === 'POST') {
      // The demo chat learns the customer message from the signed event,
      // as a real chat platform would already hold it.
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        try {
          verifyWebhook(secret, req.headers, body);
          const ev = JSON.parse(body.toString('utf8')) as { conversation_id?: string; message_id?: string; text?: string };
          if (ev.conversation_id && ev.message_id && demo.customerSaid(ev.conversation_id, ev.message_id, ev.text ?? '')) {
            log('demo chat: customer message recorded from the event', { conversation: ev.conversation_id, message_id: ev.message_id, text: ev.text });
          }
        } catch {
          // unsigned, forged or not a chat event: the agent answers it itself
        }
        (req as typeof req & { rawBody?: Buffer }).rawBody = body;
        void agent(req, res);
      });
      return;
    }
    void agent(req, res);
  });
  const [host, port] = [(values.listen as string).replace(/:\d+$/, ''), Number((values.listen as string).split(':').pop())];
  server.listen(port, host, () => {
    const a = server.address() as { address: string; port: number };
    log('agent listening', { listen: `${a.address}:${a.port}`, ledger: values.ledger, chat: demo ? 'builtin' : values.chat });
  });
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((err) => {
  process.stderr.write(`agent: ${err instanceof Error ? err.message : err}\n`);
  process.exit(1);
});
