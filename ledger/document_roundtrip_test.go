package ledger

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// fillNonZero sets every field reachable from v (a pointer) to a value that
// is not its zero, so that a field the document's JSON leaves out, or reads
// back differently, shows in a round trip.
func fillNonZero(t testing.TB, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillNonZero(t, v.Elem(), path)
		return
	}
	switch v.Interface().(type) {
	case time.Time:
		v.Set(reflect.ValueOf(time.Date(2026, 12, 2, 21, 30, 15, 123456789, time.UTC)))
		return
	case json.RawMessage:
		v.Set(reflect.ValueOf(json.RawMessage(`{"f":"` + path + `"}`)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				if f.Tag.Get("json") == "-" {
					continue // declared a step's own state, not stored
				}
				t.Fatalf("%s.%s is unexported: encoding/json never stores it", path, f.Name)
			}
			fillNonZero(t, v.Field(i), path+"."+f.Name)
		}
	case reflect.String:
		v.SetString("v-" + path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(7 + len(path)))
	case reflect.Uint, reflect.Uint64, reflect.Uint32, reflect.Uint8:
		v.SetUint(uint64(11 + len(path)))
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillNonZero(t, s.Index(0), path+"[0]")
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fillNonZero(t, k, path+"{key}")
		e := reflect.New(v.Type().Elem()).Elem()
		fillNonZero(t, e, path+"{}")
		m.SetMapIndex(k, e)
		v.Set(m)
	default:
		t.Fatalf("%s: no non-zero value for kind %s; teach fillNonZero", path, v.Kind())
	}
}

// TestDocumentRoundTripsEveryField fails when a field of the stored
// document, its runs or its entries is not written and read back as it was:
// a field added the obvious way must survive the store.
func TestDocumentRoundTripsEveryField(t *testing.T) {
	var d document
	fillNonZero(t, reflect.ValueOf(&d).Elem(), "document")
	raw, err := marshalDocument(&d)
	if err != nil {
		t.Fatal(err)
	}
	var back document
	if err := unmarshalDocument(raw, &back); err != nil {
		t.Fatal(err)
	}
	compareFields(t, reflect.ValueOf(d), reflect.ValueOf(back), "document")
}

// compareFields reports each field that differs, by its path.
func compareFields(t *testing.T, want, got reflect.Value, path string) {
	t.Helper()
	if want.Kind() == reflect.Pointer {
		if got.IsNil() {
			t.Errorf("%s: lost in the round trip", path)
			return
		}
		want, got = want.Elem(), got.Elem()
	}
	if tw, ok := want.Interface().(time.Time); ok {
		if !tw.Equal(got.Interface().(time.Time)) {
			t.Errorf("%s: wrote %v, read back %v", path, tw, got.Interface())
		}
		return
	}
	switch want.Kind() {
	case reflect.Struct:
		for i := range want.NumField() {
			if f := want.Type().Field(i); !f.IsExported() && f.Tag.Get("json") == "-" {
				continue // a step's own state, never stored (see fillNonZero)
			}
			compareFields(t, want.Field(i), got.Field(i), path+"."+want.Type().Field(i).Name)
		}
	case reflect.Map:
		for _, k := range want.MapKeys() {
			g := got.MapIndex(k)
			if !g.IsValid() {
				t.Errorf("%s[%v]: lost in the round trip", path, k)
				continue
			}
			compareFields(t, want.MapIndex(k), g, path+"["+k.String()+"]")
		}
	default:
		if !reflect.DeepEqual(want.Interface(), got.Interface()) {
			t.Errorf("%s: wrote %v, read back %v", path, want.Interface(), got.Interface())
		}
	}
}
