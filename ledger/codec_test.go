package ledger

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// TestCodecMatchesEncodingJSON holds the ledger's record codec (codec.go)
// to encoding/json: on random documents, queued event records and attempt
// records, with awkward strings (HTML characters, control characters,
// invalid UTF-8, line separators) and zero and non-zero times, both write
// the same bytes, and both read those bytes back to the same value.
func TestCodecMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	kinds := []func() any{
		func() any { return new(document) },
		func() any { return new(QueuedEvent) },
		func() any { return new(AttemptRecord) },
	}
	for i := range 3000 {
		v := kinds[i%len(kinds)]()
		fillRandom(t, rng, reflect.ValueOf(v).Elem(), reflect.TypeOf(v).Elem().Name(), 0)
		want, werr := json.Marshal(v)
		got, gerr := marshalRecord(v)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("record %d: encoding/json error %v, codec error %v", i, werr, gerr)
		}
		if !bytes.Equal(want, got) {
			t.Fatalf("record %d: the bytes differ\nencoding/json: %s\ncodec:         %s", i, want, got)
		}
		back := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		mine := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := json.Unmarshal(want, back); err != nil {
			t.Fatalf("record %d: encoding/json cannot read its own bytes: %v", i, err)
		}
		if err := unmarshalRecord(want, mine); err != nil {
			t.Fatalf("record %d: the codec cannot read encoding/json's bytes: %v\n%s", i, err, want)
		}
		if !reflect.DeepEqual(back, mine) {
			t.Fatalf("record %d: read back differently\nencoding/json: %+v\ncodec:         %+v\nfrom %s", i, back, mine, want)
		}
	}
}

// TestCodecRefusesWhatEncodingJSONRefuses: a damaged document is an
// error for the codec too, never a half-read document.
func TestCodecRefusesWhatEncodingJSONRefuses(t *testing.T) {
	var d document
	fillNonZero(t, reflect.ValueOf(&d).Elem(), "document")
	good, err := marshalDocument(&d)
	if err != nil {
		t.Fatal(err)
	}
	bad := [][]byte{
		good[:len(good)/2], good[:len(good)-1], append(bytes.Clone(good), '}'),
		bytes.Replace(good, []byte(`"seq":`), []byte(`"seq":"x`), 1),
		bytes.Replace(good, []byte(`"format":`), []byte(`"format":-`), 1),
		[]byte(`{"format":1,"entries":{"a":{"attempt":1.5}}}`),
		[]byte(`{"format":1,"runs":[]}`), []byte(``), []byte(`nul`),
	}
	for _, raw := range bad {
		var a, b document
		werr, gerr := json.Unmarshal(raw, &a), unmarshalDocument(raw, &b)
		if werr != nil && gerr == nil {
			t.Errorf("encoding/json refuses %q (%v), the codec reads it", raw, werr)
		}
	}
}

var awkward = []string{"", "a", "evt_1NQ8bC2eZvKYlo2C", "<script>&amp;</script>", "quote\"back\\slash", "\x00\x01\x1f\x7f",
	"tab\tnew\nline\r", "\u2028\u2029", "\xff\xfe", "caf\xc3", "é日本語🙂", "\ufffd", "/slash/", "a\u00a0b"}

// fillRandom sets v to a random value: zero about a third of the time,
// otherwise built from awkward strings, extreme numbers and odd times.
func fillRandom(t *testing.T, rng *rand.Rand, v reflect.Value, path string, depth int) {
	t.Helper()
	if rng.IntN(3) == 0 && path != "" && depth > 0 {
		v.SetZero()
		return
	}
	switch v.Interface().(type) {
	case time.Time:
		zones := []*time.Location{time.UTC, time.FixedZone("", 5*3600+1800), time.FixedZone("", -7*3600)}
		v.Set(reflect.ValueOf(time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))])))
		return
	case json.RawMessage:
		raws := []string{`{"f":1}`, `"x"`, `null`, `[1,"<&>",{"a":[]}]`, `{"eventId":"evt_1","source":"stripe"}`, `12.5e3`, `true`}
		v.Set(reflect.ValueOf(json.RawMessage(raws[rng.IntN(len(raws))])))
		return
	case []byte:
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		v.SetBytes(b)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillRandom(t, rng, v.Elem(), path, depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); !f.IsExported() && f.Tag.Get("json") == "-" {
				continue // declared a step's own state, not stored
			}
			fillRandom(t, rng, v.Field(i), path+"."+v.Type().Field(i).Name, depth+1)
		}
	case reflect.String:
		s := awkward[rng.IntN(len(awkward))]
		if rng.IntN(2) == 0 {
			s += awkward[rng.IntN(len(awkward))]
		}
		v.SetString(s)
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int64, reflect.Int32:
		ints := []int64{0, 1, -1, 200, 1 << 53, -(1 << 62), 1<<63 - 1, rng.Int64()}
		v.SetInt(ints[rng.IntN(len(ints))])
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		uints := []uint64{0, 1, 1 << 53, 1<<64 - 1, rng.Uint64()}
		v.SetUint(uints[rng.IntN(len(uints))])
	case reflect.Slice:
		n := rng.IntN(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fillRandom(t, rng, s.Index(i), path+"[]", depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range rng.IntN(4) {
			k := reflect.New(v.Type().Key()).Elem()
			fillRandom(t, rng, k, "", depth+1)
			e := reflect.New(v.Type().Elem()).Elem()
			fillRandom(t, rng, e, path+"{}", depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	default:
		t.Fatalf("%s: no random value for kind %s; teach fillRandom", path, v.Kind())
	}
}
