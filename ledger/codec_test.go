package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

var codecLocations = func() []*time.Location {
	locs := []*time.Location{time.UTC, time.Local, time.FixedZone("X", 5*3600+1800), time.FixedZone("", -7*3600),
		time.FixedZone("SEC", 3600+17)}
	for _, name := range []string{"America/New_York", "Asia/Kolkata", "Europe/Amsterdam"} {
		if l, err := time.LoadLocation(name); err == nil {
			locs = append(locs, l)
		}
	}
	return locs
}()

var codecStrings = []string{
	"", "a", "scope", "reply", "héllo wörld", "日本語", "emoji 😀", "<script>&amp;</script>",
	"quote \" backslash \\ slash /", "ctl \x00\x01\x1f\x7f \b\f\n\r\t", "line\u2028para\u2029",
	"bad utf8 \xff\xfe", "surrogate-ish \xed\xa0\x80", "mixed <a href=\"x\">&</a> \u2028 é",
	strings.Repeat("long ", 50), "ſ K kelvin",
}

var codecRaws = []json.RawMessage{
	nil, json.RawMessage(`null`), json.RawMessage(`1`), json.RawMessage(`-1.5e+10`),
	json.RawMessage(`"s"`), json.RawMessage(`{"a":1}`), json.RawMessage(` { "a" : [ 1 , 2 , "x y" ] } `),
	json.RawMessage("[\n\t\"<&>\",\r\n\"\u2028\"]"), json.RawMessage(`{"k":"\u003c\"\\"}`),
	json.RawMessage(`12345678901234567890123`), json.RawMessage(`true`), json.RawMessage(`[]`),
	json.RawMessage("\"\xff\""),
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func genString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		var sb strings.Builder
		for range r.IntN(12) {
			switch r.IntN(4) {
			case 0:
				sb.WriteByte(byte(r.IntN(128)))
			case 1:
				sb.WriteRune(rune(r.IntN(0x3000)))
			case 2:
				sb.WriteByte(byte(r.IntN(256)))
			default:
				sb.WriteRune(rune(0x10000 + r.IntN(0x1000)))
			}
		}
		return sb.String()
	}
	return pick(r, codecStrings)
}

func genTime(r *rand.Rand, mayBeZero bool) time.Time {
	if mayBeZero && r.IntN(3) == 0 {
		return time.Time{}
	}
	var sec int64
	switch r.IntN(6) {
	case 0:
		sec = r.Int64N(253402300799) - 62135596800 // years 1..9999
	case 1:
		sec = -62135596800 - r.Int64N(365*86400) // year 0
	default:
		sec = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix() + r.Int64N(400*86400)
	}
	var nsec int64
	switch r.IntN(4) {
	case 0:
	case 1:
		nsec = r.Int64N(1000) * 1e6
	case 2:
		nsec = r.Int64N(1e9)
	default:
		nsec = 100
	}
	return time.Unix(sec, nsec).In(pick(r, codecLocations))
}

func genInt(r *rand.Rand) int {
	switch r.IntN(5) {
	case 0:
		return 0
	case 1:
		return math.MaxInt64
	case 2:
		return math.MinInt64
	case 3:
		return -r.IntN(1000)
	}
	return r.IntN(1 << 20)
}

func genUint(r *rand.Rand) uint64 {
	switch r.IntN(4) {
	case 0:
		return 0
	case 1:
		return math.MaxUint64
	}
	return r.Uint64() >> r.IntN(64)
}

func genDocument(r *rand.Rand) *document {
	d := &document{
		Format: formatVersion, Scope: genString(r), Seq: genUint(r), Token: genUint(r),
		ExpiresAt: genTime(r, true),
	}
	if r.IntN(3) == 0 {
		d.Format = genInt(r)
	}
	if r.IntN(2) == 0 {
		d.Holder = genString(r)
	}
	switch r.IntN(4) {
	case 0: // nil
	case 1:
		d.Runs = map[string]*runState{}
	default:
		d.Runs = map[string]*runState{}
		for range r.IntN(5) {
			if r.IntN(10) == 0 {
				d.Runs[genString(r)] = nil
				continue
			}
			rs := &runState{
				ID: genString(r), Mode: pick(r, []Mode{ModeSupersede, ModeExclusive, ModeIndependent, "", "odd<>"}),
				Token: genUint(r), Delivery: genInt(r), ContextAt: genTime(r, true), SeenSeq: genUint(r),
				LeaseUntil: genTime(r, true), LastActive: genTime(r, true), Wrote: r.IntN(2) == 0,
				Ended: r.IntN(2) == 0, Cancelled: r.IntN(2) == 0, EndedAt: genTime(r, true),
				LostLease: r.IntN(2) == 0,
			}
			if r.IntN(2) == 0 {
				rs.EndReason = genString(r)
			}
			switch r.IntN(3) {
			case 0:
				rs.Acks = []string{}
			case 1:
				for range 1 + r.IntN(3) {
					rs.Acks = append(rs.Acks, genString(r))
				}
			}
			d.Runs[genString(r)] = rs
		}
	}
	switch r.IntN(4) {
	case 0:
	case 1:
		d.Entries = map[string]*Entry{}
	default:
		d.Entries = map[string]*Entry{}
		for range r.IntN(8) {
			if r.IntN(15) == 0 {
				d.Entries[genString(r)] = nil
				continue
			}
			id := fmt.Sprintf("e%d%s", r.IntN(1000), genString(r))
			e := &Entry{
				ID: id, Scope: d.Scope, Intent: genString(r), Payload: pick(r, codecRaws),
				State:   pick(r, []State{StatePending, StateCommitted, StateFailed, StateAmbiguous, "weird"}),
				Attempt: genInt(r), ClaimedAt: genTime(r, true), PendingTTL: time.Duration(genInt(r)),
				SettledAt: genTime(r, true),
			}
			if r.IntN(2) == 0 {
				e.Summary, e.Error, e.ResolvedBy, e.RunID = genString(r), genString(r), genString(r), genString(r)
			}
			if r.IntN(2) == 0 {
				e.Failures, e.MaxAttempts, e.Delivery = genInt(r), genInt(r), genInt(r)
				e.Token, e.LandedSeq = genUint(r), genUint(r)
			}
			if r.IntN(2) == 0 {
				e.Redeliverable, e.Abandoned, e.LateSettle = r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0
			}
			if r.IntN(2) == 0 {
				e.Value = pick(r, codecRaws)
			}
			if r.IntN(5) == 0 {
				e.Scope = genString(r)
			}
			if r.IntN(3) == 0 {
				d.Entries[genString(r)] = e // key differs from ID
			} else {
				d.Entries[id] = e
			}
		}
	}
	return d
}

// checkEncode compares marshalDocument with json.Marshal and reports
// whether the fast encoder handled d itself.
func checkEncode(t testing.TB, d *document) (fast bool) {
	t.Helper()
	want, werr := json.Marshal(d)
	got, gerr := marshalDocument(d)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("encode error mismatch: json %v, fast %v", werr, gerr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encode mismatch:\n got %s\nwant %s", got, want)
	}
	_, fast = d.appendJSON(nil)
	if fast && werr != nil {
		t.Fatalf("fast encoder accepted a document json.Marshal rejects: %v", werr)
	}
	return fast
}

// checkDecode compares the fast decoder (and unmarshalDocument) with
// json.Unmarshal on raw and reports whether the fast path handled it.
func checkDecode(t testing.TB, raw []byte) (fast bool) {
	t.Helper()
	var want document
	werr := json.Unmarshal(raw, &want)
	var f document
	fast = fastDecodeDocument(raw, &f)
	if fast {
		if werr != nil {
			t.Fatalf("fast decoder accepted input json.Unmarshal rejects (%v): %q", werr, raw)
		}
		if !reflect.DeepEqual(f, want) {
			t.Fatalf("decode mismatch for %q:\n got %#v\nwant %#v", raw, f, want)
		}
	}
	var g document
	gerr := unmarshalDocument(raw, &g)
	if (gerr != nil) != (werr != nil) {
		t.Fatalf("decode error mismatch: json %v, codec %v", werr, gerr)
	}
	if werr == nil && !reflect.DeepEqual(g, want) {
		t.Fatalf("unmarshalDocument mismatch for %q:\n got %#v\nwant %#v", raw, g, want)
	}
	return fast
}

func TestCodecGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 5000
	if testing.Short() {
		n = 500
	}
	var fastEnc, fastDec, decoded int
	for range n {
		d := genDocument(r)
		if checkEncode(t, d) {
			fastEnc++
		}
		raw, err := json.Marshal(d)
		if err != nil {
			continue
		}
		decoded++
		if checkDecode(t, raw) {
			fastDec++
		}
		var ind bytes.Buffer
		if err := json.Indent(&ind, raw, " ", "\t"); err != nil {
			t.Fatal(err)
		}
		checkDecode(t, ind.Bytes())
		// Decoding then re-encoding gives the same bytes both ways.
		var back document
		if err := unmarshalDocument(raw, &back); err != nil {
			t.Fatal(err)
		}
		checkEncode(t, &back)
	}
	t.Logf("%d documents: fast encoder took %d, fast decoder took %d of %d", n, fastEnc, fastDec, decoded)
	if fastEnc < n*9/10 || fastDec < decoded*9/10 {
		t.Fatalf("fast paths too rarely used: enc %d/%d dec %d/%d", fastEnc, n, fastDec, decoded)
	}
}

// TestCodecRealistic checks that documents the ledger writes take the fast
// paths.
func TestCodecRealistic(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 123456000, time.UTC)
	o := Options{}.withDefaults()
	d := newDocument("tenant/conv<1>&x", now)
	run, _ := decideBegin(d, beginInput{runID: "run-1", mode: ModeExclusive, leaseTTL: 90 * time.Second}, now, o)
	d.LandedBase = 3 // as if three landings were pruned from the front
	for i := range 50 {
		k, _ := resolveKey(Key{Scope: d.Scope, Intent: "reply", Payload: map[string]any{"i": i, "t": "<b>hi</b> \u2028"}})
		e := claimEntry(d, claimInput{key: k, runID: run.ID, token: run.Token}, nil, now, o)
		e.State, e.SettledAt, e.Value = StateCommitted, now.Add(time.Duration(i)*time.Millisecond), json.RawMessage(`{"ok":true}`)
		d.land(e, e.SettledAt)
	}
	w, err := d.finish(now, o.Retention)
	if err != nil {
		t.Fatal(err)
	}
	if !checkEncode(t, d) {
		t.Fatal("fast encoder fell back on a ledger document")
	}
	if !checkDecode(t, w.Doc) {
		t.Fatal("fast decoder fell back on a ledger document")
	}
}

func TestCodecDecodeEdgeCases(t *testing.T) {
	cases := []string{
		`{}`, `null`, ``, ` `, `[]`, `{"format":1}`, `{"format":1} `, `{"format":1}x`, `{"format":1}{}`,
		`{"format":1,}`, `{,"format":1}`, `{"format":01}`, `{"format":1.0}`, `{"format":1e2}`, `{"format":-0}`,
		`{"format":-}`, `{"format":"1"}`, `{"format":null}`, `{"format":9223372036854775807}`,
		`{"format":9223372036854775808}`, `{"format":-9223372036854775808}`, `{"seq":-1}`, `{"seq":-0}`,
		`{"seq":18446744073709551615}`, `{"seq":18446744073709551616}`, `{"seq":true}`,
		`{"FORMAT":1}`, `{"Scope":"x"}`, `{"scope":"a","scope":"b"}`, `{"scopé":"x"}`, `{"sco\u0070e":"x"}`,
		`{"scope":"\u00e9\ud83d\ude00\n\t\"\\\/\b\f\r<>&\u2028"}`, `{"scope":"\ud83d"}`, `{"scope":"\ude00x"}`,
		`{"scope":"\ud83d\u0041"}`, `{"scope":"\x"}`, `{"scope":"\u12"}`, "{\"scope\":\"\xff\"}", "{\"scope\":\"a\x01\"}",
		`{"scope":null}`, `{"scope":1}`, `{"holder":"h","unknown":{"a":[1,2,{"b":null}],"c":"\u0000"},"x":-1.5e-3}`,
		`{"unknown":[1,2,}`, `{"unknown":01}`, `{"unknown":1.}`, `{"unknown":.5}`, `{"unknown":"\q"}`, `{"unknown":tru}`,
		"{\"unknown\":\"\xff\"}", `{"expiresAt":"2026-01-01T00:00:00Z"}`, `{"expiresAt":"2026-01-01T00:00:00.5Z"}`,
		`{"expiresAt":"2026-01-01T00:00:00.123456789Z"}`, `{"expiresAt":"2026-01-01T00:00:00.1234567891Z"}`,
		`{"expiresAt":"2026-01-01T00:00:00.Z"}`, `{"expiresAt":"2026-02-29T00:00:00Z"}`, `{"expiresAt":"2024-02-29T00:00:00Z"}`,
		`{"expiresAt":"2026-13-01T00:00:00Z"}`, `{"expiresAt":"2026-01-01T24:00:00Z"}`, `{"expiresAt":"2026-01-01T00:00:60Z"}`,
		`{"expiresAt":"2026-01-01T00:00:00+05:30"}`, `{"expiresAt":"2026-01-01T00:00:00-00:00"}`, `{"expiresAt":"2026-01-01T00:00:00+00:00"}`,
		`{"expiresAt":"2026-01-01t00:00:00z"}`, `{"expiresAt":"2026-01-01T00:00:00\u005a"}`, `{"expiresAt":null}`,
		`{"expiresAt":0}`, `{"expiresAt":"0000-01-01T00:00:00Z"}`, `{"expiresAt":"2026-1-01T00:00:00Z"}`, `{"expiresAt":"2026-01-01 00:00:00Z"}`,
		`{"runs":null}`, `{"runs":{}}`, `{"runs":{"a":null}}`, `{"runs":[]}`, `{"runs":{"a":1}}`,
		`{"runs":{"a":{"id":"a","acks":["x"]}},"runs":{"b":{"acks":[]}}}`, `{"runs":{"a":{"acks":["x"],"acks":["y"]}}}`,
		`{"runs":{"a":{"acks":[null]}}}`, `{"runs":{"a":{"acks":null}}}`, `{"runs":{"a":{"wrote":true,"wrote":null,"ended":false,"mode":"exclusive"}}}`,
		`{"runs":{"a":{"wrote":"true"}}}`, `{"runs":{"\u0061":{"id":"x"}}}`, "{\"runs\":{\"\xff\":{}}}",
		`{"entries":{"e":{"id":"e","payload":  {"a" : 1 } ,"value":null,"state":"pending","pendingTtl":-5}}}`,
		`{"entries":{"e":{"payload":null}}}`, `{"entries":{"e":{"payload":"x","payload":[1]}}}`, `{"entries":{"e":null}}`,
		`{"entries":{"e":{"id":"e"},"e":{"scope":"s"}}}`, `{"entries":{"e":{"pendingTtl":1.5}}}`, `{"entries":{"e":{"Payload":1}}}`,
		`{"entries":{"e":{"value":[1,2,{"x":"<\u2028>"}]}}}`, `{"entries":{"e":{"value":}}}`, `{"entries":{"e":{"lateSettle":true,"abandoned":false}}}`,
		` { "format" : 1 , "scope" : "s" } `, "\t{\r\n\"format\"\n:\n1}\n", `{"format":1`, `{"format"`, `{"format":1]`, `"x"`,
		`{"entries":{"e":{"value":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}}}`,
	}
	for _, c := range cases {
		checkDecode(t, []byte(c))
	}
}

func TestCodecEncodeEdgeCases(t *testing.T) {
	bad := []*document{
		{ExpiresAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{ExpiresAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{ExpiresAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))},
		{ExpiresAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", -25*3600))},
		{ExpiresAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 23*3600+59*60))},
		{Entries: map[string]*Entry{"e": {Payload: json.RawMessage{}}}},
		{Entries: map[string]*Entry{"e": {Payload: json.RawMessage(`{`)}}},
		{Entries: map[string]*Entry{"e": {Value: json.RawMessage(`1 2`)}}},
		{Runs: map[string]*runState{"r": {LastActive: time.Date(12345, 1, 1, 0, 0, 0, 0, time.UTC)}}},
	}
	for _, d := range bad {
		checkEncode(t, d)
	}
}

func FuzzDocumentCodec(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 40 {
		if raw, err := json.Marshal(genDocument(r)); err == nil {
			f.Add(raw)
		}
	}
	f.Add([]byte(`{"format":1,"scope":"s","runs":{"a":{"acks":[]}},"entries":{"e":{"payload":{ "a": 1 }}}}`))
	f.Add([]byte(`{"expiresAt":"2026-01-01T00:00:00.5+05:30","unknown":[1,{"x":null}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkDecode(t, raw)
		var d document
		if json.Unmarshal(raw, &d) == nil {
			checkEncode(t, &d)
		}
	})
}

// validJSON answers as json.Valid does, except that it refuses values
// nested deeper than its bound (the encoder then falls back to
// encoding/json, which decides).
func TestValidJSONAgrees(t *testing.T) {
	for _, s := range []string{
		``, ` `, `null`, ` true `, `fals`, `1`, `-0`, `01`, `1.`, `1e`, `1e+2`, `-`, `"a"`, `"\u12"`, `"\x"`,
		"\"tab\tin\"", "\"bad\xff\"", `{}`, `{"a":1,}`, `[1,2]`, `[1,]`, `{"a" 1}`, `{"a":1}x`, `[]]`, `{"a":[{"b":null}]}`,
		"\x00", `"\ud800"`, `1 2`,
	} {
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("%q: validJSON %v, json.Valid %v", s, got, want)
		}
	}
	deep := strings.Repeat("[", 2000) + strings.Repeat("]", 2000)
	if validJSON([]byte(deep)) {
		t.Error("validJSON accepted a value deeper than its bound")
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,-2.5e3,"x\n",true,null]}`, `[`, `"\u00e9"`, `{"a":}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, want := validJSON(data), json.Valid(data)
		if got && !want {
			t.Fatalf("%q: validJSON accepted what json.Valid refuses", data)
		}
		if want && !got && bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) <= 1000 {
			t.Fatalf("%q: validJSON refused valid JSON", data)
		}
	})
}
