package signatures

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// adyenScanAgrees reads body with adyenScan and with gjson and fails when the scanner answers
// differently. It reports whether the scanner answered (false: it left the body to gjson).
func adyenScanAgrees(t testing.TB, body string) bool {
	t.Helper()
	var scanned, want adyenBatch
	if !adyenScan(body, &scanned) {
		return false
	}
	adyenReadGJSON(body, &want)
	if d := adyenBatchDiff(scanned, want); d != "" {
		t.Fatalf("body %q:\n%s", body, d)
	}
	return true
}

func adyenBatchDiff(got, want adyenBatch) string {
	if got.array != want.array || got.n != want.n || len(got.items) != len(want.items) {
		return fmt.Sprintf("scan array=%v n=%d items=%d, gjson array=%v n=%d items=%d",
			got.array, got.n, len(got.items), want.array, want.n, len(want.items))
	}
	for i := range got.items {
		g, w := got.items[i], want.items[i]
		if g.vals != w.vals || g.sig.Type != w.sig.Type || g.sig.Raw != w.sig.Raw || g.sig.Str != w.sig.Str {
			return fmt.Sprintf("item %d: scan %q sig %v %q %q\ngjson %q sig %v %q %q",
				i, g.vals, g.sig.Type, g.sig.Raw, g.sig.Str, w.vals, w.sig.Type, w.sig.Raw, w.sig.Str)
		}
	}
	return ""
}

// adyenJSONGen writes notification bodies with the shapes and spellings gjson has to get right:
// escaped keys and values, surrogates, raw control bytes, duplicate keys, every scalar kind,
// nested values, non-object items, and whitespace between every pair of tokens.
type adyenJSONGen struct {
	r *rand.Rand
	b strings.Builder
}

var (
	adyenGenKeys = []string{"pspReference", "originalReference", "merchantAccountCode", "merchantReference",
		"eventCode", "success", "reason", `psp\u0052eference`, `event\u0043ode`, `success\/`, "pspreference",
		"amount", "additionalData", `amoun\u0074`, `additional\u0044ata`, "NotificationRequestItem", ""}
	adyenGenStrings = []string{`"plain"`, `"a:b"`, `"back\\slash"`, `"\\:"`, `""`, `"é€"`, `"\u0041\n"`,
		`"q\"uote"`, `"\\\\"`, `"x\\\""`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00x"`, `"\u00e9\/"`, `"bad\x"`,
		`"\u12"`, "\"raw\x01ctl\"", "\"esc\\n\x02ctl\"", `"{\"NotificationRequestItem\":{}}"`, `"[1]"`,
		"\"\xff\xfe\"", `"7914073381342284"`}
	adyenGenScalars = []string{`1130`, `0`, `-0`, `-1.5e3`, `1E+5`, `2.50`, `true`, `false`, `null`}
)

func (g *adyenJSONGen) ws() {
	for g.r.IntN(4) == 0 {
		g.b.WriteByte(" \t\n\r"[g.r.IntN(4)])
	}
}

func (g *adyenJSONGen) tok(s string) {
	g.ws()
	g.b.WriteString(s)
	g.ws()
}

func (g *adyenJSONGen) scalar() {
	if g.r.IntN(3) == 0 {
		g.tok(adyenGenScalars[g.r.IntN(len(adyenGenScalars))])
		return
	}
	g.tok(adyenGenStrings[g.r.IntN(len(adyenGenStrings))])
}

// any writes a value of at most the given depth.
func (g *adyenJSONGen) any(depth int) {
	switch n := g.r.IntN(8); {
	case depth > 0 && n == 0:
		g.object(depth-1, adyenGenKeys, func() { g.any(depth - 1) })
	case depth > 0 && n == 1:
		g.tok("[")
		for i := range g.r.IntN(3) {
			if i > 0 {
				g.tok(",")
			}
			g.any(depth - 1)
		}
		g.tok("]")
	default:
		g.scalar()
	}
}

func (g *adyenJSONGen) object(depth int, keys []string, value func()) {
	g.tok("{")
	for i := range g.r.IntN(5) {
		if i > 0 {
			g.tok(",")
		}
		g.tok(`"` + keys[g.r.IntN(len(keys))] + `"`)
		g.tok(":")
		value()
	}
	g.tok("}")
}

// member writes "key":value with one of the given keys.
func (g *adyenJSONGen) member(key string, value func()) {
	g.tok(`"` + key + `"`)
	g.tok(":")
	value()
}

func (g *adyenJSONGen) nri() {
	if g.r.IntN(20) == 0 {
		g.any(2) // not always an object
		return
	}
	g.tok("{")
	for i := range 1 + g.r.IntN(10) {
		if i > 0 {
			g.tok(",")
		}
		key := adyenGenKeys[g.r.IntN(len(adyenGenKeys))]
		switch {
		case strings.HasPrefix(key, "amoun") && g.r.IntN(10) > 0:
			g.member(key, func() {
				g.object(1, []string{"value", "currency", `valu\u0065`, "other"}, func() { g.any(1) })
			})
		case strings.HasPrefix(key, "additional") && g.r.IntN(10) > 0:
			g.member(key, func() {
				g.object(1, []string{"hmacSignature", `hmac\u0053ignature`, "other"}, func() {
					if g.r.IntN(3) > 0 {
						g.tok(`"c2lnbmF0dXJl"`)
						return
					}
					g.any(1)
				})
			})
		default:
			g.member(key, func() { g.any(2) })
		}
	}
	g.tok("}")
}

func (g *adyenJSONGen) body() string {
	g.b.Reset()
	g.tok("{")
	for i := range 1 + g.r.IntN(3) {
		if i > 0 {
			g.tok(",")
		}
		switch g.r.IntN(6) {
		case 0:
			g.member("live", func() { g.any(2) })
		case 1:
			g.member(`notification\u0049tems`, func() { g.any(1) })
		default:
			g.member("notificationItems", func() {
				if g.r.IntN(20) == 0 {
					g.any(2)
					return
				}
				g.tok("[")
				for j := range g.r.IntN(5) {
					if j > 0 {
						g.tok(",")
					}
					if g.r.IntN(20) == 0 {
						g.any(2)
						continue
					}
					g.object(0, []string{"NotificationRequestItem", "other"}, g.nri)
				}
				g.tok("]")
			})
		}
	}
	g.tok("}")
	return g.b.String()
}

// adyenMutate breaks a body the ways a fuzzer would: a byte changed, removed, inserted or the
// body cut short, with JSON's own punctuation favoured.
func adyenMutate(r *rand.Rand, body string) string {
	b := []byte(body)
	for range 1 + r.IntN(3) {
		if len(b) == 0 {
			break
		}
		i := r.IntN(len(b))
		c := `{}[]:,"\ 0-e.tfnu` + "\x00\t\xff"
		switch r.IntN(4) {
		case 0:
			b[i] = c[r.IntN(len(c))]
		case 1:
			b = append(b[:i], b[i+1:]...)
		case 2:
			b = append(b[:i], append([]byte{c[r.IntN(len(c))]}, b[i:]...)...)
		default:
			b = b[:i]
		}
	}
	return string(b)
}

// TestAdyenScanAgreesWithGJSON: on generated bodies, valid and broken, the scanner either
// answers exactly what the gjson reading answers or leaves the body to it; and it does answer
// for every valid body of the shape Adyen sends, so the fast path is the one taken.
func TestAdyenScanAgreesWithGJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 4))
	g := &adyenJSONGen{r: r}
	var valid, validScanned, broken, brokenScanned int
	for range 40000 {
		body := g.body()
		if r.IntN(2) == 0 {
			body = adyenMutate(r, body)
			broken++
			if adyenScanAgrees(t, body) {
				brokenScanned++
			}
			continue
		}
		valid++
		if adyenScanAgrees(t, body) {
			validScanned++
		}
	}
	t.Logf("valid %d (scanned %d), broken %d (scanned %d)", valid, validScanned, broken, brokenScanned)
	if validScanned < valid*3/4 || brokenScanned == 0 {
		t.Fatalf("the scanner answered for %d of %d generated bodies and %d of %d broken ones", validScanned, valid, brokenScanned, broken)
	}
}

// The bodies Adyen sends, and the benchmark's, are read by the scanner, not by gjson.
func TestAdyenScanReadsNotifications(t *testing.T) {
	pad := strings.Repeat("a", 4096)
	for _, body := range []string{
		adyenTwoItems,
		string(familyBenchBody("adyen", 1<<10)),
		`{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":"c2ln","a\"b":"x\\y"},` +
			`"amount":{"currency":"EUR","value":1130},"eventCode":"AUTHORISATION","merchantReference":"r\/1 \u00e9","reason":"` + pad + `","success":"true"}}]}`,
		" {\n\t\"notificationItems\" : [ ] } \r\n",
	} {
		if !adyenScanAgrees(t, body) {
			t.Errorf("left to gjson: %.200s", body)
		}
	}
}

// What the scanner does not know how gjson reads, it leaves to gjson: the reading is still
// gjson's.
func TestAdyenScanLeavesTheRestToGJSON(t *testing.T) {
	for _, body := range []string{
		``, `[]`, `"notificationItems"`, `{"notificationItems":[1,"{\"NotificationRequestItem\":{}}"]}`,
		`{"notificationItems":[{"NotificationRequestItem":"{\"pspReference\":\"p\"}"}]}`,
		`{"notificationItems":[{"NotificationRequestItem":{"amount":"{\"value\":1}"}}]}`,
		`{"notificationItems":[{"NotificationRequestItem":{"additionalData":["hmacSignature"]}}]}`,
		`{"notificationItems":[{}]} x`, `{"notificationItems":[{},]}`, `{"notificationItems":[01]}`,
		`{'notificationItems':[]}`, "{\"notificationItems\":[]}\x00", `{"notificationItems":[{"NotificationRequestItem":{"success":True}}]}`,
		`{"notificationItems":[{"NotificationRequestItem":{"amount":{"value":1.}}}]}`,
		`{"a":` + strings.Repeat("[", adyenScanDepth+1) + strings.Repeat("]", adyenScanDepth+1) + `,"notificationItems":[]}`,
	} {
		var b adyenBatch
		if adyenScan(body, &b) {
			t.Errorf("scanned %q", body)
		}
	}
}

// FuzzAdyenScan: on any input the scanner answers as gjson does, or leaves the input to it.
func FuzzAdyenScan(f *testing.F) {
	f.Add(adyenTwoItems)
	f.Add(`{"notificationItems":[{"NotificationRequestItem":{"psp\u0052eference":"\ud83d\ude00","amount":{"value":-0.5e+3,"currency":"\"EUR\\"},"additionalData":{"hmacSignature":"c2ln"}}}]}`)
	f.Add(`{"notificationItems":[{"NotificationRequestItem":{"success":true,"eventCode":null,"merchantReference":{"a":[1,{"b":"\\"}]}}},{}]}`)
	r := rand.New(rand.NewPCG(1, 2))
	g := &adyenJSONGen{r: r}
	for range 20 {
		f.Add(g.body())
	}
	f.Fuzz(func(t *testing.T, body string) {
		adyenScanAgrees(t, body)
		shallow := strings.Count(body, "{")+strings.Count(body, "[") < adyenScanDepth
		if shallow && gjson.Valid(body) && strings.HasPrefix(strings.TrimLeft(body, " \t\r\n"), "{") && !strings.Contains(body, "\\") {
			// Valid JSON without escapes in which every item, NotificationRequestItem, amount
			// and additionalData is an object is always the scanner's.
			if adyenObjectsOnly(body) && !adyenScan(body, &adyenBatch{}) {
				t.Fatalf("valid body left to gjson: %q", body)
			}
		}
	})
}

// adyenObjectsOnly reports whether every value adyenScan reads with a lookup inside is an object.
func adyenObjectsOnly(body string) bool {
	items := gjson.Get(body, "notificationItems")
	if !items.IsArray() {
		return true
	}
	ok := true
	items.ForEach(func(_, it gjson.Result) bool {
		if !it.IsObject() {
			ok = false
			return false
		}
		nri := it.Get("NotificationRequestItem")
		if !nri.Exists() {
			return true
		}
		if !nri.IsObject() {
			ok = false
			return false
		}
		for _, k := range []string{"amount", "additionalData"} {
			if v := nri.Get(k); v.Exists() && !v.IsObject() {
				ok = false
			}
		}
		return ok
	})
	return ok
}
