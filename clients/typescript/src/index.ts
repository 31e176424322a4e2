// @replyonce/gateway-client: agents behind the replyonce gateway in
// TypeScript. See docs/clients.md in the repository.

export { canonicalize, entryId, idempotencyKey, type Json } from './canonical.js';
export { LedgerError, NotApplied, classifyError, type ErrorClass, type ErrorCode } from './errors.js';
export { LedgerClient, Run, type LedgerClientOptions } from './client.js';
export { runEffect, type Attempts, type LoopOptions } from './loop.js';
export type {
  CheckResult,
  Claim,
  ClaimRef,
  ClaimRequest,
  ConflictMode,
  Effect,
  EffectContext,
  Entry,
  EntryState,
  Key,
  Mode,
  OnceOptions,
  Outcome,
  Reason,
  Reconciler,
  Result,
  RunOptions,
  Status,
} from './types.js';
export {
  DeliveryError,
  WebhookVerificationError,
  header,
  parseCovers,
  parseDelivery,
  signWebhook,
  verifyWebhook,
  type Delivery,
  type HeaderSource,
  type VerifyOptions,
} from './webhook.js';
export {
  fastifyForwardHandler,
  fetchForwardHandler,
  handleForward,
  nodeForwardHandler,
  readBody,
  type FastifyLikeReply,
  type FastifyLikeRequest,
  type ForwardAnswer,
  type ForwardHandler,
  type ForwardOptions,
} from './handler.js';
export {
  anthropicToolResult,
  checkTool,
  checkToolName,
  dispatchTool,
  guardTool,
  handleAnthropicToolUse,
  handleMcpToolCall,
  handleOpenAIChatToolCall,
  handleOpenAIResponsesCall,
  mcpToolResult,
  openAIChatToolMessage,
  openAIResponsesOutput,
  toAnthropicTool,
  toMcpTool,
  toOpenAIChatTool,
  toOpenAIResponsesTool,
  toolOutcome,
  type GuardToolOptions,
  type JsonSchema,
  type Tool,
  type ToolConflict,
  type ToolDefinition,
  type ToolOutcome,
  type ToolRun,
  type ToolStatus,
} from './tool.js';
