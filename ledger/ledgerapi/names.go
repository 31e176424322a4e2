package ledgerapi

import (
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/replyonce/gateway/ledger"
)

// MaxNameBytes bounds a scope, a source name or an id (run_id, entry_id,
// event_id, an escalation's id) taken by the API. Every store holds that
// much as a key (PostgreSQL's index rows stop near 2.7 KB; bolt's keys at
// 32 KiB), and it is over what the gateway itself writes: a source name of
// up to 64 bytes, ':' and an event id or scope of up to 1 KiB
// (ingress.MaxIDBytes).
const MaxNameBytes = 2048

// nameFields are the JSON fields and query parameters checkName applies
// to.
var nameFields = map[string]bool{"scope": true, "source": true, "run_id": true, "entry_id": true, "event_id": true, "id": true}

// checkName refuses, with the same rule whatever the store, a name no
// store holds faithfully: NUL (PostgreSQL's text refuses it), invalid
// UTF-8 (refused by PostgreSQL, and names differing only in such bytes
// would collapse once re-encoded as JSON), or more than MaxNameBytes.
// Without this rule a store's refusal would read as its failure, a 503
// "retry later" that no retry ever mends.
func checkName(field, v string) error {
	switch {
	case len(v) > MaxNameBytes:
		return fmt.Errorf("%w: %s: %d bytes, over the limit of %d", ledger.ErrInvalid, field, len(v), MaxNameBytes)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: %s: contains NUL", ledger.ErrInvalid, field)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s: not valid UTF-8", ledger.ErrInvalid, field)
	}
	return nil
}

// checkSource refuses a source name the gateway is not configured with
// (see WithSources); field is where the request put it.
func (s *server) checkSource(field, v string) error {
	if s.sources == nil || v == "" || s.sources[v] {
		return nil
	}
	known := slices.Sorted(maps.Keys(s.sources))
	return fmt.Errorf("%w: %s: unknown source %q (configured: %s)", ledger.ErrInvalid, field, v, strings.Join(known, ", "))
}

// checkField is checkName, and checkSource for a source.
func (s *server) checkField(field, leaf, v string) error {
	if err := checkName(field, v); err != nil {
		return err
	}
	if leaf == "source" {
		return s.checkSource(field, v)
	}
	return nil
}

// checkQueryNames applies checkField to a request's {scope} path value and
// to its query's name parameters, every value of each.
func (s *server) checkQueryNames(scope string, q url.Values) error {
	if err := checkName("scope", scope); err != nil {
		return err
	}
	for k, vs := range q {
		if !nameFields[k] {
			continue
		}
		for _, v := range vs {
			if err := s.checkField(k, k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkBodyNames applies checkName to the name fields of a decoded
// request body v, nested objects included (a replay's filter), each named
// by its JSON path. Whether a body's source is configured is for its
// endpoint to check (checkSource): a resume may name a source no longer
// configured that is still paused.
func (s *server) checkBodyNames(v reflect.Value, prefix string) error {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fv := v.Field(i)
		switch {
		case fv.Kind() == reflect.String && nameFields[name]:
			if err := checkName(prefix+name, fv.String()); err != nil {
				return err
			}
		case fv.Kind() == reflect.Struct || fv.Kind() == reflect.Pointer && fv.Type().Elem().Kind() == reflect.Struct:
			if fv.Type().PkgPath() != "" && fv.Type().PkgPath() != v.Type().PkgPath() {
				continue // a type of another package (time.Time) holds no names
			}
			if err := s.checkBodyNames(fv, prefix+name+"."); err != nil {
				return err
			}
		}
	}
	return nil
}
