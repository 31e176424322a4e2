package ledger

import gojson "github.com/goccy/go-json"

// The ledger's own records (the scope document, a queued event's header
// record, an attempt record) are encoding/json's bytes, written and read by
// github.com/goccy/go-json. Every Transact decodes and encodes its scope's
// document, and with encoding/json that round trip cost about 40 µs of a
// queued event's 190 µs of gateway CPU; goccy does it in about 15 µs. A
// hand-written codec was cheaper still but silently dropped any field added
// to the types (TestDocumentRoundTripsEveryField); a library walks the
// types as encoding/json does. TestCodecMatchesEncodingJSON holds it to
// encoding/json's exact bytes and values on random records, so documents
// written by either read back the same in both.
//
// Values and payloads that callers hand the ledger stay with encoding/json
// (encodeValue, canonical keys): their bytes are part of the API.

func marshalDocument(d *document) ([]byte, error) { return gojson.Marshal(d) }

func unmarshalDocument(raw []byte, d *document) error { return gojson.Unmarshal(raw, d) }

func marshalRecord(v any) ([]byte, error) { return gojson.Marshal(v) }

func unmarshalRecord(raw []byte, v any) error { return gojson.Unmarshal(raw, v) }
