// Package fakechat is a chat provider for trying and testing the example
// agent: conversations of customer messages and agent replies, kept in
// memory, with a count of replies per customer message.
//
// It promises nothing a real provider would not: it does not deduplicate
// replies (an Idempotency-Key is recorded, never honoured), so a count above
// one is a duplicate the customer would have seen.
package fakechat
