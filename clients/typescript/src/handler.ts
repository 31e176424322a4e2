// A webhook handler for the gateway's forwards, for the request objects of
// Node's http (and Express, which extends it), Fastify, and the fetch API
// (Hono, Next.js route handlers, Bun, Deno). Each verifies the signature on
// the raw bytes, reads the delivery, and answers with the status your
// handler returns, which tells the gateway what to do: 2xx done, 503 (or
// any 5xx) deliver again later, 400 never again.

import type { IncomingMessage, ServerResponse } from 'node:http';

import { DeliveryError, parseDelivery, verifyWebhook, WebhookVerificationError, type Delivery, type HeaderSource, type VerifyOptions } from './webhook.js';

/** What your handler answers the gateway. body is sent as JSON when set. */
export interface ForwardAnswer {
  status: number;
  body?: unknown;
}

export type ForwardHandler = (delivery: Delivery, body: Buffer) => Promise<ForwardAnswer> | ForwardAnswer;

export interface ForwardOptions extends VerifyOptions {
  /** The gateway's forward.signing_secret ("whsec_..."). Required unless allowUnsigned. */
  secret?: string;
  /** Accept unsigned forwards: local trials only. */
  allowUnsigned?: boolean;
  /** Bigger bodies are refused 413 (default 1 MiB). */
  maxBodyBytes?: number;
  /** A cancellation notice (Replyonce-Notice: cancel); the default answers 204 and does nothing. */
  onCancel?: (delivery: Delivery) => Promise<ForwardAnswer> | ForwardAnswer;
  /** Told why a forward was refused (the sender is told only the status). */
  onRefused?: (status: number, reason: string) => void;
}

/**
 * handleForward is the framework-free core: verify, parse, then call
 * handler. A bad signature is 401, a request that is not a gateway forward
 * 400, a handler that throws 503 (the gateway delivers again later).
 */
export async function handleForward(options: ForwardOptions, handler: ForwardHandler, headers: HeaderSource, body: Buffer): Promise<ForwardAnswer> {
  const refuse = (status: number, reason: string): ForwardAnswer => {
    options.onRefused?.(status, reason);
    return { status, body: { error: status === 401 ? 'signature verification failed' : reason } };
  };
  if (!options.secret && !options.allowUnsigned) {
    throw new TypeError('handleForward: a secret is required (the gateway\'s forward.signing_secret)');
  }
  if (options.secret) {
    try {
      verifyWebhook(options.secret, headers, body, options);
    } catch (err) {
      if (err instanceof WebhookVerificationError) return refuse(401, err.message);
      throw err;
    }
  }
  let delivery: Delivery;
  try {
    delivery = parseDelivery(headers);
  } catch (err) {
    if (err instanceof DeliveryError) return refuse(400, err.message);
    throw err;
  }
  try {
    if (delivery.notice === 'cancel') {
      return options.onCancel ? await options.onCancel(delivery) : { status: 204 };
    }
    return await handler(delivery, body);
  } catch (err) {
    return refuse(503, `handler failed: ${(err as Error)?.message ?? err}`);
  }
}

class TooLarge extends Error {}

/** readBody reads a Node request's body up to limit bytes. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.destroy();
        reject(new TooLarge());
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, a: ForwardAnswer): void {
  if (a.body === undefined) {
    res.writeHead(a.status).end();
    return;
  }
  res.writeHead(a.status, { 'Content-Type': 'application/json' }).end(JSON.stringify(a.body));
}

/**
 * nodeForwardHandler returns a listener for Node's http.createServer, and a
 * route handler for Express. It reads the raw body itself, or takes it from
 * req.rawBody or a Buffer/string req.body (express.raw()); a body another
 * parser already turned into an object cannot be verified and is refused
 * 500 with a message saying so.
 */
export function nodeForwardHandler(options: ForwardOptions, handler: ForwardHandler) {
  const limit = options.maxBodyBytes ?? 1 << 20;
  return async (req: IncomingMessage & { rawBody?: unknown; body?: unknown }, res: ServerResponse): Promise<void> => {
    if (req.method !== 'POST') {
      res.setHeader('Allow', 'POST');
      send(res, { status: 405, body: { error: 'POST only' } });
      return;
    }
    let body: Buffer;
    const pre = req.rawBody ?? req.body;
    if (Buffer.isBuffer(pre)) body = pre;
    else if (typeof pre === 'string') body = Buffer.from(pre, 'utf8');
    else if (pre !== undefined && pre !== null && !(typeof pre === 'object' && Object.keys(pre).length === 0)) {
      send(res, { status: 500, body: { error: 'the body was parsed before the signature check; mount express.raw() on this route' } });
      return;
    } else {
      try {
        body = await readBody(req, limit);
      } catch (err) {
        send(res, err instanceof TooLarge ? { status: 413, body: { error: 'body too large' } } : { status: 400, body: { error: 'body unreadable' } });
        return;
      }
    }
    if (body.length > limit) {
      send(res, { status: 413, body: { error: 'body too large' } });
      return;
    }
    send(res, await handleForward(options, handler, req.headers, body));
  };
}

/** The parts of a Fastify request and reply the handler uses. */
export interface FastifyLikeRequest {
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
  rawBody?: string | Buffer;
}
export interface FastifyLikeReply {
  code(status: number): FastifyLikeReply;
  header(name: string, value: string): FastifyLikeReply;
  send(payload?: unknown): unknown;
}

/**
 * fastifyForwardHandler returns a Fastify route handler. Fastify parses
 * JSON bodies by default: give the route the raw bytes, with
 * `addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => done(null, body))`
 * or a raw-body plugin setting request.rawBody.
 */
export function fastifyForwardHandler(options: ForwardOptions, handler: ForwardHandler) {
  return async (request: FastifyLikeRequest, reply: FastifyLikeReply): Promise<unknown> => {
    const pre = request.rawBody ?? request.body;
    let a: ForwardAnswer;
    if (Buffer.isBuffer(pre)) a = await handleForward(options, handler, request.headers, pre);
    else if (typeof pre === 'string') a = await handleForward(options, handler, request.headers, Buffer.from(pre, 'utf8'));
    else a = { status: 500, body: { error: 'the body was parsed before the signature check; give this route the raw bytes' } };
    reply.code(a.status);
    if (a.body === undefined) return reply.send();
    return reply.header('Content-Type', 'application/json').send(JSON.stringify(a.body));
  };
}

/** fetchForwardHandler returns a handler from a fetch Request to a Response (Hono, Next.js, Bun, Deno). */
export function fetchForwardHandler(options: ForwardOptions, handler: ForwardHandler) {
  const limit = options.maxBodyBytes ?? 1 << 20;
  return async (request: Request): Promise<Response> => {
    if (request.method !== 'POST') return new Response(JSON.stringify({ error: 'POST only' }), { status: 405, headers: { Allow: 'POST' } });
    const body = Buffer.from(await request.arrayBuffer());
    if (body.length > limit) return new Response(JSON.stringify({ error: 'body too large' }), { status: 413 });
    const a = await handleForward(options, handler, request.headers, body);
    if (a.body === undefined) return new Response(null, { status: a.status });
    return new Response(JSON.stringify(a.body), { status: a.status, headers: { 'Content-Type': 'application/json' } });
  };
}
