package signatures

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// adyenScheme follows Adyen/adyen-node-api-library src/utils/hmacValidator.ts. Standard
// notifications carry one base64 HMAC-SHA256 per item in
// notificationItems[].NotificationRequestItem.additionalData.hmacSignature, over eight of the
// item's fields joined by ":" (absent fields are empty). Every item must verify, under the same
// key: a batch with one forged item is refused whole. Banking and platform webhooks carry the
// HMAC of the raw body in the HmacSignature header instead. The key is the hex string from the
// Customer Area, hex-decoded.
//
// The body is read with gjson, and only when it is valid JSON. gjson reads the first of members
// with the same name where JSON.parse (the SDK, and most agents) reads the last, so a body
// that names notificationItems, NotificationRequestItem, a signed field, amount,
// additionalData or hmacSignature twice (in any letter case) is malformed: otherwise the
// gateway could verify one value while the agent acts on another.
type adyenScheme struct {
	keys [][]byte
}

const (
	adyenHeader   = "HmacSignature"
	maxAdyenItems = 1000
)

// adyenFields is the order of the signed fields of a notification item; amount.value and
// amount.currency are read from the amount object.
var adyenFields = [...]string{"pspReference", "originalReference", "merchantAccountCode", "merchantReference",
	"amount.value", "amount.currency", "eventCode", "success"}

func newAdyen(cfg Config) (*adyenScheme, error) {
	s := &adyenScheme{}
	for i, k := range cfg.Secrets {
		b, err := hex.DecodeString(strings.TrimSpace(k))
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("%w: secrets[%d]: want the hex HMAC key from the Customer Area", ErrConfig, i)
		}
		s.keys = append(s.keys, b)
	}
	return s, nil
}

// adyenValue is a field as the SDK stringifies it: strings as they are, numbers and booleans in
// their JSON spelling, absent, null or anything else as empty.
func adyenValue(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		return v.Str
	case gjson.Number, gjson.True, gjson.False:
		return v.Raw
	}
	return ""
}

// adyenMembers returns the members of obj with the given names, in one pass: absent ones as
// gjson's zero Result, and an error when obj has two members whose names match one of them
// ignoring case.
func adyenMembers(obj gjson.Result, where string, names ...string) ([]gjson.Result, error) {
	out := make([]gjson.Result, len(names))
	seen := make([]bool, len(names))
	var err error
	obj.ForEach(func(k, v gjson.Result) bool {
		for i, n := range names {
			if !strings.EqualFold(k.Str, n) {
				continue
			}
			if seen[i] {
				err = fmt.Errorf("%w: body %s names %s twice", ErrMalformed, where, n)
				return false
			}
			seen[i] = true
			if k.Str == n {
				out[i] = v
			}
		}
		return true
	})
	return out, err
}

// adyenItem is what verification reads from one NotificationRequestItem: the signed fields in
// adyenFields order, and the hmacSignature.
type adyenItem struct {
	vals [len(adyenFields)]string
	sig  gjson.Result
}

// adyenRead reads the signed fields and the signature of one NotificationRequestItem.
func adyenRead(nri gjson.Result, where string) (adyenItem, error) {
	var it adyenItem
	m, err := adyenMembers(nri, where, "pspReference", "originalReference", "merchantAccountCode", "merchantReference",
		"eventCode", "success", "amount", "additionalData")
	if err != nil {
		return it, err
	}
	for i, j := range [...]int{0, 1, 2, 3, 6, 7} { // adyenFields' indexes of the plain fields
		it.vals[j] = adyenValue(m[i])
	}
	if m[6].IsObject() {
		amount, err := adyenMembers(m[6], where+".amount", "value", "currency")
		if err != nil {
			return it, err
		}
		it.vals[4], it.vals[5] = adyenValue(amount[0]), adyenValue(amount[1])
	}
	if m[7].IsObject() {
		sig, err := adyenMembers(m[7], where+".additionalData", "hmacSignature")
		if err != nil {
			return it, err
		}
		it.sig = sig[0]
	}
	return it, nil
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

// adyenSigned is the signed string of a NotificationRequestItem given as JSON.
func adyenSigned(nri []byte, escaped bool) ([]byte, error) {
	it, err := adyenRead(gjson.ParseBytes(nri), "NotificationRequestItem")
	return adyenJoin(&it.vals, escaped), err
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
	if !gjson.ValidBytes(r.Body) {
		return fmt.Errorf("%w: body is not JSON (and there is no header %s)", ErrMalformed, adyenHeader)
	}
	top, err := adyenMembers(gjson.ParseBytes(r.Body), "object", "notificationItems")
	if err != nil {
		return err
	}
	list := top[0]
	if !list.IsArray() {
		return fmt.Errorf("%w: body notificationItems[] (or header %s)", ErrMissingHeader, adyenHeader)
	}
	elems := list.Array()
	if len(elems) == 0 {
		return fmt.Errorf("%w: body notificationItems[] is empty", ErrMissingHeader)
	}
	if len(elems) > maxAdyenItems {
		return fmt.Errorf("%w: body has more than %d notification items", ErrMalformed, maxAdyenItems)
	}
	items := make([]adyenItem, len(elems))
	sigs := make([][sha256.Size]byte, len(elems))
	for i, e := range elems {
		where := fmt.Sprintf("notificationItems[%d]", i)
		nri, err := adyenMembers(e, where, "NotificationRequestItem")
		if err != nil {
			return err
		}
		if items[i], err = adyenRead(nri[0], where+".NotificationRequestItem"); err != nil {
			return err
		}
		raw := items[i].sig
		if raw.Type != gjson.String || raw.Str == "" {
			return fmt.Errorf("%w: body %s.NotificationRequestItem.additionalData.hmacSignature", ErrMissingHeader, where)
		}
		if l, ok := decodeSig(sigs[i][:], raw.Str, true); !ok || l != sha256.Size {
			return fmt.Errorf("%w: body %s hmacSignature", ErrMalformed, where)
		}
	}
	for _, key := range s.keys {
		ok := true
		for i := range items {
			if hmac.Equal(adyenMAC(key, adyenJoin(&items[i].vals, false)), sigs[i][:]) ||
				hmac.Equal(adyenMAC(key, adyenJoin(&items[i].vals, true)), sigs[i][:]) {
				continue
			}
			ok = false
			break
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("%w: body notificationItems[].hmacSignature (every item must verify under one key)", ErrNoMatch)
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
		signed, err := adyenSigned(b, false)
		if err != nil {
			return err
		}
		sig := base64.StdEncoding.EncodeToString(adyenMAC(s.keys[0], signed))
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
