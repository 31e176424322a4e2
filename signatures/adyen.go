package signatures

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
)

// adyenScheme follows Adyen/adyen-node-api-library src/utils/hmacValidator.ts. Standard
// notifications carry one base64 HMAC-SHA256 per item in
// notificationItems[].NotificationRequestItem.additionalData.hmacSignature, over eight of the
// item's fields joined by ":" (absent fields are empty). Every item must verify, under the same
// key: a batch with one forged item is refused whole. Banking and platform webhooks carry the
// HMAC of the raw body in the HmacSignature header instead. The key is the hex string from the
// Customer Area, hex-decoded.
type adyenScheme struct {
	keys [][]byte
	// macs[i] holds HMACs under keys[i]: a reset HMAC restarts from its keyed state instead
	// of hashing the key's pads again on every request.
	macs []*sync.Pool
	// scratch holds *adyenScratch: a verification needs more memory than fits on its stack
	// (the items read, the signed string of one), and allocating it was a tenth of the time.
	scratch sync.Pool
}

type adyenScratch struct {
	items []adyenItem
	msg   []byte
	sum   [sha256.Size]byte
}

// putScratch returns sc to the pool without the strings it points to (views of the body) and
// unless a large batch grew it.
func (s *adyenScheme) putScratch(sc *adyenScratch) {
	clear(sc.items[:cap(sc.items)])
	if cap(sc.items) > 64 || cap(sc.msg) > 4096 {
		return
	}
	sc.items = sc.items[:0]
	s.scratch.Put(sc)
}

const (
	adyenHeader   = "HmacSignature"
	maxAdyenItems = 1000
)

// adyenFields is the order of the signed fields of a notification item.
var adyenFields = [...]string{"pspReference", "originalReference", "merchantAccountCode", "merchantReference",
	"amount.value", "amount.currency", "eventCode", "success"}

func newAdyen(cfg Config) (*adyenScheme, error) {
	s := &adyenScheme{}
	s.scratch.New = func() any { return &adyenScratch{items: make([]adyenItem, 0, 4), msg: make([]byte, 0, 512)} }
	for i, k := range cfg.Secrets {
		b, err := hex.DecodeString(strings.TrimSpace(k))
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("%w: secrets[%d]: want the hex HMAC key from the Customer Area", ErrConfig, i)
		}
		s.keys = append(s.keys, b)
		s.macs = append(s.macs, &sync.Pool{New: func() any { return hmac.New(sha256.New, b) }})
	}
	return s, nil
}

// adyenValue is a field as the SDK stringifies it: strings as they are, numbers and booleans in
// their JSON spelling, absent or null as empty.
func adyenValue(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		return v.Str
	case gjson.Number, gjson.True, gjson.False:
		return v.Raw
	}
	return ""
}

// adyenItem is what verification reads from one NotificationRequestItem: the signed fields in
// adyenFields order, and the hmacSignature. adyenRead reads them in one pass over the item's
// members, keeping the first of duplicate keys as a path lookup would: looking each field up by
// path scanned the whole item (a long reason or additionalData) once per field.
type adyenItem struct {
	vals [len(adyenFields)]string
	sig  gjson.Result
}

func adyenRead(nri gjson.Result) adyenItem {
	var it adyenItem
	var seen [len(adyenFields) + 2]bool // the plain fields, then amount and additionalData
	set := func(i int, v gjson.Result) {
		if !seen[i] {
			seen[i] = true
			it.vals[i] = adyenValue(v)
		}
	}
	nri.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "pspReference":
			set(0, v)
		case "originalReference":
			set(1, v)
		case "merchantAccountCode":
			set(2, v)
		case "merchantReference":
			set(3, v)
		case "eventCode":
			set(6, v)
		case "success":
			set(7, v)
		case "amount":
			if !seen[8] {
				seen[8] = true
				it.vals[4], it.vals[5] = adyenValue(v.Get("value")), adyenValue(v.Get("currency"))
			}
		case "additionalData":
			if !seen[9] {
				seen[9] = true
				it.sig = v.Get("hmacSignature")
			}
		}
		return true
	})
	return it
}

// adyenJoin returns the signed string of an item's fields. escaped=true applies the escaping some
// of Adyen's SDKs use (a backslash before ":" and "\"; Ruby's data_to_sign); the Node and Java
// SDKs join the values as they are. Both are tried: each is an HMAC over the same fields, so
// accepting either admits no signature that Adyen did not make with the key.
func adyenJoin(vals *[len(adyenFields)]string, escaped bool) []byte {
	var b bytes.Buffer
	for i, v := range vals {
		if i > 0 {
			b.WriteByte(':')
		}
		if escaped {
			v = strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), ":", `\:`)
		}
		b.WriteString(v)
	}
	return b.Bytes()
}

// adyenSigned is the signed string of a NotificationRequestItem.
func adyenSigned(nri gjson.Result, escaped bool) []byte {
	it := adyenRead(nri)
	return adyenJoin(&it.vals, escaped)
}

func adyenMAC(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

func (s *adyenScheme) Verify(r *Request, _ time.Time) error {
	if h := headerValue(r.Header, adyenHeader); h != "" {
		return s.verifyBanking(h, r.Body)
	}
	// The body is read through a string view instead of a copy: nothing read here outlives
	// Verify, and the body is not written while it runs.
	body := unsafe.String(unsafe.SliceData(r.Body), len(r.Body))
	sc := s.scratch.Get().(*adyenScratch)
	defer s.putScratch(sc)
	batch := adyenBatch{items: sc.items[:0]}
	if !adyenScan(body, &batch) {
		batch = adyenBatch{items: sc.items[:0]}
		adyenReadGJSON(body, &batch)
	}
	sc.items = batch.items
	if !batch.array {
		return fmt.Errorf("%w: body notificationItems[] (or header %s)", ErrMissingHeader, adyenHeader)
	}
	if batch.n == 0 {
		return fmt.Errorf("%w: body notificationItems[] is empty", ErrMissingHeader)
	}
	if batch.n > maxAdyenItems {
		return fmt.Errorf("%w: body has more than %d notification items", ErrMalformed, maxAdyenItems)
	}
	var sigsA [4][sha256.Size]byte
	sigs, read := sigsA[:0], batch.items
	for i := range read {
		raw := read[i].sig
		if raw.Type != gjson.String || raw.Str == "" {
			return fmt.Errorf("%w: body notificationItems[%d].NotificationRequestItem.additionalData.hmacSignature", ErrMissingHeader, i)
		}
		sigs = append(sigs, [sha256.Size]byte{})
		if l, ok := decodeSig(sigs[i][:], raw.Str, true); !ok || l != sha256.Size {
			return fmt.Errorf("%w: body notificationItems[%d] hmacSignature", ErrMalformed, i)
		}
	}
	for ki := range s.keys {
		// One HMAC per key, reset per item; the escaped form is built only when the plain one
		// does not match.
		m := s.macs[ki].Get().(hash.Hash)
		ok := true
		for i := range read {
			m.Reset()
			sc.msg = adyenAppend(sc.msg[:0], &read[i].vals, false)
			m.Write(sc.msg)
			if hmac.Equal(m.Sum(sc.sum[:0]), sigs[i][:]) {
				continue
			}
			m.Reset()
			sc.msg = adyenAppend(sc.msg[:0], &read[i].vals, true)
			m.Write(sc.msg)
			if !hmac.Equal(m.Sum(sc.sum[:0]), sigs[i][:]) {
				ok = false
				break
			}
		}
		s.macs[ki].Put(m)
		if ok {
			return nil
		}
	}
	return fmt.Errorf("%w: body notificationItems[].hmacSignature (every item must verify under one key)", ErrNoMatch)
}

// adyenAppend appends the signed string of an item's fields to dst, as adyenJoin builds it.
func adyenAppend(dst []byte, vals *[len(adyenFields)]string, escaped bool) []byte {
	for i, v := range vals {
		if i > 0 {
			dst = append(dst, ':')
		}
		if !escaped {
			dst = append(dst, v...)
			continue
		}
		for len(v) > 0 {
			j := strings.IndexAny(v, `\:`)
			if j < 0 {
				dst = append(dst, v...)
				break
			}
			dst = append(dst, v[:j]...)
			dst = append(dst, '\\', v[j])
			v = v[j+1:]
		}
	}
	return dst
}

func (s *adyenScheme) verifyBanking(h string, body []byte) error {
	var sig [sha256.Size]byte
	if l, ok := decodeSig(sig[:], strings.TrimSpace(h), true); !ok || l != sha256.Size {
		return fmt.Errorf("%w: %s", ErrMalformed, adyenHeader)
	}
	for _, key := range s.keys {
		if hmac.Equal(adyenMAC(key, body), sig[:]) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNoMatch, adyenHeader)
}

// Sign writes additionalData.hmacSignature into every item of a standard notification body, or,
// when the body has no notificationItems, sets the banking webhooks' HmacSignature header.
func (s *adyenScheme) Sign(r *Request, _ time.Time) error {
	if !gjson.GetBytes(r.Body, "notificationItems").IsArray() {
		setHeader(r, adyenHeader, base64.StdEncoding.EncodeToString(adyenMAC(s.keys[0], r.Body)))
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("%w: adyen signer needs a JSON object body: %v", ErrMalformed, err)
	}
	items, _ := doc["notificationItems"].([]any)
	for i, it := range items {
		m, _ := it.(map[string]any)
		nri, ok := m["NotificationRequestItem"].(map[string]any)
		if !ok {
			return fmt.Errorf("%w: notificationItems[%d] has no NotificationRequestItem object", ErrMalformed, i)
		}
		b, _ := json.Marshal(nri)
		sig := base64.StdEncoding.EncodeToString(adyenMAC(s.keys[0], adyenSigned(gjson.ParseBytes(b), false)))
		ad, _ := nri["additionalData"].(map[string]any)
		if ad == nil {
			ad = map[string]any{}
			nri["additionalData"] = ad
		}
		ad["hmacSignature"] = sig
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	r.Body = b
	return nil
}
