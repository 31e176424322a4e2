// The gateway's forwards: verifying their Standard Webhooks signature and
// reading the delivery from their Replyonce-* headers.

import { createHmac, timingSafeEqual } from 'node:crypto';

/** Headers as Node's http gives them (lower-case names), as a fetch Headers, or as a Map. */
export type HeaderSource =
  | { get(name: string): string | null | undefined }
  | Record<string, string | string[] | undefined>;

/** Reads one header case-insensitively; the first value of a repeated one. */
export function header(h: HeaderSource, name: string): string | undefined {
  if (typeof (h as { get?: unknown }).get === 'function') {
    const v = (h as { get(n: string): string | null | undefined }).get(name) ?? (h as { get(n: string): string | null | undefined }).get(name.toLowerCase());
    return v ?? undefined;
  }
  const rec = h as Record<string, string | string[] | undefined>;
  const want = name.toLowerCase();
  for (const k of Object.keys(rec)) {
    if (k.toLowerCase() === want) {
      const v = rec[k];
      return Array.isArray(v) ? v[0] : v;
    }
  }
  return undefined;
}

/** Why a forward was refused. `reason` is for logs, never for the sender. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
}

export interface VerifyOptions {
  /** How far webhook-timestamp may be from now, either way (default 300 s). */
  toleranceSeconds?: number;
  /** The clock, in milliseconds (default Date.now). */
  now?: () => number;
}

function secretKey(secret: string): Buffer {
  const b64 = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
  const key = Buffer.from(b64, 'base64');
  if (key.length === 0) throw new TypeError('the signing secret is empty or not base64 (want "whsec_...")');
  return key;
}

/**
 * verifyWebhook checks a forward's Standard Webhooks signature
 * (webhook-id, webhook-timestamp, webhook-signature: HMAC-SHA256 over
 * "id.timestamp.body" with the gateway's forward.signing_secret) on the raw
 * body bytes, and that the timestamp is within the tolerance of this
 * process's clock. It throws WebhookVerificationError when it is not.
 */
export function verifyWebhook(secret: string, headers: HeaderSource, body: string | Uint8Array, options: VerifyOptions = {}): void {
  const id = header(headers, 'webhook-id');
  const ts = header(headers, 'webhook-timestamp');
  const sigs = header(headers, 'webhook-signature');
  if (!id || !ts || !sigs) {
    throw new WebhookVerificationError('missing webhook-id, webhook-timestamp or webhook-signature');
  }
  if (!/^\d{1,12}$/.test(ts)) {
    throw new WebhookVerificationError('webhook-timestamp is not a Unix time in seconds');
  }
  const now = (options.now ?? Date.now)();
  const tolerance = (options.toleranceSeconds ?? 300) * 1000;
  const age = now - Number(ts) * 1000;
  if (age > tolerance || age < -tolerance) {
    throw new WebhookVerificationError(`webhook-timestamp is ${Math.round(age / 1000)} s away from now`);
  }
  const mac = createHmac('sha256', secretKey(secret));
  mac.update(`${id}.${ts}.`);
  mac.update(typeof body === 'string' ? Buffer.from(body, 'utf8') : body);
  const want = mac.digest();
  for (const part of sigs.split(' ')) {
    const [version, sig] = part.split(',', 2);
    if (version !== 'v1' || !sig) continue;
    const got = Buffer.from(sig, 'base64');
    if (got.length === want.length && timingSafeEqual(got, want)) return;
  }
  throw new WebhookVerificationError('no webhook-signature matches');
}

/** signWebhook makes the three Standard Webhooks headers, as the gateway does (for tests and tools). */
export function signWebhook(secret: string, id: string, timestampSeconds: number, body: string | Uint8Array): Record<string, string> {
  const mac = createHmac('sha256', secretKey(secret));
  mac.update(`${id}.${timestampSeconds}.`);
  mac.update(typeof body === 'string' ? Buffer.from(body, 'utf8') : body);
  return { 'webhook-id': id, 'webhook-timestamp': String(timestampSeconds), 'webhook-signature': `v1,${mac.digest('base64')}` };
}

/** One forwarded event, as the gateway's headers describe it. */
export interface Delivery {
  source: string;
  eventId: string;
  /** The scope the run is fenced on. */
  scope: string;
  /** {source}:{eventId}, the same on every redelivery. */
  runId: string;
  /** 1, 2, ...: which delivery of the run this is; a later one takes the run over. */
  delivery: number;
  /** The delivery's token: writes carrying an older one are refused. */
  fencingToken: number;
  /** When this view of the world was captured. */
  contextAt?: Date;
  /** Stable for the event across deliveries and gateway instances. */
  idempotencyKey?: string;
  /** How many events this delivery stands for (a debounced burst), 1 otherwise. */
  covers: number;
  /** The covered event ids, oldest first (the gateway lists at most the newest 100). */
  coveredIds: string[];
  /** 'cancel' for a notice that a newer message superseded the run; undefined for an event. */
  notice?: string;
}

/** Thrown by parseDelivery when a request is not a gateway forward. */
export class DeliveryError extends Error {
  override readonly name = 'DeliveryError';
}

/** parseCovers reads Replyonce-Covers: "N" or "N; ids=a,b,c" (each id query-escaped). */
export function parseCovers(v: string): { count: number; ids: string[] } {
  const semi = v.indexOf(';');
  const head = (semi < 0 ? v : v.slice(0, semi)).trim();
  const count = /^\d+$/.test(head) ? Number(head) : NaN;
  if (!(count >= 1)) throw new DeliveryError(`Replyonce-Covers ${JSON.stringify(v)}: the count is not a positive number`);
  if (semi < 0) return { count, ids: [] };
  const rest = v.slice(semi + 1).trim();
  if (!rest.startsWith('ids=')) throw new DeliveryError(`Replyonce-Covers ${JSON.stringify(v)}: want "ids=" after the count`);
  const ids = rest
    .slice(4)
    .split(',')
    .map((raw) => {
      try {
        return decodeURIComponent(raw.replace(/\+/g, ' '));
      } catch {
        throw new DeliveryError(`Replyonce-Covers ${JSON.stringify(v)}: id ${JSON.stringify(raw)} is not query-escaped`);
      }
    });
  return { count, ids };
}

/**
 * parseDelivery reads a forward's Replyonce-* headers. It throws
 * DeliveryError when the scope, run id or fencing token is missing or
 * malformed: the request is not from the gateway.
 */
export function parseDelivery(headers: HeaderSource): Delivery {
  const scope = header(headers, 'Replyonce-Scope') ?? '';
  const runId = header(headers, 'Replyonce-Run-Id') ?? '';
  if (!scope || !runId) throw new DeliveryError('missing Replyonce-Scope or Replyonce-Run-Id: is this from the gateway?');
  const tok = header(headers, 'Replyonce-Fencing-Token') ?? '';
  if (!/^[1-9]\d*$/.test(tok) || !Number.isSafeInteger(Number(tok))) {
    throw new DeliveryError('missing or malformed Replyonce-Fencing-Token');
  }
  const ctxAt = header(headers, 'Replyonce-Context-At');
  const contextAt = ctxAt ? new Date(ctxAt) : undefined;
  if (contextAt && Number.isNaN(contextAt.getTime())) throw new DeliveryError(`Replyonce-Context-At ${JSON.stringify(ctxAt)} is not RFC 3339`);
  const coversHeader = header(headers, 'Replyonce-Covers');
  const covers = coversHeader ? parseCovers(coversHeader) : { count: 1, ids: [] };
  const d: Delivery = {
    source: header(headers, 'Replyonce-Source') ?? '',
    eventId: header(headers, 'Replyonce-Event-Id') ?? '',
    scope,
    runId,
    delivery: Number(header(headers, 'Replyonce-Delivery') ?? '0') || 0,
    fencingToken: Number(tok),
    contextAt,
    idempotencyKey: header(headers, 'Idempotency-Key'),
    covers: covers.count,
    coveredIds: covers.ids,
  };
  const notice = header(headers, 'Replyonce-Notice');
  if (notice) d.notice = notice;
  return d;
}
